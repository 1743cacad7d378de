"""Two writers on one session: each memory answers its own question, not the other's.

Two tabs (or two workers) share a session. Tab A puts its question, tab B puts its own right
after, then tab A's chat engine asks ``get()`` with no input, as LlamaIndex's chat engines do
(the question was put just before). The newest user message in the session is B's, but what A
sends last, as the question its model answers, must be A's.
"""

from __future__ import annotations

import uuid

from ctxbudget.memory.context import ContextMemory
from llama_index.ctxbudget import CtxBudgetMemory

from .helpers import assistant, user
from .test_li_two_writers import two_workers

__all__ = ["two_workers"]


def test_each_tab_answers_its_own_question(
    two_workers: tuple[ContextMemory, ContextMemory],
) -> None:
    one, two = two_workers
    session = f"s-{uuid.uuid4().hex[:8]}"
    tab_a = CtxBudgetMemory.from_defaults(memory=one, session_id=session, token_limit=3000)
    tab_b = CtxBudgetMemory.from_defaults(memory=two, session_id=session, token_limit=3000)
    tab_a.put(user("hello"))
    tab_a.put(assistant("hi, how can I help?"))
    tab_a.put(user("question A: where is Lisbon?"))
    one.flush()
    tab_b.put(user("question B: what is miso?"))
    two.flush()
    sent_a = tab_a.get()
    sent_b = tab_b.get()
    assert sent_a[-1].content == "question A: where is Lisbon?", [m.content for m in sent_a]
    assert sent_b[-1].content == "question B: what is miso?", [m.content for m in sent_b]
    # A's question is sent once: as the question, not also as history.
    assert [m.content for m in sent_a].count("question A: where is Lisbon?") == 1


def test_an_agent_asking_with_its_question_gets_its_own(
    two_workers: tuple[ContextMemory, ContextMemory],
) -> None:
    one, two = two_workers
    session = f"s-{uuid.uuid4().hex[:8]}"
    tab_a = CtxBudgetMemory.from_defaults(memory=one, session_id=session, token_limit=3000)
    tab_b = CtxBudgetMemory.from_defaults(memory=two, session_id=session, token_limit=3000)
    tab_a.put(user("question A: where is Lisbon?"))
    one.flush()
    tab_b.put(user("question B: what is miso?"))
    two.flush()
    # An agent asks with the text of the question it put (`aget(input=...)`), every step.
    for _ in range(2):
        sent = [m.content for m in tab_a.get(input="question A: where is Lisbon?")]
        assert sent[-1] == "question A: where is Lisbon?", sent
        assert sent.count("question A: where is Lisbon?") == 1, sent
        assert "question B: what is miso?" in sent  # the other tab's turn stays history


def test_once_answered_the_newest_question_is_asked_again(
    two_workers: tuple[ContextMemory, ContextMemory],
) -> None:
    one, two = two_workers
    session = f"s-{uuid.uuid4().hex[:8]}"
    tab_a = CtxBudgetMemory.from_defaults(memory=one, session_id=session, token_limit=3000)
    tab_b = CtxBudgetMemory.from_defaults(memory=two, session_id=session, token_limit=3000)
    tab_a.put(user("question A: where is Lisbon?"))
    one.flush()
    tab_b.put(user("question B: what is miso?"))
    two.flush()
    tab_a.put(assistant("In Portugal."))  # A's turn is over: it has no question pending
    one.flush()
    sent = [m.content for m in tab_a.get()]
    assert sent[-1] == "In Portugal.", sent
    assert sent.count("question A: where is Lisbon?") == 1, sent
