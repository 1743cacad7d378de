"""`MemoryConfig`: how much `ContextMemory` searches, keeps and weighs."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from ctxbudget.core.numbers import count, flag, real
from ctxbudget.errors import ConfigurationError
from ctxbudget.memory.entities.names import check_entity_settings
from ctxbudget.memory.policy.ranking import as_reranker
from ctxbudget.memory.policy.scoring import Scoring

__all__ = ["MemoryConfig"]


_COUNTS = (
    "recent_messages",
    "semantic_k",
    "query_turns",
    "other_sessions_k",
    "document_k",
    "neighbours",
    "min_exchanges",
    "max_message_chars",
    "entity_depth",
    "entity_cards",
    "entity_turns",
    "reranker_top",
)
_REALS = (
    "query_turn_weight",
    "episode_gap",
    "retrieved_floor",
    "access_salience",
    "reranker_timeout",
    "reranker_weight",
)


@dataclass(frozen=True, slots=True)
class MemoryConfig:
    """How `ContextMemory.assemble` gathers candidates.

    Attributes:
        recent_messages: the recent window: the newest messages of the session that may be
            offered as history (in order, as a thread).
        recent_share: ``(least, most)`` share of the budget the recent window's history may
            take. Between the two, the share follows the query: ``most`` times the fraction
            of its 10 best matches in the session that lie in the recent window. A question
            about the distant past leaves history its least share (the thread's newest
            turns); one about what was just said gives it up to the most. Newer messages that
            do not fit that share are still candidates, by relevance, like any older one.
        semantic_k: the fewest dense matches searched per query (more when the budget can
            hold more: four times what it holds).
        query_turns: earlier user turns used as extra queries (multi-query retrieval).
        query_turn_weight: how much a match of an earlier user turn counts against a match of
            the query itself.
        other_sessions: also search the same user's other sessions (never other users').
        other_sessions_k: matches per query from other sessions.
        document_k: document chunks per query.
        neighbours: turns on each side of a matched message that lend it their relevance
            (and it lends them its own), within one episode.
        episode_gap: seconds of silence that end an episode of the session (messages without
            a timestamp continue the current one).
        scoring: the candidate score weights.
        min_exchanges: newest exchanges kept before pinned facts (see `ContextAssembler`).
        retrieved_floor: when ``assemble`` gets a plain token count, the share kept for
            retrieved memories and documents even against recent history (only as much as
            they can use; the rest flows back). A `Budget` passed in is used as given.
        max_message_chars: the longest message or pinned fact stored, in characters (a
            longer one is refused before anything is written). Storing costs time and memory
            in proportion to the text (about 2.5 s and 300 MB per million characters, for the
            embedding, the word index and the token count), and no context window holds a
            message much longer; store long text with `ContextMemory.add_documents`, which
            cuts it into chunks.
        entities: gather entity memory (`ENTITY`-tier cards of the people and things the
            query names, their relations and matched patterns) as candidates too
            (`ctxbudget.memory.entities`; docs/entities.md).
        entity_depth: how far related entities are followed from those the query names
            (breadth-first; 0: only those named).
        entity_cards: the most entity cards offered per query (named, related, then the
            session's most salient).
        entity_turns: the most turns that mention an entity the query names offered as
            retrieved candidates (beyond those retrieval found).
        entity_types: only entities of these types (``"person"``, ``"place"``, ``"org"``,
            ``"other"``) get cards and turns; empty: all.
        access_salience: how much a memory the session's assemblies keep including weighs
            more (its salience times ``1 + access_salience * ln(1 + times included)``, from
            the inclusion log; `ctxbudget.memory.log.access`). 0, off, by default: a feedback loop
            to measure before use (docs/operations.md).
        excerpts: offer retrieved turns past the best as the sentences that hold the query's
            words, so a small budget holds more distinct turns
            (`ctxbudget.memory.reading.excerpts`; docs/memory.md, "Excerpts"). Off by default:
            the model then reads parts of turns, and several excerpts of weaker matches can
            take the place of one whole turn.
        newer_statements: offer with each retrieved turn the later turn of its author that
            restates it (an update: "we moved to Porto" after "I live in Lisbon"), and never
            send the earlier one alone (`ctxbudget.memory.reading.successors`; docs/memory.md,
            "When a fact changes"). On by default.
        reranker: a ranking to reorder the best retrieved candidates with before packing
            (`ctxbudget.memory.reading.rerank`; docs/memory.md, "Rerankers"): a callable
            ``(query, texts) -> scores`` (sync or async), a sentence-transformers
            ``CrossEncoder``, or a LangChain compressor or LlamaIndex postprocessor wrapped by
            its adapter. None (the default): no stage, no cost.
        reranker_top: how many of the best retrieved candidates the reranker sees, in one
            call; with a reranker the search pool holds at least this many, whatever the
            budget. 200 by default: on LoCoMo a perfect reranker over 200 keeps 0.980 of the
            evidence at 1,024 tokens, over 50 only 0.924, as the evidence it should lift was
            never among the 50 (docs/benchmarks.md, "Rerankers: what the pipeline carries").
            A reranker's cost grows with it: lower it for a slow one.
        reranker_timeout: seconds the reranker is waited for; a later answer is not used.
        reranker_weight: the reranker's share of the relevance it blends with the pipeline's
            over the ``reranker_top`` (each min-max scaled; ``w * reranker + (1 - w) *
            pipeline``), in (0, 1]. 0.5 by default: measured on LoCoMo, a perfect reranker
            keeps all it kept with 1 (0.980 at 1,024 tokens), and noisy ones (sigma 0.5 and
            1.0) do better than none at every budget (0.930 and 0.886 at 1,024 tokens, none
            0.860), where with 1 (its scores replace the pipeline's) they did worse (0.689,
            0.323), and with 0.6 sigma 1.0 already did (0.856). At 0.5 the reranker's
            favourite ties at worst with the pipeline's (the newer then comes first); above,
            it always wins. Lower it for a reranker you doubt.
    """

    recent_messages: int = 40
    recent_share: tuple[float, float] = (0.05, 0.6)
    semantic_k: int = 24
    query_turns: int = 2
    query_turn_weight: float = 0.5
    other_sessions: bool = True
    other_sessions_k: int = 8
    document_k: int = 8
    neighbours: int = 2
    episode_gap: float = 3600.0
    scoring: Scoring = Scoring()
    min_exchanges: int = 1
    retrieved_floor: float = 0.35
    max_message_chars: int = 1_000_000
    entities: bool = False
    entity_depth: int = 1
    entity_cards: int = 6
    entity_turns: int = 6
    entity_types: tuple[str, ...] = ()
    access_salience: float = 0.0
    excerpts: bool = False
    newer_statements: bool = True
    reranker: Any = None
    reranker_top: int = 200
    reranker_timeout: float = 2.0
    reranker_weight: float = 0.5

    def __post_init__(self) -> None:
        # Numbers pass the one boundary (`ctxbudget.core.numbers`): numpy's are taken, a bool,
        # a string, NaN or an infinity refused here, by name.
        for name in _COUNTS:
            value = count(getattr(self, name), f"MemoryConfig.{name}", least=None)
            object.__setattr__(self, name, value)
        for name in _REALS:
            object.__setattr__(self, name, real(getattr(self, name), f"MemoryConfig.{name}"))
        share: object = self.recent_share
        if isinstance(share, tuple | list) and len(share) == 2:
            pair = tuple(real(v, "MemoryConfig.recent_share") for v in share)
            object.__setattr__(self, "recent_share", pair)
        if not isinstance(self.scoring, Scoring):
            msg = f"MemoryConfig.scoring must be a Scoring, got {self.scoring!r:.80}"
            raise ConfigurationError(msg)
        least, most = self.recent_share
        if not 0.0 <= least <= most <= 1.0:
            msg = (
                f"MemoryConfig.recent_share must be (least, most) with 0 <= least <= most <= 1, "
                f"got {self.recent_share!r}"
            )
            raise ConfigurationError(msg)
        if not 0.0 <= self.query_turn_weight <= 1.0:
            msg = f"MemoryConfig.query_turn_weight must be in [0, 1], got {self.query_turn_weight}"
            raise ConfigurationError(msg)
        check_entity_settings(self)
        for name in ("recent_messages", "semantic_k", "query_turns", "neighbours"):
            if getattr(self, name) < 0:
                msg = f"MemoryConfig.{name} cannot be negative, got {getattr(self, name)}"
                raise ConfigurationError(msg)
        if self.episode_gap < 0:
            msg = f"MemoryConfig.episode_gap cannot be negative, got {self.episode_gap}"
            raise ConfigurationError(msg)
        if not 0.0 <= self.access_salience < float("inf"):  # NaN fails too
            msg = (
                "MemoryConfig.access_salience must be a finite number >= 0 (0: off), got "
                f"{self.access_salience!r}"
            )
            raise ConfigurationError(msg)
        for name in ("other_sessions", "entities", "excerpts", "newer_statements"):  # on/off
            object.__setattr__(self, name, flag(getattr(self, name), f"MemoryConfig.{name}"))
        if self.reranker is not None:
            object.__setattr__(self, "reranker", as_reranker(self.reranker))
        if self.reranker_timeout > threading.TIMEOUT_MAX:
            msg = (
                f"MemoryConfig.reranker_timeout must be at most {threading.TIMEOUT_MAX:g} "
                f"seconds (the longest a thread can be waited for), got "
                f"{self.reranker_timeout:g}"
            )
            raise ConfigurationError(msg)
        if self.reranker_top < 1 or self.reranker_timeout <= 0:
            msg = (
                "MemoryConfig.reranker_top must be positive and reranker_timeout more than 0 "
                f"seconds, got {self.reranker_top} and {self.reranker_timeout:g}"
            )
            raise ConfigurationError(msg)
        if not 0.0 < self.reranker_weight <= 1.0:
            msg = (
                "MemoryConfig.reranker_weight must be in (0, 1] (the reranker's share of the "
                f"blended relevance; 1: its scores replace the pipeline's), got "
                f"{self.reranker_weight:g}"
            )
            raise ConfigurationError(msg)
        limit = self.max_message_chars
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            msg = f"MemoryConfig.max_message_chars must be a positive int, got {limit!r}"
            raise ConfigurationError(msg)
