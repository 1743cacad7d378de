"""The scene of the adapters' rerank tests (LangChain and LlamaIndex): one memory, one session.

The session is a dozen chatty lines about the weekend and one line of evidence (``EVIDENCE``)
that plain retrieval leaves out of a small budget for ``QUERY``; a reranker favouring it
brings it in.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence

from ctxbudget.memory.context import ContextMemory
from ctxbudget.memory.policy.config import MemoryConfig
from ctxbudget.store.chroma_store import ChromaStore

__all__ = ["EVIDENCE", "QUERY", "TOPICS", "LoopBound", "memory", "session_of"]

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


class LoopBound:
    """An async reranker whose client is bound to the app's event loop; it favours ``EVIDENCE``.

    Each call sends its texts through one lock, several at once (as a client holding one
    connection does), so the lock is contended: asyncio binds it to the loop of its first
    contention, and on any other loop it raises ``RuntimeError: ... is bound to a different
    event loop``. `bind` contends it in the running loop (the app's) first. ``loops`` holds the
    loop of each call.
    """

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.loops: list[asyncio.AbstractEventLoop] = []

    async def bind(self) -> None:
        """Contend the lock in the running loop: from now on it works there only."""
        await asyncio.gather(self._send(""), self._send(""))

    async def _send(self, text: str) -> float:
        async with self.lock:
            await asyncio.sleep(0)
            return 1.0 if text == EVIDENCE else 0.0

    async def __call__(self, query: str, texts: Sequence[str]) -> list[float]:
        self.loops.append(asyncio.get_running_loop())
        return list(await asyncio.gather(*(self._send(t) for t in texts)))
