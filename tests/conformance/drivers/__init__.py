"""One driver per door of the product (see `base`); `DRIVERS` names each one's module.

A driver module defines ``make(place: Place) -> Driver``. The suite's ``driver`` fixture
(tests/conformance/conftest.py) is parametrized over `DRIVERS`.
"""

from __future__ import annotations

__all__ = ["DRIVERS"]

DRIVERS: dict[str, str] = {
    # name: module under tests.conformance.drivers (added as each driver lands)
    "memory_sync": "memory_sync",
    "memory_async": "memory_async",
    "memory_rerank": "memory_rerank",
    "memory_rerank_async": "memory_rerank_async",
    "cli": "cli",
    "mcp_stdio": "mcp_stdio",
    "mcp_http": "mcp_http",
    "lc_middleware": "lc_middleware",
    "lc_middleware_async": "lc_middleware_async",
    "lc_middleware_values": "lc_middleware_values",
    "lc_budget_messages": "lc_budget_messages",
    "lc_retriever": "lc_retriever",
    "lc_retriever_async": "lc_retriever_async",
    "lc_chat_history": "lc_chat_history",
    "lc_compressor": "lc_compressor",
    "lc_compressor_async": "lc_compressor_async",
    "li_memory": "li_memory",
    "li_memory_async": "li_memory_async",
    "li_retriever": "li_retriever",
    "li_retriever_async": "li_retriever_async",
    "li_postprocessor": "li_postprocessor",
    "li_postprocessor_async": "li_postprocessor_async",
    "inspect_page": "inspect_page",
    "lg_store": "lg_store",
    "lg_store_async": "lg_store_async",
}
