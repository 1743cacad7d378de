"""Figures of an evaluation run: a summary dict, the JSON file and the Markdown tables.

The headline leaves the adversarial category out (its questions have no answer in the
conversation); it is reported apart, with the same measures.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Iterable, Sequence
from typing import Any

from ctxbudget.eval.locomo import ADVERSARIAL, CATEGORIES
from ctxbudget.eval.runner import METHODS, EvalRun, Outcome

__all__ = ["LABELS", "SWITCHES", "percentile", "summarize", "switched_on", "to_json", "to_markdown"]

LABELS = {
    "ctxbudget": "ctxbudget (ContextMemory defaults)",
    "top-k": "vector top-k",
    "recency": "recency window",
}
"""How each method is named in tables and plots."""

_COLUMNS = (
    "sample_id",
    "question",
    "category",
    "method",
    "budget",
    "recall",
    "contained",
    "tokens",
    "latency_ms",
    "fitted",
)


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank ``q`` quantile (``q`` in [0, 1]) of ``values``; 0.0 when empty.

    >>> percentile([1.0, 2.0, 3.0, 4.0], 0.5)
    2.0
    """
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, math.ceil(q * len(ordered)))
    return ordered[min(len(ordered), rank) - 1]


def _measures(outcomes: Iterable[Outcome]) -> dict[str, Any]:
    rows = list(outcomes)
    if not rows:
        return {"n": 0}
    answered = [r.contained for r in rows if r.contained is not None]
    latencies = [r.latency_ms for r in rows if r.fitted]
    return {
        "n": len(rows),
        "recall": statistics.fmean(r.recall for r in rows),
        "containment": statistics.fmean(answered) if answered else None,
        "answered": len(answered),
        "tokens_mean": statistics.fmean(r.tokens for r in rows),
        "tokens_max": max(r.tokens for r in rows),
        "latency_p50_ms": percentile(latencies, 0.50),
        "latency_p95_ms": percentile(latencies, 0.95),
        "unfit": sum(not r.fitted for r in rows),
    }


def summarize(run: EvalRun) -> dict[str, Any]:
    """The run's figures as plain data (what `to_json` writes, without the per-question rows)."""
    grouped: dict[tuple[str, int, bool], list[Outcome]] = {}
    by_category: dict[tuple[int, str, int], list[Outcome]] = {}
    for row in run.outcomes:
        adversarial = row.category == ADVERSARIAL
        grouped.setdefault((row.method, row.budget, adversarial), []).append(row)
        by_category.setdefault((row.category, row.method, row.budget), []).append(row)
    questions = {(r.sample_id, r.question, r.category) for r in run.outcomes}
    categories = sorted({c for _, _, c in questions})

    def table(adversarial: bool) -> dict[str, dict[str, Any]]:
        return {
            method: {
                str(budget): _measures(grouped.get((method, budget, adversarial), []))
                for budget in run.budgets
            }
            for method in METHODS
        }

    counts: dict[str, int] = {}
    for note in run.notes:
        counts[note.action] = counts.get(note.action, 0) + 1
    return {
        "benchmark": "locomo",
        "model": run.model,
        "format": run.format,
        "speakers": run.speakers,
        "budgets": list(run.budgets),
        "methods": {m: LABELS[m] for m in METHODS},
        "conversations": list(run.conversations),
        "turns": run.turns,
        "questions": {
            "headline": sum(1 for _, _, c in questions if c != ADVERSARIAL),
            "adversarial": sum(1 for _, _, c in questions if c == ADVERSARIAL),
            "by_category": {
                CATEGORIES.get(c, str(c)): sum(1 for _, _, k in questions if k == c)
                for c in categories
            },
        },
        "headline": table(adversarial=False),
        "adversarial": table(adversarial=True),
        "by_category": {
            CATEGORIES.get(c, str(c)): {
                method: {
                    str(b): _measures(by_category.get((c, method, b), []))["recall"]
                    if by_category.get((c, method, b))
                    else None
                    for b in run.budgets
                }
                for method in METHODS
            }
            for c in categories
        },
        "loader": {"counts": counts, "notes": [str(n) for n in run.notes]},
        "settings": run.settings,
        "seconds": {k: round(v, 2) for k, v in run.seconds.items()},
    }


def to_json(run: EvalRun) -> str:
    """The summary and every outcome (one row per question, method and budget) as JSON."""
    data = summarize(run)
    data["outcomes"] = {
        "columns": list(_COLUMNS),
        "rows": [
            [
                r.sample_id,
                r.question,
                r.category,
                r.method,
                r.budget,
                round(r.recall, 6),
                r.contained,
                r.tokens,
                round(r.latency_ms, 3),
                r.fitted,
            ]
            for r in run.outcomes
        ],
    }
    return json.dumps(data, ensure_ascii=False, indent=1)


def _number(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


SWITCHES = ("entities", "excerpts")
"""The `MemoryConfig` settings a run may turn on (``--entities``, ``--excerpts``)."""


def switched_on(run: EvalRun) -> list[str]:
    """The `SWITCHES` ``run`` had on, in that order."""
    return [name for name in SWITCHES if run.settings.get(name)]


def _stored(run: EvalRun) -> str:
    """How the speakers were stored and whether entities or excerpts were on, if not default."""
    forms = {"prefix": "speakers as a 'Name: ' prefix", "role": "no speakers (role only)"}
    form = forms.get(run.speakers)
    parts = [form] if form else []
    parts += [f"{name} on" for name in switched_on(run)]
    return "".join(f", {part}" for part in parts)


def _method_names(run: EvalRun) -> dict[str, str]:
    """`LABELS`, with the settings a run turned on in ContextMemory's (not its defaults then)."""
    on = switched_on(run)
    if not on:
        return LABELS
    return {**LABELS, "ctxbudget": f"ctxbudget (ContextMemory, {', '.join(on)} on)"}


def to_markdown(run: EvalRun) -> str:
    """The tables: recall, containment, tokens and latency, per category, adversarial apart."""
    data = summarize(run)
    names = _method_names(run)
    budgets = [str(b) for b in run.budgets]
    head = "| method | " + " | ".join(f"{int(b):,}" for b in budgets) + " |"
    rule = "|---|" + "---:|" * len(budgets)
    lines: list[str] = []
    n = data["questions"]["headline"]
    conversations = len(run.conversations)
    lines.append(
        f"LoCoMo: {conversations} conversation{'s' * (conversations != 1)}, {run.turns:,} "
        f"turns, {n} questions with evidence (adversarial excluded), {run.format} format, "
        f"counted for {run.model}{_stored(run)}."
    )
    for title, key in (
        ("Evidence recall", "recall"),
        ("Answer containment (normalized gold answer in the rendered context)", "containment"),
    ):
        lines += ["", f"### {title}", "", head, rule]
        for method in METHODS:
            cells = [_number(data["headline"][method][b].get(key)) for b in budgets]
            lines.append(f"| {names[method]} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "### Tokens used (mean / max) and latency (p50 / p95 ms)",
        "",
        head,
        rule,
    ]
    for method in METHODS:
        cells = []
        for b in budgets:
            m = data["headline"][method][b]
            if not m["n"]:
                cells.append("-")
                continue
            cells.append(
                f"{m['tokens_mean']:,.0f} / {m['tokens_max']:,} tok, "
                f"{m['latency_p50_ms']:.1f} / {m['latency_p95_ms']:.1f} ms"
            )
        lines.append(f"| {names[method]} | " + " | ".join(cells) + " |")
    lines += ["", "### Evidence recall by category", ""]
    lines.append("| category | n | method | " + " | ".join(f"{int(b):,}" for b in budgets) + " |")
    lines.append("|---|---:|---|" + "---:|" * len(budgets))
    for category, per_method in data["by_category"].items():
        if category == CATEGORIES[ADVERSARIAL]:
            continue  # apart, below
        count = data["questions"]["by_category"][category]
        for method in METHODS:
            cells = [_number(per_method[method][b]) for b in budgets]
            lines.append(f"| {category} | {count} | {names[method]} | " + " | ".join(cells) + " |")
    adversarial = data["questions"]["adversarial"]
    if adversarial:
        lines += ["", f"### Adversarial questions, apart ({adversarial}): evidence recall", ""]
        lines += [head, rule]
        for method in METHODS:
            cells = [_number(data["adversarial"][method][b]["recall"]) for b in budgets]
            lines.append(f"| {names[method]} | " + " | ".join(cells) + " |")
    lines.append("")
    counts = data["loader"]["counts"]
    if counts:
        done = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
        lines.append(f"Loader: {done} (details in the JSON file).")
    unfit = sum(not r.fitted for r in run.outcomes)
    if unfit:
        lines.append(f"{unfit} assemblies did not fit the question itself (counted as recall 0).")
    seconds = data["seconds"]
    if seconds:
        lines.append(
            f"Time: {seconds.get('total', 0):.0f} s (storing the turns in ContextMemory "
            f"{seconds.get('ingest', 0):.0f} s, embedding them for top-k "
            f"{seconds.get('baseline_index', 0):.0f} s, questions "
            f"{seconds.get('questions', 0):.0f} s)."
        )
    return "\n".join(lines) + "\n"
