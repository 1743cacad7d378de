"""`CtxBudgetStore`: LangGraph's long-term memory store (``BaseStore``) kept in a `ContextMemory`.

Agents keep facts in LangGraph's store (``create_agent(..., store=...)``, tools reading
``runtime.store``, LangMem's memory tools). This store keeps them as the memory's keyed values
(`ContextMemory.put_values`, ``search_values``...): persisted in the memory's Chroma (embedded or
a server), embedded with the memory's embedder, searched by meaning and words, and offered to
the middleware's budget beside the conversation. The adapter only turns LangGraph's operations
into those calls and the answers back into LangGraph items; every rule (values, filters, ranking,
TTL, isolation) lives in the core (`ctxbudget.memory.values`).

Users: ``user_at`` names the namespace element that is the user (LangMem's
``("memories", "{langgraph_user_id}")`` is ``user_at=1``). An operation on a namespace that long
passes that element as the core's ``user_id``: the item lives in that user's partition, is never
read through another user's namespace, and ``ContextMemory.delete_user`` removes it. Shorter
namespaces are shared. A search or listing that names the user reads that user's partition
only; one that does not (``store.list_namespaces()``, a search of ``("memories",)``) reads every
user's items and the shared ones: an administrative read (browsing the store, as LangGraph
Studio does) whose cost grows with the number of users (see `CtxBudgetStore`). Sweeping
expired items is `langchain_ctxbudget.store_ttl`'s.

>>> store = CtxBudgetStore(memory, user_at=1)  # doctest: +SKIP
>>> store.put(("memories", "alice"), "k1", {"text": "Alice moved to Lisbon"})  # doctest: +SKIP
>>> store.search(("memories", "alice"), query="where does she live?")[0].key  # doctest: +SKIP
'k1'
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import partial
from typing import Any

from ctxbudget.compat import refuse_unknown
from ctxbudget.core.numbers import count, flag
from ctxbudget.errors import (
    ConfigurationError,
    InvalidValueError,
    MissingDependencyError,
)
from ctxbudget.memory.closing import Closing
from ctxbudget.memory.context import ContextMemory
from ctxbudget.memory.ordering import CallOrder, InFlight
from ctxbudget.memory.values import ValuePut
from ctxbudget.store.client import Closable

try:
    from langgraph.store.base import (
        BaseStore,
        GetOp,
        ListNamespacesOp,
        Op,
        PutOp,
        Result,
        SearchItem,
        SearchOp,
        TTLConfig,
    )
except ImportError as exc:  # pragma: no cover - exercised by a test that hides langgraph
    _msg = (
        "CtxBudgetStore needs LangGraph's store (the 'langgraph' package): "
        "pip install 'langchain-ctxbudget[agents]'"
    )
    raise MissingDependencyError(_msg) from exc

from langchain_ctxbudget.store_closing import ClosingStore
from langchain_ctxbudget.store_ops import (
    InvalidNamespaceError,
    check_namespaces,
    check_puts,
    check_read,
    conditions,
    index_fields,
    index_paths,
    item_of,
    memory_options,
    nothing_asked,
    search_item_of,
    translated,
    translated_async,
    ttl_config,
)

__all__ = ["CtxBudgetStore", "InvalidNamespaceError"]

_MAX_USER_AT = 7  # the core keys namespaces up to depth 8 (selective keys)


class CtxBudgetStore(Closable, ClosingStore, BaseStore):
    """LangGraph's ``BaseStore`` over a `ContextMemory`'s keyed values (sync and async).

    Args:
        memory: the memory to keep items in; None opens one from ``memory_kwargs`` (the
            `ContextMemory` arguments: ``path=``, ``chroma_url=``, ``namespace=``...), which
            this store then closes with `close`.
        user_at: the position of the user in namespaces (LangMem's ``("memories",
            "{langgraph_user_id}")``: 1). An item whose namespace reaches it lives in that
            user's partition, and a search or listing whose prefix names the user reads only
            that partition. One whose prefix does not reach it (or has ``"*"`` there) reads
            every user's partition and the shared items (`ContextMemory.search_values`'
            ``all_users``): answers as LangGraph's stores give them, an administrative read
            whose cost grows with the number of users. None: every item is shared within the
            memory's namespace. ``user_at`` decides where items are kept, so a memory
            namespace's items must always be opened with the same one: the first put records
            it, and a store opened with another is refused (`ConfigurationError`) before it
            reads or writes anything.
        ttl: LangGraph's ``TTLConfig``: ``default_ttl`` (minutes) for puts that give none,
            ``refresh_on_read`` (default True), ``sweep_interval_minutes`` for
            `start_ttl_sweeper`. Expired items are never returned (``omit_expired`` may only
            be True) and are deleted by the next write to their partition or a sweep. A ttl is
            at most 1,000,000,000 minutes (about 1,900 years; None: never expires), a sweep
            interval at most a year.
        index: ``{"fields": [...]}``: the paths whose text is embedded for a put that gives
            no ``index=`` (default ``["$"]``, the whole value), read as LangGraph reads them;
            a malformed one (``"a..b"``, ``"items[0"``...: `store_paths.path_problem`) is
            refused. The embedder is always the memory's; ``embed`` and ``dims`` are refused.

    Searches with ``query`` rank by meaning and words (score in [0, 1]; a blank query is no
    query); without one, newest ``updated_at`` first. ``offset`` and ``limit`` page one ranking:
    an item's score and place do not depend on them. Items put with ``index=False`` are found
    by filters only and follow ranked ones with score None.

    >>> store = CtxBudgetStore(path="./.ctxbudget", user_at=1)  # doctest: +SKIP
    >>> store.put(("memories", "alice"), "diet", {"text": "vegetarian"})  # doctest: +SKIP
    >>> store.get(("memories", "alice"), "diet").value  # doctest: +SKIP
    {'text': 'vegetarian'}
    """

    supports_ttl: bool = True

    # BaseStore's methods check namespaces before `batch` does: their refusals are ours too.
    get = translated(BaseStore.get)
    search = translated(BaseStore.search)
    put = translated(BaseStore.put)
    delete = translated(BaseStore.delete)
    list_namespaces = translated(BaseStore.list_namespaces)
    aget = translated_async(BaseStore.aget)
    asearch = translated_async(BaseStore.asearch)
    aput = translated_async(BaseStore.aput)
    adelete = translated_async(BaseStore.adelete)
    alist_namespaces = translated_async(BaseStore.alist_namespaces)

    def __init__(
        self,
        memory: ContextMemory | None = None,
        *,
        user_at: int | None = None,
        ttl: TTLConfig | None = None,
        index: Mapping[str, Any] | None = None,
        **memory_kwargs: Any,
    ) -> None:
        if memory is not None and memory_kwargs:
            msg = (
                f"CtxBudgetStore got memory= and {sorted(memory_kwargs)}: pass either a "
                "ContextMemory or the arguments to open one"
            )
            raise ConfigurationError(msg)
        if memory is not None and not isinstance(memory, ContextMemory):
            msg = (
                f"CtxBudgetStore(memory=) must be a ContextMemory, got {type(memory).__name__}; "
                "to open one, pass its arguments instead (e.g. CtxBudgetStore(path='./memory'))"
            )
            raise ConfigurationError(msg)
        refuse_unknown(memory_kwargs, memory_options(), "CtxBudgetStore")
        self.user_at = (
            None
            if user_at is None
            else count(user_at, "CtxBudgetStore(user_at=)", least=0, most=_MAX_USER_AT)
        )
        self.ttl_config = ttl_config(ttl)
        self.index_fields = index_fields(index)
        self._owns = memory is None
        self._closing = Closing()
        self.memory = ContextMemory(**memory_kwargs) if memory is None else memory
        self._sweeper = None
        self._layout_checked = False
        self._order = CallOrder()  # async calls in call order, per loop (ctxbudget.memory.ordering)
        self._in_flight = InFlight()  # async writes on worker threads, for sync calls

    def _where(self) -> str:
        return f"namespace {self.memory.namespace!r} in {self.memory.store.location}"

    # -- operations -------------------------------------------------------------------------
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run LangGraph operations; one result per operation, in order.

        Reads (get, search, list) see the store as it was before the batch's puts, which are
        applied last (the last put of a key wins), as LangGraph's stores do, and timed in the
        batch's order (a later put is newer). Every operation is checked before any runs, so a
        refused one leaves the store as it was. Async writes already running on the memory's
        worker threads end first (`ctxbudget.memory.ordering`).
        """
        ops = list(ops)
        self._in_flight.wait()
        return self._batch(ops)

    def _batch(self, ops: list[Op]) -> list[Result]:
        """`batch` itself (what `abatch` runs on a worker thread)."""
        users = [self._user_of(op) for op in ops]
        results: list[Result] = [None] * len(ops)
        gets: dict[tuple[str | None, bool], list[tuple[int, GetOp]]] = {}
        puts: dict[str | None, list[ValuePut]] = {}
        runs: list[tuple[str | None, list[ValuePut]]] = []  # each user's puts in a row, in order
        for n, (op, user) in enumerate(zip(ops, users, strict=True)):
            if isinstance(op, GetOp):
                gets.setdefault((user, self._refresh(op)), []).append((n, op))
            elif isinstance(op, PutOp):
                where = f"namespace {op.namespace!r}, key {op.key!r}"
                index = self.index_fields if op.index is None else index_paths(op.index, where)
                put = ValuePut(op.namespace, op.key, op.value, index=index, ttl=op.ttl)
                puts.setdefault(user, []).append(put)
                if not runs or runs[-1][0] != user:
                    runs.append((user, []))
                runs[-1][1].append(put)
        if ops and not self._layout_checked:
            if puts:  # checked before the layout is recorded by this first write
                for user, written in puts.items():
                    check_puts(user, written)
            self._check_layout(writing=bool(puts))
        for (user, refresh), asked in gets.items():
            keys = [(op.namespace, op.key) for _, op in asked]
            found = self.memory.get_values(keys, user_id=user, refresh_ttl=refresh)
            for (n, _), value in zip(asked, found, strict=True):
                results[n] = None if value is None else item_of(value)
        for n, (op, user) in enumerate(zip(ops, users, strict=True)):
            if isinstance(op, SearchOp):
                results[n] = self._search(op, user)
            elif isinstance(op, ListNamespacesOp):
                results[n] = self._list(op, user)
        if len(puts) > 1:  # one write per user: check them all before the first
            for user, written in puts.items():
                check_puts(user, written)
        # Written in the batch's order (one write per run of a user's puts): a later put is
        # newer (`updated_at`), as each put of LangGraph's stores is.
        for user, written in runs:
            self.memory.put_values(written, user_id=user)
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Async `batch`, on the memory's worker threads (`ContextMemory.arun`).

        The event loop is never blocked. Cancelled, the batch has no effect (not started yet) or
        ends before the cancellation reaches the caller (`ctxbudget.memory.awaitable`).

        Batches run in the order they were called on the loop, as LangGraph's stores apply
        them (`ctxbudget.memory.ordering`): of ``asyncio.gather(store.aput(ns, k, a),
        store.aput(ns, k, b))`` the last, ``b``, wins, and a get called after a put reads
        it (the memory's worker threads would otherwise race). Batches that only read, called
        side by side, run side by side.
        """
        ops = list(ops)
        writes = any(isinstance(op, PutOp) for op in ops)
        return await self._order.run(partial(self._run_async, ops, writes), writes=writes)

    async def _run_async(self, ops: list[Op], writes: bool) -> list[Result]:
        """``_batch(ops)`` on a worker thread; a write is `InFlight` until it ended there."""
        if not writes:
            return await self.memory.arun(self._batch, ops)
        event = self._in_flight.started()  # handed over in this step: no await before arun

        def write() -> list[Result]:
            try:
                return self._batch(ops)
            finally:
                self._in_flight.ended(event)

        try:
            return await self.memory.arun(write)
        finally:
            self._in_flight.ended(event)  # never ran (cancelled first, or a closed memory)

    def _layout(self) -> str:
        return f"CtxBudgetStore(user_at={self.user_at})"

    def _check_layout(self, *, writing: bool) -> None:
        """Refuse a memory namespace whose items were put with another ``user_at``.

        Its first write records this store's ``user_at`` (`ContextMemory.value_layout`): a
        store with another would look for items in other partitions (miss them, put second
        copies, leave them behind on delete). Once the record is seen, never again.
        """
        mine = self._layout()
        recorded = self.memory.value_layout(mine if writing else None)
        if recorded is None:
            return
        if recorded != mine:
            msg = (
                f"{mine} cannot use the items of memory {self._where()}: they were put by "
                f"{recorded}, which "
                "keeps them in other partitions, so this store would miss them, put second "
                "copies and leave them behind on delete. Open it with the same user_at, or "
                "keep this store's items in another memory namespace "
                "(ContextMemory(namespace=...)); nothing was read or written"
            )
            raise ConfigurationError(msg)
        self._layout_checked = True

    def _refresh(self, op: GetOp | SearchOp) -> bool:
        """Whether ``op`` refreshes ttls: its ``refresh_ttl`` (None: the store's default)."""
        if op.refresh_ttl is None:
            return bool((self.ttl_config or {}).get("refresh_on_read", True))
        return flag(op.refresh_ttl, "refresh_ttl", error=InvalidValueError)

    def _everyone(self, user: str | None) -> bool:
        """Whether a search or listing reads every user's items: ``user_at`` and no user named."""
        return self.user_at is not None and user is None

    def _search(self, op: SearchOp, user: str | None) -> list[SearchItem]:
        if nothing_asked(op.limit):  # limit=0: no item, as LangGraph's stores answer
            return []
        query = op.query
        if query is None or (isinstance(query, str) and not query.strip()):
            query = None  # LangGraph's stores treat "" (and a blank query) as no query
        found = self.memory.search_values(
            op.namespace_prefix,
            query=query,
            filter=op.filter,
            limit=op.limit,
            offset=op.offset,
            user_id=user,
            refresh_ttl=self._refresh(op),
            all_users=self._everyone(user),
        )
        return [search_item_of(value) for value in found]

    def _list(self, op: ListNamespacesOp, user: str | None) -> list[tuple[str, ...]]:
        prefix, suffix = conditions(op)
        if nothing_asked(op.limit):
            return []
        return self.memory.list_value_namespaces(
            prefix=prefix,
            suffix=suffix,
            max_depth=op.max_depth,
            limit=op.limit,
            offset=op.offset,
            user_id=user,
            all_users=self._everyone(user),
        )

    def _user_of(self, op: Op) -> str | None:
        """The user ``op`` acts for (None: shared), after LangGraph's namespace checks."""
        check_namespaces(op)
        if isinstance(op, GetOp | SearchOp):
            self._refresh(op)  # refused before any operation of the batch runs
        if isinstance(op, SearchOp | ListNamespacesOp):
            check_read(op)  # so is a bad filter, query, limit or offset
        at = self.user_at
        if isinstance(op, GetOp | PutOp):
            return op.namespace[at] if at is not None and len(op.namespace) > at else None
        if isinstance(op, SearchOp):  # None with user_at: every user's (`_everyone`)
            prefix = tuple(op.namespace_prefix)
            return prefix[at] if at is not None and len(prefix) > at else None
        if isinstance(op, ListNamespacesOp):
            head, _ = conditions(op)
            if at is not None and head is not None and len(head) > at and head[at] != "*":
                return head[at]
            return None
        msg = (
            f"CtxBudgetStore cannot run {type(op).__name__}: give GetOp, SearchOp, PutOp or "
            "ListNamespacesOp"
        )
        raise ConfigurationError(msg)
