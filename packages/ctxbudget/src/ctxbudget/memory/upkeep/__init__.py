"""Upkeep of sessions: summaries, the task stack, forgetting."""

__all__: list[str] = []
