"""`ContextMemory`: keep every message, fact and document; assemble what fits on every turn.

One object most users touch. It writes to a `ChromaStore` (embedded by default, a Chroma server
with ``chroma_url=`` or ``CTXBUDGET_CHROMA_URL``), gathers candidates for a question from every
source (by meaning and by words), scores them (`ctxbudget.memory.policy.scoring`), and hands
them to `ContextAssembler`. The work is done in the sub-packages of `ctxbudget.memory`:
`writing`, `reading`, `policy`, `log`, `upkeep`, `entities`, `values` (keyed JSON values,
LangGraph's store model) and `awaitable` (the ``a``-methods, `aassemble`...).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any, ParamSpec, TypeVar

from ctxbudget.core.assemble import ContextAssembler
from ctxbudget.core.budget import Budget
from ctxbudget.core.items import ContextItem
from ctxbudget.core.numbers import flag
from ctxbudget.core.prefix import PreviousContexts
from ctxbudget.core.render import Format, Layout
from ctxbudget.core.report import AssembledContext
from ctxbudget.core.summaries import ExtractiveSummarizer, Summarizer
from ctxbudget.embed.base import Embedder, as_embedder
from ctxbudget.memory.awaitable import CLOSE_WAIT, AsyncRunner, awaitable
from ctxbudget.memory.closing import Closing, close_async
from ctxbudget.memory.entities.api import EntityMemory
from ctxbudget.memory.entities.index import EntityIndexes
from ctxbudget.memory.entities.names import EntityExtractor
from ctxbudget.memory.inputs import extra_items
from ctxbudget.memory.log.api import ContextLogging, InclusionLogConfig
from ctxbudget.memory.policy.config import MemoryConfig
from ctxbudget.memory.policy.plan import memory_strategy, plan_for
from ctxbudget.memory.policy.presets import StrategyLike
from ctxbudget.memory.reading.candidates import Candidates, gather, offered
from ctxbudget.memory.reading.held_indexes import SessionIndexes
from ctxbudget.memory.reading.rerank import RerankWarnings, rerank
from ctxbudget.memory.reading.retrieval import QueryVectors
from ctxbudget.memory.reading.search import ScoredHit, scored_search
from ctxbudget.memory.upkeep.api import SessionUpkeep
from ctxbudget.memory.values.api import ValueMethods, ValueQuery
from ctxbudget.memory.writing.api import MemoryWrites
from ctxbudget.memory.writing.opening import drain_siblings, open_write_behind
from ctxbudget.store.chroma_store import ChromaStore
from ctxbudget.store.client import Closable
from ctxbudget.store.records import Record
from ctxbudget.store.search import search_k
from ctxbudget.store.stamps import Stamps
from ctxbudget.telemetry.operations import candidates_span, memory_assembly_span, search_span
from ctxbudget.tokens.counter import TokenCounter

__all__ = []

P = ParamSpec("P")
R = TypeVar("R")


class ContextMemory(
    Closable, MemoryWrites, SessionUpkeep, ContextLogging, EntityMemory, ValueMethods
):
    """Memory for an LLM app: store everything, assemble what matters within a token budget.

    Args:
        path: folder of the embedded store (default ``./.ctxbudget``).
        chroma_url: a Chroma server instead (or set ``CTXBUDGET_CHROMA_URL``).
        client: any chromadb client instead.
        store: a ready `ChromaStore` (then path, url and client are not used).
        embedder: an `Embedder`, a LangChain ``Embeddings``, a LlamaIndex embedding or a callable
            (default: the local all-MiniLM-L6-v2, offline).
        namespace: the tenant; nothing crosses namespaces.
        model: the default model (its tokenizer counts, its window bounds budgets).
        config: candidate gathering settings (`MemoryConfig`).
        summarizer: for `summarize` and ``shrink="summarize"`` items (default: extractive).
        write_behind: acknowledge messages once journaled and store them in the background
            (`ctxbudget.memory.writing.behind`): True journals in an embedded store's folder
            (a server writes synchronously), a folder journals there (any store), False never.
        strategy: a preset (``"chat"``, ``"agent"``, ``"coding"``, ``"rag"``), a `Strategy` or
            a mapping of its fields, applied over ``config`` (`ctxbudget.memory.policy.strategy`).
        inclusion_log: record every assembly (`ctxbudget.memory.log.api`; read back with
            `contexts`, `budget_stats`): True, False, or an `InclusionLogConfig` (retention).
        entity_extractor: finds entities in messages for `MemoryConfig.entities` (default
            the built-in rules, no model; `ctxbudget.memory.entities`, docs/entities.md).

    Ids are unique within their scope (session, user, document collection); how ids, scopes
    and tool calls are kept and shown is in docs/concepts.md ("Ids", "Tool calls"). After
    `close`, every method (sync and async) raises `MemoryClosedError` (`Closable`).

    >>> mem = ContextMemory(path=tmp_path)  # doctest: +SKIP
    >>> mem.add_message("s1", "user", "I moved to Lisbon in May", id="m1")  # doctest: +SKIP
    'm1'
    """

    _counts_calls = True  # close waits for the sync calls other threads run (`Closable`)

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        chroma_url: str | None = None,
        client: Any = None,
        store: ChromaStore | None = None,
        embedder: object = None,
        namespace: str = "default",
        model: str = "gpt-4o",
        config: MemoryConfig | None = None,
        summarizer: Summarizer | None = None,
        write_behind: bool | str | os.PathLike[str] = True,
        strategy: StrategyLike | None = None,
        inclusion_log: bool | InclusionLogConfig = True,
        entity_extractor: EntityExtractor | None = None,
    ) -> None:
        self._closing = Closing()  # one close, whoever asks (ctxbudget.memory.closing)
        if store is None:
            chosen: Embedder | None = None if embedder is None else as_embedder(embedder)
            store = ChromaStore(path, url=chroma_url, client=client, embedder=chosen)
        self.store = store
        self.namespace = namespace
        self.model = model
        self.config, self.strategy = memory_strategy(config, strategy)
        self._counters: dict[str, TokenCounter] = {}
        self._layouts: dict[str, dict[str, Layout]] = {}  # each counter's, by format
        self.counter = self.counter_for(model)
        self.summarizer: Summarizer = summarizer or ExtractiveSummarizer(self.counter.count)
        self._indexes = SessionIndexes()  # each session's word index, built on first use
        self._vectors = QueryVectors()  # earlier user turns' vectors, for multi-query search
        self._entities = EntityIndexes(entity_extractor)  # each session's, beside its index
        self._behind = open_write_behind(store, write_behind)
        self.previous_contexts = PreviousContexts()  # each session's last, for previous=
        self._log = self._open_log(inclusion_log)
        self._async = AsyncRunner(refuse=self._check_open)  # the a-methods' threads, on first use
        self._rerank_warnings = RerankWarnings(refuse=self._check_open)  # and its threads

    def counter_for(self, model: str | None) -> TokenCounter:
        """The (cached) token counter of ``model`` (the default model when None)."""
        name = model or self.model
        counter = self._counters.get(name) if isinstance(name, str) else None  # for_model checks
        if counter is None:
            counter = self._counters[name] = TokenCounter.for_model(name)
        return counter

    def layouts_for(self, model: str | None) -> dict[str, Layout]:
        """The rendering rules ``model``'s assemblies share (by format; see `ContextAssembler`)."""
        self.counter_for(model)  # checks the name; one counter, so one set of layouts, per model
        return self._layouts.setdefault(model or self.model, {})

    # -- writing: add_message(s), pin, unpin, add_documents (ctxbudget.memory.writing.api) -----
    def _settle(self) -> None:  # what this and the process's other memories acknowledged
        if self._behind is not None:
            self._behind.settle()
        drain_siblings(self.store, self._behind, strict=False)  # another's failure is its own

    def flush(self) -> None:
        """Wait until every acknowledged message and logged assembly is stored (for all to see).

        Raises:
            StoreError: the store kept failing (the messages stay journaled and retried).
        """
        self._settle()
        self._log.flush()

    # -- reading (ctxbudget.memory.reading.candidates) ----------------------------------------
    def history(self, session_id: str, *, limit: int | None = None) -> list[Record]:
        """The session's messages in order (the last ``limit`` when given)."""
        self._settle()
        if limit is not None:
            return self.store.recent(namespace=self.namespace, session_id=session_id, limit=limit)
        return self.store.session_messages(namespace=self.namespace, session_id=session_id)

    @memory_assembly_span
    def assemble(
        self,
        session_id: str,
        query: str,
        *,
        budget: Budget | int = 4096,
        model: str | None = None,
        system: str | None = None,
        user_id: str | None = None,
        format: Format = "messages",  # noqa: A002 - the public name
        tools: Sequence[Mapping[str, Any] | str] = (),
        documents: bool | str | Sequence[str] = True,
        other_sessions: bool | None = None,
        extra: Sequence[ContextItem] = (),
        strategy: StrategyLike | None = None,
    ) -> AssembledContext:
        """The context for answering ``query`` in ``session_id``, within ``budget``.

        Candidates: the system prompt, pinned facts (session and user), the task stack, tool
        schemas, the session's recent history (its share of the budget follows the query, see
        `MemoryConfig.recent_share`), the session's other turns that match the query or the last
        user turns by meaning or by words (with their neighbouring turns), the user's other
        sessions (when enabled), documents, and stored summaries; scored by relevance x recency
        x salience (see `ctxbudget.memory.policy.scoring`).

        Args:
            session_id: the conversation.
            query: the current user message (rendered last; not stored here).
            budget: tokens the rendered context may use, or a `Budget`.
            model: the model whose tokenizer counts (default: this memory's model).
            system: the system prompt (never pruned).
            user_id: the user (default: the one stored with the session's messages).
            format: ``"messages"``, ``"text"`` or ``"compact"``.
            tools: tool schemas (dicts or JSON text) the call will carry, counted in the budget.
            documents: search documents (True), none (False), or only these collections.
            other_sessions: search the user's other sessions (default: the config's setting).
            extra: more items to consider, as they are.
            strategy: merged over the memory's for this call (a preset, `Strategy` or mapping).
        """
        extras = extra_items(extra)
        plan = plan_for(self.config, self.strategy, strategy)
        found = self.candidates(
            session_id,
            query,
            budget=budget,
            model=model,
            user_id=user_id,
            format=format,
            documents=documents,
            other_sessions=other_sessions,
            strategy=strategy,
        )
        items = offered(found, query, system=system, tools=tools, extras=extras)
        assembler = ContextAssembler(
            self.counter_for(model),
            summarizer=self.summarizer,
            min_exchanges=plan.config.min_exchanges,
            layouts=self.layouts_for(model),
        )
        # The previous call's context, if the session is still the same ("" is none: a session
        # without records, as one deleted since is).
        generation = found.generation
        kept = self.previous_contexts
        previous = kept.get(session_id, generation=generation) if generation else None
        run = partial(assembler.assemble, previous=previous)
        ctx = self._logged(run, items, plan.budget(budget), format, session_id, found, model)
        if generation:
            self.previous_contexts.put(session_id, ctx, generation=generation)
        return ctx

    @candidates_span
    def candidates(
        self,
        session_id: str,
        query: str,
        *,
        budget: Budget | int = 4096,
        model: str | None = None,
        user_id: str | None = None,
        format: Format = "messages",  # noqa: A002 - the public name
        documents: bool | str | Sequence[str] = True,
        other_sessions: bool | None = None,
        search_recent: bool = False,
        wait: bool = True,
        strategy: StrategyLike | None = None,
        values: ValueQuery | None = None,
        stamps: Stamps | None = None,
    ) -> Candidates:
        """The scored candidates for ``query`` in ``session_id``, bounded by ``budget``.

        What `assemble` offers before packing: pins and tasks, the newest turns (their share
        follows the query), summaries, and the older turns, other sessions and documents that
        match (best first, by relevance x recency x salience), a few times what ``budget`` holds.

        The arguments are `assemble`'s (``budget`` sizes the search and the recent share;
        ``format`` is the one the context will be rendered in), and ``search_recent``: also
        search the newest turns (for a caller that holds the history itself, like an agent's
        state): they come back in ``retrieved`` too when they match, with their ``history`` ids;
        and ``wait``: False for such a caller, which needs not wait for the messages it just
        added to be stored (a failure of earlier writes is still raised); ``strategy``: as in
        `assemble`; ``values``: also offer keyed values that match (`ValueQuery`, tier SAVED);
        ``stamps``: the session's, which the caller read just before (`ChromaStore.stamps`).
        """
        if flag(wait, "wait"):
            self._settle()
        elif self._behind is not None:
            self._behind.check()
        config = plan_for(self.config, self.strategy, strategy).config
        found = gather(
            self.store,
            self.namespace,
            config,
            indexes=self._indexes,
            vectors=self._vectors,
            index_counter=self.counter.name,
            session_id=session_id,
            query=query,
            counter_for=self.counter_for,
            layouts_for=self.layouts_for,
            model=model,
            budget=budget,
            user_id=user_id,
            format=format,
            documents=documents,
            other_sessions=other_sessions,
            search_recent=search_recent,
            entities=self._entities,
            stamps=stamps,
        )
        if config.reranker is not None:  # the user's ranking of the best (reading.rerank)
            found = rerank(found, query, config, self._rerank_warnings)
        found = found if values is None else self._with_values(found, query, values)
        return self._with_access(session_id, found)

    @search_span
    def search(
        self,
        query: str,
        *,
        k: int = 20,
        kinds: Sequence[str] | None = ("document",),
        session_id: str | None = None,
        user_id: str | None = None,
        collections: bool | str | Sequence[str] | None = None,
        vector: Sequence[float] | None = None,
        strategy: StrategyLike | None = None,
    ) -> list[ScoredHit]:
        """Stored records matching ``query``, scored the way `candidates` scores them.

        For retrievers: one store search (``k`` nearest by meaning, of these ``kinds``, in one
        session, user or document collections), each hit scored by relevance (its similarity
        within the hits' range and its content words shared with the query) x recency x
        salience, best first. ``kinds=None`` searches every kind; ``collections`` narrows
        documents as in `assemble`; ``vector`` is the query's embedding when the caller has it;
        ``strategy`` (as in `assemble`) sets the scoring weights.
        """
        hits = search_k(k)
        self._settle()
        return scored_search(
            self.store,
            self.namespace,
            plan_for(self.config, self.strategy, strategy).config,
            query,
            k=hits,
            kinds=kinds,
            session_id=session_id,
            user_id=user_id,
            collections=collections,
            vector=vector,
        )

    def close(self) -> None:
        """Store the acknowledged messages, then release the store; closing again does nothing.

        From its start every new call raises `MemoryClosedError`; the calls running end first.
        It returns once closed and its threads ended, also when another close ran (it waits
        for it, and raises what it raised: a failed close fails again).
        """
        refuse = partial(setattr, self, "_closed", True)
        calls = partial(self._wait_for_calls, self._async.own_threads, CLOSE_WAIT)
        behind = () if self._behind is None else (self._behind.close,)
        reranks = self._rerank_warnings  # stop_waiting_here first: a close on their loop
        steps: list[Callable[[], None]] = [refuse, reranks.stop_waiting_here, self._async.close]
        steps += [calls, self._entities.close, reranks.close, *behind, self.store.close]
        self._closing.run(steps, self._async.excused, in_child=[refuse])  # a forked copy

    def _where(self) -> str:
        return f"namespace {self.namespace!r} in {self.store.location}"

    # -- async (ctxbudget.memory.awaitable): the same calls, off the event loop ---------------
    async def arun(self, func: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
        """``func(*args, **kwargs)`` on this memory's worker threads, with the caller's context.

        What every ``a``-method does with its sync twin; for a function that makes several
        calls of this memory (an adapter's whole turn), so it does not block the event loop.
        """
        return await self._async.run(func, *args, **kwargs)

    aassemble = awaitable(assemble, writes=False)
    acandidates = awaitable(candidates, writes=False)
    asearch = awaitable(search)
    ahistory = awaitable(history, writes=False)
    aflush = awaitable(flush)
    aadd_message = awaitable(MemoryWrites.add_message, writes=True)
    aadd_messages = awaitable(MemoryWrites.add_messages, writes=True)
    apin = awaitable(MemoryWrites.pin, writes=True)
    aunpin = awaitable(MemoryWrites.unpin)
    aclear = awaitable(SessionUpkeep.clear, writes=True)
    adelete_session = awaitable(SessionUpkeep.delete_session, writes=True)
    adelete_user = awaitable(SessionUpkeep.delete_user)
    adelete_messages = awaitable(SessionUpkeep.delete_messages, writes=True)
    areplace_message = awaitable(SessionUpkeep.replace_message, writes=True)

    async def aclose(self) -> None:
        """Async `close` (on a closed memory, nothing to do); returns once its threads ended."""
        await close_async(self.close)  # on a thread of its own (ctxbudget.memory.closing)
        await self._async.stopped()  # a worker that ran a close (in ``arun``) ends after it

    def __enter__(self) -> ContextMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> ContextMemory:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
