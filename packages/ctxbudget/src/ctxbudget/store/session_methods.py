"""`ChromaStore`'s methods for a session as a whole: its stamps, its owner, one call's view.

The stamps are what copies kept in memory are checked against (`ctxbudget.store.stamps`); the
owner is claimed as a session's first write claims it (`ctxbudget.store.writes`); the view is
what one call reads of a session (`ctxbudget.store.reads`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ctxbudget.store.records import require_name
from ctxbudget.store.stamps import Stamp, Stamps

if TYPE_CHECKING:
    from ctxbudget.store.reads import Reader, SessionView
    from ctxbudget.store.sessions import Sessions
    from ctxbudget.store.writes import Writer

__all__ = ["SessionMethods"]


class SessionMethods:
    """`ChromaStore`'s session methods (one of its bases), each a call of its parts."""

    _sessions: Sessions
    _writer: Writer
    _reader: Reader

    def session_stamp(self, *, namespace: str, session_id: str) -> Stamp | None:
        """The session's `Stamp` (None: it has no records), in one read by id.

        What a copy of anything read from the session, kept between calls, is checked against:
        its ``generation`` changes with every delete or replace of the session's records and
        when the session is deleted and started again.
        """
        entry = self._sessions.entry(
            require_name("namespace", namespace), require_name("session_id", session_id)
        )
        return None if entry is None else entry.stamp()

    def claim_session(self, *, namespace: str, session_id: str, user_id: str) -> Stamp:
        """The session's `Stamp`, its entry created first with ``user_id`` as owner if absent.

        The entry is added as the session's first write adds it: with Chroma's ``add``, which
        keeps an id's first write, then read back. Of two users starting one session at once
        (two processes on one server), one owns it and both read that owner back
        (`ctxbudget.memory.writing.owners.claim_session` refuses the other).
        """
        entry = self._writer.claim(
            require_name("namespace", namespace),
            require_name("session_id", session_id),
            require_name("user_id", user_id),
        )
        return entry.stamp()

    def stamps(
        self,
        *,
        namespace: str,
        session_id: str,
        user_id: str | None,
        shared_values: bool = False,
    ) -> Stamps:
        """`Stamps` of the session, the user (None: its owner) and the namespace's documents.

        What a copy of a session's candidates is checked against, read before they are: one
        read by id. A delete or replace of any record they draw from changes one of them.
        ``shared_values``: with the stamp of the namespace's shared values (every put or delete
        of a value without a user draws it anew).
        """
        ns, sid = require_name("namespace", namespace), require_name("session_id", session_id)
        uid = None if user_id is None else require_name("user_id", user_id)
        return self._sessions.stamps(ns, sid, uid, shared_values=shared_values)

    def session_view(
        self,
        *,
        namespace: str,
        session_id: str,
        recent: int,
        user_id: str | None = None,
        held: Stamp | None = None,
        known: Stamps | None = None,
    ) -> SessionView:
        """What one call needs of a session, in one or two Chroma calls (`SessionView`).

        The last ``recent`` messages (at least the newest), the session's pins and summaries,
        and the user-wide pins of ``user_id`` (default: the user who started the session), with
        a `Stamp` whose generation changes whenever a copy of the session kept in memory would
        be stale. ``held``: the stamp of such a copy (its ``last``: the copy's newest seq); if
        of the current generation, only newer messages are read. ``known``: the session's
        `Stamps` the caller read just before (`stamps`): the session's entry read with them is
        not read again (one Chroma call fewer).
        """
        return self._reader.view(
            namespace=namespace,
            session_id=session_id,
            limit=recent,
            user_id=user_id,
            held=held,
            known=known,
        )
