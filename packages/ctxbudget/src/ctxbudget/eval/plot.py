"""The recall-against-budget plot of an evaluation run (PNG, matplotlib's Agg canvas)."""

from __future__ import annotations

from pathlib import Path

from ctxbudget.errors import MissingDependencyError
from ctxbudget.eval.report import LABELS, summarize
from ctxbudget.eval.runner import METHODS, EvalRun

__all__ = ["plot_recall"]

_STYLE = {"ctxbudget": ("o", "-"), "top-k": ("s", "--"), "recency": ("^", ":")}


def plot_recall(run: EvalRun, path: str | Path) -> Path:
    """Draw evidence recall against budget, one line per method, into a PNG file.

    Uses a figure on matplotlib's Agg canvas: no display is needed and the caller's pyplot
    state is left alone.

    Raises:
        MissingDependencyError: matplotlib is not installed.

    >>> plot_recall(run, "recall.png")  # doctest: +SKIP
    PosixPath('recall.png')
    """
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        msg = "the recall plot needs matplotlib: pip install matplotlib"
        raise MissingDependencyError(msg) from exc
    data = summarize(run)
    budgets = list(run.budgets)
    figure = Figure(figsize=(7.2, 4.4), dpi=120)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    for method in METHODS:
        recalls = [data["headline"][method][str(b)].get("recall") for b in budgets]
        points = [(b, r) for b, r in zip(budgets, recalls, strict=True) if r is not None]
        if not points:
            continue
        marker, line = _STYLE.get(method, ("o", "-"))
        axes.plot(
            [b for b, _ in points],
            [r for _, r in points],
            marker=marker,
            linestyle=line,
            label=LABELS[method],
        )
    axes.set_xscale("log", base=2)
    axes.set_xticks(budgets, [f"{b:,}" for b in budgets])
    axes.set_ylim(0.0, 1.0)
    axes.set_xlabel("token budget")
    axes.set_ylabel("evidence recall")
    n = data["questions"]["headline"]
    axes.set_title(f"LoCoMo evidence recall ({n} questions, {run.format} format)")
    axes.grid(True, alpha=0.3)
    axes.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=3, frameon=False)
    out = Path(path)
    figure.savefig(out, format="png", bbox_inches="tight")
    return out
