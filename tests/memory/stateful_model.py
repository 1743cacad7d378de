"""A reference model of one namespace of a `ContextMemory`: what is stored, what a read may offer.

The model says what is stored: per session its messages in order (id, role, text, user, seq),
its pinned facts and summaries (each with the user it carries and what it may quote); per user
the user-wide pins; per session the logged assemblies. Every text carries a token unique to its
write (``w17`` for a message, ``p3`` for a pin), so a piece of any read names the write it came
from. The checks of every read against it are in `tests/memory/stateful_checks.py`.

Sessions may hold several users' messages (``add_message(..., user_id=)`` into a session another
user started: a group chat), as the store keeps them (`ctxbudget.store.sessions`):

- a session's **entry** is created by its first write; its **owner** is that write's user (none
  for a session started by a pin) and stays while the entry does: through deletes of its
  records one by one and `clear` (``pins=False``), until `delete_session` (or ``clear(pins=
  True)``), or a `delete_user` that deletes the session whole or leaves it without records;
  its message seqs count on while it stays;
- a session's own reads (history, assembly, search of the session) hold every message of it,
  whoever wrote it; an assembly without a user is for the user of its newest message;
- a user's other sessions (an assembly with ``other_sessions``, a search of the user) offer only
  records carrying that user's id: the user's messages wherever they are, and the summaries
  that carry the user; never another user's message, in a summary either;
- a summary carries the user of its stretch's messages, or none if they are several users';
- `delete_user(U)` removes U's user-wide pins and every record of U; the sessions U started go
  whole (the other users' messages in them too), and those without an owner that hold a record
  of U; in a session another user started, the other users' records stay, but not a summary
  quoting U (docs/reliability.md, "Deleting a user"); U's assemblies leave every session's log.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ctxbudget.core.ids import internal_id
from ctxbudget.store.records import scoped_item_id

USERS = ("alice", "bob")
SESSIONS = ("s1", "s2")
MESSAGE_IDS = ("m1", "m2", "m3", "m4")
PIN_IDS = ("p1", "p2", "p3")
MAX_MESSAGES = 6  # per session: an assembly, a search (k=20) and a history hold all of them
CITIES = {"alice": ("Porto", "Lisbon"), "bob": ("Oslo", "Bergen")}
ALL_CITIES = tuple(c for cities in CITIES.values() for c in cities)
PHRASES = (
    "booked a night train",
    "is learning the cello",
    "bought green coffee beans",
    "repaired an old bicycle",
    "adopted a grey cat",
    "started a pottery class",
    "planted tomatoes on the balcony",
    "lost the house keys",
    "wrote a letter to grandma",
    "watched a chess final",
    "painted the kitchen yellow",
    "ran a half marathon",
)
LIKES = ("window seats", "decaf", "metric units", "short answers", "email", "vegetarian food")
QUERIES = (
    "what happened in Porto?",
    "anything about Oslo or Bergen?",
    "tell me about the train and the coffee",
    "what do you remember?",
    "did someone mention Lisbon?",
)
TOKEN = re.compile(r"\b[wp]\d+\b")
STRETCH = 2  # messages per summary (`tests/memory/stateful_runner.py` summarizes with stretch=2)


def message_text(token: str, user: str, session: str, n: int) -> str:
    """A message's text: its write token, who and where, and a city (an entity)."""
    city = CITIES[user][n % 2]
    return f"{token} {user} {session} {PHRASES[n % len(PHRASES)]} in {city}"


def pin_text(token: str, owner: str, n: int) -> str:
    """A pinned fact's text: its write token and what it is about."""
    return f"{token} note: {owner} prefers {LIKES[n % len(LIKES)]}"


def tokens(text: str) -> set[str]:
    """The write tokens in a text."""
    return set(TOKEN.findall(text))


@dataclass
class Message:
    """A stored message, as the model holds it."""

    id: str
    role: str
    text: str
    user: str
    plain: bool  # stored as `ContextMemory.add_messages` stores it (no timestamp, no metadata)
    seq: int


@dataclass(frozen=True)
class Summary:
    """A stored summary: the user it carries, whose words it quotes, what it may quote."""

    user: str | None  # its stretch's one user (None: several users' messages)
    authors: frozenset[str]  # the users of its stretch's messages
    covers: frozenset[str]  # the ids of its stretch's messages
    quotes: frozenset[str]  # the write tokens of its stretch's texts when it was made
    own: frozenset[str]  # those of ``user``'s messages: all it may quote outside its session
    last: int  # the seq of its stretch's last message


@dataclass
class Session:
    """One session's records, and its entry in the store (see the module docstring)."""

    messages: list[Message] = field(default_factory=list)
    pins: dict[str, str] = field(default_factory=dict)
    summaries: dict[str, Summary] = field(default_factory=dict)
    started: bool = False  # the store holds the session's entry
    owner: str | None = None  # the user of its first write (None: not started, or by a pin)
    members: set[str] = field(default_factory=set)  # users who wrote a message here (entries)
    seqs: int = 0  # the seq of its next message (kept while the entry stays)

    def start(self, user: str | None) -> None:
        """A write to the session: its entry is created by the first (owner: its user)."""
        if not self.started:
            self.started, self.owner = True, user

    @property
    def newest_user(self) -> str | None:
        """The user of the newest message (whom an assembly without a user is for)."""
        return self.messages[-1].user if self.messages else None

    def users(self) -> set[str]:
        """The users whose id one of the session's records carries (messages, summaries)."""
        carried = {s.user for s in self.summaries.values() if s.user is not None}
        return {m.user for m in self.messages} | carried

    def whole_for(self, user: str) -> bool:
        """Whether `delete_user` of ``user`` deletes this session whole.

        It does a session the user started, and one without an owner holding their records.
        """
        return self.started and (
            self.owner == user or (self.owner is None and user in self.users())
        )

    def records(self) -> int:
        return len(self.messages) + len(self.pins) + len(self.summaries)

    def message(self, mid: str) -> Message | None:
        return next((m for m in self.messages if m.id == mid), None)


@dataclass
class Logged:
    """One logged assembly: its user and what it included (id, tier).

    The log is written in the background: an entry still queued (``pending``: its actor not
    flushed since) when a delete changes its session's records is taken back when written, or
    not if it was written before (`ctxbudget.store.context_log`: "a log, never memory"); such an
    entry is ``doubtful`` until a read of the log shows which.
    """

    user: str | None
    included: tuple[tuple[str, int], ...]
    actor: int
    pending: bool = True
    doubtful: bool = False
    names: frozenset[str] = frozenset()
    """The record ids it names, included or pruned (inside another scope's id too): a delete of
    any of them drops it (`LogPartitions.drop_naming`: a log keeps nothing of a deleted
    message)."""


class Model:
    """What one namespace stores (see the module docstring)."""

    def __init__(self) -> None:
        self.sessions = {s: Session() for s in SESSIONS}
        self.user_pins: dict[str, dict[str, str]] = {u: {} for u in USERS}
        self.logs: dict[str, list[Logged]] = {s: [] for s in SESSIONS}
        # Bumped when a session's records are cleared or deleted: a new life shares nothing with
        # the old one.
        self.life = dict.fromkeys(SESSIONS, 0)
        self.assembled: dict[tuple[int, str], int | None] = {}  # (actor, session) -> life
        self.writes = 0

    def token(self, kind: str) -> str:
        self.writes += 1
        return f"{kind}{self.writes}"

    # -- writes --------------------------------------------------------------------------------
    def conflicts(self, session: str, user: str, messages: Iterable[dict[str, Any]]) -> bool:
        """Whether a batch reuses an id of the session with other content (it is refused).

        The user is part of the content: another user's message sent again under one's own id
        is refused like a changed text.
        """
        s = self.sessions[session]
        return any(
            (old := s.message(m["id"])) is not None
            and (old.text, old.role, old.user) != (m["text"], m["role"], user)
            for m in messages
            if m.get("id")
        )

    def add(
        self,
        session: str,
        user: str,
        messages: list[dict[str, Any]],
        ids: list[str],
        *,
        plain: bool,
    ) -> None:
        s = self.sessions[session]
        for message, mid in zip(messages, ids, strict=True):
            if s.message(mid) is None:
                s.start(user)
                s.members.add(user)
                s.messages.append(
                    Message(mid, message["role"], message["text"], user, plain, s.seqs)
                )
                s.seqs += 1

    def replace(self, session: str, mid: str, text: str) -> None:
        message = self.sessions[session].message(mid)
        assert message is not None
        message.text, message.plain = text, True

    def delete_message(self, session: str, mid: str) -> int:
        s = self.sessions[session]
        before = len(s.messages)
        s.messages = [m for m in s.messages if m.id != mid]
        self.drop_naming(session, {mid})
        return before - len(s.messages)

    def drop_naming(self, session: str, ids: set[str]) -> None:
        """The session's logged assemblies naming a deleted record go (queued ones too)."""
        self.logs[session] = [e for e in self.logs[session] if not e.names & ids]

    def clear(self, session: str, *, pins: bool) -> int:
        """`clear`: messages and summaries go; pins, the entry (owner, seqs) and the log stay."""
        if pins:
            return self.delete_session(session)
        s = self.sessions[session]
        count = len(s.messages) + len(s.summaries)
        self.drop_naming(session, {m.id for m in s.messages} | set(s.summaries))
        s.messages, s.summaries = [], {}
        self.life[session] += count > 0
        if count:
            self.touched(session)
        return count

    def delete_session(self, session: str) -> int:
        count = self.sessions[session].records()
        self.sessions[session] = Session()
        self.logs[session] = []
        self.life[session] += count > 0
        return count

    def delete_user(self, user: str) -> int:
        """`delete_user`: the user's pins and records; the sessions that are theirs, whole.

        The sessions the user started go whole, and those without an owner that hold a record
        of theirs (`Session.whole_for`); in one another user started, the user's messages go,
        and every summary quoting them. A session the user wrote in that is left without
        records loses its entry (and log); the user's assemblies leave every log.
        """
        count = len(self.user_pins[user])
        self.user_pins[user] = {}
        for name, s in list(self.sessions.items()):
            if s.whole_for(user):
                count += self.delete_session(name)
                continue
            before = s.records()
            gone = {m.id for m in s.messages if m.user == user}
            gone |= {k for k, x in s.summaries.items() if user in x.authors}
            self.drop_naming(name, gone)
            s.messages = [m for m in s.messages if m.user != user]
            s.summaries = {k: x for k, x in s.summaries.items() if user not in x.authors}
            if s.records() < before:
                count += before - s.records()
                self.life[name] += 1
                self.touched(name)
            if user in s.members:
                s.members.discard(user)
                if not s.records():
                    self.sessions[name] = Session()
                    self.logs[name] = []
        for name, entries in self.logs.items():
            self.logs[name] = [e for e in entries if e.user != user]
        return count

    def summary_plan(self, session: str) -> list[tuple[str, list[Message]]]:
        """What `summarize` (``keep_recent=0``) folds: each whole stretch after the last summary.

        Each as (summary id, its messages); the id names the stretch's first and last seqs.
        """
        s = self.sessions[session]
        covered = max((x.last for x in s.summaries.values()), default=-1)
        todo = [m for m in s.messages if m.seq > covered]
        parts = [todo[i : i + STRETCH] for i in range(0, len(todo) - STRETCH + 1, STRETCH)]
        return [(internal_id("summary", f"{p[0].seq}-{p[-1].seq}"), p) for p in parts]

    def summarized(self, session: str, plan: list[tuple[str, list[Message]]]) -> None:
        s = self.sessions[session]
        for sid, part in plan:
            authors = frozenset(m.user for m in part)
            user = next(iter(authors)) if len(authors) == 1 else None
            quotes = frozenset(t for m in part for t in tokens(m.text))
            own = frozenset(t for m in part if m.user == user for t in tokens(m.text))
            covers = frozenset(m.id for m in part)
            s.summaries[sid] = Summary(user, authors, covers, quotes, own, part[-1].seq)

    def log(
        self,
        actor: int,
        session: str,
        user: str | None,
        included: list[list[Any]],
        pruned: Iterable[list[Any]] = (),
    ) -> None:
        names = frozenset(n for i in [*included, *pruned] for n in _named(str(i[0])))
        entry = Logged(user, tuple((str(i[0]), int(i[1])) for i in included), actor, names=names)
        self.logs[session].append(entry)
        # A context of a session with records: its next life must not share a prefix with it.
        had = self.sessions[session].records() > 0
        self.assembled[(actor, session)] = self.life[session] if had else None

    def flushed(self, actor: int) -> None:
        """``actor``'s logged assemblies are written (`ContextMemory.flush` and log reads)."""
        for entries in self.logs.values():
            for entry in entries:
                entry.pending &= entry.actor != actor

    def touched(self, session: str) -> None:
        """A delete changed the session's records: its queued log entries may be taken back."""
        for entry in self.logs[session]:
            entry.doubtful |= entry.pending

    def user_for(self, session: str, given: str | None) -> str | None:
        """The user an assembly is for: the one given, else the newest message's."""
        return given if given is not None else self.sessions[session].newest_user

    # -- what a read may and must offer --------------------------------------------------------
    def offerable(
        self, session: str, user: str | None, *, other_sessions: bool, entities: bool
    ) -> Offerable:
        """What an assembly of ``session`` for ``user`` may offer, and must.

        The session's own records, whoever wrote them; the user's pins; from the other sessions
        (``other_sessions``) only the user's messages and the summaries carrying the user.
        """
        s = self.sessions[session]
        exact = {m.id: m.text for m in s.messages}
        exact.update(s.pins)
        quoting = {sid: x.quotes for sid, x in s.summaries.items()}
        pinned = set(s.pins)
        if user is not None:
            mine = {
                scoped_item_id(("user", user), pid): t for pid, t in self.user_pins[user].items()
            }
            exact.update(mine)
            pinned |= set(mine)
            for name, other in self.sessions.items():
                if name == session or not other_sessions:
                    continue
                scope = ("session", name)
                exact.update(
                    {scoped_item_id(scope, m.id): m.text for m in other.messages if m.user == user}
                )
                quoting.update(
                    {
                        scoped_item_id(scope, sid): x.own
                        for sid, x in other.summaries.items()
                        if x.user == user
                    }
                )
        current = {t for m in s.messages for t in tokens(m.text)}
        cities = {c for m in s.messages for c in ALL_CITIES if c in m.text}
        return Offerable(
            session=session,
            exact=exact,
            quoting=quoting,
            messages={m.id for m in s.messages},
            pinned=pinned,
            summaries=set(s.summaries),
            entity_tokens=current if entities else None,
            entity_cities=cities,
        )


@dataclass(frozen=True)
class Offerable:
    """What one read of a session may offer (``exact``: id -> text) and must offer."""

    session: str
    exact: dict[str, str]
    quoting: dict[str, frozenset[str]]  # summaries: the tokens they may quote
    messages: set[str]
    pinned: set[str]
    summaries: set[str]
    entity_tokens: set[str] | None  # None: entity memory is off for this object
    entity_cities: set[str]


def _named(item_id: str) -> set[str]:
    """The record ids an item id names: itself, and the ids inside another scope's id.

    ``ctxbudget:session:["s2","m4"]`` names ``m4`` (and ``s2``), as the log's record holds it.
    """
    named = {item_id}
    start = item_id.find("[")
    if start >= 0:
        try:
            inner = json.loads(item_id[start:])
        except ValueError:
            return named
        if isinstance(inner, list):
            named |= {str(x) for x in inner}
    return named
