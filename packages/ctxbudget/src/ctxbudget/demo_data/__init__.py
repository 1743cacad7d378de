"""Sample conversation and notes for `ctxbudget demo`, written by the ctxbudget project (MIT)."""

from __future__ import annotations

__all__: list[str] = []
