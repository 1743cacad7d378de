"""The commands of the model-based memory tests, run on one `ContextMemory`, as plain data.

A command is a JSON-ready dict (``{"op": "assemble", "session": "s1", ...}``); `Runner.run`
performs it on its memory (or through an adapter on top of it: the LangChain chat history, the
LlamaIndex memory) and returns what was observed as JSON-ready data too, so the same commands
run in this process (several objects on one embedded folder) and in worker processes on one
Chroma server (`tests/reliability/stateful_worker.py`), and `tests/memory/stateful_model.py`
checks both the same way.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ctxbudget.core.report import AssembledContext
from ctxbudget.errors import SessionOwnerError, StoreInputError
from ctxbudget.memory.context import ContextMemory
from ctxbudget.store.records import Record

Observation = dict[str, Any]

BUDGET = 8000
"""Tokens of every assembly: far more than a model's sessions hold, so everything fits."""


def observe_context(ctx: AssembledContext) -> Observation:
    """What an assembly offered, kept and left out, its tier figures and prefix."""
    return {
        "included": [[it.id, int(it.tier), it.text, it.source] for it in ctx.included],
        "pruned": [[p.item.id, int(p.item.tier), p.item.text, p.reason.value] for p in ctx.pruned],
        "tiers": {str(t): [u.offered, u.kept, u.pruned] for t, u in ctx.tiers.items()},
        "tokens_used": ctx.tokens_used,
        "tokens_available": ctx.tokens_available,
        "prefix_tokens": ctx.prefix_tokens,
    }


def _record(record: Record) -> list[Any]:
    return [record.kind, record.session_id, record.user_id, record.id, record.text, record.role]


class Runner:
    """Runs commands on one `ContextMemory` (see the module docstring)."""

    def __init__(self, memory: ContextMemory) -> None:
        self.memory = memory

    def run(self, command: dict[str, Any]) -> Observation:
        """Perform ``command``; a refused input comes back as ``{"error": ...}``."""
        args = dict(command)
        handler: Callable[..., Observation] = getattr(self, "op_" + args.pop("op"))
        try:
            observed = handler(**args)
        except StoreInputError as exc:
            return {"error": type(exc).__name__, "message": str(exc)}
        except SessionOwnerError as exc:  # the LlamaIndex door keeps a session to its owner
            return {"owner_refused": exc.owner, "door": args.get("via")}
        return json.loads(json.dumps(observed))  # the same data a worker process sends

    # -- writes ------------------------------------------------------------------------------
    def op_flush(self) -> Observation:
        self.memory.flush()
        return {}

    def op_add(
        self, session: str, user: str, messages: list[dict[str, Any]], via: str
    ) -> Observation:
        memory = self.memory
        if via == "langchain":
            from langchain_core.messages import AIMessage, HumanMessage

            from langchain_ctxbudget import CtxBudgetChatMessageHistory

            kinds = {"user": HumanMessage, "assistant": AIMessage}
            history = CtxBudgetChatMessageHistory(memory, session, user_id=user)
            history.add_messages([kinds[m["role"]](m["text"], id=m["id"]) for m in messages])
            return {"ids": [m["id"] for m in messages]}
        if via == "llamaindex":
            from llama_index.core.base.llms.types import ChatMessage

            before = len(memory.history(session))
            chat = self._llama(session, user)
            chat.put_messages([ChatMessage(role=m["role"], content=m["text"]) for m in messages])
            # LlamaIndex messages carry no id: the memory gives each a new one.
            return {"ids": [r.id for r in memory.history(session)][before:]}
        ids = memory.add_messages(session, messages, user_id=user, progress=False)
        return {"ids": ids}

    def op_replace(self, session: str, id: str, text: str, role: str, user: str) -> Observation:  # noqa: A002
        self.memory.flush()
        record = Record(
            id=id,
            kind="message",
            text=text,
            namespace=self.memory.namespace,
            session_id=session,
            user_id=user,
            role=role,
        )
        self.memory.store.add([record], replace=True)
        return {}

    def op_delete_message(self, session: str, id: str) -> Observation:  # noqa: A002
        self.memory.flush()
        store = self.memory.store
        return {"count": store.delete([id], namespace=self.memory.namespace, session_id=session)}

    def op_pin(self, id: str, text: str, session: str | None, user: str | None) -> Observation:  # noqa: A002
        return {"id": self.memory.pin(session, text, user_id=user, id=id)}

    def op_unpin(self, id: str, session: str | None, user: str | None) -> Observation:  # noqa: A002
        return {"result": self.memory.unpin(id, session_id=session, user_id=user)}

    def op_clear(self, session: str, pins: bool, via: str) -> Observation:
        if via == "langchain":
            from langchain_ctxbudget import CtxBudgetChatMessageHistory

            CtxBudgetChatMessageHistory(self.memory, session).clear(pins=pins)
            return {}
        if via == "llamaindex":
            self._llama(session, None).clear(pins=pins)
            return {}
        return {"count": self.memory.clear(session, pins=pins)}

    def op_delete_session(self, session: str) -> Observation:
        return {"count": self.memory.delete_session(session)}

    def op_delete_user(self, user: str) -> Observation:
        return {"count": self.memory.delete_user(user)}

    def op_summarize(self, session: str) -> Observation:
        return {"ids": self.memory.summarize(session, keep_recent=0, stretch=2)}

    # -- reads -------------------------------------------------------------------------------
    def op_assemble(
        self, session: str, query: str, user: str | None, other_sessions: bool | None, via: str
    ) -> Observation:
        if via == "llamaindex":
            chat = self._llama(session, user)
            chat.get(query)
            context = chat.last_context
            if context is None:  # pragma: no cover - get always sets it
                msg = "CtxBudgetMemory.get left no last_context"
                raise AssertionError(msg)
            return observe_context(context)
        ctx = self.memory.assemble(
            session, query, budget=BUDGET, user_id=user, other_sessions=other_sessions
        )
        return observe_context(ctx)

    def op_candidates(
        self, session: str, query: str, user: str | None, other_sessions: bool | None
    ) -> Observation:
        found = self.memory.candidates(
            session, query, budget=BUDGET, user_id=user, other_sessions=other_sessions
        )
        items = [[it.id, int(it.tier), it.text, it.source] for it in found.items]
        return {"items": items, "user_id": found.user_id}

    def op_history(self, session: str, limit: int | None, via: str) -> Observation:
        if via == "langchain":
            from langchain_ctxbudget import CtxBudgetChatMessageHistory

            messages = CtxBudgetChatMessageHistory(self.memory, session).messages
            return {"messages": [[m.id, m.content] for m in messages]}
        if via == "llamaindex":
            texts = [m.content for m in self._llama(session, None).get_all()]
            return {"texts": texts}
        records = self.memory.history(session, limit=limit)
        return {"records": [_record(r) for r in records]}

    def op_search(
        self, query: str, session: str | None, user: str | None, messages_only: bool
    ) -> Observation:
        kinds = ("message",) if messages_only else None
        hits = self.memory.search(query, k=20, kinds=kinds, session_id=session, user_id=user)
        return {"hits": [_record(h.hit.record) for h in hits]}

    def op_contexts(self, session: str) -> Observation:
        records = self.memory.contexts(session)
        logged = [[r.user_id, [[e.id, e.tier] for e in r.included]] for r in records]
        return {"records": logged, "access": self.memory.access_counts(session)}

    def op_entities(self, session: str) -> Observation:
        found = self.memory.entities(session)
        return {"entities": [[e.name, e.mentions, list(e.turns)] for e in found]}

    def _llama(self, session: str, user: str | None) -> Any:
        from llama_index.ctxbudget import CtxBudgetMemory

        return CtxBudgetMemory(
            memory=self.memory, token_limit=BUDGET, session_id=session, user_id=user
        )
