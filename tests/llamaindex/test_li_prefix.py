"""`CtxBudgetMemory.get` compares each assembly with the session's previous one."""

from __future__ import annotations

from typing import Any

from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.instrumentation import get_dispatcher  # type: ignore[attr-defined]
from llama_index.core.instrumentation.event_handlers import BaseEventHandler

from ctxbudget.core.prefix import shared_message_tokens
from ctxbudget.memory.context import ContextMemory
from llama_index.ctxbudget import ContextAssembledEvent, CtxBudgetMemory


class Events(BaseEventHandler):
    """Collects the ContextAssembledEvents dispatched while it is attached."""

    seen: list[Any] = []

    @classmethod
    def class_name(cls) -> str:
        return "Events"

    def handle(self, event: Any, **kwargs: Any) -> None:
        if isinstance(event, ContextAssembledEvent):
            self.seen.append(event)


def test_each_get_reports_the_prefix_it_shares_with_the_sessions_last(
    context_memory: ContextMemory,
) -> None:
    events = Events(seen=[])
    get_dispatcher().add_event_handler(events)
    try:
        memory = CtxBudgetMemory.from_defaults(
            token_limit=800, memory=context_memory, session_id="s1", system_prompt="Be brief."
        )
        memory.put(ChatMessage(role=MessageRole.USER, content="I moved to Lisbon in May."))
        memory.get()
        first = memory.last_context
        assert first is not None and first.prefix_tokens is None
        memory.put(ChatMessage(role=MessageRole.ASSISTANT, content="Noted, Lisbon it is."))
        memory.put(ChatMessage(role=MessageRole.USER, content="Where do I live?"))
        memory.get()
        second = memory.last_context
        assert second is not None
        assert second.prefix_tokens == shared_message_tokens(
            second.to_messages(), first.to_messages(), memory.counter
        )
        assert second.prefix_tokens > 0
        assert context_memory.previous_contexts.get("s1") is second
    finally:
        get_dispatcher().event_handlers.remove(events)
    assert [e.prefix_tokens for e in events.seen[-2:]] == [None, second.prefix_tokens]
