"""Recall-against-budget plots of evaluation runs (PNG, matplotlib's Agg canvas)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ctxbudget.errors import MissingDependencyError
from ctxbudget.eval.report import LABELS, summarize
from ctxbudget.eval.runner import METHODS, EvalRun

__all__ = ["plot_recall", "plot_variants"]

_STYLE = {"ctxbudget": ("o", "-"), "top-k": ("s", "--"), "recency": ("^", ":")}


def _figure() -> tuple[Any, Any]:
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        msg = "the recall plot needs matplotlib: pip install matplotlib"
        raise MissingDependencyError(msg) from exc
    figure = Figure(figsize=(7.2, 4.4), dpi=120)
    FigureCanvasAgg(figure)
    return figure, figure.add_subplot()


def _line(
    axes: Any, budgets: Sequence[int], recalls: Sequence[Any], label: str, marker: str, line: str
) -> None:
    points = [(b, r) for b, r in zip(budgets, recalls, strict=True) if r is not None]
    if points:
        xs, ys = [b for b, _ in points], [r for _, r in points]
        axes.plot(xs, ys, marker=marker, linestyle=line, label=label)


def _finish(figure: Any, axes: Any, budgets: Sequence[int], title: str, path: str | Path) -> Path:
    axes.set_xscale("log", base=2)
    axes.set_xticks(budgets, [f"{b:,}" for b in budgets])
    axes.set_ylim(0.0, 1.0)
    axes.set_xlabel("token budget")
    axes.set_ylabel("evidence recall")
    axes.set_title(title)
    axes.grid(True, alpha=0.3)
    axes.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=3, frameon=False)
    out = Path(path)
    figure.savefig(out, format="png", bbox_inches="tight")
    return out


def plot_recall(run: EvalRun, path: str | Path) -> Path:
    """Draw evidence recall against budget, one line per method, into a PNG file.

    Uses a figure on matplotlib's Agg canvas: no display is needed and the caller's pyplot
    state is left alone.

    Raises:
        MissingDependencyError: matplotlib is not installed.

    >>> plot_recall(run, "recall.png")  # doctest: +SKIP
    PosixPath('recall.png')
    """
    figure, axes = _figure()
    data = summarize(run)
    budgets = list(run.budgets)
    for method in METHODS:
        recalls = [data["headline"][method][str(b)].get("recall") for b in budgets]
        marker, line = _STYLE.get(method, ("o", "-"))
        _line(axes, budgets, recalls, LABELS[method], marker, line)
    n = data["questions"]["headline"]
    title = f"LoCoMo evidence recall ({n} questions, {run.format} format)"
    return _finish(figure, axes, budgets, title, path)


def plot_variants(runs: Sequence[EvalRun], path: str | Path) -> Path:
    """Draw ContextMemory's recall against budget for several runs, with the first's baselines.

    One solid line per run (`ctxbudget.eval.compare.variant_label`), and the vector top-k and
    recency window of the first run, dashed, for scale.

    Raises:
        MissingDependencyError: matplotlib is not installed.
        ConfigurationError: runs over different budgets, data, model or format.
    """
    from ctxbudget.eval.compare import compare_summary

    comparison = compare_summary(runs)
    figure, axes = _figure()
    budgets = comparison["budgets"]
    markers = "osD^vP*X"
    for number, (label, values) in enumerate(comparison["recall"].items()):
        _line(axes, budgets, [values[str(b)] for b in budgets], label, markers[number % 8], "-")
    first = summarize(runs[0])
    for method in ("top-k", "recency"):
        recalls = [first["headline"][method][str(b)].get("recall") for b in budgets]
        marker, line = _STYLE[method]
        _line(axes, budgets, recalls, f"{LABELS[method]} ({comparison['reference']})", marker, line)
    n = comparison["questions"]["headline"]
    return _finish(figure, axes, budgets, f"LoCoMo evidence recall by run ({n} questions)", path)
