"""`Candidates`: what `ContextMemory` offers for one query, scored, before anything is packed.

`gather` is `ContextMemory.candidates`: it reads the session's state once (`read_session`:
recent turns, pins and tasks, summaries), brings the session's word index up to date, and
searches (`ctxbudget.memory.reading.retrieval.retrieve`). `ContextMemory.assemble` is
candidates + the core assembler (`offered`: what it hands over).
`ctxbudget.memory.reading.search` is `ContextMemory.search`.
The LangChain middleware, both retrievers and LlamaIndex's `CtxBudgetMemory` use the same
gathering (`ContextMemory.candidates` and `ContextMemory.search`), so every adapter ranks
records the way `ContextMemory` does. The gathering is bounded by the budget: the search pool
is a few times what the budget can hold, never the whole session.

A caller that holds the conversation itself (an agent's state) gathers with
``search_recent=True`` (and the budget its own items leave, `room_left`) and takes
`Candidates.added_to` its messages (`Additions`): what the memory adds, and copies of its own
older turns that matter only when its history loses them.
`retrieved_floors` is the share of a plain token budget kept for retrieved memories.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ctxbudget.core.assemble import ContextAssembler
from ctxbudget.core.budget import Budget
from ctxbudget.core.ids import internal_id
from ctxbudget.core.items import ContextItem, Tier
from ctxbudget.core.numbers import flag
from ctxbudget.core.render import Format, Layout
from ctxbudget.core.report import AssembledContext
from ctxbudget.errors import InvalidItemError
from ctxbudget.memory.entities.cards import EntityScope, entity_candidates
from ctxbudget.memory.entities.documents import document_matches
from ctxbudget.memory.entities.index import EntityIndexes
from ctxbudget.memory.entities.stored import split_pins
from ctxbudget.memory.inputs import documents_arg
from ctxbudget.memory.policy.config import MemoryConfig
from ctxbudget.memory.reading.held_indexes import SessionIndexes
from ctxbudget.memory.reading.record_items import (
    history_item,
    pinned_items,
    prime,
    summary_items,
    tool_items,
)
from ctxbudget.memory.reading.retrieval import QueryVectors, SearchScope, retrieve
from ctxbudget.memory.reading.session_index import SessionIndex
from ctxbudget.memory.reading.session_state import read_session
from ctxbudget.store.records import Record
from ctxbudget.store.stamps import Stamps
from ctxbudget.tokens.backends import check_text
from ctxbudget.tokens.counter import TokenCounter

if TYPE_CHECKING:
    from ctxbudget.store.chroma_store import ChromaStore

__all__ = [
    "Additions",
    "Candidates",
    "gather",
    "offered",
    "room_left",
]


@dataclass(frozen=True, slots=True)
class Additions:
    """What the memory adds to a conversation its caller holds (see `Candidates.added_to`).

    Attributes:
        extras: candidates the caller does not hold, to offer with its history: pinned facts,
            tasks, summaries, documents, the user's other sessions and stored turns missing
            from the caller's messages (those as ``Tier.RETRIEVED`` memories with the id
            ``ctxbudget:memory:<id>``, without their tool calls).
        copies: the caller's own older turns that match the query, by the id of the message
            they copy: memories (id ``ctxbudget:memory:<id>``, no tool calls) worth offering
            only when the history loses that message (`lost`).
    """

    extras: tuple[ContextItem, ...]
    copies: Mapping[str, ContextItem]

    def lost(self, context: AssembledContext) -> list[ContextItem]:
        """The copies of the messages ``context`` cut, to offer in a second assembly.

        History only shrinks when more is offered, so no copy repeats a message kept then.
        """
        included = {it.id for it in context.included}
        return [copy for key, copy in self.copies.items() if key not in included]


@dataclass(frozen=True, slots=True)
class Candidates:
    """The scored candidates for one query in one session.

    Attributes:
        pinned: pinned facts (session and user-wide) and the task stack.
        history: the session's newest stored turns (tier RECENT), oldest first, as many as
            their share of the budget holds.
        summaries: the session's stored summaries.
        retrieved: older turns of the session, the user's other sessions and documents that
            match the query, best first (tier RETRIEVED; `ContextItem.score` is relevance x
            recency x salience, see `ctxbudget.memory.policy.scoring`); with entity memory, also
            turns that mention an entity the query names (metadata ``source`` ``"entity"``).
        user_id: the user the search used (given, or the one stored with the session).
        entities: entity cards and matched patterns (tier ENTITY), when
            `MemoryConfig.entities` is on (`ctxbudget.memory.entities.cards`).
        generation: the session's generation when read (`ctxbudget.store.sessions.Stamp`; ""
            for a session with no records): what is kept of this session in memory between
            calls (its previous context) is keyed by it.
        saved: keyed values that match the query (tier SAVED), when asked for with
            ``values=`` (`ctxbudget.memory.values`), best first.
    """

    pinned: tuple[ContextItem, ...]
    history: tuple[ContextItem, ...]
    summaries: tuple[ContextItem, ...]
    retrieved: tuple[ContextItem, ...]
    user_id: str | None
    entities: tuple[ContextItem, ...] = ()
    generation: str = ""
    saved: tuple[ContextItem, ...] = ()

    @property
    def items(self) -> list[ContextItem]:
        """Every candidate, in the order `ContextMemory.assemble` offers them."""
        found = [*self.pinned, *self.history, *self.saved, *self.summaries, *self.retrieved]
        return [*found, *self.entities]

    @property
    def true_until(self) -> float | None:
        """When the first saved value among them expires (epoch seconds; None: never).

        A copy of these candidates kept between calls is not offered after it: an expired
        value is gone, though its expiry drew no stamp.
        """
        ends = [item.metadata["expires"] for item in self.saved if "expires" in item.metadata]
        return min(ends) if ends else None

    def added_to(self, held: Collection[str]) -> Additions:
        """What these candidates add to a conversation the caller holds (ids ``held``).

        For a caller that keeps the history itself (an agent's state) and stores its messages
        under those ids: gather with ``ContextMemory.candidates(search_recent=True)``, offer
        its messages and the `Additions.extras`, assemble, and assemble once more with
        `Additions.lost` when the history lost turns that matched (the LangChain middleware).
        A stored turn that is both recent history and a match is offered once (as the memory
        of it the history made), whether the caller holds it or not.
        """
        extras: list[ContextItem] = []
        copies: dict[str, ContextItem] = {}
        seen: set[str] = set()  # by the stored turn's own id, whatever id it is offered under
        for item in self.items:
            stored = item.id
            if item.tier in (Tier.SYSTEM, Tier.QUERY):
                continue  # the caller has the prompt and the question
            if item.id in held:
                if item.tier != Tier.RECENT and item.id not in copies:
                    copies[item.id] = dataclasses.replace(
                        item, id=internal_id("memory", item.id), tool_calls=(), tool_call_id=None
                    )
                continue
            if item.tier == Tier.RECENT:
                # Stored turns the caller does not hold (an earlier thread of the session).
                item = dataclasses.replace(
                    item,
                    id=internal_id("memory", item.id),
                    tier=Tier.RETRIEVED,
                    tool_calls=(),
                    tool_call_id=None,
                )
            if stored not in seen:
                seen.add(stored)
                extras.append(item)
        return Additions(extras=tuple(extras), copies=copies)


def room_left(budget: Budget, layout: Layout, held: Sequence[ContextItem]) -> int:
    """The budget to gather with for a caller that offers ``held`` items of its own.

    A caller that holds the conversation (an agent's state) offers its system prompt, facts and
    messages with the memory's candidates; those in a tier before `Tier.RETRIEVED` are packed
    first (the conversation gives way only down to the retrieved tier's floor), so the search
    is sized to the room they leave (the pool follows the budget it is given): ``budget``'s
    available tokens less their cost in ``layout``, never less than that floor.
    """
    before = [it for it in held if it.tier < Tier.RETRIEVED]  # what packs before memories
    taken = sum(layout.cost(it, layout.section_of(it)) for it in before)
    return max(1, budget.available - taken, budget.floor_tokens(Tier.RETRIEVED))


def gather(
    store: ChromaStore,
    namespace: str,
    config: MemoryConfig,
    *,
    indexes: SessionIndexes,
    vectors: QueryVectors,
    index_counter: str,
    session_id: str,
    query: str,
    counter_for: Callable[[str | None], TokenCounter],
    model: str | None,
    budget: Budget | int,
    user_id: str | None,
    format: Format,  # noqa: A002 - the public name
    documents: bool | str | Sequence[str],
    other_sessions: bool | None,
    search_recent: bool,
    entities: EntityIndexes | None = None,
    layouts_for: Callable[[str | None], dict[str, Layout]] | None = None,
    stamps: Stamps | None = None,
) -> Candidates:
    """`ContextMemory.candidates` (see there) with what it needs.

    ``counter_for`` is `ContextMemory.counter_for` (``model``'s counter counts; the query is
    checked first); ``index_counter`` names the counter whose stored counts size the index;
    ``entities``: the memory's entity indexes (with its extractor), used when
    `MemoryConfig.entities` is on; ``layouts_for``: `ContextMemory.layouts_for`; ``stamps``:
    the session's, read by the caller just before (`read_session`'s ``known``).
    """
    if not isinstance(query, str) or not query.strip():
        msg = "query must be a non-empty string: the user's current message"
        raise InvalidItemError(msg)
    counter = counter_for(model)
    try:
        counter.count(query)  # a lone surrogate is refused here, before it is embedded
    except InvalidItemError as exc:
        msg = f"query: {exc}"
        raise InvalidItemError(msg) from exc
    documents = documents_arg(documents)
    search_recent = flag(search_recent, "search_recent")
    if other_sessions is not None:
        other_sessions = flag(other_sessions, "other_sessions")
    budget = Budget.coerce(budget)
    shared = layouts_for(model) if layouts_for is not None else None
    layout = ContextAssembler(counter, min_exchanges=config.min_exchanges, layouts=shared).layout(
        format
    )
    state = read_session(
        store,
        namespace,
        session_id,
        query=query,
        user_id=user_id,
        recent_messages=config.recent_messages,
        held=indexes.held(session_id, config.episode_gap),
        known=stamps,
    )
    # Read under its lock: another call on this session extends it only before or after.
    with indexes.reading(
        store,
        namespace,
        session_id,
        state.last_seq,
        state.stamp,
        episode_gap=config.episode_gap,
        counter_name=index_counter,
        newest=state.newest,
    ) as index:
        prime(counter, state.recent)
        search = SearchScope(
            session_id=session_id,
            user=state.user_id,
            query=query,
            counter=counter,
            available=budget.available,
            documents=documents,
            other_sessions=config.other_sessions if other_sessions is None else other_sessions,
            elsewhere=state.elsewhere,
            has_documents=state.has_documents,
        )
        history, retrieved = retrieve(
            store,
            namespace,
            config,
            vectors,
            search,
            state.recent,
            index,
            state.skip,
            layout,
            search_recent,
        )
        # Declared relations and patterns are pinned records of their scope, never pinned facts.
        pins, relations, patterns = split_pins(state.pins)
        cards: list[ContextItem] = []
        if config.entities:
            cards, turns = entity_candidates(
                EntityScope(
                    session_id=session_id,
                    query=query,
                    config=config,
                    offered=state.skip | {r.id for r in history},
                    retrieved={it.id: it for it in retrieved},
                    record=_records_of(index),
                    lexical=_matches_of(index),
                    newest=index.newest if index is not None else None,
                ),
                (entities or _ENTITIES).current(index) if index is not None else None,
                relations,
                patterns,
                document_matches(store, namespace, query, documents, config),
            )
            better = {it.id: it for it in turns}  # new, or scored higher for naming an entity
            kept = [it for it in retrieved if it.id not in better]
            retrieved = sorted([*kept, *turns], key=lambda it: (-it.score, it.id))
        return Candidates(
            pinned=tuple(pinned_items(pins, session_id)),
            history=tuple(history_item(r) for r in history),
            summaries=tuple(summary_items(state.summaries)),
            retrieved=tuple(retrieved),
            user_id=state.user_id,
            entities=tuple(cards),
            generation="" if state.stamp is None else state.stamp.generation,
        )


_ENTITIES = EntityIndexes()  # for callers of gather without a memory's own (its extractor)


def _matches_of(index: SessionIndex | None) -> Callable[[list[str]], dict[str, float]]:
    """The session's turns that hold some of the terms: id -> BM25 over the best's (0, 1]."""

    def matches(terms: list[str]) -> dict[str, float]:
        if index is None or not terms:
            return {}
        scores = index.lexical.array(terms)
        found = np.flatnonzero(scores)
        if not len(found):
            return {}
        top = float(scores[found].max())
        return {index.ids[int(p)]: float(scores[p]) / top for p in found}

    return matches


def _records_of(index: SessionIndex | None) -> Callable[[str], Record | None]:
    """The session's message with an id, from its copy in memory (None: not there)."""

    def record(record_id: str) -> Record | None:
        if index is None:
            return None
        position = index.position.get(record_id)
        return index.records[position] if position is not None else None

    return record


def offered(
    found: Candidates,
    query: str,
    *,
    system: str | None,
    tools: Sequence[Mapping[str, Any] | str],
    extras: Sequence[ContextItem],
) -> list[ContextItem]:
    """What `ContextMemory.assemble` hands the core, in order; the query comes last."""
    items: list[ContextItem] = []
    if system:
        try:
            check_text(system)  # a lone surrogate is refused naming the system prompt
        except InvalidItemError as exc:
            msg = f"system: {exc}"
            raise InvalidItemError(msg) from exc
        items.append(ContextItem(internal_id("system"), system, tier=Tier.SYSTEM, source="system"))
    items.extend(found.pinned)
    items.extend(tool_items(tools))
    items.extend(found.history)
    items.extend(found.summaries)
    items.extend(found.retrieved)
    items.extend(found.entities)
    items.extend(extras)
    items.append(
        ContextItem(internal_id("query"), query, tier=Tier.QUERY, role="user", source="query")
    )
    return items
