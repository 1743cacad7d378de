"""Deleting and replacing stored messages: `ContextMemory.delete_messages`, `replace_message`.

A user edits a message, or an app removes one: the old text must leave everything derived from
it (its vector, the session's summaries quoting it, the inclusion log's records naming it) and
every copy of the session kept in memory by another object or a Chroma server's other client
(`SessionIndex`, the recent window), while the message keeps its place (its seq). Only the
named session is touched. Real parts: embedded Chroma and a Chroma server, the default
embedder, tiktoken.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from ctxbudget import ContextMemory, StoreInputError
from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.memory import InclusionLogConfig
from ctxbudget.memory.policy.config import MemoryConfig
from ctxbudget.memory.reading.candidates import Candidates
from tests.conftest import StoreFactory

OLD = "My locker code at the gym is 4471"
NEW = "My locker code at the gym is 9902"
QUERY = "what is my gym locker code?"


def offered(candidates: Candidates) -> str:
    items = [
        *candidates.pinned,
        *candidates.history,
        *candidates.summaries,
        *candidates.retrieved,
        *candidates.entities,
    ]
    return "\n".join(item.text for item in items)


def seed(memory: ContextMemory) -> None:
    turns = [
        {"id": "q1", "role": "user", "text": OLD},
        {"id": "a1", "role": "assistant", "text": "Noted, I will remember it."},
        {"id": "q2", "role": "user", "text": "Thanks, see you tomorrow."},
    ]
    memory.add_messages("gym", turns, user_id="ana")
    memory.add_messages(
        "chat", [{"id": "h1", "role": "user", "text": "Hello again."}], user_id="ana"
    )
    memory.flush()


def test_another_memory_on_the_store_sees_the_edit_and_never_the_old_text(
    open_store: StoreFactory,
) -> None:
    writer = ContextMemory(store=open_store())
    # Another process on a server, in effect; with a short recent window, older turns are
    # searched in its copy of the session in memory.
    reader = ContextMemory(store=open_store(), config=MemoryConfig(recent_messages=1))
    seed(writer)
    # The reader holds the session in memory (its index, its window) and recalls the old text
    # in the user's other thread.
    assert "4471" in offered(reader.candidates("gym", QUERY, budget=2000))
    assert "4471" in offered(reader.candidates("chat", QUERY, budget=2000, user_id="ana"))
    seqs = {r.id: r.seq for r in writer.history("gym")}

    assert writer.replace_message("gym", "q1", NEW) == "q1"
    assert writer.delete_messages("gym", ["a1"]) == 1

    for memory in (reader, writer):
        here = memory.candidates("gym", QUERY, budget=2000)
        there = memory.candidates("chat", QUERY, budget=2000, user_id="ana")
        assert "9902" in offered(there)  # recalled from the edited thread, new text
        for text in (offered(here), offered(there)):
            assert "4471" not in text
        hits = memory.search(QUERY, kinds=["message"], user_id="ana")
        assert any("9902" in h.hit.record.text for h in hits)
        assert all("4471" not in h.hit.record.text for h in hits)
        history = memory.history("gym")
        assert [(r.id, r.seq, r.text) for r in history] == [
            ("q1", seqs["q1"], NEW),
            ("q2", seqs["q2"], "Thanks, see you tomorrow."),
        ]
    # A message added later gets a new seq: the deleted one's is never given out again.
    writer.add_message("gym", "user", "One more thing.", id="q3", user_id="ana")
    assert writer.history("gym")[-1].seq > seqs["q2"]  # type: ignore[operator]


def test_summaries_and_log_records_quoting_the_old_text_go(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    log = InclusionLogConfig(keep_context=True)
    with ContextMemory(tmp_path / "db", embedder=embedder, inclusion_log=log) as memory:
        seed(memory)
        memory.add_message("gym", "assistant", "Bye!", id="a2", user_id="ana")
        assert len(memory.summarize("gym", keep_recent=0, stretch=2)) == 2
        memory.assemble("gym", QUERY, budget=2000)
        memory.assemble("chat", "hello", budget=2000)  # recalls gym's turns: quotes 4471
        memory.flush()
        assert "4471" in json.dumps([r.context for r in memory.contexts("gym")], default=str)
        summaries = memory.store.find(namespace="default", kinds=["summary"], session_id="gym")
        assert len(summaries) == 2

        memory.replace_message("gym", "q1", NEW)
        memory.flush()
        left = memory.store.find(namespace="default", kinds=["summary"], session_id="gym")
        assert [s.summary_of for s in left] == [("q2", "a2")]  # the one quoting q1 went
        assert memory.contexts("gym") == []  # the record naming q1 went
        # The other session's record recalled q1 and quoted it: it goes too (until 2026-11-30
        # it stayed, the old text with it).
        assert "4471" not in json.dumps([r.context for r in memory.contexts("chat")], default=str)
        assert "4471" not in offered(memory.candidates("gym", QUERY, budget=2000))

        memory.delete_messages("gym", ["a2"])
        assert memory.store.find(namespace="default", kinds=["summary"], session_id="gym") == []
    with ContextMemory(tmp_path / "db", embedder=embedder) as again:  # and after reopening
        texts = [r.text for r in again.history("gym")]
        assert texts == [NEW, "Noted, I will remember it.", "Thanks, see you tomorrow."]


def test_acknowledged_messages_are_stored_first(
    tmp_path: Path, embedder: OnnxEmbedder, caplog: pytest.LogCaptureFixture
) -> None:
    with (
        ContextMemory(tmp_path / "db", embedder=embedder) as memory,
        ContextMemory(tmp_path / "db", embedder=embedder) as sibling,
    ):
        with caplog.at_level(logging.WARNING):
            memory.add_message("s", "user", OLD, id="m1")  # acknowledged, not stored yet
            memory.replace_message("s", "m1", NEW)
            sibling.add_message("s", "user", "Another one.", id="m2")  # the sibling's queue
            assert sibling.delete_messages("s", ["m2"]) == 1
            memory.flush()
            sibling.flush()
        assert [r.text for r in memory.history("s")] == [NEW]
        assert [r.levelname for r in caplog.records if r.levelno >= logging.WARNING] == []


def test_only_the_named_session_is_touched(tmp_path: Path, embedder: OnnxEmbedder) -> None:
    with ContextMemory(tmp_path / "db", embedder=embedder) as memory:
        memory.add_message("a", "user", OLD, id="m1", user_id="ana")
        memory.add_message("b", "user", "Bob's own words", id="m1", user_id="bob")
        memory.pin(user_id="ana", text="Ana swims", id="m1")
        before = memory.store.session_stamp(namespace="default", session_id="b")
        memory.replace_message("a", "m1", NEW)
        assert memory.delete_messages("a", ["m1"]) == 1
        assert [r.text for r in memory.history("b")] == ["Bob's own words"]
        assert memory.store.session_stamp(namespace="default", session_id="b") == before
        pins = memory.store.get(["m1"], namespace="default", user_id="ana")
        assert [p.text for p in pins] == ["Ana swims"]
        assert memory.history("a") == []


def test_bad_input_changes_nothing(tmp_path: Path, embedder: OnnxEmbedder) -> None:
    with ContextMemory(tmp_path / "db", embedder=embedder) as memory:
        memory.add_message("s", "user", OLD, id="m1", user_id="ana")
        memory.pin("s", "Ana swims", id="swim")
        stamp = memory.store.session_stamp(namespace="default", session_id="s")
        with pytest.raises(StoreInputError, match="holds no message 'nope' to replace"):
            memory.replace_message("s", "nope", NEW)
        with pytest.raises(StoreInputError, match="holds no message 'm1'"):
            memory.replace_message("other", "m1", NEW)  # another session: not there
        with pytest.raises(StoreInputError, match="'swim' of session 's' is a pinned record"):
            memory.replace_message("s", "swim", NEW)
        with pytest.raises(StoreInputError, match="has empty text"):
            memory.replace_message("s", "m1", "  ")
        with pytest.raises(StoreInputError, match="stored by user 'ana', not by user 'bob'"):
            memory.replace_message("s", "m1", NEW, user_id="bob")
        with pytest.raises(StoreInputError, match="max_message_chars"):
            memory.replace_message("s", "m1", "x" * (memory.config.max_message_chars + 1))
        with pytest.raises(StoreInputError, match=r"ids \['swim'\] of session 's' are not"):
            memory.delete_messages("s", ["m1", "swim"])  # refused whole: m1 stays
        with pytest.raises(StoreInputError, match=r"pass \['m1'\]"):
            memory.delete_messages("s", "m1")  # type: ignore[arg-type]
        with pytest.raises(StoreInputError, match="ctxbudget"):
            memory.delete_messages("s", ["ctxbudget:summary:0-1"])
        assert memory.replace_message("s", "m1", OLD, user_id="ana") == "m1"  # the same: no-op
        assert memory.store.session_stamp(namespace="default", session_id="s") == stamp
        assert [r.text for r in memory.history("s")] == [OLD]
        assert memory.candidates("s", "swim", budget=500).pinned[0].text == "Ana swims"
        assert memory.delete_messages("s", []) == 0
        assert memory.delete_messages("s", ["nope"]) == 0
        assert memory.delete_messages("nobody", ["m1"]) == 0
        assert memory.delete_messages("s", ["m1", "m1"]) == 1
        assert memory.delete_messages("s", ["m1"]) == 0  # deleting again


def test_fields_left_out_are_kept_and_given_ones_replace(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    call = {"id": "c1", "name": "lookup", "args": {"q": "gym"}}
    with ContextMemory(tmp_path / "db", embedder=embedder) as memory:
        memory.add_message(
            "s", "assistant", "Looking it up", id="m1", name="bot", tool_calls=[call],
            timestamp=1_000.0, metadata={"lang": "en"},
        )  # fmt: skip
        memory.add_message("s", "tool", "4471", id="m2", tool_call_id="c1")
        memory.replace_message("s", "m1", "Looking up your locker")
        first = memory.history("s")[0]
        assert (first.text, first.role, first.timestamp) == (
            "Looking up your locker",
            "assistant",
            1_000.0,
        )
        assert first.tool_calls == ("c1",) and first.metadata["_name"] == "bot"
        assert first.metadata["lang"] == "en" and "_tool_calls" in first.metadata
        with pytest.raises(StoreInputError, match=r"calls tools \(c1\).*pass tool_calls=\[\]"):
            memory.replace_message("s", "m1", "Plain text now", role="user")
        memory.replace_message(
            "s", "m1", "Plain text now", name="", metadata={}, role="user", tool_calls=[]
        )
        memory.replace_message("s", "m2", "9902")
        first, second = memory.history("s")
        assert (first.role, first.text) == ("user", "Plain text now")
        assert "_name" not in first.metadata and "lang" not in first.metadata
        assert (second.tool_call_id, second.text) == ("c1", "9902")


async def test_the_async_twins(tmp_path: Path, embedder: OnnxEmbedder) -> None:
    with ContextMemory(tmp_path / "db", embedder=embedder) as memory:
        await memory.aadd_messages("s", [("user", OLD), ("assistant", "Noted.")])
        first, second = (r.id for r in await memory.ahistory("s"))
        assert await memory.areplace_message("s", first, NEW) == first
        assert await memory.adelete_messages("s", [second]) == 1
        assert [r.text for r in await memory.ahistory("s")] == [NEW]


def test_an_edit_is_seen_by_a_memory_opened_afterwards_on_the_server(
    open_store: StoreFactory,
) -> None:
    with ContextMemory(store=open_store()) as memory:
        seed(memory)
        memory.replace_message("gym", "q1", NEW)
    again = ContextMemory(store=open_store())
    assert "4471" not in offered(again.candidates("chat", QUERY, budget=2000, user_id="ana"))
    assert again.search(NEW, kinds=["message"], user_id="ana")[0].hit.record.id == "q1"
    again.close()
