"""One session's timeline page, by pages: its logged assemblies and its messages.

A session can hold thousands of assemblies and messages; the page shows `CALLS_PER_PAGE` of
the assemblies (``?start=N``: from the N-th, counted from 0; by default the newest) and
`MESSAGES_PER_PAGE` of the messages (``?messages=N``, the same way), so what a page decodes
and sends is bounded by the page. Assemblies are numbered by their place in the session's log,
as the assembly page numbers them (a damaged one is skipped, its number kept).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ctxbudget.inspect.data import call_summary, decoded, log_rows, message_row

if TYPE_CHECKING:
    from ctxbudget.memory.context import ContextMemory

__all__ = ["CALLS_PER_PAGE", "MESSAGES_PER_PAGE", "timeline_page"]

#: Logged assemblies a timeline page shows (and decodes) at once.
CALLS_PER_PAGE = 500

#: Messages a timeline page lists at once.
MESSAGES_PER_PAGE = 500


def timeline_page(
    memory: ContextMemory,
    session_id: str,
    start: int | None = None,
    messages: int | None = None,
) -> dict[str, Any] | None:
    """A page of a session's logged assemblies and messages, oldest first.

    ``start`` and ``messages``: the first assembly and message shown (counted from 0; None:
    the newest page). None when the session has no messages and no log, or a ``start`` or
    ``messages`` past the end is asked for.
    """
    rows = log_rows(memory, session_id)
    stored = memory.history(session_id)
    if not rows and not stored:
        return None
    calls = _window(start, len(rows), CALLS_PER_PAGE)
    shown = _window(messages, len(stored), MESSAGES_PER_PAGE)
    if calls is None or shown is None:
        return None
    page = rows[calls["from"] : calls["to"]]
    records = [(n, decoded(row)) for n, row in enumerate(page, calls["from"] + 1)]
    return {
        "page": "timeline",
        "session": session_id,
        "user": next((m.user_id for m in stored if m.user_id), None),
        "messages": len(stored),
        "assemblies": [call_summary(n, r) for n, r in records if r is not None],
        "calls": calls,
        "message_list": [message_row(m) for m in stored[shown["from"] : shown["to"]]],
        "message_range": shown,
    }


def _window(start: int | None, total: int, size: int) -> dict[str, Any] | None:
    """Where a page of ``size`` from ``start`` (None: the last page) lies in ``total``."""
    if start is None:
        start = max(0, total - size)
    elif start > 0 and start >= total:
        return None
    end = min(total, start + size)
    return {
        "from": start,
        "to": end,
        "of": total,
        "previous": max(0, start - size) if start else None,
        "next": end if end < total else None,
    }
