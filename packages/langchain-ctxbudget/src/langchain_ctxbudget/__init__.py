"""LangChain adapters for ctxbudget.

The adapters (middleware, retriever, compressor, chat history) land with their own issue; the
package exists now so that the monorepo layout is final.
"""

from __future__ import annotations

__all__: list[str] = []
