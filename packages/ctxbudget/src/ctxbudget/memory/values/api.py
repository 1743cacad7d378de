"""`ContextMemory`'s keyed values: put, get, delete, search and list, as LangGraph's store does.

The methods are `ContextMemory`'s own (`ValueMethods` is one of its bases); values are checked
in `ctxbudget.memory.values.model`, filtered in `ctxbudget.memory.values.matching`, and kept by
`ctxbudget.store.values`. ``user_id`` names the owner: a user's values are read and written in
that user's partition only, and `ContextMemory.delete_user` removes them; without it, the
namespace's shared values. Expired values (``ttl``) are invisible to every read.

A search with a query ranks by meaning and words (`ctxbudget.memory.values.ranking`); values
put with ``index=False`` follow, with score None. Without a query: newest ``updated_at`` first.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from ctxbudget.core.ids import internal_id
from ctxbudget.core.numbers import flag, shown
from ctxbudget.errors import InvalidValueError
from ctxbudget.memory.awaitable import awaitable
from ctxbudget.memory.reading.record_items import value_item
from ctxbudget.memory.values.asked import listing_args, search_args
from ctxbudget.memory.values.layout import is_layout, value_layout
from ctxbudget.memory.values.matching import namespace_matches
from ctxbudget.memory.values.model import (
    MAX_TTL_MINUTES,
    StoredValue,
    ValuePut,
    ValueQuery,
    check_key,
    check_namespace,
    now_micros,
)
from ctxbudget.memory.values.ranking import best_first, ranked, shown_text
from ctxbudget.memory.values.rows import passes_row, stored_value, value_write
from ctxbudget.store.records import require_name
from ctxbudget.store.values import ValueRow, ValueWrite

if TYPE_CHECKING:
    from ctxbudget.memory.reading.candidates import Candidates
    from ctxbudget.store.chroma_store import ChromaStore

__all__ = ["ValueMethods", "ValueQuery", "stored_value"]


def _user(user_id: object) -> str | None:
    return None if user_id is None else require_name("user_id", user_id)


class ValueMethods:
    """Keyed values (LangGraph's store model): methods of `ContextMemory`."""

    store: ChromaStore
    namespace: str

    def _settle(self) -> None:  # ContextMemory's: wait for acknowledged messages
        raise NotImplementedError  # pragma: no cover

    def put_value(
        self,
        namespace: Sequence[str],
        key: str,
        value: Mapping[str, Any],
        *,
        user_id: str | None = None,
        index: Sequence[str] | bool | None = None,
        ttl: float | None = None,
    ) -> StoredValue:
        """Store ``value`` (a JSON object) under ``namespace`` and ``key``; the value as stored.

        A put of an existing key replaces it and keeps its ``created_at``. ``index``: None
        embeds the whole value, a list of paths (``"text"``, ``"a.b"``, ``"items[*].x"``) the
        texts there, False nothing (found by filter only). ``ttl``: minutes until it expires.

        Raises:
            InvalidValueError: a value that is not JSON (NaN, a lone surrogate, a set...), too
                deep or too large, or a malformed namespace, key, index or ttl; nothing stored.

        >>> mem.put_value(("notes", "alice"), "diet", {"text": "vegetarian"}).key  # doctest: +SKIP
        'diet'
        """
        space = check_namespace(namespace)
        if value is None:
            msg = f"value of namespace {space!r}, key {key!r} is None; use delete_value"
            raise InvalidValueError(msg)
        put = ValuePut(space, key, value, index, ttl)
        stored = self.put_values([put], user_id=user_id)[0]
        if stored is None:  # pragma: no cover - a put always returns its row
            msg = "the value was not stored"
            raise InvalidValueError(msg)
        return stored

    def put_values(
        self, puts: Sequence[ValuePut], *, user_id: str | None = None
    ) -> list[StoredValue | None]:
        """Put (or, with ``value`` None, delete) several values in one write; one result each.

        Every put is checked before anything is written; the last put of a (namespace, key)
        in the batch wins (earlier ones get None, as deletes do).
        """
        uid = _user(user_id)
        writes = [value_write(p) for p in puts]
        self._settle()
        rows = self.store.values.write(self.namespace, uid, writes, now_micros())
        return [None if r is None else stored_value(r) for r in rows]

    def get_value(
        self,
        namespace: Sequence[str],
        key: str,
        *,
        user_id: str | None = None,
        refresh_ttl: bool = True,
    ) -> StoredValue | None:
        """The value under ``namespace`` and ``key`` (None: none, or expired)."""
        return self.get_values(
            [(check_namespace(namespace), key)], user_id=user_id, refresh_ttl=refresh_ttl
        )[0]

    def get_values(
        self,
        gets: Sequence[tuple[Sequence[str], str]],
        *,
        user_id: str | None = None,
        refresh_ttl: bool = True,
    ) -> list[StoredValue | None]:
        """The values at these (namespace, key) pairs, in one read (None where there is none).

        ``refresh_ttl``: values with a ttl found here expire a ttl from now.
        """
        uid = _user(user_id)
        refresh = flag(refresh_ttl, "refresh_ttl", error=InvalidValueError)
        pairs = []
        for space, key in gets:
            labels = check_namespace(space)
            pairs.append((labels, check_key(key, labels)))
        self._settle()
        now = now_micros()
        rows = self.store.values.read(self.namespace, uid, pairs, now)
        found = [r for r in rows if r is not None]
        if refresh and found:
            by_id = dict(zip(map(id, found), self._refreshed(uid, found, now), strict=True))
            rows = [None if r is None else by_id[id(r)] for r in rows]
        return [None if r is None else stored_value(r) for r in rows]

    def _refreshed(self, uid: str | None, rows: list[ValueRow], now: int) -> list[ValueRow]:
        """``rows`` with their expiry pushed a ttl from ``now`` (those with a ttl).

        A ttl longer than `MAX_TTL_MINUTES` (stored before it was refused) never expires and
        is left as it is.
        """
        timed = [r for r in rows if r.ttl is not None and r.ttl <= MAX_TTL_MINUTES]
        if not timed:
            return list(rows)
        fresh = self.store.values.refresh(self.namespace, uid, timed, now)
        by_id = dict(zip(map(id, timed), fresh, strict=True))
        return [by_id.get(id(r), r) for r in rows]

    def value_layout(self, layout: str | None = None) -> str | None:
        """The rule this namespace's values were laid out by (None: none recorded yet).

        ``layout`` (a string a door chooses, e.g. ``CtxBudgetStore``'s ``user_at``) is recorded
        when none was, and the recorded one returned: a door compares it with its own before
        it reads or writes (`ctxbudget.memory.values.layout`).
        """
        if layout is not None and not isinstance(layout, str):
            msg = f"layout must be a str or None, got {shown(layout)}"
            raise InvalidValueError(msg)
        return value_layout(self.store.values, self.namespace, layout, now_micros())

    def delete_value(
        self, namespace: Sequence[str], key: str, *, user_id: str | None = None
    ) -> bool:
        """Delete the value under ``namespace`` and ``key``; whether there was one."""
        space = check_namespace(namespace)
        uid = _user(user_id)
        labels = check_key(key, space)
        self._settle()
        values = self.store.values
        now = now_micros()
        had = values.read(self.namespace, uid, [(space, labels)], now)[0] is not None
        values.write(self.namespace, uid, [ValueWrite(space, labels, None)], now)
        return had

    def search_values(
        self,
        prefix: Sequence[str],
        *,
        query: str | None = None,
        filter: Mapping[str, Any] | None = None,  # noqa: A002 - LangGraph's name
        limit: int = 10,
        offset: int = 0,
        user_id: str | None = None,
        refresh_ttl: bool = True,
        all_users: bool = False,
    ) -> list[StoredValue]:
        """Values under the namespace ``prefix`` that pass ``filter``, best or newest first.

        With ``query``: ranked by meaning and words (score in [0, 1]; values put with
        ``index=False`` follow with score None); without: newest ``updated_at`` first.
        ``limit`` (1..10,000) and ``offset`` page the result. ``all_users``: the values of
        every user and the shared ones (no ``user_id``), an administrative read (browsing a
        store): it visits every values partition of the namespace, so its cost grows with the
        number of users, like `ContextMemory.stats`; a query ranks within each partition.

        Raises:
            InvalidValueError: a malformed prefix, filter, limit, offset or query.
        """
        found = self._search(
            prefix, query, filter, limit, offset, user_id, refresh_ttl, all_users=all_users
        )
        return [stored_value(row, score) for row, score in found]

    def _owners(self, user_id: object, all_users: object) -> list[str | None]:
        """The owners a read visits: ``user_id``'s partition, or every one (``all_users``)."""
        uid = _user(user_id)
        if not flag(all_users, "all_users", error=InvalidValueError):
            return [uid]
        if uid is not None:
            msg = f"all_users=True reads every user's values: drop user_id={uid!r}"
            raise InvalidValueError(msg)
        return self.store.values.owners(self.namespace)

    def _search(
        self,
        prefix: object,
        query: object,
        filter: object,  # noqa: A002 - LangGraph's name
        limit: object,
        offset: object,
        user_id: object,
        refresh_ttl: object,
        *,
        all_users: object = False,
    ) -> list[tuple[ValueRow, float | None]]:
        # Values are written directly (never through the write-behind journal), so a search
        # needs no wait for pending messages: it reads what every returned put wrote.
        space, query, wanted, first, skip = search_args(prefix, query, filter, limit, offset)
        owners = self._owners(user_id, all_users)
        refresh = flag(refresh_ttl, "refresh_ttl", error=InvalidValueError)
        now = now_micros()
        vector = None if query is None or not owners else self.store.embedder.embed_query(query)
        found: list[tuple[str | None, ValueRow, float | None, float]] = []
        for uid in owners:
            if query is None or vector is None:
                keep = partial(passes_row, wanted=wanted)
                rows = self.store.values.newest(self.namespace, uid, space, now, skip + first, keep)
                found += [(uid, r, None, 0.0) for r in rows]
                continue
            unembedded = partial(self._matching, uid, space, wanted, now, embedded=False)
            scored = ranked(
                self.store.values,
                self.namespace,
                uid,
                space,
                wanted,
                query,
                vector,
                skip + first,
                now,
                unembedded,
            )
            found += [(uid, r, s, similarity) for r, s, similarity in scored]
        if len(owners) > 1:
            owner_of = {id(r): uid for uid, r, _, _ in found}
            merged = best_first([(r, s, similarity) for _, r, s, similarity in found])
            found = [(owner_of[id(r)], r, s, similarity) for r, s, similarity in merged]
        page = found[skip : skip + first]
        fresh: dict[int, ValueRow] = {}
        for uid in dict.fromkeys(o for o, _, _, _ in page) if refresh else ():
            mine = [r for o, r, _, _ in page if o == uid]
            fresh.update(zip(map(id, mine), self._refreshed(uid, mine, now), strict=True))
        return [(fresh.get(id(r), r), s) for _, r, s, _ in page]

    def _with_values(self, found: Candidates, query: str, values: ValueQuery) -> Candidates:
        """``found`` with the values ``values`` asks for, scored for ``query`` (tier SAVED)."""
        if not isinstance(values, ValueQuery):
            msg = f"values must be a ValueQuery or None, got {shown(values)}"
            raise InvalidValueError(msg)
        hits = self._search(
            values.namespace,
            query if query.strip() else None,
            values.filter,
            values.k,
            0,
            values.user_id,
            True,
        )
        owner = values.user_id or ""
        items = [
            value_item(
                internal_id(
                    "value",
                    json.dumps(
                        [owner, list(r.namespace), r.key], ensure_ascii=False, separators=(",", ":")
                    ),
                ),
                r.namespace,
                r.key,
                shown_text(r),
                1.0 if score is None else score,
                r.updated / 1e6,
                None if r.expires is None else r.expires / 1e6,
            )
            for r, score in hits
        ]
        return dataclasses.replace(found, saved=tuple(items))

    def _matching(
        self,
        uid: str | None,
        space: tuple[str, ...],
        wanted: dict[str, Any] | None,
        now: int,
        *,
        embedded: bool | None,
    ) -> list[ValueRow]:
        rows = self.store.values.scan(self.namespace, uid, space, now, embedded=embedded)
        return [r for r in rows if passes_row(r, wanted=wanted)]

    def list_value_namespaces(
        self,
        *,
        prefix: Sequence[str] | None = None,
        suffix: Sequence[str] | None = None,
        max_depth: int | None = None,
        limit: int = 100,
        offset: int = 0,
        user_id: str | None = None,
        all_users: bool = False,
    ) -> list[tuple[str, ...]]:
        """The namespaces holding values, sorted; ``"*"`` in ``prefix``/``suffix``: any one.

        ``max_depth`` cuts longer namespaces to their first ``max_depth`` elements.
        ``all_users``: every user's and the shared ones (administrative: see `search_values`).
        """
        head, tail, depth, first, skip = listing_args(prefix, suffix, max_depth, limit, offset)
        owners = self._owners(user_id, all_users)
        fixed: tuple[str, ...] = ()
        for label in head or ():
            if label == "*":
                break
            fixed += (label,)
        now = now_micros()
        spaces = {
            r.namespace
            for uid in owners
            for r in self.store.values.scan(self.namespace, uid, fixed, now, documents=False)
            if not is_layout(r) and namespace_matches(r.namespace, prefix=head, suffix=tail)
        }
        if depth is not None:
            spaces = {s[:depth] for s in spaces}
        return sorted(spaces)[skip : skip + first]

    def sweep_values(self) -> int:
        """Delete the expired values of this memory's namespace (every user's); how many."""
        self._settle()
        return self.store.values.sweep(self.namespace, now_micros())

    # The async twins (ctxbudget.memory.awaitable): the same arguments, off the event loop.
    aput_value = awaitable(put_value)
    aput_values = awaitable(put_values)
    aget_value = awaitable(get_value)
    aget_values = awaitable(get_values)
    adelete_value = awaitable(delete_value)
    asearch_values = awaitable(search_values)
    alist_value_namespaces = awaitable(list_value_namespaces)
    asweep_values = awaitable(sweep_values)
