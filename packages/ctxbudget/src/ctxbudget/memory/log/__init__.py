"""The inclusion log: what every assembly offered and kept, analytics over it, access counts.

The log only reads: it imports policy and reading, never writing or upkeep.
"""

__all__: list[str] = []
