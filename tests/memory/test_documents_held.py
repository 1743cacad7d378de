"""A turn searches the namespace's documents only when it has some (`Stamps.has_documents`).

The read of the session's entry also reads whether the namespace's documents partition is
registered (`Collections.register` records it before anything is written to it), so a turn in a
namespace without documents makes no Chroma call for them. What another memory object, process
or worker adds is searched by the next turn: nothing of it is kept between calls.
"""

from __future__ import annotations

from typing import Any

import pytest

from ctxbudget import ContextMemory
from ctxbudget.store import layout
from ctxbudget.store.chroma_store import ChromaStore
from ctxbudget.store.partitions import docs_partition

FACT = "The ferry to the island leaves from pier seven at dawn."


def _looked_up(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The partitions opened by name from now on (a search of one that is not held first)."""
    names: list[str] = []
    real = layout.existing

    def existing(client: Any, name: str) -> Any:
        names.append(name)
        return real(client, name)

    monkeypatch.setattr(layout, "existing", existing)
    return names


def _memory(store: ChromaStore) -> ContextMemory:
    memory = ContextMemory(store=store, write_behind=False)
    memory.add_message("s1", "user", "We are planning a trip to the island next week.")
    memory.add_message("s1", "assistant", "Lovely: which day do you want to leave?")
    return memory


@pytest.mark.parametrize("known", [False, True], ids=["assemble", "with stamps"])
def test_a_turn_in_a_namespace_without_documents_never_looks_for_them(
    store: ChromaStore, monkeypatch: pytest.MonkeyPatch, known: bool
) -> None:
    memory = _memory(store)
    stamps = store.stamps(namespace=memory.namespace, session_id="s1", user_id=None)
    assert stamps.has_documents is False
    names = _looked_up(monkeypatch)
    found = memory.candidates(
        "s1", "When does the ferry leave?", budget=2000, stamps=stamps if known else None
    )
    assert found.history
    assert docs_partition(store.collection, memory.namespace) not in names


def test_documents_another_memory_adds_are_searched_by_the_next_turn(
    open_store: Any,
) -> None:
    """Two memory objects on one folder (or two workers on one server)."""
    asking = _memory(open_store())
    adding = ContextMemory(store=open_store(), write_behind=False)
    question = "When does the ferry to the island leave?"
    before = asking.assemble("s1", question, budget=2000)
    assert not [i for i in before.included if FACT in i.text]
    adding.add_documents([("guide", FACT)], collection="guide")
    stamps = asking.store.stamps(namespace=asking.namespace, session_id="s1", user_id=None)
    assert stamps.has_documents is True
    after = asking.assemble("s1", question, budget=2000)
    offered = [i for i in after.included if FACT in i.text]
    assert offered, after.included
    with_stamps = asking.candidates("s1", question, budget=2000, stamps=stamps)
    assert any(FACT in it.text for it in with_stamps.retrieved)


def test_documents_deleted_still_leave_the_partition_searched(store: ChromaStore) -> None:
    """The partition stays registered once made (it is named): a search finds nothing."""
    memory = _memory(store)
    memory.add_documents([("guide", FACT)], collection="guide")
    store.delete(["guide#0"], namespace=memory.namespace, collection="guide")
    stamps = store.stamps(namespace=memory.namespace, session_id="s1", user_id=None)
    assert stamps.has_documents is True
    found = memory.candidates("s1", "When does the ferry leave?", budget=2000)
    assert not any(FACT in it.text for it in found.retrieved)
