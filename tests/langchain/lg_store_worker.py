"""A worker process of the side-by-side server test: `CtxBudgetStore` commands in, answers out.

Run as ``python -m tests.langchain.lg_store_worker URL COLLECTION USER_AT`` from the repository
root (USER_AT: a number, or ``-``). It loads the embedding model once, then reads one JSON line
per command: ``{"open": namespace}`` opens its own `ContextMemory` (and a `CtxBudgetStore` over
it) on the Chroma server at URL, ``{"close": true}`` closes it, and ``{"run": command,
"async": bool}`` runs a `lg_store_commands` command. Each answer is one line on stdout starting
with `REPLY`; an exception comes back as ``{"crash": traceback}``.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path
from typing import Any

REPLY = "@@reply "


def main(url: str, collection: str, user_at: str) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    sys.path.insert(0, str(Path(__file__).parent))
    from lg_store_commands import run

    from ctxbudget.embed.onnx import OnnxEmbedder
    from ctxbudget.memory.context import ContextMemory
    from ctxbudget.store.chroma_store import ChromaStore
    from langchain_ctxbudget.store import CtxBudgetStore

    embedder = OnnxEmbedder()
    embedder.embed_query("warm up")
    at = None if user_at == "-" else int(user_at)
    store: CtxBudgetStore | None = None

    def answer(reply: Any) -> None:
        sys.stdout.write(REPLY + json.dumps(reply) + "\n")
        sys.stdout.flush()

    answer({"ready": os.getpid()})
    for line in sys.stdin:
        command = json.loads(line)
        try:
            if "open" in command:
                chroma = ChromaStore(url=url, embedder=embedder, collection=collection)
                memory = ContextMemory(store=chroma, namespace=command["open"])
                store = CtxBudgetStore(memory, user_at=at)
                reply: Any = {}
            elif "close" in command:
                if store is not None:
                    store.memory.close()
                store = None
                reply = {}
            elif store is None:
                reply = {"crash": f"no store is open for {command}"}
            else:
                reply = {"answer": run(store, command["run"], use_async=command["async"])}
        except Exception:  # noqa: BLE001 - handed to the test, which fails with it
            reply = {"crash": traceback.format_exc()}
        answer(reply)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
