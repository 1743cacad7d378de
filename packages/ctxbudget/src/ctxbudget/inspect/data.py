"""What the inspector shows, read through `ContextMemory`'s public read API: plain documents.

Each page of the inspector is one function of this module returning a JSON-ready ``dict`` (the
page's ``?format=json`` twin); `ctxbudget.inspect.pages` draws the same document as HTML. Reads
only: `ContextMemory.history`, `ContextMemory.contexts`, the inclusion log's session list, the
store's log rows (`ChromaStore.logs`: counted without decoding, and only the records a page
needs decoded) and `ChromaStore.get`/`list_sessions`. Nothing here writes, and a session id
nobody stored finds nothing (no read creates a record, a partition or a log).

What the inclusion log keeps of an assembly (`ctxbudget.memory.log.entries`) is ids, tiers,
tokens, scores, prune reasons and their details, and per-tier figures; the query and the
rendered context as sent only with `InclusionLogConfig(keep_context=True)`. Item texts are
looked up in the store by id (a record deleted since shows none). What a record does not hold
(an older record has no scores or details; the query and context are off by default) is listed
in the assembly page's ``not_logged``.
"""

from __future__ import annotations

import json
import logging
import os
import re
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ctxbudget.core.ids import is_internal, ref_of_id
from ctxbudget.core.items import tier_name
from ctxbudget.errors import StoreError, StoreInputError
from ctxbudget.memory.log.entries import ContextRecord, decode_record
from ctxbudget.store.context_log import LogRow

if TYPE_CHECKING:
    from ctxbudget.memory.context import ContextMemory
    from ctxbudget.store.records import Record

__all__ = [
    "SEARCH_LIMIT",
    "SESSIONS_PER_PAGE",
    "assembly_page",
    "call_summary",
    "message_page",
    "open_reader",
    "search_page",
    "decoded",
    "log_rows",
    "message_row",
    "sessions_page",
]

logger = logging.getLogger(__name__)

#: The most messages a search lists.
SEARCH_LIMIT = 200

#: Sessions the sessions page reads and lists at once (``?start=N`` for the next ones): a page
#: reads its sessions' messages and logs, so its cost is bounded by the page, not the store.
SESSIONS_PER_PAGE = 100

_WORD = re.compile(r"\w+", re.UNICODE)


def open_reader(
    path: str | os.PathLike[str] | None = None,
    *,
    chroma_url: str | None = None,
    namespace: str = "default",
    model: str = "gpt-4o",
) -> ContextMemory:
    """A `ContextMemory` that only looks: no inclusion log of its own, no write-behind journal.

    >>> memory = open_reader("./.ctxbudget")  # doctest: +SKIP
    """
    from ctxbudget.memory.context import ContextMemory

    return ContextMemory(
        path,
        chroma_url=chroma_url,
        namespace=namespace,
        model=model,
        write_behind=False,
        inclusion_log=False,
    )


def log_rows(memory: ContextMemory, session_id: str) -> list[LogRow]:
    """A session's stored log rows, oldest first, undecoded (what is queued written first)."""
    memory.inclusion_log.flush()
    return memory.store.logs.read(memory.namespace, session_id)[::-1]


def decoded(row: LogRow) -> ContextRecord | None:
    """A log row's record (None: damaged; skipped with a warning, as `contexts` skips it)."""
    try:
        return decode_record(row.document)
    # As `ContextMemory.contexts` does: skipped, and said. OverflowError: a damaged record's
    # infinite count (``"used": 1e999``), which `decode_record` lets out as it is.
    except (StoreError, OverflowError) as exc:
        logger.warning("context record %r skipped: %s", row.key, exc)
        return None


# -- sessions and search -------------------------------------------------------------------
def sessions_page(memory: ContextMemory, start: int = 0) -> dict[str, Any]:
    """The namespace's sessions (with messages or a log) by name, from ``start``, by user.

    At most `SESSIONS_PER_PAGE` of them are read; ``next`` and ``previous`` are the ``start``
    of the pages beside (None: none).
    """
    names = set(memory.store.list_sessions(namespace=memory.namespace))
    names.update(memory.inclusion_log.sessions())
    ordered = sorted(names)
    page = ordered[start : start + SESSIONS_PER_PAGE]
    users: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for session_id in page:
        messages = memory.history(session_id)
        rows = log_rows(memory, session_id)  # counted, not decoded
        user = next((m.user_id for m in messages if m.user_id), None)
        user = user or next((r.user_id for r in rows if r.user_id), None)
        times = [m.timestamp for m in messages if m.timestamp is not None]
        times += [r.time for r in rows[-1:]]
        users[user or ""].append(
            {
                "session": session_id,
                "user": user,
                "messages": len(messages),
                "assemblies": len(rows),
                "last_activity": max(times) if times else None,
            }
        )
    end = start + len(page)
    return {
        "page": "sessions",
        "namespace": memory.namespace,
        "store": memory.store.location,
        "users": [{"user": u or None, "sessions": users[u]} for u in sorted(users)],
        "total": len(ordered),
        "start": start,
        "next": end if end < len(ordered) else None,
        "previous": max(0, start - SESSIONS_PER_PAGE) if start else None,
    }


def _words(text: str) -> list[str]:
    """The words of ``text`` as search compares them: case-folded, without accents.

    Split first, then folded, for the query and the messages alike (folded first, "İstanbul"
    became "i", a combining dot no word holds, and "stanbul": until 2026-12-01 no query found
    it); the marks go, so a word matches in any case or accent ("cafe" finds "Café").
    """
    return [_folded(word) for word in _WORD.findall(text)]


def _folded(word: str) -> str:
    decomposed = unicodedata.normalize("NFKD", word.casefold())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def search_page(memory: ContextMemory, query: str, start: int = 0) -> dict[str, Any]:
    """The messages holding every word of ``query`` (any case or accent), in its sessions.

    The sessions are read by name from ``start``, `SESSIONS_PER_PAGE` at most (the page's cost
    is bounded by them, not by the store); ``next`` is the ``start`` of the sessions not read
    yet (None: all were), ``more`` the hits past `SEARCH_LIMIT` in those read.
    """
    words = _words(query)
    hits: list[dict[str, Any]] = []
    more = 0
    names = memory.store.list_sessions(namespace=memory.namespace) if words else []
    page = names[start : start + SESSIONS_PER_PAGE]
    for session_id in page:
        for record in memory.history(session_id):
            found = set(_words(record.text))
            if all(w in found for w in words):
                if len(hits) >= SEARCH_LIMIT:
                    more += 1
                    continue
                hits.append(message_row(record))
    end = start + len(page)
    return {
        "page": "search",
        "query": query,
        "words": words,
        "hits": hits,
        "more": more,
        "sessions": {"from": start, "to": end, "of": len(names)},
        "next": end if end < len(names) else None,
    }


def call_summary(number: int, record: ContextRecord) -> dict[str, Any]:
    """One logged assembly in a line: its figures by tier and its prune reasons."""
    return {
        "call": number,
        "id": record.id,
        "time": record.time,
        "model": record.model,
        "format": record.format,
        "budget": record.tokens_available,
        "window": record.window,
        "tokens_used": record.tokens_used,
        "included": len(record.included),
        "pruned": len(record.pruned),
        "tiers": [
            {
                "tier": t.tier,
                "name": t.name,
                "offered": t.offered,
                "kept": t.kept,
                "pruned": t.pruned,
                "tokens": t.tokens,
                "floor": t.floor,
                "cap": t.cap,
            }
            for t in record.tiers
        ],
        "prune_reasons": dict(sorted(Counter(p.reason for p in record.pruned).items())),
        "error": record.error,
        "required": record.required,
    }


# -- one assembly  ----------------------------------------------------------------------------
def assembly_page(memory: ContextMemory, session_id: str, record_id: str) -> dict[str, Any] | None:
    """One logged assembly: every item offered, and what changed since the call before."""
    rows = log_rows(memory, session_id)  # only this record and the one before are decoded
    at = next((n for n, r in enumerate(rows) if r.key == record_id), None)
    record = None if at is None else decoded(rows[at])
    if at is None or record is None:
        return None
    before = decoded(rows[at - 1]) if at > 0 else None
    texts = _texts(memory, record, [e.id for e in record.included] + [e.id for e in record.pruned])
    items = [
        {
            "id": e.id,
            "ref": _ref(record, e.id),
            "status": "included",
            "tier": e.tier,
            "tier_name": tier_name(e.tier),
            "tokens": e.tokens,
            "score": e.score,
            "reason": None,
            "detail": None,
            **texts.get(e.id, _UNKNOWN),
        }
        for e in record.included
    ]
    items += [
        {
            "id": e.id,
            "ref": _ref(record, e.id),
            "status": "pruned",
            "tier": e.tier,
            "tier_name": tier_name(e.tier),
            "tokens": None,
            "score": e.score,
            "reason": e.reason,
            "detail": e.detail,
            **texts.get(e.id, _UNKNOWN),
        }
        for e in record.pruned
    ]
    now = record.included_ids
    earlier = [] if before is None else before.included_ids
    shared = 0
    for mine, theirs in zip(now, earlier, strict=False):
        if mine != theirs:
            break
        shared += 1
    kept = set(now)
    return {
        "page": "assembly",
        "session": session_id,
        "call": at + 1,
        "calls": len(rows),
        "summary": call_summary(at + 1, record),
        "user": record.user_id,
        "reserve": record.reserve,
        "safety": record.safety,
        "items": items,
        "previous": rows[at - 1].key if at > 0 else None,
        "next": rows[at + 1].key if at + 1 < len(rows) else None,
        "entered": [i for i in now if i not in set(earlier)] if before is not None else [],
        "left": [i for i in earlier if i not in kept],
        "shared_prefix": {
            "items": shared,
            "tokens": sum(e.tokens for e in record.included[:shared]),
        },
        "query": record.query,
        "context": None if record.context is None else _context(record.context),
        "not_logged": _not_logged(record),
    }


def _context(context: str | tuple[dict[str, Any], ...]) -> dict[str, Any]:
    """The context as sent: ``{"text": ...}`` or ``{"messages": [...]}``."""
    return {"text": context} if isinstance(context, str) else {"messages": list(context)}


def _not_logged(record: ContextRecord) -> list[str]:
    """What the page cannot show of ``record``: what its log did not keep."""
    missing = []
    if any(e.score is None for e in record.included) or any(e.score is None for e in record.pruned):
        missing.append("score")
    if any(e.detail is None for e in record.pruned):
        missing.append("prune detail")
    if record.query is None:
        missing.append("query text")
    if record.context is None:
        missing.append("rendered context")
    return missing


_UNKNOWN: dict[str, Any] = {"text": None, "role": None, "kind": None}


def _ref(record: ContextRecord, item_id: str) -> dict[str, Any] | None:
    ref = record.ref(item_id)
    if ref is None or ref.scope is None:
        return None
    return {"id": ref.id, "scope": list(ref.scope)}


def _texts(
    memory: ContextMemory, record: ContextRecord, ids: Iterable[str]
) -> dict[str, dict[str, Any]]:
    """The stored text of each item id (by its scope); ctxbudget's own items have none stored."""
    wanted: dict[tuple[str, str], dict[str, str]] = defaultdict(dict)  # scope -> own id -> item
    for item_id in ids:
        ref = ref_of_id(item_id)
        if ref is not None and ref.scope is not None:
            wanted[ref.scope][ref.id] = item_id
        elif item_id.startswith("ctxbudget:summary:") or not is_internal(item_id):
            wanted[("session", record.session_id)][item_id] = item_id
    out: dict[str, dict[str, Any]] = {}
    for (kind, name), by_id in wanted.items():
        scope = {{"session": "session_id", "user": "user_id"}.get(kind, "collection"): name}
        try:
            found = memory.store.get(list(by_id), namespace=memory.namespace, **scope)
        except StoreInputError:
            continue  # an id the store cannot hold: shown without its text
        for rec in found:
            out[by_id[rec.id]] = {"text": rec.text, "role": rec.role, "kind": rec.kind}
    return out


# -- one message -----------------------------------------------------------------------------
def message_page(memory: ContextMemory, session_id: str, message_id: str) -> dict[str, Any] | None:
    """A message of a session, and what each of the session's logged assemblies did with it."""
    try:
        found = memory.store.get([message_id], namespace=memory.namespace, session_id=session_id)
    except StoreInputError:
        return None
    if not found:
        return None
    # Only the records that name the message are decoded (its id, as JSON, is in the text).
    named = (json.dumps(message_id, ensure_ascii=False), json.dumps(message_id))
    calls = [
        _fate(n, row, message_id, named) for n, row in enumerate(log_rows(memory, session_id), 1)
    ]
    last = max((c["call"] for c in calls if c["status"] == "included"), default=None)
    stopped = None
    if last is not None and last < len(calls):
        stopped = calls[last]["call"]  # the first call after the last one that sent it
    return {
        "page": "message",
        "session": session_id,
        "message": message_row(found[0]),
        "included_in": [c["call"] for c in calls if c["status"] == "included"],
        "last_included": last,
        "stopped_at": stopped,
        "calls": calls,
    }


def _fate(number: int, row: LogRow, item_id: str, named: tuple[str, ...]) -> dict[str, Any]:
    entry: dict[str, Any] = {"call": number, "id": row.key, "time": row.time}
    # Its id as this version writes it, or with non-ASCII escaped (as another JSON writer may).
    record = decoded(row) if any(n in row.document for n in named) else None
    if record is None:
        return {**entry, "status": "not offered", "tokens": None, "reason": None}
    tokens = next((e.tokens for e in record.included if e.id == item_id), None)
    if tokens is not None:
        return {**entry, "status": "included", "tokens": tokens, "reason": None}
    reason = next((e.reason for e in record.pruned if e.id == item_id), None)
    status = "not offered" if reason is None else "pruned"
    return {**entry, "status": status, "tokens": None, "reason": reason}


def message_row(record: Record) -> dict[str, Any]:
    """A stored message as the pages list it."""
    return {
        "id": record.id,
        "session": record.session_id,
        "user": record.user_id,
        "role": record.role,
        "seq": record.seq,
        "time": record.timestamp,
        "text": record.text,
    }
