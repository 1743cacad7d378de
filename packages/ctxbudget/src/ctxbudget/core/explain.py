"""`AssembledContext.explain` and `AssembledContext.to_json`: an assembly's report.

`explain_context` writes it for people:

a line on the budget, a bar of what each tier used, a table per tier (offered, kept, cut,
tokens, the solver), then what was cut and why, what was truncated, images counted at their
most, how history was trimmed and the prefix shared with the previous call. `context_json`
writes it for machines: the figures, the included ids and the pruned ones with their reasons;
`context_document` is the fuller document of ``ctxbudget assemble --json`` and of the MCP
server's ``assemble`` tool (each item's tier and tokens too).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ctxbudget.core.items import ContextItem, tier_name
from ctxbudget.core.numbers import count
from ctxbudget.core.render import Layout
from ctxbudget.tokens.images import IMAGE_TOKENS_MAX

if TYPE_CHECKING:
    from ctxbudget.core.ids import ItemRef
    from ctxbudget.core.report import AssembledContext, PrunedItem
    from ctxbudget.tokens.counter import TokenCounter

__all__ = ["context_document", "context_json", "explain_context", "ref_fields"]


def explain_context(ctx: AssembledContext, *, width: int = 40, show_pruned: int = 12) -> str:
    """A per-tier table, a budget bar, and what was cut and why (`AssembledContext.explain`).

    Raises:
        ConfigurationError: ``width`` is not a positive int (at most 1,000 characters), or
            ``show_pruned`` is not an int of 0 or more.
    """
    width = count(width, "explain(width=)", most=1000, hint="the bar's characters, e.g. 40")
    show_pruned = count(
        show_pruned, "explain(show_pruned=)", least=0, most=None, hint="e.g. show_pruned=12"
    )
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


def context_json(ctx: AssembledContext) -> str:
    """`AssembledContext.to_json`: figures, included ids, and pruned ids with reasons."""
    return json.dumps(
        {
            **_figures(ctx),
            "included": ctx.included_ids,
            "included_refs": [_ref_json(ref) for ref in ctx.included_refs],
            "pruned": [_pruned_json(p) for p in ctx.pruned],
            "truncated": list(ctx.truncated),
            "estimated": ctx.estimated,
            "tiers": {
                u.name: {"offered": u.offered, "kept": u.kept, "tokens": u.tokens}
                for u in ctx.tiers.values()
            },
            "solvers": {
                tier_name(t): {"solver": s.solver, "value": s.value, "bound": s.upper_bound}
                for t, s in ctx.solvers.items()
            },
            "timing_ms": round(ctx.timing_ms, 3),
        },
        ensure_ascii=False,
    )


def _figures(ctx: AssembledContext) -> dict[str, Any]:
    """The figures both JSON reports open with: format, counter, tokens, the budget's parts."""
    return {
        "format": ctx.format,
        "counter": ctx.counter_name,
        "approximate": ctx.approximate,
        "tokens_used": ctx.tokens_used,
        "tokens_available": ctx.tokens_available,
        "window": ctx.budget.window,
        "reserve": ctx.budget.reserve,
        "safety": ctx.budget.safety,
    }


def _ref_json(ref: ItemRef) -> dict[str, Any]:
    return {"id": ref.id, "scope": None if ref.scope is None else list(ref.scope)}


def _pruned_json(entry: PrunedItem) -> dict[str, Any]:
    """A pruned item in `AssembledContext.to_json`: its id, reason, and the caller's ref."""
    out: dict[str, Any] = {"id": entry.item.id, "reason": entry.reason.value}
    ref = entry.item.ref
    if ref is not None:
        out["ref"] = _ref_json(ref)
    if entry.duplicate_of is not None:
        out["duplicate_of"] = entry.duplicate_of.id
    return out


def ref_fields(item: ContextItem) -> dict[str, Any]:
    """``record_id`` and ``scope`` of an item built from a record of another scope.

    Its ``id`` is qualified with the scope (``ctxbudget:session:["s3","s3-0011"]``); these
    name the caller's own id (``s3-0011``) and the scope (``["session", "s3"]``).
    """
    ref = item.ref
    if ref is None or ref.scope is None or ref.id == item.id:
        return {}
    return {"record_id": ref.id, "scope": list(ref.scope)}


def context_document(
    ctx: AssembledContext,
    counter: TokenCounter,
    *,
    session: str,
    namespace: str,
    warnings: Sequence[str],
    output: bool,
) -> dict[str, Any]:
    """The ``--json`` document of ``assemble`` (``output=True``) and ``explain``.

    Each item's ``tokens`` is what it costs in its section as rendered (``Layout.cost``, the
    figure packing used): section headers, date lines and the reply priming belong to no item,
    so the included items' tokens add up to at most ``tokens_used``.
    """
    layout = Layout(ctx.format, counter)

    def cost(item: ContextItem) -> int:
        return layout.cost(item, layout.section_of(item))

    document: dict[str, Any] = {
        "session": session,
        "namespace": namespace,
        **_figures(ctx),
        "included": [
            {
                "id": item.id,
                **ref_fields(item),
                "tier": tier_name(item.tier),
                "tokens": cost(item),
            }
            for item in ctx.included
        ],
        "pruned": [
            {
                "id": p.item.id,
                **ref_fields(p.item),
                "tier": tier_name(p.item.tier),
                "tokens": cost(p.item),
                "reason": p.reason.value,
                "detail": p.detail,
            }
            for p in ctx.pruned
        ],
        "tiers": {
            u.name: {"offered": u.offered, "kept": u.kept, "pruned": u.pruned, "tokens": u.tokens}
            for u in ctx.tiers.values()
        },
        "solvers": {
            tier_name(t): {"solver": s.solver, "value": s.value, "bound": s.upper_bound}
            for t, s in ctx.solvers.items()
        },
        "truncated": list(ctx.truncated),
        "estimated": ctx.estimated,
        "warnings": list(warnings),
        "timing_ms": round(ctx.timing_ms, 3),
    }
    if output:
        document["messages"] = ctx.to_messages()
        document["text"] = ctx.render() if ctx.format != "messages" else None
    return document
