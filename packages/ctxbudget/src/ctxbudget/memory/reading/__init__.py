"""What one call reads and offers: the session's state and in-memory index, retrieval, candidates.

Imports policy (and entities), never writing's internals, the log or upkeep.
"""

__all__: list[str] = []
