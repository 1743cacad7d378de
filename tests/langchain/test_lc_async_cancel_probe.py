"""`CtxBudgetMiddleware`'s async path (``agent.ainvoke``) cancelled, timed out, closed, at once.

Turns timed out at several points and retried with the same message ids are stored once per
session, and no model call carries another thread's turns; closing the memory while turns run
ends each with its answer or `MemoryClosedError`; one turn sent six times at once (half of them
cancelled) is stored once; a session deleted while the model answers stays deleted. The only
fake is the chat model (a slow async `RecordingChatModel`).
"""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatResult
from lc_fakes import RecordingChatModel

from ctxbudget import MemoryClosedError
from ctxbudget.embed.local import LocalEmbedder
from ctxbudget.memory.context import ContextMemory
from langchain_ctxbudget import CtxBudgetMiddleware


class SlowModel(RecordingChatModel):
    delay: float = 0.05

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        await asyncio.sleep(self.delay)
        return self._generate(messages, stop=stop, **kwargs)


def replies() -> Any:
    return (AIMessage(f"reply {n}") for n in itertools.count())


async def test_cancelled_turns_retried_with_their_ids_are_stored_once_per_session(
    tmp_path: Path, embedder: LocalEmbedder
) -> None:
    memory = ContextMemory(tmp_path / "chroma", embedder=embedder)
    middleware = CtxBudgetMiddleware(model="gpt-4o", budget=3000, memory=memory)
    model = SlowModel(messages=replies(), delay=0.02)
    agent = create_agent(model, middleware=[middleware])

    async def chat(thread: str) -> list[str]:
        config: Any = {"configurable": {"thread_id": thread, "user_id": "ana"}}
        state: list[BaseMessage] = []
        for n in range(5):
            turn = HumanMessage(f"{thread} question {n} about trams", id=f"{thread}-h{n}")
            try:
                out = await asyncio.wait_for(
                    agent.ainvoke({"messages": [*state, turn]}, config), (0.001, 0.03, 5)[n % 3]
                )
            except TimeoutError:
                out = await asyncio.wait_for(
                    agent.ainvoke({"messages": [*state, turn]}, config), 60
                )
            state = out["messages"]
        return [str(m.id) for m in state]

    threads = [f"t{k}" for k in range(4)]
    finals = await asyncio.wait_for(asyncio.gather(*(chat(t) for t in threads)), 180)
    await memory.aclose()
    reopened = ContextMemory(tmp_path / "chroma", embedder=embedder)
    for thread, ids in zip(threads, finals, strict=True):
        stored = [r.id for r in reopened.history(thread)]
        assert [i for i, c in Counter(stored).items() if c > 1] == [], thread
        assert [i for i in ids if i not in stored] == [], thread
        texts = [r.text for r in reopened.history(thread)]
        assert not [t for t in texts if "question" in t and not t.startswith(thread)], thread
    reopened.close()
    for sent, _ in model.calls:
        owners = {m.text.split()[0] for m in sent if isinstance(m, HumanMessage)}
        assert len(owners) == 1, owners


async def test_closing_the_memory_while_turns_run_ends_them_with_memory_closed(
    tmp_path: Path, embedder: LocalEmbedder
) -> None:
    memory = ContextMemory(tmp_path / "chroma", embedder=embedder)
    middleware = CtxBudgetMiddleware(model="gpt-4o", budget=3000, memory=memory)
    agent = create_agent(SlowModel(messages=replies(), delay=0.01), middleware=[middleware])
    turns = [
        asyncio.ensure_future(
            agent.ainvoke(
                {"messages": [HumanMessage(f"t{k} hello", id=f"t{k}-h0")]},
                {"configurable": {"thread_id": f"t{k}"}},
            )
        )
        for k in range(6)
    ]
    await asyncio.sleep(0.05)
    await asyncio.wait_for(memory.aclose(), 60)
    ended = await asyncio.wait_for(asyncio.gather(*turns, return_exceptions=True), 60)
    odd = [
        e for e in ended if isinstance(e, BaseException) and not isinstance(e, MemoryClosedError)
    ]
    assert odd == []
    reopened = ContextMemory(tmp_path / "chroma", embedder=embedder)
    for k, e in enumerate(ended):
        if not isinstance(e, BaseException):
            stored = [r.id for r in reopened.history(f"t{k}")]
            assert f"t{k}-h0" in stored
    reopened.close()


async def test_the_same_turn_sent_at_once_many_times_is_stored_once(
    tmp_path: Path, embedder: LocalEmbedder
) -> None:
    memory = ContextMemory(tmp_path / "chroma", embedder=embedder)
    seen: list[Any] = []
    middleware = CtxBudgetMiddleware(
        model="gpt-4o", budget=3000, memory=memory, on_context=seen.append
    )
    model = SlowModel(messages=replies(), delay=0.01)
    agent = create_agent(model, middleware=[middleware])
    config: Any = {"configurable": {"thread_id": "t1", "user_id": "ana"}}
    state: list[BaseMessage] = [HumanMessage("first about trams", id="h0")]
    state = (await agent.ainvoke({"messages": state}, config))["messages"]
    turn = [*state, HumanMessage("second about trams", id="h1")]
    tasks = [asyncio.ensure_future(agent.ainvoke({"messages": turn}, config)) for _ in range(6)]
    for n, task in enumerate(tasks):
        if n % 2:
            await asyncio.sleep(0.002)
            task.cancel()
    await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 60)
    await memory.aclose()
    reopened = ContextMemory(tmp_path / "chroma", embedder=embedder)
    stored = [r.id for r in reopened.history("t1")]
    reopened.close()
    assert [i for i, c in Counter(stored).items() if c > 1] == []
    assert "h0" in stored and "h1" in stored


async def test_a_session_deleted_while_the_model_answers_stays_deleted_async(
    tmp_path: Path, embedder: LocalEmbedder
) -> None:
    memory = ContextMemory(tmp_path / "chroma", embedder=embedder)
    middleware = CtxBudgetMiddleware(model="gpt-4o", budget=3000, memory=memory)
    model = SlowModel(messages=replies(), delay=0.3)
    agent = create_agent(model, middleware=[middleware])
    config: Any = {"configurable": {"thread_id": "t1", "user_id": "ana"}}
    state = (await agent.ainvoke({"messages": [HumanMessage("old about trams", id="h0")]}, config))[
        "messages"
    ]
    turn = [*state, HumanMessage("new about trams", id="h1")]
    running = asyncio.ensure_future(agent.ainvoke({"messages": turn}, config))
    await asyncio.sleep(0.15)  # the model is answering
    await memory.adelete_session("t1")
    out = await asyncio.wait_for(running, 60)
    await memory.aclose()
    reopened = ContextMemory(tmp_path / "chroma", embedder=embedder)
    stored = [r.id for r in reopened.history("t1")]
    reopened.close()
    assert stored == [str(out["messages"][-1].id)]
