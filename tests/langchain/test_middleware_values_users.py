"""One user's saved values never reach another user's run (`CtxBudgetMiddleware(values=...)`).

A real ``create_agent`` with the middleware and ``values=("memories", "{user_id}")`` over an
embedded memory (the real embedding model); the chat model is the suite's fake, which records
what it received. The first user has many saved values (small to several hundred tokens, all
matching the question, under a roomy budget: each would fit); the second user (another name, or
one that differs only by case, a look-alike letter, a suffix or a slash), with or without values
of their own under the same keys, asks the same question in the same agent, right after (the
middleware keeps a question's candidates between calls), again, and async. Nothing the model
receives for the second user holds any of the first user's values, and the second's report offers
only the second's. The conformance suite's ``lc_middleware_values`` door runs the other promises
with saved values present; the suite has no promise across users, so this is here.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from lc_fakes import RecordingChatModel

from ctxbudget.core.items import Tier
from ctxbudget.memory.context import ContextMemory
from langchain_ctxbudget import CtxBudgetMiddleware

VALUES = ("memories", "{user_id}")
QUESTION = "What do you remember about my trips to Lisbon, my cello and my garden?"
SIZES = (3, 12, 40, 120, 300, 600)
WORDS = "lisbon trip cello garden train coffee piano winter market river".split()
PAIRS = [
    ("ana", "bo"),
    ("ana", "Ana"),
    ("ana", "\u0430na"),  # a Cyrillic "а"
    ("ana", "ana-2"),
    ("ana", "ana/x"),
]
_TAGS = itertools.count()


def put_values(memory: ContextMemory, user: str) -> dict[str, str]:
    """Values of every size for ``user``, each with a unique tag; their texts by key."""
    texts: dict[str, str] = {}
    for n, size in enumerate(SIZES):
        words = " ".join(WORDS[(n + i) % len(WORDS)] for i in range(size))
        texts[f"fact-{n}"] = f"saved t{next(_TAGS):05d}x {words}"
        memory.put_value(
            (VALUES[0], user), f"fact-{n}", {"content": texts[f"fact-{n}"]}, user_id=user
        )
    return texts


def received(model: RecordingChatModel, since: int) -> str:
    """Everything the model received from call ``since`` on, as one text."""
    return "\n".join(str(m.content) for sent, _ in model.calls[since:] for m in sent)


def saved_namespaces(middleware: CtxBudgetMiddleware, thread: str) -> set[tuple[str, ...]]:
    context = middleware.last_context(thread)
    assert context is not None
    return {tuple(it.metadata["namespace"]) for it in context.included if it.tier == Tier.SAVED}


def run(agent: Any, user: str, thread: str, *, use_async: bool = False) -> None:
    state = {"messages": [HumanMessage(QUESTION)]}
    config = {"configurable": {"thread_id": thread, "user_id": user}}
    if use_async:
        asyncio.run(agent.ainvoke(state, config))
    else:
        agent.invoke(state, config)


@pytest.mark.parametrize("own", [False, True], ids=["no-own-values", "own-values"])
@pytest.mark.parametrize(("first", "second"), PAIRS, ids=[f"{a}|{b}" for a, b in PAIRS])
def test_a_users_saved_values_never_reach_another_users_run(
    memory: ContextMemory, first: str, second: str, own: bool
) -> None:
    secrets = put_values(memory, first)
    mine = put_values(memory, second) if own else {}
    model = RecordingChatModel(messages=iter([AIMessage("Noted.")] * 8))
    middleware = CtxBudgetMiddleware(model="gpt-4o", budget=8000, memory=memory, values=VALUES)
    agent = create_agent(model, middleware=[middleware])

    run(agent, first, "t-first")
    offered = [t for t in secrets.values() if t in received(model, 0)]
    assert len(offered) >= 3, "the first user's own run gets their values (else nothing is tested)"
    assert saved_namespaces(middleware, "t-first") == {(VALUES[0], first)}

    since = len(model.calls)
    for thread, use_async in [("t-second", False), ("t-second", False), ("t-second-b", True)]:
        run(agent, second, thread, use_async=use_async)
        leaked = [t for t in secrets.values() if t in received(model, since)]
        assert not leaked, f"{second!r}'s run received {len(leaked)} of {first!r}'s values"
        assert saved_namespaces(middleware, thread) <= {(VALUES[0], second)}
    if own:
        assert any(t in received(model, since) for t in mine.values())
