"""Two writers on one session (a user's two tabs, two workers): each tool step is still sent whole.

The store keeps a session's messages in the order they arrived, so the other writer's message can
land between an assistant message that calls a tool and its result. The agent's next `get()`
must still send its own call with its result right after it (not drop both as orphans and
leave the agent without the result it asked for), and so must every later `get()`.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock

from ctxbudget import PruneReason
from ctxbudget.memory.context import ContextMemory
from ctxbudget.testing import ChromaServer
from llama_index.ctxbudget import CtxBudgetEmbedding, CtxBudgetMemory

from .helpers import assistant, user


def tool_call(call_id: str) -> ChatMessage:
    block = ToolCallBlock(tool_call_id=call_id, tool_name="lookup", tool_kwargs={"q": call_id})
    return ChatMessage(role=MessageRole.ASSISTANT, blocks=[block])


def tool_result(call_id: str) -> ChatMessage:
    kwargs = {"tool_call_id": call_id, "name": "lookup"}
    return ChatMessage(role=MessageRole.TOOL, content=f"result {call_id}", additional_kwargs=kwargs)


def steps(messages: list[ChatMessage]) -> list[str]:
    """Each message as ``role:what`` (the call id for calls and results)."""
    out = []
    for m in messages:
        calls = [b.tool_call_id for b in m.blocks if isinstance(b, ToolCallBlock)]
        calls += [c["id"] for c in (m.additional_kwargs or {}).get("tool_calls") or []]
        what = ",".join(calls) or m.additional_kwargs.get("tool_call_id") or m.content
        out.append(f"{m.role.value}:{what}")
    return out


@pytest.fixture(params=["embedded", pytest.param("server", marks=pytest.mark.integration)])
def two_workers(
    request: pytest.FixtureRequest, context_memory: ContextMemory, embedding: CtxBudgetEmbedding
) -> Iterator[tuple[ContextMemory, ContextMemory]]:
    """Two workers' memories: one embedded store shared, or two objects on one Chroma server."""
    if request.param == "embedded":
        yield context_memory, context_memory
        return
    server: ChromaServer = request.getfixturevalue("chroma_server")
    first = ContextMemory(chroma_url=server.url, embedder=embedding)
    second = ContextMemory(chroma_url=server.url, embedder=embedding)
    yield first, second
    first.close()
    second.close()


def test_a_tool_step_split_by_another_writer_is_sent_whole(
    two_workers: tuple[ContextMemory, ContextMemory],
) -> None:
    one, two = two_workers
    session = f"s-{uuid.uuid4().hex[:8]}"
    tab_a = CtxBudgetMemory.from_defaults(memory=one, session_id=session, token_limit=3000)
    tab_b = CtxBudgetMemory.from_defaults(memory=two, session_id=session, token_limit=3000)
    tab_a.put(user("question A"))
    tab_a.put(tool_call("cA"))
    one.flush()
    tab_b.put(user("question B"))  # the other tab's message lands between call and result
    two.flush()
    tab_a.put(tool_result("cA"))

    sent = steps(tab_a.get())
    assert sent[:3] == ["user:question A", "assistant:cA", "tool:cA"], sent
    assert "user:question B" in sent

    tab_a.put(assistant("answer A"))
    tab_b.put(tool_call("cB"))
    tab_b.put(tool_result("cB"))
    tab_b.put(assistant("answer B"))
    one.flush()
    two.flush()
    later = CtxBudgetMemory.from_defaults(memory=one, session_id=session, token_limit=3000)
    sent = steps(later.get(input="next"))
    for call in ("cA", "cB"):
        at = sent.index(f"assistant:{call}")
        assert sent[at + 1] == f"tool:{call}", sent
    context = later.last_context
    assert context is not None
    orphans = {PruneReason.ORPHAN_TOOL_CALL, PruneReason.ORPHAN_TOOL_RESULT}
    assert not [p for p in context.pruned if p.reason in orphans], context.explain()
    everything = steps(later.get_all())
    assert len(everything) == 8  # every message both tabs put, once
    for call in ("cA", "cB"):  # as a conversation providers accept, as get() sends it
        at = everything.index(f"assistant:{call}")
        assert everything[at + 1] == f"tool:{call}", everything
