"""Run the LoCoMo evaluation: `ContextMemory` with its default settings against two baselines.

For each conversation, every turn is stored in a fresh `ContextMemory` (one session holding all
the conversation's sessions in order; id = the turn's ``dia_id``, the speaker as the message's
name, the session date as its timestamp, an image caption kept in the text). ``speakers=``
stores the speaker as a ``Name: `` prefix of the text, or not at all, instead
(`ctxbudget.eval.forms`). Each question is
then assembled under every budget by the three methods, all rendered by the same assembler in
the same format with the question as the query:

- ``ctxbudget``: ``ContextMemory.assemble`` with the memory's settings (the defaults unless a
  `MemoryConfig` is given);
- ``top-k``: the turns most similar to the question that fit, as a plain RAG over the
  transcript does it: each turn embedded as ``Speaker: text`` by the same model (the text
  alone when the speaker is not stored), the question as asked;
- ``recency``: the newest turns that fit.

Each outcome records evidence recall (the share of the question's evidence turns among the
included ids), whether the normalized gold answer appears in the rendered context (the query
itself left out), the tokens used and the wall time of the method.
"""

from __future__ import annotations

import dataclasses
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ctxbudget.core.assemble import ContextAssembler
from ctxbudget.core.render import FORMATS, Format
from ctxbudget.core.report import AssembledContext
from ctxbudget.errors import BudgetExceededError, ConfigurationError
from ctxbudget.eval.baselines import query_item, recency_window, top_k
from ctxbudget.eval.forms import SPEAKER_FORMS, turn_item, turn_line, turn_message
from ctxbudget.eval.locomo import Conversation, LocomoData, Note, Question
from ctxbudget.memory.context import ContextMemory
from ctxbudget.memory.policy.config import MemoryConfig
from ctxbudget.store.chroma_store import ChromaStore
from ctxbudget.tokens.counter import TokenCounter

__all__ = [
    "DEFAULT_BUDGETS",
    "METHODS",
    "EvalRun",
    "Outcome",
    "answer_in",
    "normalize_answer",
    "run_locomo",
]

DEFAULT_BUDGETS = (1024, 2048, 4096, 8192)
METHODS = ("ctxbudget", "top-k", "recency")
"""The measured methods, in report order."""

_SESSION = "conversation"
_ARTICLES = re.compile(r"\b(?:a|an|the)\b")
_PUNCTUATION = re.compile(r"[^\w\s]")


@dataclass(frozen=True, slots=True)
class Outcome:
    """One question assembled under one budget by one method.

    Attributes:
        sample_id: the conversation.
        question: the question's index in the conversation's ``qa`` list.
        category: the LoCoMo category code.
        method: one of `METHODS`.
        budget: the token budget.
        recall: the share of the question's evidence turns in the context.
        contained: whether the normalized gold answer appears in the rendered context (None
            when the question has no gold answer).
        tokens: tokens the rendered context uses.
        latency_ms: wall time of the method (search and assembly).
        fitted: False when the question alone did not fit the budget (recall 0).
    """

    sample_id: str
    question: int
    category: int
    method: str
    budget: int
    recall: float
    contained: bool | None
    tokens: int
    latency_ms: float
    fitted: bool = True


@dataclass(frozen=True, slots=True)
class EvalRun:
    """Everything one evaluation measured, and how it was run.

    ``speakers`` is how the turns' speakers were stored (one of
    `ctxbudget.eval.forms.SPEAKER_FORMS`); ``settings`` are the `MemoryConfig` used.
    """

    outcomes: tuple[Outcome, ...]
    budgets: tuple[int, ...]
    model: str
    format: str
    conversations: tuple[str, ...]
    turns: int
    notes: tuple[Note, ...]
    settings: dict[str, Any]
    seconds: dict[str, float] = field(default_factory=dict)
    speakers: str = "name"


def normalize_answer(text: str) -> str:
    """Lower case, punctuation and articles removed, spaces collapsed (SQuAD-style).

    >>> normalize_answer("The Lord of the Rings!")
    'lord of rings'
    """
    text = _PUNCTUATION.sub(" ", text.casefold())
    return " ".join(_ARTICLES.sub(" ", text).split())


def answer_in(answer: str | None, context: str) -> bool | None:
    """Whether the normalized ``answer`` appears, as whole words, in the normalized ``context``.

    >>> answer_in("7 May 2023", "Caroline|I went on 7 May, 2023.")
    True
    """
    if answer is None:
        return None
    wanted = normalize_answer(answer)
    if not wanted:
        return None
    return f" {wanted} " in f" {normalize_answer(context)} "


def run_locomo(
    data: LocomoData,
    *,
    budgets: Sequence[int] = DEFAULT_BUDGETS,
    model: str = "gpt-4o",
    format: Format = "compact",  # noqa: A002 - the name used across ctxbudget
    config: MemoryConfig | None = None,
    embedder: object = None,
    max_conversations: int | None = None,
    max_questions: int | None = None,
    progress: bool = True,
    workdir: str | Path | None = None,
    speakers: str = "name",
) -> EvalRun:
    """Evaluate ContextMemory and the baselines on LoCoMo conversations.

    Args:
        data: the loaded benchmark (`load_locomo`).
        budgets: token budgets to assemble under.
        model: the model whose tokenizer counts.
        format: the rendering every method uses.
        config: ContextMemory settings (default: `MemoryConfig()`).
        embedder: the embedder for every store (default: the local all-MiniLM-L6-v2).
        max_conversations: only the first this many conversations.
        max_questions: only the first this many scorable questions of each conversation.
        progress: draw a progress bar on stderr.
        workdir: where the temporary stores go (default: the system's temporary folder).
        speakers: how each turn's speaker is stored: ``"name"`` (the message's name),
            ``"prefix"`` (``Speaker: text``) or ``"role"`` (not at all); see
            `ctxbudget.eval.forms`.

    Raises:
        ValueError: an empty budget list, a non-positive budget or limit, an unknown format
            or speakers form.
        UnknownModelError: ``model`` is not registered.
    """
    budgets = tuple(budgets)
    if not budgets or any(b <= 0 for b in budgets):
        msg = f"budgets must be positive token counts, got {list(budgets)}"
        raise ConfigurationError(msg)
    for name, limit in (("max_conversations", max_conversations), ("max_questions", max_questions)):
        if limit is not None and limit <= 0:
            msg = f"{name} must be positive, got {limit}"
            raise ConfigurationError(msg)
    if format not in FORMATS:
        msg = f"format must be one of {list(FORMATS)}, got {format!r}"
        raise ConfigurationError(msg)
    if speakers not in SPEAKER_FORMS:
        msg = f"speakers must be one of {', '.join(SPEAKER_FORMS)}, got {speakers!r}"
        raise ConfigurationError(msg)
    config = config or MemoryConfig()
    TokenCounter.for_model(model)  # an unknown model fails here, before any work
    conversations = list(data.conversations[:max_conversations])
    work = [
        (conversation, list(conversation.questions[:max_questions]))
        for conversation in conversations
    ]
    chosen: Any = embedder
    if chosen is None:
        from ctxbudget.embed.base import default_embedder

        chosen = default_embedder()
    bar = _bar(sum(len(q) for _, q in work), progress)
    outcomes: list[Outcome] = []
    seconds = {"ingest": 0.0, "baseline_index": 0.0, "questions": 0.0}
    started = time.perf_counter()
    root = Path(tempfile.mkdtemp(prefix="ctxbudget-eval-", dir=workdir))
    try:
        for number, (conversation, questions) in enumerate(work):
            if bar is not None:
                bar.set_description(conversation.sample_id)
            store = ChromaStore(root / str(number), embedder=chosen)
            # No inclusion log: its background writes would share the store with the timed
            # assemblies back to back (docs/benchmarks.md, "Inclusion log").
            memory = ContextMemory(store=store, model=model, config=config, inclusion_log=False)
            try:
                clock = time.perf_counter()
                messages = [turn_message(t, conversation, speakers) for t in conversation.turns]
                memory.add_messages(_SESSION, messages, progress=False)
                seconds["ingest"] += time.perf_counter() - clock
                clock = time.perf_counter()
                runner = _Conversation(memory, conversation, budgets, format, speakers)
                seconds["baseline_index"] += time.perf_counter() - clock
                clock = time.perf_counter()
                for question in questions:
                    outcomes.extend(runner.evaluate(question))
                    if bar is not None:
                        bar.update(1)
                seconds["questions"] += time.perf_counter() - clock
            finally:
                memory.close()
    finally:
        if bar is not None:
            bar.close()
        shutil.rmtree(root, ignore_errors=True)
    seconds["total"] = time.perf_counter() - started
    names = {c.sample_id for c in conversations}
    return EvalRun(
        outcomes=tuple(outcomes),
        budgets=budgets,
        model=model,
        format=format,
        conversations=tuple(c.sample_id for c in conversations),
        turns=sum(len(c.turns) for c in conversations),
        notes=tuple(n for n in data.notes if n.where.split(" ")[0] in names),
        settings=_settings(config),
        seconds=seconds,
        speakers=speakers,
    )


class _Conversation:
    """The three methods on one ingested conversation."""

    def __init__(
        self,
        memory: ContextMemory,
        conversation: Conversation,
        budgets: tuple[int, ...],
        fmt: Format,
        form: str,
    ) -> None:
        self.memory = memory
        self.budgets = budgets
        self.format: Format = fmt
        self.sample_id = conversation.sample_id
        # The baselines pack with history as a plain tier, the way a trimmer sees it.
        self.assembler = ContextAssembler(memory.counter, min_exchanges=0)
        self.turns = [turn_item(turn, conversation, form) for turn in conversation.turns]
        lines = [turn_line(turn, form) for turn in conversation.turns]
        self.vectors = _unit(memory.store.embedder.embed_documents(lines))

    def evaluate(self, question: Question) -> list[Outcome]:
        memory = self.memory
        clock = time.perf_counter()
        vector = _unit([memory.store.embedder.embed_query(question.question)])[0]
        similarity = self.vectors @ vector
        order = np.argsort(-similarity, kind="stable")
        ranked = [self.turns[int(i)] for i in order]
        search_ms = (time.perf_counter() - clock) * 1000.0
        methods: dict[str, Callable[[int], AssembledContext]] = {
            "ctxbudget": lambda b: memory.assemble(
                _SESSION, question.question, budget=b, format=self.format
            ),
            "top-k": lambda b: top_k(
                ranked, question.question, budget=b, assembler=self.assembler, format=self.format
            ),
            "recency": lambda b: recency_window(
                self.turns,
                question.question,
                budget=b,
                assembler=self.assembler,
                format=self.format,
            ),
        }
        out: list[Outcome] = []
        for budget in self.budgets:
            for method in METHODS:
                clock = time.perf_counter()
                try:
                    ctx = methods[method](budget)
                except BudgetExceededError:
                    out.append(self._unfit(question, method, budget))
                    continue
                latency = (time.perf_counter() - clock) * 1000.0
                if method == "top-k":
                    latency += search_ms  # its search is part of its cost, as for ctxbudget
                out.append(self._outcome(question, method, budget, ctx, latency))
        return out

    def _outcome(
        self, question: Question, method: str, budget: int, ctx: AssembledContext, ms: float
    ) -> Outcome:
        included = set(ctx.included_ids)
        found = sum(1 for dia_id in question.evidence if dia_id in included)
        rendered = ctx.render()
        asked = question.question.strip()
        if rendered.endswith(asked):
            rendered = rendered[: -len(asked)]
        return Outcome(
            sample_id=self.sample_id,
            question=question.index,
            category=question.category,
            method=method,
            budget=budget,
            recall=found / len(question.evidence),
            contained=answer_in(question.answer, rendered),
            tokens=ctx.tokens_used,
            latency_ms=ms,
        )

    def _unfit(self, question: Question, method: str, budget: int) -> Outcome:
        alone = query_item(question.question)
        return Outcome(
            sample_id=self.sample_id,
            question=question.index,
            category=question.category,
            method=method,
            budget=budget,
            recall=0.0,
            contained=None if question.answer is None else False,
            tokens=self.memory.counter.count(alone.text),
            latency_ms=0.0,
            fitted=False,
        )


def _unit(vectors: Sequence[Sequence[float]]) -> np.ndarray[Any, np.dtype[np.float64]]:
    """Rows scaled to length 1, so a dot product is the cosine similarity."""
    array = np.asarray(vectors, dtype=np.float64)
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    return array / np.where(norms > 0, norms, 1.0)


def _settings(config: MemoryConfig) -> dict[str, Any]:
    def plain(value: Any) -> Any:
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
        if isinstance(value, tuple):
            return [plain(v) for v in value]
        return value

    settings: dict[str, Any] = plain(config)
    return settings


def _bar(total: int, progress: bool) -> Any:
    if not progress:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, unit="question", desc="locomo")
