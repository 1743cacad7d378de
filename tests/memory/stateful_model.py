"""A reference model of one namespace of a `ContextMemory`, and the checks of every read against it.

The model says what is stored: per session its messages in order (id, role, text, user), its
pinned facts and summaries; per user the user-wide pins; per session the logged assemblies. A
session belongs to the user of its messages (one user at a time; another may start it again
once it has no messages). Every text carries a token unique to its write (``w17`` for a message,
``p3`` for a pin), so a piece of any read names the write it came from.

Each ``check_*`` compares one read (the data `tests/memory/stateful_runner.py` observed) with
the model: nothing deleted, nothing of another user or session, nothing missing that was
flushed (the budget holds every session whole), and the report is a partition of what was
offered. A failed check raises AssertionError from its own line, so hypothesis tells the classes
of failures apart.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ctxbudget.core.items import Tier
from ctxbudget.memory.log.analytics import is_memory_tier
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
SCOPED = re.compile(r"^ctxbudget:(session|user|entity):(\[.*\])$")
NEVER_LEFT_OUT = {"over_budget", "tier_cap", "over_limit"}  # the budget holds everything


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


@dataclass
class Session:
    """One session's records; ``ever``: tokens written in this life (summaries may quote them)."""

    messages: list[Message] = field(default_factory=list)
    pins: dict[str, str] = field(default_factory=dict)
    summaries: set[str] = field(default_factory=set)
    ever: set[str] = field(default_factory=set)
    summarized_for: str | None = None  # the user the summaries carry (their messages')

    @property
    def owner(self) -> str | None:
        """The user of the session's messages, else of its summaries (None: neither)."""
        if self.messages:
            return self.messages[-1].user
        return self.summarized_for if self.summaries else None

    def records(self) -> int:
        return len(self.messages) + len(self.pins) + len(self.summaries)

    def message(self, mid: str) -> Message | None:
        return next((m for m in self.messages if m.id == mid), None)


@dataclass
class Logged:
    """One logged assembly: its user and what it included (id, tier)."""

    user: str | None
    included: tuple[tuple[str, int], ...]


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
    def conflicts(self, session: str, messages: Iterable[dict[str, Any]]) -> bool:
        """Whether a batch reuses an id of the session with other content (it is refused)."""
        s = self.sessions[session]
        return any(
            (old := s.message(m["id"])) is not None and old.text != m["text"]
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
                s.messages.append(Message(mid, message["role"], message["text"], user, plain))
                s.ever |= tokens(message["text"])

    def replace(self, session: str, mid: str, text: str) -> None:
        message = self.sessions[session].message(mid)
        assert message is not None
        message.text, message.plain = text, True
        self.sessions[session].ever |= tokens(text)

    def delete_message(self, session: str, mid: str) -> int:
        s = self.sessions[session]
        before = len(s.messages)
        s.messages = [m for m in s.messages if m.id != mid]
        return before - len(s.messages)

    def clear(self, session: str, *, pins: bool) -> int:
        if pins:
            return self.delete_session(session)
        s = self.sessions[session]
        count = len(s.messages) + len(s.summaries)
        self.sessions[session] = Session(pins=s.pins)
        self.life[session] += count > 0
        return count

    def delete_session(self, session: str) -> int:
        count = self.sessions[session].records()
        self.sessions[session] = Session()
        self.logs[session] = []
        self.life[session] += count > 0
        return count

    def delete_user(self, user: str) -> int:
        count = len(self.user_pins[user])
        self.user_pins[user] = {}
        for name, s in self.sessions.items():
            if s.owner == user:
                count += self.delete_session(name)
            else:  # the user's records in other users' session logs go too
                self.logs[name] = [e for e in self.logs[name] if e.user != user]
        return count

    def summarized(self, session: str, ids: list[str]) -> None:
        s = self.sessions[session]
        if ids:
            s.summaries.update(ids)
            s.summarized_for = s.owner

    def log(self, actor: int, session: str, user: str | None, included: list[list[Any]]) -> None:
        entry = Logged(user, tuple((str(i[0]), int(i[1])) for i in included))
        self.logs[session].append(entry)
        # A context of a session with records: its next life must not share a prefix with it.
        had = self.sessions[session].records() > 0
        self.assembled[(actor, session)] = self.life[session] if had else None

    def user_for(self, session: str, given: str | None) -> str | None:
        """The user an assembly is for: the one given, else the session's."""
        return given if given is not None else self.sessions[session].owner

    # -- what a read may and must offer --------------------------------------------------------
    def offerable(
        self, session: str, user: str | None, *, other_sessions: bool, entities: bool
    ) -> Offerable:
        s = self.sessions[session]
        exact = {m.id: m.text for m in s.messages}
        exact.update(s.pins)
        quoting = dict.fromkeys(s.summaries, frozenset(s.ever))
        if user is not None:
            exact.update(
                {scoped_item_id(("user", user), pid): t for pid, t in self.user_pins[user].items()}
            )
            for name, other in self.sessions.items():
                if name == session or other.owner != user or not other_sessions:
                    continue
                scope = ("session", name)
                exact.update({scoped_item_id(scope, m.id): m.text for m in other.messages})
                quoting.update(
                    {scoped_item_id(scope, sid): frozenset(other.ever) for sid in other.summaries}
                )
        pinned = set(s.pins)
        if user is not None:
            pinned |= {scoped_item_id(("user", user), pid) for pid in self.user_pins[user]}
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


# -- checks --------------------------------------------------------------------------------------


def check_item(allowed: Offerable, item: list[Any], query: str | None) -> None:
    """One offered item ``[id, tier, text, ...]`` is something the model says may be offered."""
    item_id, tier, text = str(item[0]), int(item[1]), str(item[2])
    if tier in (Tier.SYSTEM, Tier.QUERY):
        assert query is None or text == query or not tokens(text), f"query item {item}"
        return
    if item_id in allowed.exact:
        assert text == allowed.exact[item_id], (
            f"{item_id!r} offered as {text!r}, stored {allowed.exact[item_id]!r}"
        )
        return
    if item_id in allowed.quoting:
        stray = tokens(text) - allowed.quoting[item_id]
        assert not stray, f"summary {item_id!r} quotes {sorted(stray)} not of its session: {text!r}"
        return
    scoped = SCOPED.match(item_id)
    if scoped and scoped.group(1) == "entity" and allowed.entity_tokens is not None:
        owner = json.loads(scoped.group(2))[0]
        assert owner == allowed.session, f"entity card {item_id!r} of another session"
        stray = tokens(text) - allowed.entity_tokens
        assert not stray, f"entity card {item_id!r} quotes deleted or foreign {sorted(stray)}"
        named = {c for c in ALL_CITIES if c in text} - allowed.entity_cities
        assert not named, f"entity card {item_id!r} names {sorted(named)}, not in the session"
        return
    raise AssertionError(f"offered an item the model does not hold: {item}")


def check_assembly(allowed: Offerable, observed: dict[str, Any], query: str | None) -> None:
    """An assembly offers only what may be offered, all of it, and reports a partition."""
    included, pruned = observed["included"], observed["pruned"]
    for item in [*included, *pruned]:
        check_item(allowed, item, query)
    kept = [str(i[0]) for i in included]
    assert len(kept) == len(set(kept)), f"an id included twice: {kept}"
    twice = {str(p[0]) for p in pruned if p[3] != "duplicate"} & set(kept)
    assert not twice, f"included and pruned: {sorted(twice)}"
    for tier, (offered, n_kept, n_pruned) in observed["tiers"].items():
        assert offered == n_kept + n_pruned, f"tier {tier}: {offered} != {n_kept} + {n_pruned}"
        assert n_kept == sum(int(i[1]) == int(tier) for i in included), f"tier {tier} kept"
    assert observed["tokens_used"] <= observed["tokens_available"]
    offered_ids = set(kept) | {str(p[0]) for p in pruned}
    missing = (allowed.messages | allowed.summaries) - offered_ids
    assert not missing, f"flushed records not offered: {sorted(missing)}"
    left_out = allowed.pinned - set(kept)
    assert not left_out, f"pinned facts not included: {sorted(left_out)}"
    cut = [p for p in pruned if str(p[0]) in allowed.messages and p[3] in NEVER_LEFT_OUT]
    assert not cut, f"messages cut though everything fits: {cut}"


def check_candidates(allowed: Offerable, observed: dict[str, Any], user: str | None) -> None:
    """Candidates hold only what may be offered, and every message, summary and pin."""
    for item in observed["items"]:
        check_item(allowed, item, None)
    ids = {str(i[0]) for i in observed["items"]}
    missing = (allowed.messages | allowed.summaries | allowed.pinned) - ids
    assert not missing, f"flushed records not among the candidates: {sorted(missing)}"
    assert observed["user_id"] == user, f"candidates for {observed['user_id']!r}, not {user!r}"


def check_history(model: Model, session: str, observed: dict[str, Any], limit: int | None) -> None:
    """A session's history is its stored messages in order, exactly (the last ``limit``)."""
    stored = model.sessions[session].messages
    if "records" in observed:
        expected = [["message", session, m.user, m.id, m.text, m.role] for m in stored]
        if limit is not None:
            expected = expected[-limit:] if limit else []
        assert observed["records"] == expected
    elif "messages" in observed:  # LangChain
        assert observed["messages"] == [[m.id, m.text] for m in stored]
    else:  # LlamaIndex
        assert observed["texts"] == [m.text for m in stored]


def check_search(
    model: Model,
    observed: dict[str, Any],
    *,
    session: str | None,
    user: str | None,
    messages_only: bool,
) -> None:
    """Hits are stored records of the scope searched, with their text; every message is found."""
    hits = observed["hits"]
    in_scope = [
        (name, s)
        for name, s in model.sessions.items()
        if (session is None or name == session) and (user is None or s.owner == user)
    ]
    exact = {("message", name, m.id): m.text for name, s in in_scope for m in s.messages}
    for name, s in in_scope:
        exact.update({("pinned", name, pid): t for pid, t in s.pins.items()})
    if session is None and user is not None:
        exact.update({("pinned", None, pid): t for pid, t in model.user_pins[user].items()})
    quoting = {("summary", name, sid): s.ever for name, s in in_scope for sid in s.summaries}
    for kind, sid, _uid, rid, text, _role in hits:
        key = (kind, sid, rid)
        if key in exact:
            assert text == exact[key], f"hit {key} is {text!r}, stored {exact[key]!r}"
        elif key in quoting:
            stray = tokens(text) - quoting[key]
            assert not stray, f"summary hit {key} quotes {sorted(stray)}"
        else:
            raise AssertionError(f"hit {key} ({text!r}) is not a stored record of the scope")
    if messages_only:
        found = {(k, s, r) for k, s, _u, r, _t, _ro in hits}
        missing = {k for k in exact if k[0] == "message"} - found
        assert not missing, f"stored messages not found: {sorted(missing)}"


def check_contexts(model: Model, session: str, observed: dict[str, Any]) -> None:
    """The log holds exactly the session's assemblies (newest first); access counts sum it."""
    expected = [[e.user, [list(p) for p in e.included]] for e in reversed(model.logs[session])]
    assert observed["records"] == expected, (
        f"logged assemblies of {session} differ from those made: {observed['records']} != "
        f"{expected}"
    )
    counts: Counter[str] = Counter()
    for entry in model.logs[session]:
        counts.update({i for i, tier in entry.included if is_memory_tier(tier)})
    assert observed["access"] == dict(counts), (
        f"access counts of {session} are {observed['access']}, its logged assemblies {counts}"
    )


def check_entities(model: Model, session: str, observed: dict[str, Any]) -> None:
    """A session's entities are the cities its messages name, counted in its messages now."""
    messages = model.sessions[session].messages
    names = set()
    for name, mentions, turns in observed["entities"]:
        names.add(name)
        naming = [m.id for m in messages if name in m.text]
        assert mentions == len(naming), f"{name}: {mentions} mentions, stored {len(naming)}"
        assert set(turns) <= set(naming), f"{name}: turns {turns}, stored {naming}"
    named = {c for m in messages for c in ALL_CITIES if c in m.text}
    assert names == named, f"entities {sorted(names)}, the messages name {sorted(named)}"
