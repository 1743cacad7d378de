"""The LangChain door, async: `lc_middleware`'s driver running the agent with ``ainvoke``.

The driver's verbs are sync; each run is awaited on the driver's own event loop.
"""

from __future__ import annotations

from .base import Place
from .lc_middleware import MiddlewareDriver

__all__ = ["make"]


def make(place: Place) -> MiddlewareDriver:
    """The async driver (``ainvoke``, ``awrap_model_call``, ``aafter_agent``)."""
    return MiddlewareDriver(place, run_async=True)
