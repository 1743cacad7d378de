"""What each tool of ``ctxbudget mcp`` does with a `ContextMemory`, without the MCP SDK.

Each public method of `MemoryTools` is one tool (`ctxbudget.mcp.server` registers them with
their argument schemas): it keeps the server's scoping, calls `ContextMemory`'s public API, and
returns a JSON document. A mistake raises a `CtxBudgetError` (ours, or the memory's own) whose
message says what was wrong and what to do; the server hands it to the client as a tool error.

Arguments arrive as the client sent them (JSON values, unconverted) and pass the core's own
checks: `ContextMemory` refuses a bad budget, timestamp, role, text or id with the message it
gives any caller (``budget: "200"`` and ``k: true`` are refused, not converted).

Scoping is `ContextMemory`'s: one namespace per server (``--namespace``), a session named by
each call (``session_id``), and a user (``user_id``). A server started for one user
(``ctxbudget mcp --user U``) uses U on every call and refuses another user id, so its client can
neither write as nor search another user. A call with a user never continues a session another
user started (`ctxbudget.memory.writing.owners`): a write claims a new session for its user
first, so of two users starting one session id at once, one is refused. A call with a user
deletes, edits or unpins only in a session that user started: a session started without a user
(a group chat of the app's, perhaps with other users' messages) is read and written to, never
changed.

>>> tools = MemoryTools(ContextMemory(path=tmp_path), user="maya")  # doctest: +SKIP
>>> tools.remember("s1", "user", "My cat is Miso.")["user_id"]  # doctest: +SKIP
'maya'
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from ctxbudget.core.explain import context_document
from ctxbudget.core.numbers import shown
from ctxbudget.errors import ConfigurationError
from ctxbudget.memory.writing.owners import (
    check_session_changer,
    check_session_owner,
    claim_session,
)
from ctxbudget.store.records import require_name, scope_of
from ctxbudget.store.search import search_k

if TYPE_CHECKING:
    from ctxbudget.memory.context import ContextMemory
    from ctxbudget.memory.reading.search import ScoredHit

__all__ = [
    "DEFAULT_BUDGET",
    "FORMATS",
    "RECALL_KINDS",
    "ROLES",
    "Format",
    "MemoryTools",
    "Role",
]

#: What ``context`` may use when the call names no budget (``ctxbudget assemble``'s default).
DEFAULT_BUDGET = 4096

#: The kinds of record ``recall`` searches: messages, pinned facts and stored summaries.
RECALL_KINDS: tuple[str, ...] = ("message", "pinned", "summary")

Role = Literal["user", "assistant", "system"]
Format = Literal["messages", "text", "compact"]

#: The roles ``remember`` offers (its schema's enum; the memory checks the value).
ROLES: tuple[str, ...] = ("user", "assistant", "system")

#: The formats ``context`` offers (its schema's enum; the memory checks the value).
FORMATS: tuple[str, ...] = ("messages", "text", "compact")


class MemoryTools:
    """The tools of one MCP server over one `ContextMemory`.

    Args:
        memory: the memory every tool reads and writes (its namespace is the server's).
        user: the only user this server serves (``--user``): every call uses it, and a call
            naming another ``user_id`` is refused. None: each call names its user, or none.
    """

    def __init__(self, memory: ContextMemory, *, user: str | None = None) -> None:
        self.memory = memory
        self.user = None if user is None else require_name("--user", user)

    # -- writing -----------------------------------------------------------------------------
    def remember(
        self,
        session_id: str,
        role: Role,
        text: str,
        *,
        user_id: str | None = None,
        name: str | None = None,
        id: str | None = None,  # noqa: A002 - the name ContextMemory.add_message takes
        timestamp: str | float | None = None,
    ) -> dict[str, Any]:
        """Store one message of a session; acknowledged at once, stored for all to see soon."""
        if not isinstance(role, str) or role not in ROLES:  # a "tool" result has no call here
            msg = (
                f"remember's role must be one of {list(ROLES)}, got {shown(role)}: a tool's "
                "result is stored with the call it answers, which this tool cannot take"
            )
            raise ConfigurationError(msg)
        _own_id("remember", id)
        user = self._user(user_id)
        stored = self.memory.add_message(
            self._session(session_id, user, write=True),
            role,
            text,
            id=id,
            user_id=user,
            name=name,
            timestamp=timestamp,
        )
        return {
            "id": stored,
            "session_id": session_id,
            "user_id": user,
            "namespace": self.memory.namespace,
        }

    def remember_fact(
        self,
        text: str,
        *,
        session_id: str | None = None,
        user_id: str | None = None,
        id: str | None = None,  # noqa: A002 - the name ContextMemory.pin takes
    ) -> dict[str, Any]:
        """Pin a fact to a session, or to a user (offered in every session of theirs)."""
        user = self._user(user_id)
        if session_id is None and user is None:
            msg = (
                "remember_fact needs a session_id (a fact of one conversation) or a user_id (a "
                "fact about the user, offered in every session of theirs); pass one of them"
            )
            raise ConfigurationError(msg)
        _own_id("remember_fact", id)
        session = None if session_id is None else self._session(session_id, user, write=True)
        stored = self.memory.pin(session, text, user_id=user, id=id)
        return {"id": stored, "scope": _scope(session_id, user), "namespace": self.memory.namespace}

    # -- reading -----------------------------------------------------------------------------
    def recall(
        self,
        query: str,
        *,
        session_id: str | None = None,
        user_id: str | None = None,
        k: int = 10,
        kinds: Sequence[str] = RECALL_KINDS,
    ) -> dict[str, Any]:
        """The stored records that best match ``query``, in one session or of one user."""
        user = self._user(user_id)
        if session_id is None and user is None:
            msg = (
                "recall needs a session_id (search one conversation) or a user_id (search "
                "everything of one user): without either it would search every user's memory"
            )
            raise ConfigurationError(msg)
        if not isinstance(query, str) or not query.strip():  # a lone surrogate: the core's refusal
            msg = f"recall needs a query to search for (a non-empty text), got {shown(query)}"
            raise ConfigurationError(msg)
        k = search_k(k)  # the core's check of k (ContextMemory.search's), before any work
        if (
            not isinstance(kinds, list | tuple)
            or not kinds
            or not all(isinstance(kind, str) and kind in RECALL_KINDS for kind in kinds)
        ):
            msg = f"kinds must be some of {list(RECALL_KINDS)}, got {kinds!r:.200}"
            raise ConfigurationError(msg)
        hits = self.memory.search(
            query,
            k=k,
            kinds=tuple(kinds),
            session_id=None if session_id is None else self._session(session_id, user),
            user_id=user,
        )
        return {
            "query": query,
            "scope": _scope(session_id, user),
            "namespace": self.memory.namespace,
            "hits": [_hit_document(hit) for hit in hits],
        }

    def context(
        self,
        session_id: str,
        question: str,
        *,
        budget: int = DEFAULT_BUDGET,
        user_id: str | None = None,
        system: str | None = None,
        format: Format = "messages",  # noqa: A002 - ContextMemory.assemble's name
    ) -> dict[str, Any]:
        """The context for answering ``question`` in ``session_id``, within ``budget`` tokens.

        The document ``ctxbudget assemble --json`` prints (its ``--help`` lists the keys):
        ``messages`` (and ``text`` in the text and compact formats), ``tokens_used`` (never
        above ``tokens_available``), and what was included and pruned, with the reasons.
        """
        user = self._user(user_id)
        memory = self.memory
        ctx = memory.assemble(
            self._session(session_id, user),
            question,
            budget=budget,
            user_id=user,
            system=system,
            format=format,
        )
        warnings = []
        if not memory.history(session_id, limit=1):
            warnings.append(
                f"session {session_id!r} holds no messages in namespace {memory.namespace!r}, "
                "so the context has none of its history; check session_id (the sessions tool "
                "lists them)"
            )
        return context_document(
            ctx,
            memory.counter,
            session=session_id,
            namespace=memory.namespace,
            warnings=warnings,
            output=True,
        )

    def sessions(self, *, user_id: str | None = None) -> dict[str, Any]:
        """The sessions that hold records: of one user, or (no user) of the whole namespace."""
        user = self._user(user_id)
        memory = self.memory
        memory.flush()  # the sessions of messages acknowledged a moment ago are listed too
        found = memory.store.list_sessions(namespace=memory.namespace, user_id=user)
        return {"namespace": memory.namespace, "user_id": user, "sessions": found}

    # -- forgetting --------------------------------------------------------------------------
    def forget_session(self, session_id: str) -> dict[str, Any]:
        """Delete every record of a session: its messages, pinned facts and summaries."""
        session = self._session(session_id, self.user, change="delete the session")
        removed = self.memory.delete_session(session)
        return {"session_id": session_id, "removed": removed, "namespace": self.memory.namespace}

    def edit_message(
        self,
        session_id: str,
        id: str,  # noqa: A002 - the name ContextMemory.replace_message takes
        text: str,
        *,
        user_id: str | None = None,
    ) -> dict[str, Any]:
        """Replace the text of a stored message of a session: the same id, in its place.

        What quoted the old text goes with it (`ContextMemory.replace_message`): no later
        ``context`` or ``recall`` offers it.
        """
        user = self._user(user_id)
        session = self._session(session_id, user, change="edit a message")
        stored = self.memory.replace_message(session, id, text, user_id=user)
        return {"id": stored, "session_id": session_id, "namespace": self.memory.namespace}

    def forget_messages(
        self, session_id: str, ids: list[str], *, user_id: str | None = None
    ) -> dict[str, Any]:
        """Delete some messages of a session, and what quoted them; how many there were."""
        session = self._session(session_id, self._user(user_id), change="delete messages")
        removed = self.memory.delete_messages(session, ids)
        return {"session_id": session_id, "removed": removed, "namespace": self.memory.namespace}

    def forget_fact(
        self,
        id: str,  # noqa: A002 - the name ContextMemory.unpin takes
        *,
        session_id: str | None = None,
        user_id: str | None = None,
    ) -> dict[str, Any]:
        """Remove a pinned fact of a session (``session_id``) or of a user (``user_id``)."""
        user = self._user(user_id)
        if session_id is not None:
            session = self._session(session_id, user, change="remove a pinned fact")
            removed = self.memory.unpin(id, session_id=session)
        elif user is not None:
            removed = self.memory.unpin(id, user_id=user)
        else:
            msg = (
                "forget_fact needs the scope the fact was pinned to: its session_id, or its "
                "user_id for a fact about the user"
            )
            raise ConfigurationError(msg)
        return {"id": id, "scope": _scope(session_id, user), "removed": removed}

    # -- scoping -----------------------------------------------------------------------------
    def _session(
        self, session_id: str, user: str | None, *, write: bool = False, change: str = ""
    ) -> str:
        """A session of a call for ``user``: never one another user started.

        A write claims a new session for ``user`` first (`claim_session`: of two users writing
        one new session id at once, one is refused); a read checks the owner the session's
        stamp names; a ``change`` (what a delete, edit or unpin would do) is made only in a
        session ``user`` started (`check_session_changer`: not in one started without a user).
        A session id is no key to another user's conversation.
        """
        require_name("session_id", session_id)
        if user is None:
            return session_id
        memory, door = self.memory, self._door
        if write:
            claim_session(memory, session_id, user_id=user, door=door)
        elif change:
            instead = (
                "make the change from a call without a user (a ctxbudget mcp server started "
                "without --user, and no user_id) or with ContextMemory directly"
            )
            check_session_changer(
                memory, session_id, user_id=user, door=door, change=change, instead=instead
            )
        else:
            check_session_owner(memory, session_id, user_id=user, door=door)
        return session_id

    @property
    def _door(self) -> str:
        return "ctxbudget mcp" if self.user is None else f"ctxbudget mcp --user {self.user}"

    def _user(self, given: str | None) -> str | None:
        """The user of a call: the server's own (``--user``), else the one the call names."""
        if given is not None:
            require_name("user_id", given)
        if self.user is None or given is None or given == self.user:
            return self.user if self.user is not None else given
        msg = (
            f"user_id {given!r} is not this server's user: it serves {self.user!r} only "
            f"(ctxbudget mcp --user {self.user}); leave user_id out"
        )
        raise ConfigurationError(msg)


def _scope(session_id: str | None, user: str | None) -> list[str | None]:
    return ["session", session_id] if session_id is not None else ["user", user]


def _hit_document(found: ScoredHit) -> dict[str, Any]:
    record = found.hit.record
    when = record.timestamp
    return {
        "id": record.id,
        "scope": list(scope_of(record)),
        "kind": record.kind,
        "role": record.role,
        "user_id": record.user_id,
        "text": record.text,
        "score": round(found.score, 4),
        "timestamp": None if when is None else datetime.fromtimestamp(when, UTC).isoformat(),
    }


def _own_id(tool: str, given: object) -> None:
    """Refuse an ``id`` that is not a non-empty string (the core would take 7 as "7", "" as none).

    Values are not converted at this door: the tools that edit and forget refuse them, so an
    id stored as ``7`` could not be named again as given.
    """
    if given is not None and (not isinstance(given, str) or not given):
        msg = (
            f"{tool}'s id must be a non-empty string (your own id), or left out for a new one; "
            f"got {shown(given)}"
        )
        raise ConfigurationError(msg)
