"""How memory spends a budget: `MemoryConfig`, `Scoring`, strategies, presets, the per-call plan.

Imports nothing of reading, writing, the log or upkeep: policy is data and formulas.
"""

__all__: list[str] = []
