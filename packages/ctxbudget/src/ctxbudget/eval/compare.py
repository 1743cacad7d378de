"""Several evaluation runs side by side: the same turns stored differently, settings off and on.

``ctxbudget eval locomo --speakers all`` stores the turns with the speaker in ``name``, as a
``Name: `` prefix and not at all (`ctxbudget.eval.forms`), and ``--entities both`` and
``--excerpts both`` run with `MemoryConfig.entities` and `MemoryConfig.excerpts` off and on.
Each combination is one `EvalRun`; this module puts them side by side: ContextMemory's
evidence recall per run and budget, the gap of each run to the first (the *reference*:
speakers in ``name``, both settings off, when those were run), recall per category, and the
baselines in each speaker form.

>>> from ctxbudget.eval import compare_markdown, load_locomo, run_locomo
>>> data = load_locomo("locomo10.json")  # doctest: +SKIP
>>> runs = [run_locomo(data, speakers=s) for s in ("name", "prefix")]  # doctest: +SKIP
>>> print(compare_markdown(runs))  # doctest: +SKIP
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ctxbudget.errors import ConfigurationError
from ctxbudget.eval.locomo import ADVERSARIAL, CATEGORIES
from ctxbudget.eval.report import LABELS, SWITCHES, summarize, switched_on, to_json, to_markdown
from ctxbudget.eval.runner import EvalRun

__all__ = [
    "compare_json",
    "compare_markdown",
    "compare_summary",
    "variant_label",
    "write_results",
]

_FORMS = {
    "name": "speakers in name",
    "prefix": "speakers as a Name: prefix",
    "role": "role only (no speaker)",
}


def variant_label(run: EvalRun) -> str:
    """How a run is named in the comparison: its speaker form, and entities or excerpts when on.

    >>> from ctxbudget.eval.runner import EvalRun
    >>> variant_label(EvalRun((), (1024,), "gpt-4o", "compact", (), 0, (), {"entities": True}))
    'speakers in name, entities on'
    """
    label = _FORMS.get(run.speakers, run.speakers)
    return "".join([label, *(f", {name} on" for name in switched_on(run))])


def _check(runs: Sequence[EvalRun]) -> None:
    if not runs:
        msg = "compare needs at least one evaluation run, got none"
        raise ConfigurationError(msg)
    first = runs[0]
    for run in runs[1:]:
        if (run.budgets, run.conversations, run.model, run.format) != (
            first.budgets,
            first.conversations,
            first.model,
            first.format,
        ):
            msg = (
                f"runs compared must share budgets, conversations, model and format: "
                f"{variant_label(run)!r} has {list(run.budgets)} on {len(run.conversations)} "
                f"conversations ({run.model}, {run.format}), the first has "
                f"{list(first.budgets)} on {len(first.conversations)} ({first.model}, "
                f"{first.format}); run them with the same options"
            )
            raise ConfigurationError(msg)


def compare_summary(runs: Sequence[EvalRun]) -> dict[str, Any]:
    """ContextMemory's recall per run (headline and per category) and the gap to the first run.

    ``gap[label][budget]`` is the run's recall minus the reference's (the first run's);
    ``largest_gap[label]`` is its largest absolute value over the budgets.

    Raises:
        ConfigurationError: no runs, or runs over different budgets, data, model or format.
    """
    _check(runs)
    summaries = [summarize(run) for run in runs]
    labels = [variant_label(run) for run in runs]
    budgets = [str(b) for b in runs[0].budgets]
    recall = {
        label: {b: data["headline"]["ctxbudget"][b].get("recall") for b in budgets}
        for label, data in zip(labels, summaries, strict=True)
    }
    reference = labels[0]
    gap: dict[str, dict[str, float | None]] = {}
    for label in labels[1:]:
        gap[label] = {
            b: None
            if recall[label][b] is None or recall[reference][b] is None
            else recall[label][b] - recall[reference][b]
            for b in budgets
        }
    by_category = {
        label: {
            category: per_method["ctxbudget"]
            for category, per_method in data["by_category"].items()
        }
        for label, data in zip(labels, summaries, strict=True)
    }
    baselines = {
        label: {m: {b: data["headline"][m][b].get("recall") for b in budgets} for m in LABELS}
        for label, data, run in zip(labels, summaries, runs, strict=True)
        if not switched_on(run)  # the baselines use no ContextMemory setting
    }
    return {
        "reference": reference,
        "variants": [
            {
                "label": label,
                "speakers": run.speakers,
                **{name: name in switched_on(run) for name in SWITCHES},
            }
            for label, run in zip(labels, runs, strict=True)
        ],
        "budgets": [int(b) for b in budgets],
        "questions": summaries[0]["questions"],
        "recall": recall,
        "gap": gap,
        "largest_gap": {
            label: max((abs(v) for v in values.values() if v is not None), default=None)
            for label, values in gap.items()
        },
        "by_category": by_category,
        "baselines": baselines,
    }


def compare_json(runs: Sequence[EvalRun]) -> str:
    """The comparison and, for each run, what `to_json` writes for it (under ``variants``)."""
    comparison = compare_summary(runs)
    variants = []
    for run in runs:
        data = json.loads(to_json(run))
        variants.append({"label": variant_label(run), **data})
    out = {"benchmark": "locomo", "comparison": comparison, "variants": variants}
    return json.dumps(out, ensure_ascii=False, indent=1)


def _cell(value: float | None, *, signed: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.3f}" if signed else f"{value:.3f}"


def compare_markdown(runs: Sequence[EvalRun]) -> str:
    """The comparison tables, then each run's own tables (`to_markdown`) under its label."""
    data = compare_summary(runs)
    budgets = [str(b) for b in data["budgets"]]
    head = " | ".join(f"{int(b):,}" for b in budgets)
    rule = "---:|" * len(budgets)
    first = runs[0]
    n = data["questions"]["headline"]
    conversations = len(first.conversations)
    lines = [
        f"## ContextMemory side by side ({len(runs)} runs)",
        "",
        f"LoCoMo: {conversations} conversation{'s' * (conversations != 1)}, {first.turns:,} "
        f"turns, {n} "
        f"questions with evidence (adversarial excluded), {first.format} format, counted for "
        f"{first.model}. The same turns in every run; only how each turn's speaker is stored "
        "(and the MemoryConfig settings a run names) differs.",
        "",
        "### Evidence recall",
        "",
        f"| run | {head} |",
        f"|---|{rule}",
    ]
    for label, values in data["recall"].items():
        lines.append(f"| {label} | " + " | ".join(_cell(values[b]) for b in budgets) + " |")
    for label, values in data["gap"].items():
        cells = " | ".join(_cell(values[b], signed=True) for b in budgets)
        lines.append(f"| gap: {label} - {data['reference']} | {cells} |")
    lines += [
        "",
        "### Evidence recall by category (ContextMemory)",
        "",
        f"| category | n | run | {head} |",
        f"|---|---:|---|{rule}",
    ]
    counts = data["questions"]["by_category"]
    categories = [c for c in counts if c != CATEGORIES[ADVERSARIAL]]
    for category in [*categories, CATEGORIES[ADVERSARIAL]]:
        for label, per_category in data["by_category"].items():
            values = per_category.get(category)
            if values is None:
                continue
            cells = " | ".join(_cell(values[b]) for b in budgets)
            name = f"{category} (apart)" if category == CATEGORIES[ADVERSARIAL] else category
            lines.append(f"| {name} | {counts[category]} | {label} | {cells} |")
    if len(data["baselines"]) > 1:
        lines += [
            "",
            "### The baselines in each speaker form",
            "",
            f"| method | run | {head} |",
            f"|---|---|{rule}",
        ]
        for method in ("top-k", "recency"):
            for label, per_method in data["baselines"].items():
                cells = " | ".join(_cell(per_method[method][b]) for b in budgets)
                lines.append(f"| {LABELS[method]} | {label} | {cells} |")
    lines.append("")
    for run in runs:
        lines += [f"## {variant_label(run)}", "", to_markdown(run)]
    return "\n".join(lines)


def write_results(runs: Sequence[EvalRun], folder: str | Path) -> tuple[str, list[Path]]:
    """Write ``locomo.md``, ``locomo.json`` and ``locomo_recall.png`` into ``folder``.

    One run is written as `to_markdown`, `to_json` and `plot_recall` write it (the shape of
    every earlier run); several as `compare_markdown`, `compare_json` and `plot_variants`.
    Returns the Markdown and the files written.

    Raises:
        MissingDependencyError: matplotlib is not installed (the tables are written first).
    """
    from ctxbudget.eval.plot import plot_recall, plot_variants

    out = Path(folder)
    single = len(runs) == 1
    table = to_markdown(runs[0]) if single else compare_markdown(runs)
    files = {"locomo.md": table, "locomo.json": to_json(runs[0]) if single else compare_json(runs)}
    written = []
    for name, text in files.items():
        (out / name).write_text(text, encoding="utf-8")
        written.append(out / name)
    plot = out / "locomo_recall.png"
    written.append(plot_recall(runs[0], plot) if single else plot_variants(runs, plot))
    return table, written
