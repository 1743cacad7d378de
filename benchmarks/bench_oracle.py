"""Rerankers: what the pipeline carries (issue 42). An oracle reranker on the LoCoMo dev file.

No model: the oracle knows each question's evidence turns. It scores a candidate 1 when its
text is (or holds) an evidence turn's stored text and 0 otherwise; a noisy oracle adds
``N(0, sigma)`` to every score (seeded by the question and sigma), so evidence still ranks higher
on average but not always. Each is set as `MemoryConfig(reranker=..., reranker_top=...,
reranker_weight=...)`: for each of ``--weights`` (the reranker's share of the blended relevance;
1: its scores replace the pipeline's), the perfect oracle at each of ``--tops`` and the noisy
ones at the last; the other settings are the defaults, and the conversation is assembled exactly as ``ctxbudget eval locomo`` assembles
its ``ctxbudget`` method (one session, ``compact``, gpt-4o's tokenizer, the question as the
query, no inclusion log); ``none`` is that method itself (no reranker).

Each conversation is stored and embedded once per speaker form; every variant reads the same
store through a `ContextMemory` of its own. Reports evidence recall (the share of a question's
evidence turns among the included ids) per category and overall (the adversarial category
apart, as the eval does) at each budget, per variant and speaker form.

With ``--diagnose`` (the perfect oracles only), every evidence turn they still lose is placed:
``recent`` (offered as recent history, cut), ``reranked`` (in the pool the reranker saw, so
ranked first, and cut by packing: the prune reason and its token cost are counted), ``deep``
(in the pool past ``reranker_top``), ``absent`` (never a candidate).

Run: nice -n 5 .venv/bin/python benchmarks/bench_oracle.py ../shared/data/locomo/locomo_dev.json
     [--budgets 1024,2048,4096,8192] [--speakers name,prefix] [--tops 200]
     [--weights 0.6] [--sigmas 0.25 0.5 1.0]
     [--conversations N] [--questions N] [--diagnose] [--json out.json]
The LoCoMo data stays outside the repository: pass its path.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
import zlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ctxbudget.core.render import Format
from ctxbudget.core.report import AssembledContext
from ctxbudget.embed.base import Embedder, default_embedder
from ctxbudget.eval.forms import speaker_forms, turn_message
from ctxbudget.eval.locomo import ADVERSARIAL, CATEGORIES, Conversation, Question, load_locomo
from ctxbudget.memory.context import ContextMemory
from ctxbudget.memory.policy.config import MemoryConfig
from ctxbudget.memory.reading.excerpts import MARKER
from ctxbudget.store.chroma_store import ChromaStore

__all__ = ["Oracle", "Tally", "main", "run_oracle"]

SESSION = "conversation"
TOP = MemoryConfig().reranker_top  # the defaults
WEIGHT = MemoryConfig().reranker_weight
FORMAT: Format = "compact"
MODEL = "gpt-4o"


class Oracle:
    """A reranker that knows the evidence: 1 for an evidence turn's text, else 0, plus noise."""

    def __init__(self, sigma: float = 0.0) -> None:
        self.sigma = sigma
        self.evidence: dict[str, str] = {}  # stored text -> dia_id
        self.seen: set[str] = set()  # evidence ids among the texts it was last asked about
        self.rng = np.random.default_rng(0)

    def ask(self, evidence: dict[str, str], seed: str) -> None:
        """The next question's evidence (stored text -> id); the noise restarts from ``seed``."""
        self.evidence = evidence
        self.seen = set()
        self.rng = np.random.default_rng(zlib.crc32(f"{seed}/{self.sigma}".encode()))

    def match(self, text: str) -> str | None:
        """The evidence id ``text`` is or holds (an excerpt: every piece of it), else None."""
        for wanted, dia_id in self.evidence.items():
            if wanted in text:
                return dia_id
            pieces = [p.strip() for p in text.split(MARKER) if p.strip()]
            if MARKER in text and pieces and all(p in wanted for p in pieces):
                return dia_id
        return None

    def __call__(self, query: str, texts: Sequence[str], /) -> list[float]:
        hits = [self.match(text) for text in texts]
        self.seen = {h for h in hits if h is not None}
        scores = np.array([0.0 if h is None else 1.0 for h in hits])
        if self.sigma > 0:
            scores = scores + self.rng.normal(0.0, self.sigma, len(texts))
        return [float(s) for s in scores]


@dataclass(slots=True)
class Tally:
    """Recall rows of one speaker form: (variant, budget, category) -> per-question recalls."""

    recalls: dict[tuple[str, int, int], list[float]] = field(default_factory=dict)
    # (variant, budget) -> where the perfect oracles lost evidence (--diagnose)
    lost: dict[tuple[str, int], Counter[str]] = field(default_factory=dict)
    seconds: float = 0.0

    def add(self, variant: str, budget: int, category: int, recall: float) -> None:
        self.recalls.setdefault((variant, budget, category), []).append(recall)

    def recall(self, variant: str, budget: int, category: int | None) -> float | None:
        """Mean recall of a category, or of every category but the adversarial one (None)."""
        rows = [
            value
            for (v, b, c), values in self.recalls.items()
            if v == variant
            and b == budget
            and (c == category or (category is None and c != ADVERSARIAL))
            for value in values
        ]
        return statistics.fmean(rows) if rows else None


Variant = tuple[Oracle, int, float]  # the oracle, reranker_top, reranker_weight


def variants_for(
    sigmas: Sequence[float], tops: Sequence[int], weights: Sequence[float] = (WEIGHT,)
) -> dict[str, Variant]:
    """The reranked variants in report order: name -> (oracle, reranker_top, reranker_weight).

    For each weight: the perfect oracle at each of ``tops``, then the noisy ones at the last.
    """
    out: dict[str, Variant] = {}
    for weight in weights:
        for top in tops:
            out[f"oracle, top {top}, w {weight:g}"] = (Oracle(), top, weight)
        for sigma in sigmas:
            out[f"oracle+N({sigma:g}), top {tops[-1]}, w {weight:g}"] = (
                Oracle(sigma),
                tops[-1],
                weight,
            )
    return out


def names(
    sigmas: Sequence[float], tops: Sequence[int], weights: Sequence[float] = (WEIGHT,)
) -> list[str]:
    """Every variant, in report order: ``none`` (no reranker) first."""
    return ["none", *variants_for(sigmas, tops, weights)]


def run_oracle(
    path: str | Path,
    *,
    budgets: Sequence[int],
    form: str,
    sigmas: Sequence[float],
    tops: Sequence[int] = (TOP,),
    weights: Sequence[float] = (WEIGHT,),
    conversations: int | None = None,
    questions: int | None = None,
    diagnose: bool = False,
    embedder: Embedder | None = None,
) -> Tally:
    """Every variant on every question of the file, in one speaker ``form``."""
    data = load_locomo(path)
    if embedder is None:
        embedder = default_embedder()
    tally = Tally()
    started = time.perf_counter()
    root = Path(tempfile.mkdtemp(prefix="ctxbudget-oracle-"))
    try:
        for number, conversation in enumerate(data.conversations[:conversations]):
            store = ChromaStore(root / str(number), embedder=embedder)
            # Stored before any variant reads: the variants' memories share the store.
            base = ContextMemory(store=store, model=MODEL, write_behind=False, inclusion_log=False)
            try:
                said = [turn_message(t, conversation, form) for t in conversation.turns]
                base.add_messages(SESSION, said, progress=False)
                variants = variants_for(sigmas, tops, weights)
                _conversation(
                    base, conversation, form, budgets, variants, questions, diagnose, tally
                )
            finally:
                base.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    tally.seconds = time.perf_counter() - started
    return tally


def _conversation(
    base: ContextMemory,
    conversation: Conversation,
    form: str,
    budgets: Sequence[int],
    variants: dict[str, Variant],
    questions: int | None,
    diagnose: bool,
    tally: Tally,
) -> None:
    stored = {t.dia_id: turn_message(t, conversation, form)["text"] for t in conversation.turns}
    memories: dict[str, tuple[ContextMemory, Oracle | None]] = {"none": (base, None)}
    for name, (known, top, weight) in variants.items():  # the same store, a memory of its own
        config = MemoryConfig(
            reranker=known, reranker_top=top, reranker_weight=weight, reranker_timeout=30.0
        )
        memories[name] = (
            ContextMemory(
                store=base.store,
                model=MODEL,
                config=config,
                write_behind=False,
                inclusion_log=False,
            ),
            known,
        )
    for question in conversation.questions[:questions]:
        evidence = {stored[e]: e for e in question.evidence if e in stored}
        seed = f"{conversation.sample_id}/{question.index}"
        for name, (memory, oracle) in memories.items():
            if oracle is not None:
                oracle.ask(evidence, seed)
            for budget in budgets:
                ctx = memory.assemble(SESSION, question.question, budget=budget, format=FORMAT)
                included = set(ctx.included_ids)
                found = [e for e in question.evidence if e in included]
                tally.add(name, budget, question.category, len(found) / len(question.evidence))
                perfect = oracle is not None and oracle.sigma == 0
                if diagnose and perfect and question.category != ADVERSARIAL:
                    missed = [e for e in question.evidence if e not in included]
                    if missed:
                        lost = tally.lost.setdefault((name, budget), Counter())
                        lost.update(_where(memory, question, budget, ctx, missed))


def _where(
    memory: ContextMemory, question: Question, budget: int, ctx: AssembledContext, missed: list[str]
) -> list[str]:
    """Where each missed evidence turn of the perfect oracle was lost (see the docstring)."""
    found = memory.candidates(SESSION, question.question, budget=budget, format=FORMAT)
    top = memory.config.reranker_top
    pruned = {p.item.id: p for p in ctx.pruned}
    history = {it.id for it in found.history}
    ranked = [it.id for it in found.retrieved]
    out = []
    for dia_id in missed:
        if dia_id in history:
            out.append("recent")
        elif dia_id in ranked[:top]:
            entry = pruned.get(dia_id)
            reason = entry.reason.value if entry is not None else "not offered"
            tokens = memory.counter.count(found.retrieved[ranked.index(dia_id)].text)
            out.append(f"reranked: {reason}, {'long (>100 tokens)' if tokens > 100 else 'short'}")
        elif dia_id in ranked:
            out.append("deep (past reranker_top)")
        else:
            out.append("absent")
    return out


def table(tally: Tally, budgets: Sequence[int], variants: Sequence[str]) -> str:
    """Markdown: one row per variant and category, one column per budget."""
    shown = [c for c in CATEGORIES if c != ADVERSARIAL]
    head = "| variant | category | " + " | ".join(f"{b:,}" for b in budgets) + " |"
    lines = [head, "|---|---|" + "---:|" * len(budgets)]
    for name in variants:
        for category in [None, *shown, ADVERSARIAL]:
            label = "all (headline)" if category is None else CATEGORIES[category]
            if category == ADVERSARIAL:
                label += " (apart)"
            cells = [tally.recall(name, b, category) for b in budgets]
            if all(c is None for c in cells):
                continue
            text = " | ".join("-" if c is None else f"{c:.3f}" for c in cells)
            lines.append(f"| {name} | {label} | {text} |")
    return "\n".join(lines)


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"{one:.1f} (5 min {five:.1f})"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("data", help="LoCoMo JSON (kept outside the repository)")
    parser.add_argument("--budgets", default="1024,2048,4096,8192")
    parser.add_argument("--speakers", default="name,prefix")
    parser.add_argument("--sigmas", type=float, nargs="*", default=[0.25, 0.5, 1.0])
    parser.add_argument("--tops", type=int, nargs="+", default=[TOP])
    parser.add_argument("--weights", type=float, nargs="+", default=[WEIGHT])
    parser.add_argument("--conversations", type=int, default=None)
    parser.add_argument("--questions", type=int, default=None)
    parser.add_argument("--diagnose", action="store_true")
    parser.add_argument("--json", default=None, help="also write the figures here")
    args = parser.parse_args(argv)
    budgets = [int(b) for b in args.budgets.split(",") if b.strip()]
    print(f"load before: {load()}")
    figures: dict[str, Any] = {}
    for form in speaker_forms(args.speakers):
        tally = run_oracle(
            args.data,
            budgets=budgets,
            form=form,
            sigmas=args.sigmas,
            tops=args.tops,
            weights=args.weights,
            conversations=args.conversations,
            questions=args.questions,
            diagnose=args.diagnose,
        )
        print(f"\nspeakers={form} ({tally.seconds:.0f} s, load {load()})\n")
        print(table(tally, budgets, names(args.sigmas, args.tops, args.weights)))
        for (name, budget), lost in sorted(tally.lost.items()):
            print(f"\n{name}, {budget:,} tokens: evidence lost, by where")
            for where, n in lost.most_common():
                print(f"  {n:>4}  {where}")
        figures[form] = {
            "seconds": round(tally.seconds, 1),
            "recall": {
                **{
                    f"{v}|{b}|{CATEGORIES.get(c, c)}": statistics.fmean(rows)
                    for (v, b, c), rows in sorted(tally.recalls.items())
                },
                **{  # the headline: every question but the adversarial ones
                    f"{v}|{b}|all": tally.recall(v, b, None)
                    for v, b in sorted({(v, b) for v, b, _ in tally.recalls})
                },
            },
            "lost": {f"{v}|{b}": dict(lost) for (v, b), lost in tally.lost.items()},
        }
    print(f"\nload after: {load()}")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
