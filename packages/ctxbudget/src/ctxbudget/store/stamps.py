"""A session's entry in ``<collection>.meta`` and the stamps copies kept in memory are keyed by.

A session's entry (`SessionEntry`) holds its last ``seq`` (a starting point for numbering),
its **home** partition (`ctxbudget.store.layout`), its owner, a version bumped whenever one of
its messages is deleted or replaced, and its **generation**: a random id drawn when the entry is
created and drawn again by every delete or replace. Copies of a session kept in memory are keyed
by it (`Stamp`): a counter restarts when a session is deleted and started again (by another
user, maybe), a random generation never comes back.

What a session's candidates draw from beyond the session has stamps of its own (`Stamps`): one
generation per user (its user-wide pins and its messages in every session) and one per
namespace's documents, stored under `stamp_key` of the user's or documents' partition (a
digest, so no user id is left behind), and, for candidates that offer shared values, the one of
the namespace's shared values partition (`ctxbudget.store.values`).
`ctxbudget.store.sessions.Sessions` reads and writes them (``stamps``, ``touched``,
``removed``).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, NamedTuple

from ctxbudget.store.records import json_key

__all__ = [
    "SessionEntry",
    "Stamp",
    "Stamps",
    "entry_of",
    "new_generation",
    "session_key",
    "stamp_key",
]


def session_key(namespace: str, session_id: str) -> str:
    """The id of a session's entry in ``meta``."""
    return json_key("session", namespace, session_id)


def new_generation() -> str:
    """A session generation: random, so no delete, clear or replace ever brings one back."""
    return uuid.uuid4().hex


class Stamp(NamedTuple):
    """What a copy of a session kept in memory is keyed by: equal stamps, the same messages.

    ``generation`` changes with every delete or replace of the session's records and when the
    session is deleted and started again; ``last`` is its newest seq (a copy may be extended
    past it); ``version`` counts deletes and replaces (kept for entries written before
    generations, which have ``generation`` "" until their first delete or replace);
    ``owner`` is the user who started the session ("" for none), never part of the key.
    """

    generation: str
    last: int
    version: int
    owner: str = ""

    def same_session(self, other: Stamp | None) -> bool:
        """Whether ``other`` is a stamp of the same messages (up to its ``last``)."""
        return (
            other is not None
            and other.generation == self.generation
            and other.version == self.version
        )


class Stamps(NamedTuple):
    """What a copy of a session's candidates is keyed by: every scope they are drawn from.

    ``session`` is the session's `Stamp` (None: no records); ``user`` the generation of the
    records of user ``user_id`` (user-wide pins, messages in any session; None: no user),
    ``documents`` that of the namespace's documents ("": never changed), ``values`` that of
    the namespace's shared values (read only when asked for; "": not read or never written).
    Read in one read by id (`ctxbudget.store.chroma_store.ChromaStore.stamps`) before what
    they key is read.
    """

    session: Stamp | None
    user: str
    documents: str
    user_id: str | None = None
    values: str = ""
    entry: SessionEntry | None = None
    """The session's entry as the same read found it (None: none), for `entry_key`."""
    entry_key: str = ""
    """The ``meta`` id of the session ``entry`` belongs to (`session_key`)."""
    elsewhere: tuple[str, ...] | None = None
    """The partitions of other owners that hold messages of ``user_id``, as the same read found
    them (`Sessions.elsewhere`; None: not read), for `Sessions.route`."""
    has_documents: bool | None = None
    """Whether the namespace's documents partition is registered, as the same read found it
    (None: not read). False: the namespace holds no documents and a search of them is skipped
    (`Collections.register` records a partition before anything is written to it)."""

    def same(self, other: Stamps) -> bool:
        """Whether nothing a copy keyed by ``other`` drew from was removed or replaced since."""
        return (
            self.session is not None
            and bool(self.session.generation)
            and self.session.same_session(other.session)
            and (self.user_id, self.user, self.documents, self.values)
            == (other.user_id, other.user, other.documents, other.values)
        )


def stamp_key(partition: str) -> str:
    """The id in ``meta`` of the stamp of a user's records or of a namespace's documents."""
    return json_key("stamp", partition)


@dataclass(frozen=True, slots=True)
class SessionEntry:
    """A session's entry: last seq (a hint), home, owner ("": none), version and generation."""

    last: int
    home: str
    owner: str
    version: int
    generation: str = ""

    def stamp(self) -> Stamp:
        """What copies of the session are keyed by (`Stamp`), with its owner."""
        return Stamp(self.generation, self.last, self.version, self.owner)

    def metadata(self, namespace: str, session_id: str) -> dict[str, Any]:
        """The entry as ``meta`` stores it."""
        return {
            "type": "session",
            "ns": namespace,
            "sid": session_id,
            "last": self.last,
            "home": self.home,
            "owner": self.owner,
            "ver": self.version,
            "gen": self.generation,
        }


def entry_of(meta: dict[str, Any]) -> SessionEntry:
    """A session's entry as ``meta`` stores it, read back."""
    return SessionEntry(
        int(meta.get("last", -1)),
        str(meta["home"]),
        str(meta.get("owner", "")),
        int(meta.get("ver", 0)),
        str(meta.get("gen", "")),
    )
