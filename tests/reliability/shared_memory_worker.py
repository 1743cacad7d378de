"""A worker process with one `ContextMemory` on a Chroma server: JSON commands in, JSON lines out.

Run as ``python -m tests.reliability.shared_memory_worker URL COLLECTION`` from the repository
root and driven by `tests.worker_process.Worker` (used by
tests/reliability/test_first_write_across_processes.py and
tests/reliability/test_elsewhere_across_processes.py). It loads the embedding model once, then
runs one command per line; each answer is one line starting with `REPLY`, an exception comes
back as ``{"crash": traceback}``. Every warning logged by ctxbudget is kept until the
``warnings`` command hands them over.

Commands (``op``):

- ``open``: ``namespace``, ``write_behind`` (False, or a journal folder), ``other_sessions``.
- ``add``: ``session``, ``messages``, ``user_id``, ``first_write_wins``; with ``start`` (a
  path), waits until that file exists first, so that two workers write at the same moment.
- ``flush``, ``close``, ``warnings`` (and forget them).
- ``history``: ``session`` -> ``messages`` as ``[id, role, text, user_id]``.
- ``assemble``: ``session``, ``query``, ``user_id``, ``budget`` -> ``included`` and ``pruned``
  as ``[id, text]``.
- ``delete_user``: ``user_id`` -> ``removed``.
- ``documents``: ``texts``, ``collection`` -> ``ids`` (`ContextMemory.add_documents`).
- ``agent``: ``session``, ``user_id``, ``text``, ``fresh``: one turn of a LangChain agent with
  `CtxBudgetMiddleware` over the memory and the recording fake chat model (``fresh``: a new
  conversation state) -> ``sent``, the texts the model received on that turn.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import sys
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPLY = "@@shared-memory "


class _Kept(logging.Handler):
    """Keeps the message of every warning (and worse) logged under ``ctxbudget``."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def _replies() -> Iterator[Any]:
    from langchain_core.messages import AIMessage

    for number in itertools.count():
        yield AIMessage(f"Reply {number}: noted.")


def main(url: str, collection: str) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    from ctxbudget.embed.onnx import OnnxEmbedder
    from ctxbudget.memory.context import ContextMemory
    from ctxbudget.memory.policy.config import MemoryConfig
    from ctxbudget.store.chroma_store import ChromaStore

    kept = _Kept()
    logging.getLogger("ctxbudget").addHandler(kept)
    embedder = OnnxEmbedder()
    embedder.embed_query("warm up")
    memory: ContextMemory | None = None
    agent: Any = None
    model: Any = None
    state: list[Any] = []

    def answer(reply: dict[str, Any]) -> None:
        sys.stdout.write(REPLY + json.dumps(reply) + "\n")
        sys.stdout.flush()

    def opened() -> ContextMemory:
        if memory is None:
            msg = "no memory is open"
            raise RuntimeError(msg)
        return memory

    def agent_turn(command: dict[str, Any]) -> list[str]:
        nonlocal agent, model, state
        from langchain.agents import create_agent
        from langchain_core.messages import HumanMessage

        from langchain_ctxbudget import CtxBudgetMiddleware
        from tests.lc_fakes import RecordingChatModel

        if agent is None or command["fresh"]:
            model = RecordingChatModel(messages=_replies())
            middleware = CtxBudgetMiddleware(
                model="gpt-4o",
                budget=command.get("budget", 2000),
                memory=opened(),
                session_id=command["session"],
                user_id=command["user_id"],
            )
            agent = create_agent(model, middleware=[middleware])
            state = []
        question = HumanMessage(command["text"])
        state = list(agent.invoke({"messages": [*state, question]})["messages"])
        return [str(m.content) for m in model.calls[-1][0]]

    answer({"ready": os.getpid()})
    for line in sys.stdin:
        command = json.loads(line)
        op = command["op"]
        try:
            reply: dict[str, Any] = {}
            if op == "open":
                store = ChromaStore(url=url, embedder=embedder, collection=collection)
                memory = ContextMemory(
                    store=store,
                    namespace=command["namespace"],
                    write_behind=command["write_behind"],
                    config=MemoryConfig(other_sessions=command["other_sessions"]),
                )
            elif op == "close":
                opened().close()
                memory = agent = model = None
            elif op == "add":
                start = command.get("start")
                while start is not None and not Path(start).exists():
                    time.sleep(0.0005)
                ids = opened().add_messages(
                    command["session"],
                    command["messages"],
                    user_id=command["user_id"],
                    progress=False,
                    first_write_wins=command["first_write_wins"],
                )
                reply = {"ids": ids}
            elif op == "flush":
                opened().flush()
            elif op == "warnings":
                reply = {"warnings": list(kept.messages)}
                kept.messages.clear()
            elif op == "history":
                found = opened().history(command["session"])
                reply = {"messages": [[r.id, r.role, r.text, r.user_id] for r in found]}
            elif op == "assemble":
                ctx = opened().assemble(
                    command["session"],
                    command["query"],
                    user_id=command["user_id"],
                    budget=command.get("budget", 2000),
                )
                reply = {
                    "included": [[i.id, i.text] for i in ctx.included],
                    "pruned": [[p.item.id, p.item.text] for p in ctx.pruned],
                }
            elif op == "documents":
                ids = opened().add_documents(command["texts"], collection=command["collection"])
                reply = {"ids": list(ids)}
            elif op == "delete_user":
                reply = {"removed": opened().delete_user(command["user_id"])}
            elif op == "agent":
                reply = {"sent": agent_turn(command)}
            else:
                reply = {"crash": f"unknown command {command}"}
        except Exception:  # noqa: BLE001 - handed to the test, which fails with it
            reply = {"crash": traceback.format_exc()}
        answer(reply)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
