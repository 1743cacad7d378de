"""The assembler: pure functions of items, a budget and a token counter (tiktoken + numpy only).

Where things happen:

- `items`: `ContextItem`, `Tier`, `Shrink`: what callers offer.
  `stored`: `stored_item`, the same item built at search speed (hundreds a call).
- `budget`: `Budget`: window, reserve, per-tier floors and caps.
- `history`: where history is trimmed: whole exchanges, tool calls with their results;
  `trimming`: cut in steps, so consecutive calls share a cached prefix (`prefix` measures it).
- `packing`: the knapsack that picks what fits; `dedupe`: near-duplicates.
- `tiers`: one packing pass, tier by tier, within floors and caps; `accounting`: its accounts.
- `summaries`: what stands in for pruned items, and truncating or summarizing what did not fit;
  `lines`: cutting at line boundaries, with a marker naming the lines left out.
- `render`, `rows`, `readback`: the text and message formats, and reading them back.
- `fit`: the exact count of the rendered output, and what goes when it is over.
- `report`: `AssembledContext`: what was included, what was pruned and why.
- `assemble`: `ContextAssembler`, which runs all of the above.
- `ids`, `toolcalls`, `tool_schemas`: the id, tool-call and tool-schema conventions every
  layer shares.
"""

from __future__ import annotations

from ctxbudget.core.assemble import ContextAssembler
from ctxbudget.core.budget import Budget
from ctxbudget.core.items import ContextItem, Shrink, Tier
from ctxbudget.core.packing import SolverReport
from ctxbudget.core.report import AssembledContext, PrunedItem, PruneReason, TierUsage
from ctxbudget.core.summaries import ExtractiveSummarizer, Summarizer
from ctxbudget.core.trimming import TrimReport

__all__ = [
    "AssembledContext",
    "Budget",
    "ContextAssembler",
    "ContextItem",
    "ExtractiveSummarizer",
    "PruneReason",
    "PrunedItem",
    "Shrink",
    "SolverReport",
    "Summarizer",
    "Tier",
    "TierUsage",
    "TrimReport",
]
