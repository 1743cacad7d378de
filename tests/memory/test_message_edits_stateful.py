"""Adds, edits and deletes of a session's messages agree with a plain list, seen from two memories.

A model-based test (hypothesis' rule-based state machine): one memory writes (write-behind on:
messages acknowledged, stored in the background), another on the same folder reads and keeps
the session in memory between reads. After every step, both memories' history of the session is
the model's list (ids, order, texts; seqs increasing and never reused), and nothing either one
offers for the session or for the user's other session holds a text the model no longer has
(an old text of an edited message, a deleted message). Every text carries a word of its own, so
an old text is told from a new one. A message deleted and added again under its id is a new one
(last, a new seq); a replace with a bad value is refused and changes nothing. Real parts:
embedded Chroma, the default embedder, tiktoken.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from ctxbudget import ContextMemory, StoreInputError
from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.memory.policy.config import MemoryConfig

SESSION, OTHER, USER = "s", "elsewhere", "ana"
TOPICS = ["locker code", "flight to Oslo", "dentist visit", "vegetarian dinner", "new bike"]
BAD: list[dict[str, object]] = [
    {"text": "\ud800"},
    {"text": "  "},
    {"text": None},
    {"session_id": OTHER},
    {"session_id": 3},
    {"id": ""},
    {"timestamp": float("nan")},
    {"role": "wizard"},
    {"user_id": "bob"},
    {"metadata": {"x": float("inf")}},
]


def machine(root: Path, embedder: OnnxEmbedder) -> type[RuleBasedStateMachine]:
    class Edits(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.folder = Path(tempfile.mkdtemp(dir=root))
            # A short recent window: older turns are searched in the session's copy in memory.
            small = MemoryConfig(recent_messages=2)
            self.writer = ContextMemory(self.folder, embedder=embedder, config=small)
            self.reader = ContextMemory(self.folder, embedder=embedder, config=small)
            self.model: list[tuple[str, str]] = []  # (id, text), in session order
            self.gone: set[str] = set()  # texts no longer stored
            self.seqs: dict[str, int] = {}  # id: its seq, once seen
            self.made = 0

        def text(self, topic: str) -> str:
            self.made += 1
            return f"note w{self.made}x about my {topic}"

        @initialize()
        def other_session(self) -> None:
            self.writer.add_message(OTHER, "user", "Hello there.", id="o1", user_id=USER)

        @rule(topic=st.sampled_from(TOPICS), role=st.sampled_from(["user", "assistant"]))
        def add(self, topic: str, role: str) -> None:
            mid = f"m{self.made}"
            text = self.text(topic)
            self.writer.add_message(SESSION, role, text, id=mid, user_id=USER)
            self.model.append((mid, text))

        @precondition(lambda self: self.model)
        @rule(data=st.data(), topic=st.sampled_from(TOPICS), reader=st.booleans())
        def replace(self, data: st.DataObject, topic: str, reader: bool) -> None:
            at = data.draw(st.integers(0, len(self.model) - 1))
            mid, old = self.model[at]
            text = self.text(topic)
            memory = self.reader if reader else self.writer
            assert memory.replace_message(SESSION, mid, text, user_id=USER) == mid
            self.model[at] = (mid, text)
            self.gone.add(old)

        @precondition(lambda self: self.model)
        @rule(data=st.data(), unknown=st.booleans(), reader=st.booleans())
        def delete(self, data: st.DataObject, unknown: bool, reader: bool) -> None:
            picked = data.draw(st.sets(st.integers(0, len(self.model) - 1), min_size=1))
            ids = [self.model[i][0] for i in sorted(picked)] + (["never-stored"] if unknown else [])
            memory = self.reader if reader else self.writer
            assert memory.delete_messages(SESSION, ids) == len(picked)
            self.gone |= {self.model[i][1] for i in picked}
            self.model = [m for i, m in enumerate(self.model) if i not in picked]

        @precondition(lambda self: self.model)
        @rule(data=st.data(), topic=st.sampled_from(TOPICS), reader=st.booleans())
        def delete_and_add_again(self, data: st.DataObject, topic: str, reader: bool) -> None:
            at = data.draw(st.integers(0, len(self.model) - 1))
            mid, old = self.model.pop(at)
            memory = self.reader if reader else self.writer
            assert memory.delete_messages(SESSION, [mid]) == 1
            text = self.text(topic)
            self.writer.add_message(SESSION, "user", text, id=mid, user_id=USER)
            self.model.append((mid, text))  # a new message: last, with a new seq
            self.seqs.pop(mid, None)
            self.gone.add(old)

        @precondition(lambda self: self.model)
        @rule(data=st.data(), bad=st.sampled_from(BAD))
        def replace_badly(self, data: st.DataObject, bad: dict[str, object]) -> None:
            mid = self.model[data.draw(st.integers(0, len(self.model) - 1))][0]
            given = {"session_id": SESSION, "id": mid, "text": "a new text", **bad}
            try:
                self.writer.replace_message(**given)  # type: ignore[arg-type]
            except StoreInputError as exc:
                assert "nothing was changed" in str(exc)
                return
            raise AssertionError(f"a replace with {bad} was accepted")

        @rule()
        def replace_unknown(self) -> None:
            try:
                self.writer.replace_message(SESSION, "never-stored", "anything")
            except StoreInputError:
                return
            raise AssertionError("a replace of an unknown id was accepted")

        @rule(topic=st.sampled_from(TOPICS), reader=st.booleans())
        def recall(self, topic: str, reader: bool) -> None:
            memory = self.reader if reader else self.writer
            query = f"what about my {topic}?"
            offered = [
                *memory.candidates(SESSION, query, budget=3000).retrieved,
                *memory.candidates(SESSION, query, budget=3000).history,
                *memory.candidates(OTHER, query, budget=3000, user_id=USER).retrieved,
            ]
            for item in offered:
                assert item.text not in self.gone, item.text
            hits = memory.search(query, kinds=["message"], user_id=USER)
            assert all(h.hit.record.text not in self.gone for h in hits)

        @invariant()
        def histories_are_the_model(self) -> None:
            self.writer.flush()
            for memory in (self.writer, self.reader):
                history = memory.history(SESSION)
                assert [(r.id, r.text) for r in history] == self.model
                seqs = [r.seq for r in history]
                assert seqs == sorted(seqs)
                for record in history:
                    assert record.seq is not None
                    # An edit keeps the message's place.
                    assert self.seqs.setdefault(record.id, record.seq) == record.seq
            # A seq is never given to two ids, even after a delete.
            assert len(set(self.seqs.values())) == len(self.seqs)

        def teardown(self) -> None:
            self.writer.close()
            self.reader.close()
            shutil.rmtree(self.folder, ignore_errors=True)

    return Edits


def test_edits_and_deletes_agree_with_a_list(tmp_path: Path, embedder: OnnxEmbedder) -> None:
    run_state_machine_as_test(
        machine(tmp_path, embedder),
        settings=settings(
            max_examples=12,
            stateful_step_count=12,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
