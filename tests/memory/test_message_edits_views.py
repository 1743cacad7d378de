"""What the model receives after an edit, through each door that reads the memory.

After another object's `replace_message` returned, `assemble` (its messages and its report),
LangChain's chat history read through ``budget_messages``, and LlamaIndex's memory ``get()``
show the new text once and never the old one, and the report lists the message once (included
or pruned, never both). Embedded Chroma and a Chroma server; the default embedder.
"""

from __future__ import annotations

from typing import Any

import pytest

from ctxbudget import ContextMemory
from ctxbudget.memory.policy.config import MemoryConfig
from tests.conftest import StoreFactory

OLD = "My locker code at the gym is 4471"
NEW = "My locker code at the gym is 9902"
QUERY = "what is my gym locker code?"


def seeded(open_store: StoreFactory) -> tuple[ContextMemory, ContextMemory]:
    writer = ContextMemory(store=open_store())
    reader = ContextMemory(store=open_store(), config=MemoryConfig(recent_messages=2))
    writer.add_messages(
        "gym",
        [
            {"id": "q1", "role": "user", "text": OLD},
            {"id": "a1", "role": "assistant", "text": "Noted, I will remember it."},
            {"id": "q2", "role": "user", "text": "Thanks, see you tomorrow."},
            {"id": "a2", "role": "assistant", "text": "Bye!"},
        ],
        user_id="ana",
    )
    writer.flush()
    return writer, reader


def listed(context: Any) -> list[str]:
    return [i.id for i in context.included] + [p.item.id for p in context.pruned]


@pytest.mark.parametrize("budget", [2000, 60])
def test_assemble_sends_and_reports_the_new_text_once(
    open_store: StoreFactory, budget: int
) -> None:
    writer, reader = seeded(open_store)
    assert OLD in str(reader.assemble("gym", QUERY, budget=2000).to_messages())
    writer.replace_message("gym", "q1", NEW)
    for memory in (reader, writer):
        context = memory.assemble("gym", QUERY, budget=budget, user_id="ana")
        sent = "\n".join(str(m["content"]) for m in context.to_messages())
        assert OLD not in sent
        assert listed(context).count("q1") == 1  # offered once: included or pruned
        included = {i.id: i.text for i in context.included}
        assert sent.count(NEW) == (1 if "q1" in included else 0)
        assert included.get("q1", NEW) == NEW
        assert all(OLD not in p.item.text for p in context.pruned)
    writer.close()
    reader.close()


def test_langchain_chat_history_and_budget_messages_show_the_new_text(
    open_store: StoreFactory,
) -> None:
    pytest.importorskip("langchain_core")
    from langchain_core.messages import HumanMessage, SystemMessage

    from langchain_ctxbudget import CtxBudgetChatMessageHistory, budget_messages

    writer, reader = seeded(open_store)
    history = CtxBudgetChatMessageHistory(reader, "gym", user_id="ana")
    assert OLD in [m.text for m in history.messages]
    writer.replace_message("gym", "q1", NEW)
    messages = history.messages
    assert [(m.id, m.text) for m in messages][0] == ("q1", NEW)
    assert all(OLD not in m.text for m in messages)
    sent = budget_messages(
        [SystemMessage("Be brief."), *messages, HumanMessage(QUERY)], max_tokens=2000
    )
    texts = [m.text for m in sent]
    assert texts.count(NEW) == 1 and all(OLD not in t for t in texts)
    writer.close()
    reader.close()


def test_llamaindex_memory_get_shows_the_new_text(open_store: StoreFactory) -> None:
    pytest.importorskip("llama_index.core")
    from llama_index.ctxbudget import CtxBudgetMemory

    writer, reader = seeded(open_store)
    chat = CtxBudgetMemory.from_defaults(
        memory=reader, session_id="gym", user_id="ana", token_limit=2000, model="gpt-4o"
    )
    assert any(OLD in (m.content or "") for m in chat.get(QUERY))
    writer.replace_message("gym", "q1", NEW)
    got = [m.content or "" for m in chat.get(QUERY)]
    assert all(OLD not in text for text in got), got
    assert sum(text.count(NEW) for text in got) == 1, got
    assert listed(chat.last_context).count("q1") == 1
    writer.close()
    reader.close()
