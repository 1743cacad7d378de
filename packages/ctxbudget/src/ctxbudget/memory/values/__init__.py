"""Keyed values: JSON under a namespace tuple and a key, beside the memory's messages.

What LangGraph's ``BaseStore`` keeps (``langchain_ctxbudget.store.CtxBudgetStore`` is a thin
adapter over it): `ContextMemory.put_value`, ``get_value``, ``search_values`` (by meaning and
words, by filter), ``list_value_namespaces``, ``delete_value``, ``sweep_values`` (`api`);
`StoredValue`, `ValuePut`, `ValueQuery` and the checks of a value (`model`); the filter and
namespace match rules (`matching`); the store's side is `ctxbudget.store.values`.
"""

from __future__ import annotations

from ctxbudget.memory.values.model import StoredValue, ValuePut, ValueQuery

__all__ = ["StoredValue", "ValuePut", "ValueQuery"]
