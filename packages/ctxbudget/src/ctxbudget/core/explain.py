"""`AssembledContext.explain`: an assembly's report written for people.

A line on the budget, a bar of what each tier used, a table per tier (offered, kept, cut,
tokens, the solver), then what was cut and why, what was truncated, images counted at their
most, how history was trimmed and the prefix shared with the previous call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ctxbudget.core.items import tier_name
from ctxbudget.tokens.images import IMAGE_TOKENS_MAX

if TYPE_CHECKING:
    from ctxbudget.core.report import AssembledContext

__all__ = ["explain_context"]


def explain_context(ctx: AssembledContext, *, width: int = 40, show_pruned: int = 12) -> str:
    """A per-tier table, a budget bar, and what was cut and why (`AssembledContext.explain`)."""
    lines: list[str] = []
    label = " (APPROXIMATE count)" if ctx.approximate else ""
    budget = ctx.budget
    if budget.reserve or budget.safety:
        given = f"window {budget.window:,} - reserve {budget.reserve:,} - safety {budget.safety:,}"
    else:  # a plain token budget: nothing kept back to describe
        given = f"budget {budget.window:,}"
    lines.append(
        f"context: {ctx.tokens_used:,} of {ctx.tokens_available:,} tokens ({given}), "
        f"format {ctx.format}, counter {ctx.counter_name}{label}"
    )
    lines.append(_bar(ctx, width))
    lines.append(f"{'tier':<12}{'offered':>8}{'kept':>7}{'cut':>6}{'tokens':>9}  solver")
    for tier in sorted(ctx.tiers):
        usage = ctx.tiers[tier]
        solver = ctx.solvers.get(tier)
        how = ""
        if solver is not None:
            how = solver.solver
            if solver.solver == "greedy":
                how += f" (within {solver.gap:.1%} of optimum)"
        lines.append(
            f"{usage.name:<12}{usage.offered:>8}{usage.kept:>7}{usage.pruned:>6}"
            f"{usage.tokens:>9,}  {how}"
        )
    pruned = ctx.pruned
    if pruned:
        reasons: dict[str, int] = {}
        for p in pruned:
            reasons[p.reason.value] = reasons.get(p.reason.value, 0) + 1
        summary = ", ".join(f"{n} {r}" for r, n in sorted(reasons.items()))
        lines.append(f"cut: {len(pruned)} items ({summary})")
        for p in pruned[:show_pruned]:
            preview = p.item.text.replace("\n", " ")[:48]
            detail = f" ({p.detail})" if p.detail else ""
            lines.append(
                f"  - {p.item.label} [{tier_name(p.item.tier)}] {p.reason.value}{detail}: "
                f"{preview!r}"
            )
        if len(pruned) > show_pruned:
            lines.append(f"  ... and {len(pruned) - show_pruned} more")
    labels = {item.id: item.label for item in ctx.included}
    if ctx.truncated:
        lines.append(f"truncated to fit: {', '.join(labels.get(i, i) for i in ctx.truncated)}")
    estimated = ctx.estimated
    if estimated:
        lines.append(
            f"images of unknown size counted as {IMAGE_TOKENS_MAX:,} tokens each in: "
            f"{', '.join(labels.get(i, i) for i in estimated)}"
        )
    if ctx.trim is not None:
        lines.append(ctx.trim.describe())
    if ctx.prefix_tokens is not None:
        share = ctx.prefix_tokens / max(ctx.tokens_used, 1)
        lines.append(
            f"prefix shared with the previous call: {ctx.prefix_tokens:,} of "
            f"{ctx.tokens_used:,} tokens ({share:.0%}), reusable by a provider's prompt cache"
        )
    lines.append(f"assembled in {ctx.timing_ms:.2f} ms")
    return "\n".join(lines)


def _bar(ctx: AssembledContext, width: int) -> str:
    marks = "#=+*~-:.o"
    cells: list[str] = []
    total = max(ctx.tokens_available, 1)
    for index, tier in enumerate(sorted(ctx.tiers)):
        n = round(ctx.tiers[tier].tokens * width / total)
        cells.append(marks[index % len(marks)] * n)
    bar = "".join(cells)[:width]
    bar += " " * (width - len(bar))
    legend = " ".join(
        f"{marks[i % len(marks)]}={ctx.tiers[t].name}"
        for i, t in enumerate(sorted(ctx.tiers))
        if ctx.tiers[t].tokens
    )
    share = ctx.tokens_used / total
    return f"[{bar}] {share:.0%}  {legend}"
