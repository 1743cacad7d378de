"""A deletion is never overtaken by a write another memory of this process acknowledged before it.

Two `ContextMemory` objects on one folder (or one server with a journal folder): the first
acknowledges a message (journaled, stored in the background a few milliseconds later), the
second deletes the session, the user or the conversation at once. What was acknowledged before
the deletion must not land after it (the deleted session coming back with that message).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from ctxbudget import ContextMemory
from ctxbudget.errors import StoreError
from ctxbudget.memory.writing.behind import WriteBehind

Delete = Callable[[ContextMemory], object]
DELETES: dict[str, Delete] = {
    "delete_session": lambda m: m.delete_session("s1"),
    "delete_user": lambda m: m.delete_user("alice"),
    "clear": lambda m: m.clear("s1"),
}


@pytest.mark.parametrize("delete", sorted(DELETES))
def test_delete_waits_for_a_sibling_write(tmp_path: Path, delete: str) -> None:
    first = ContextMemory(tmp_path / "mem")
    second = ContextMemory(tmp_path / "mem")
    try:
        first.add_message("s1", "user", "an early remark", user_id="alice")
        first.flush()
        first.add_message("s1", "user", "acknowledged before the delete", user_id="alice")
        DELETES[delete](second)  # the first's write is still in its queue (it lingers)
        first.flush()
        second.flush()
        assert [r.text for r in second.history("s1")] == []
        assert [r.text for r in first.history("s1")] == []
    finally:
        first.close()
        second.close()


def test_a_sibling_failing_to_store_stops_the_delete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sibling whose writes fail: the delete refuses, naming why, rather than be overtaken."""
    first = ContextMemory(tmp_path / "mem")
    second = ContextMemory(tmp_path / "mem")
    gate = threading.Event()
    try:
        first.add_message("s1", "user", "stored", user_id="alice")
        first.flush()
        behind = first._behind
        assert isinstance(behind, WriteBehind)

        def failing(records: object) -> object:
            gate.set()
            raise StoreError("the store is down for a moment")

        monkeypatch.setattr(behind, "_add", failing)
        monkeypatch.setattr(behind, "_timeout", 0.5)
        first.add_message("s1", "user", "acknowledged, not stored yet", user_id="alice")
        assert gate.wait(5)
        with pytest.raises(StoreError, match="another memory"):
            second.delete_session("s1")
        assert [r.text for r in second.history("s1")] == ["stored"]  # nothing deleted
    finally:
        monkeypatch.undo()
        first.close()
        second.close()
