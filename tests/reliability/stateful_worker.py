"""A worker process of the model-based server test: commands in, observations out, as JSON lines.

Run as ``python -m tests.reliability.stateful_worker URL COLLECTION`` from the repository root.
It loads the embedding model once, then reads one command per line from stdin:
``{"op": "open", "namespace": ..., "entities": ...}`` opens its own `ContextMemory` on the
Chroma server at URL (a fresh namespace per example), ``{"op": "close"}`` closes it, and any
other command is run by `tests.memory.stateful_runner.Runner`. Each answer is one line on
stdout starting with `REPLY` (libraries may print too); an exception comes back as
``{"crash": traceback}``.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from typing import Any

REPLY = "@@reply "


def main(url: str, collection: str) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    from ctxbudget.embed.onnx import OnnxEmbedder
    from ctxbudget.memory.context import ContextMemory
    from ctxbudget.memory.policy.config import MemoryConfig
    from ctxbudget.store.chroma_store import ChromaStore
    from tests.memory.stateful_runner import Runner

    embedder = OnnxEmbedder()
    embedder.embed_query("warm up")
    memory: ContextMemory | None = None
    runner: Runner | None = None

    def answer(reply: dict[str, Any]) -> None:
        sys.stdout.write(REPLY + json.dumps(reply) + "\n")
        sys.stdout.flush()

    answer({"ready": os.getpid()})
    for line in sys.stdin:
        command = json.loads(line)
        try:
            if command["op"] == "open":
                store = ChromaStore(url=url, embedder=embedder, collection=collection)
                config = MemoryConfig(entities=command["entities"])
                memory = ContextMemory(store=store, namespace=command["namespace"], config=config)
                runner = Runner(memory)
                reply: dict[str, Any] = {}
            elif command["op"] == "close":
                if memory is not None:
                    memory.close()
                memory = runner = None
                reply = {}
            elif runner is None:
                reply = {"crash": f"no memory is open for {command}"}
            else:
                reply = runner.run(command)
        except Exception:  # noqa: BLE001 - handed to the test, which fails with it
            reply = {"crash": traceback.format_exc()}
        answer(reply)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
