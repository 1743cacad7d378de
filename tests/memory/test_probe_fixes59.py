"""What the adapters' probes of 2026-11-30 found in the core, fixed: one test each.

- The default embedder (and the sentence-transformers one) given a lone surrogate failed in the
  tokenizer with ``TypeError: TextInputSequence must be str``, naming neither the text nor the
  cause: now `InvalidItemError` naming the text's index, as every other door refuses it.
- ``clear(session, pins="false")`` forgot the session's pinned facts (a non-empty str is true):
  ``pins`` is now a bool, anything else refused with nothing cleared.
- An entity extractor's ``batch`` refused numpy's ints, as no other count does.
- A tool call stored as a plain id was sent as an assistant turn with no calls, its result
  answering none (a conversation providers refuse).

Real parts: the default embedder, an embedded Chroma.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ctxbudget import ContextMemory
from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.errors import ConfigurationError, InvalidItemError
from ctxbudget.memory.entities.prompt import check_entity_batch


@pytest.mark.parametrize("texts", [["caf\ud800e"], ["fine", "x\udfff"]])
def test_the_embedder_refuses_a_lone_surrogate_naming_the_text(
    embedder: OnnxEmbedder, texts: list[str]
) -> None:
    with pytest.raises(InvalidItemError, match=rf"text {len(texts) - 1} holds a lone surrogate"):
        embedder.embed_documents(texts)
    with pytest.raises(InvalidItemError, match="text 0 holds a lone surrogate"):
        embedder.embed_query(texts[-1])
    assert len(embedder.embed_documents(["fine"])[0]) == 384  # and it answers on


@pytest.mark.parametrize("pins", ["false", "no", 0.0, None, np.array([True, False])])
def test_clear_takes_a_bool_for_pins_and_clears_nothing_else(
    tmp_path: Path, embedder: OnnxEmbedder, pins: object
) -> None:
    with ContextMemory(tmp_path / "m", embedder=embedder) as memory:
        memory.add_message("s1", "user", "I live in Lisbon.", id="m1")
        memory.pin("s1", "Ada is allergic to peanuts.", id="p1")
        with pytest.raises(ConfigurationError, match=r"clear\(pins=\)"):
            memory.clear("s1", pins=pins)  # type: ignore[arg-type]
        assert [r.id for r in memory.history("s1")] == ["m1"]
        assert memory.clear("s1", pins=np.bool_(False)) == 1  # numpy's bool is a bool
        assert [r.id for r in memory.store.get(["p1"], namespace=memory.namespace, session_id="s1")]


def test_an_entity_batch_takes_numpy_ints() -> None:
    assert check_entity_batch(np.int64(3), "LLMEntityExtractor") == 3
    with pytest.raises(ConfigurationError, match="batch"):
        check_entity_batch(0, "LLMEntityExtractor")
    with pytest.raises(ConfigurationError, match="batch"):
        check_entity_batch(True, "LLMEntityExtractor")


def test_a_call_stored_as_a_plain_id_is_sent_as_a_call(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    """``tool_calls=["c1"]`` (ids only, as the command's files may give them) was sent as an
    assistant turn without calls, then a result answering none: OpenAI refuses that. The call
    is now sent with a stand-in name and no arguments, and counted as sent."""
    from ctxbudget.memory.reading.record_items import STAND_IN

    with ContextMemory(tmp_path / "m", embedder=embedder) as memory:
        memory.add_messages(
            "s1",
            [
                {"role": "user", "text": "Weather?", "id": "u1"},
                {"role": "assistant", "text": "", "tool_calls": ["c1"], "id": "a1"},
                {"role": "tool", "text": "sunny", "tool_call_id": "c1", "id": "t1"},
            ],
        )
        ctx = memory.assemble("s1", "And tomorrow?", budget=2000)
        sent = ctx.to_messages()
        [call] = [m for m in sent if m["role"] == "assistant"][0]["tool_calls"]
        assert call["id"] == "c1" and call["function"]["name"] == STAND_IN
        assert [m.get("tool_call_id") for m in sent if m["role"] == "tool"] == ["c1"]
        assert ctx.tokens_used == memory.counter_for(None).count_messages(sent)
