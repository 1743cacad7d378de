"""`ContextMemory` keeps each session's last context and compares the next one with it.

Over the parametrized ``store`` fixture (embedded Chroma, and a Chroma server when integration
tests run): the previous context is kept in process, per session, bounded.
"""

from __future__ import annotations

from ctxbudget import ContextMemory
from ctxbudget.core.prefix import shared_message_tokens
from ctxbudget.store.chroma_store import ChromaStore

SYSTEM = "You are a careful assistant. Answer in one sentence."


def test_each_sessions_next_assembly_reports_the_prefix_it_shares_with_the_last(
    store: ChromaStore,
) -> None:
    memory = ContextMemory(store=store)
    memory.add_messages("s1", [("user", "I moved to Lisbon in May."), ("assistant", "Noted!")])
    memory.add_messages("s2", [("user", "My cat is called Miso."), ("assistant", "Cute!")])
    first = memory.assemble("s1", "Where do I live?", budget=600, system=SYSTEM)
    assert first.prefix_tokens is None  # nothing to compare with yet
    other = memory.assemble("s2", "What is my cat called?", budget=600, system=SYSTEM)
    assert other.prefix_tokens is None  # s1's context is never s2's previous one
    second = memory.assemble("s1", "Where do I live?", budget=600, system=SYSTEM)
    assert second.prefix_tokens == shared_message_tokens(
        second.to_messages(), first.to_messages(), memory.counter
    )
    assert second.prefix_tokens > 0  # the system message at least
    assert memory.previous_contexts.get("s1") is second
    assert memory.previous_contexts.get("s2") is other
    assert "prefix shared with the previous call" in second.explain()
    assert second.summary()["prefix_tokens"] == second.prefix_tokens
