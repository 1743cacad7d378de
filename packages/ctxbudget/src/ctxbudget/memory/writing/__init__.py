"""How a message, pinned fact or document is acknowledged, journaled, embedded and stored."""

__all__: list[str] = []
