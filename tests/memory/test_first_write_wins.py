"""``add_messages(first_write_wins=True)``: an id held with other content keeps its message.

The LangChain middleware stores an agent's state on every model call, and a key the session
holds for another message keeps the first one (a warning, the rest stored). With
``first_write_wins`` the memory does that itself, with no read of the ids before the messages
are acknowledged (issue 40: two reads a turn): the store's own write finds them. Whatever
another memory object did on the folder: the property in test_id_check_across_memories.py.
Here: the earlier message still queued (write-behind) or stored, the same outcome.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.errors import StoreInputError
from ctxbudget.memory.context import ContextMemory


def kept_out(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "first write wins" in r.getMessage()]


@pytest.mark.parametrize("write_behind", [True, False])
def test_an_id_acknowledged_and_reused_before_it_is_stored_keeps_the_first_message(
    embedder: OnnxEmbedder, tmp_path: Path, caplog: pytest.LogCaptureFixture, write_behind: bool
) -> None:
    # Queued (write-behind, within its linger) or stored already: the same outcome.
    memory = ContextMemory(path=tmp_path / "db", embedder=embedder, write_behind=write_behind)
    try:
        memory.add_message("s1", "user", "First wording", id="q1")
        with caplog.at_level(logging.WARNING):
            memory.add_messages(
                "s1",
                [{"id": "q1", "role": "user", "text": "Other wording"}],
                first_write_wins=True,
            )
            memory.add_messages(
                "s1", [{"id": "q2", "role": "user", "text": "Next"}], first_write_wins=True
            )
            memory.flush()
        assert [(r.id, r.text) for r in memory.history("s1")] == [
            ("q1", "First wording"),
            ("q2", "Next"),
        ]
        warned = kept_out(caplog)
        assert len(warned) == 1 and "q1" in warned[0], warned
        # Without it, the call is refused whole, as before.
        with pytest.raises(StoreInputError, match="already stored with different content"):
            memory.add_messages("s1", [{"id": "q1", "role": "user", "text": "Third"}])
    finally:
        memory.close()


def test_first_write_wins_takes_a_bool_only(embedder: OnnxEmbedder, tmp_path: Path) -> None:
    memory = ContextMemory(path=tmp_path / "db", embedder=embedder)
    try:
        with pytest.raises(StoreInputError, match="first_write_wins"):
            memory.add_messages("s1", [("user", "hi")], first_write_wins="yes")  # type: ignore[arg-type]
        assert memory.history("s1") == []
    finally:
        memory.close()
