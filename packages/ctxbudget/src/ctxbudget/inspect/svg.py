"""Inline SVG drawn by the inspector itself: a budget bar by tier, and budget use over calls.

Nothing is fetched: each picture is an ``<svg>`` element written into the page. Every text in
a picture (a tier name, a tooltip) is escaped with `html.escape`; numbers are formatted here.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["TIER_COLOURS", "budget_bar", "tier_colour", "usage_chart"]

#: A fill colour per tier (the tiers of `ctxbudget.core.items.Tier`); others get grey.
TIER_COLOURS: dict[int, str] = {
    0: "#4c566a",  # SYSTEM
    10: "#5e81ac",  # QUERY
    15: "#8fbcbb",  # FILES
    20: "#b48ead",  # PINNED
    30: "#d08770",  # TOOLS
    40: "#88c0d0",  # RECENT
    50: "#a3be8c",  # RETRIEVED
    60: "#ebcb8b",  # ENTITY
    70: "#bf616a",  # SUMMARY
}


def tier_colour(tier: int) -> str:
    """The fill colour of ``tier``.

    >>> tier_colour(40)
    '#88c0d0'
    """
    return TIER_COLOURS.get(tier, "#999999")


def budget_bar(
    tiers: Sequence[Mapping[str, Any]], *, budget: int, used: int, width: int = 560
) -> str:
    """One assembly as a bar: each tier's tokens side by side, against its budget (the frame).

    ``tiers``: dicts with ``tier``, ``name`` and ``tokens``. The bar is scaled to the larger of
    the budget and what was used, so an over-budget call shows past the budget line.
    """
    scale = width / max(budget, used, 1)
    height = 18
    parts = []
    x = 0.0
    for entry in tiers:
        tokens = int(entry["tokens"])
        if tokens <= 0:
            continue
        w = tokens * scale
        title = html.escape(f"{entry['name']}: {tokens:,} tokens")
        parts.append(
            f'<rect x="{x:.1f}" y="1" width="{w:.1f}" height="{height}" '
            f'fill="{tier_colour(int(entry["tier"]))}"><title>{title}</title></rect>'
        )
        x += w
    limit = budget * scale
    label = html.escape(f"{used:,} of {budget:,} tokens")
    return (
        f'<svg class="bar" width="{width + 2}" height="{height + 2}" role="img" '
        f'aria-label="{label}" xmlns="http://www.w3.org/2000/svg">'
        f'<rect x="0" y="1" width="{limit:.1f}" height="{height}" fill="#eceff4" '
        f'stroke="#4c566a"/>{"".join(parts)}'
        f'<line x1="{limit:.1f}" x2="{limit:.1f}" y1="0" y2="{height + 2}" stroke="#2e3440" '
        f'stroke-width="2"/></svg>'
    )


def usage_chart(points: Sequence[tuple[int, int, int]], *, width: int = 720) -> str:
    """Budget use over a conversation: (call, tokens used, budget) per call, as a line chart.

    The solid line is the tokens used, the dashed one the budget; the y axis starts at 0.
    """
    height, pad = 200, 40
    if not points:
        return ""
    top = max(max(used, budget) for _, used, budget in points) or 1
    first, last = points[0][0], points[-1][0]
    span = max(last - first, 1)

    def xy(call: int, value: int) -> str:
        x = pad + (call - first) * (width - 2 * pad) / span
        y = height - pad + 10 - value * (height - pad) / top
        return f"{x:.1f},{y:.1f}"

    used_line = " ".join(xy(c, u) for c, u, _ in points)
    budget_line = " ".join(xy(c, b) for c, _, b in points)
    base = height - pad + 10
    return (
        f'<svg class="chart" width="{width}" height="{height + 10}" role="img" '
        f'aria-label="tokens used per call against the budget" '
        f'xmlns="http://www.w3.org/2000/svg">'
        f'<line x1="{pad}" y1="{base}" x2="{width - pad}" y2="{base}" stroke="#4c566a"/>'
        f'<line x1="{pad}" y1="10" x2="{pad}" y2="{base}" stroke="#4c566a"/>'
        f'<text x="2" y="16" font-size="11">{top:,}</text>'
        f'<text x="2" y="{base}" font-size="11">0</text>'
        f'<text x="{pad}" y="{base + 16}" font-size="11">call {first}</text>'
        f'<text x="{width - pad - 50}" y="{base + 16}" font-size="11">call {last}</text>'
        f'<polyline points="{budget_line}" fill="none" stroke="#bf616a" '
        f'stroke-dasharray="5,4"/>'
        f'<polyline points="{used_line}" fill="none" stroke="#5e81ac" stroke-width="2"/>'
        f'<text x="{width - pad - 150}" y="24" font-size="11" fill="#5e81ac">tokens used</text>'
        f'<text x="{width - pad - 70}" y="24" font-size="11" fill="#bf616a">budget</text>'
        "</svg>"
    )
