"""The scene of the adapters' rerank tests (LangChain and LlamaIndex): one memory, one session.

The session is a dozen chatty lines about the weekend and one line of evidence (``EVIDENCE``)
that plain retrieval leaves out of a small budget for ``QUERY``; a reranker favouring it
brings it in.
"""

from __future__ import annotations

import uuid

from ctxbudget.memory.context import ContextMemory
from ctxbudget.memory.policy.config import MemoryConfig
from ctxbudget.store.chroma_store import ChromaStore

__all__ = ["EVIDENCE", "QUERY", "TOPICS", "memory", "session_of"]

EVIDENCE = "Melanie painted a sunrise over the lake last summer"
TOPICS = "soup trains bikes rain guitars tea hills cakes rivers cats Porto Lisbon jobs".split()
QUERY = "what did she do on the weekend with friends"


def memory(store: ChromaStore, reranker: object = None) -> ContextMemory:
    """A memory over ``store`` that reranks with ``reranker`` (None: no reranking)."""
    config = MemoryConfig(recent_messages=4, reranker=reranker)
    return ContextMemory(store=store, config=config, write_behind=False, inclusion_log=False)


def session_of(mem: ContextMemory) -> str:
    """A new session of the chatty lines, the evidence second; its id."""
    texts = [f"We talked about {t} and the weekend plans with friends again" for t in TOPICS]
    session = f"s-{uuid.uuid4().hex[:12]}"
    mem.add_messages(
        session,
        [
            {"role": "user" if i % 2 == 0 else "assistant", "content": text}
            for i, text in enumerate([texts[0], EVIDENCE, *texts[1:]])
        ],
        progress=False,
    )
    return session
