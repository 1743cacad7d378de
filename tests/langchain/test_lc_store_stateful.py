"""What the middleware stores agrees with the app's state, over any run of turns (stateful).

A model-based test (hypothesis' rule-based state machine) of the LangChain middleware's writes.
Two agents, each with its own middleware over its own `ContextMemory` on one folder (two
workers of one app), take turns on one thread; the app keeps the state and passes it in. The
app asks (a good question, or one the memory refuses), edits a message of its state (same id,
new text), trims the oldest turn from its state, or gets an answer the memory refuses (a lone
surrogate). The middleware checks only the messages it has not stored yet, so what must hold:

- a refused question raises `StoreInputError` before the model is called and stores nothing;
- an answer the memory refused is not remembered as stored: every later call that carries it
  is refused, by either worker, until the app mends it;
- after every step both memories hold the model's list: every message the app ever sent, in
  order, with its newest text (an edit stored in its place; a trimmed message stays stored).
  An edit is stored by a worker that carried the message before with its old text; the other
  keeps the stored text (docs/langchain.md: it cannot tell an edit in the state from a
  message replaced in the memory, whose new text must stay);
- the model receives the state's messages, in order, with their newest texts.

Real tiktoken, embedded Chroma and embedder; the chat model is the one fake.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from lc_fakes import RecordingChatModel

from ctxbudget import StoreInputError
from ctxbudget.embed.local import LocalEmbedder
from ctxbudget.memory.context import ContextMemory
from langchain_ctxbudget import CtxBudgetMiddleware

THREAD = "t"
TOPICS = ["locker code", "flight to Oslo", "dentist visit", "vegetarian dinner", "new bike"]
BAD = "bad \ud800 text"


def machine(root: Path, embedder: LocalEmbedder) -> type[RuleBasedStateMachine]:
    class Turns(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.folder = Path(tempfile.mkdtemp(dir=root))
            self.memories = [ContextMemory(self.folder, embedder=embedder) for _ in range(2)]
            self.answer: str | None = None  # the next answer's text
            self.models = [RecordingChatModel(messages=self._answers()) for _ in range(2)]
            self.agents = [
                create_agent(
                    model,
                    middleware=[
                        CtxBudgetMiddleware(model="gpt-4o", budget=6000, reserve=100, memory=m)
                    ],
                )
                for model, m in zip(self.models, self.memories, strict=True)
            ]
            self.state: list[BaseMessage] = []  # the app's state
            self.stored: list[tuple[str, str]] = []  # the model: (id, text), session order
            self.known: list[dict[str, str]] = [{}, {}]  # what each worker carried: id: text
            self.made = 0

        def _answers(self) -> Iterator[AIMessage]:
            while True:
                self.made += 1
                text = self.answer or f"answer w{self.made}x noted"
                self.answer = None
                yield AIMessage(text, id=f"a{self.made}")

        def text(self, topic: str) -> str:
            self.made += 1
            return f"question w{self.made}x about my {topic}"

        def poisoned(self) -> bool:
            return any(m.text == BAD for m in self.state)

        def calls(self) -> int:
            return sum(len(m.calls) for m in self.models)

        def settle(self, messages: list[BaseMessage], worker: int) -> None:
            """The model's list once ``worker`` stored ``messages``: new ones last, edits in place.

            An edit is stored by a worker that carried the message with another text.
            """
            at = {mid: n for n, (mid, _) in enumerate(self.stored)}
            known = self.known[worker]
            for message in messages:
                mid, text = str(message.id), message.text
                if mid not in at:
                    at[mid] = len(self.stored)
                    self.stored.append((mid, text))
                elif known.get(mid, text) != text:
                    self.stored[at[mid]] = (mid, text)
                known[mid] = text

        @rule(topic=st.sampled_from(TOPICS), worker=st.integers(0, 1), bad=st.booleans())
        def ask(self, topic: str, worker: int, bad: bool) -> None:
            question = HumanMessage(BAD if bad else self.text(topic), id=f"q{self.made}")
            messages = [*self.state, question]
            before = self.calls()
            if bad or self.poisoned():
                with pytest.raises(StoreInputError, match="surrogate"):
                    self.agents[worker].invoke(
                        {"messages": messages}, {"configurable": {"thread_id": THREAD}}
                    )
                assert self.calls() == before  # refused before the model was called
                return
            result = self.agents[worker].invoke(
                {"messages": messages}, {"configurable": {"thread_id": THREAD}}
            )
            assert self.calls() == before + 1
            sent = self.models[worker].calls[-1][0]
            texts = [m.text for m in sent]
            positions = [texts.index(m.text) for m in messages if m.text in texts]
            assert len(positions) == len(messages) and positions == sorted(positions)
            self.state = list(result["messages"])
            answer = self.state[-1]
            self.settle(messages, worker)
            if answer.text != BAD:  # stored when the run ends; a refused one is not
                self.settle([answer], worker)

        @rule()
        def next_answer_is_refused(self) -> None:
            self.answer = BAD

        @precondition(lambda self: self.state)
        @rule(data=st.data(), topic=st.sampled_from(TOPICS))
        def edit(self, data: st.DataObject, topic: str) -> None:
            at = data.draw(st.integers(0, len(self.state) - 1))
            old = self.state[at]
            new = self.text(topic)
            kind = HumanMessage if isinstance(old, HumanMessage) else AIMessage
            self.state[at] = kind(new, id=old.id)

        @precondition(lambda self: len(self.state) >= 4)
        @rule()
        def trim(self) -> None:
            self.state = self.state[2:]  # the oldest turn leaves the state, not the memory

        @invariant()
        def memories_hold_the_model(self) -> None:
            for memory in self.memories:
                memory.flush()
            for memory in self.memories:
                history = memory.history(THREAD)
                assert [(r.id, r.text) for r in history] == self.stored

        def teardown(self) -> None:
            for memory in self.memories:
                memory.close()
            shutil.rmtree(self.folder, ignore_errors=True)

    return Turns


def test_what_the_middleware_stores_agrees_with_the_state(
    tmp_path: Path, embedder: LocalEmbedder
) -> None:
    run_state_machine_as_test(
        machine(tmp_path, embedder),
        settings=settings(
            max_examples=8,
            stateful_step_count=12,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )


def test_an_edit_of_the_first_question_is_stored(memory: ContextMemory) -> None:
    # The first turn is stored before the session has a generation: its digests were not
    # remembered, so an edit of a chat's first question kept the old text (found by the
    # machine above, 2026-11-30).
    model = RecordingChatModel(messages=iter([AIMessage(f"Answer {n}.") for n in range(3)]))
    middleware = CtxBudgetMiddleware(model="gpt-4o", budget=4000, reserve=100, memory=memory)
    agent = create_agent(model, middleware=[middleware])
    config: Any = {"configurable": {"thread_id": THREAD}}
    state = agent.invoke({"messages": [HumanMessage("Where is the ferry?", id="q0")]}, config)
    edited = [HumanMessage("Where is the train?", id="q0"), *state["messages"][1:]]
    agent.invoke({"messages": [*edited, HumanMessage("When?", id="q1")]}, config)
    memory.flush()
    assert [r.text for r in memory.history(THREAD)][:2] == ["Where is the train?", "Answer 0."]
    assert "Where is the ferry?" not in [m.text for m in model.calls[-1][0]]
