"""What is returned or sent is exactly what the report includes: the same ids, texts, order.

(A door without a report whose choice can be read back, ``chosen``: exactly what it chose.)

Over random conversations: one or two sessions of one user (the other session's turns reach
the context by search), pinned facts where the door pins, and budgets from tight to roomy. And
a question too large for its budget: refused, never sent without (an empty request, or the
system message alone).
"""

from __future__ import annotations

from typing import Any

import pytest
from _suite import PROPERTY, WORDS, conversations, fresh, needs, tagged, turns_of
from conversation import conversation_problem
from hypothesis import given
from hypothesis import strategies as st

SHARES_SERVERS = True  # each test uses fresh ids: an MCP server door is the session's one
queries = st.lists(st.sampled_from(WORDS), min_size=1, max_size=8).map(" ".join)


@PROPERTY
@given(
    conversation=conversations,
    other=st.one_of(st.none(), conversations),
    pins=st.lists(st.tuples(st.sampled_from(["session", "user"]), st.lists(
        st.sampled_from(WORDS), min_size=2, max_size=6)), max_size=2),
    query=queries,
    budget=st.integers(min_value=80, max_value=1500),
)  # fmt: skip
def test_what_is_sent_is_what_the_report_includes(
    driver: Any,
    conversation: list[list[str]],
    other: list[list[str]] | None,
    pins: list[tuple[str, list[str]]],
    query: str,
    budget: int,
) -> None:
    needs(driver, "send")
    if "chosen" not in driver.can:  # a door without a report may read its choice otherwise
        needs(driver, "report")
    session, user = fresh("s"), fresh("u")
    if "add" in driver.can:
        driver.add(session, user, turns_of(conversation, session))
        if other is not None:
            earlier = fresh("s")
            driver.add(earlier, user, turns_of(other, earlier))
    if "pin" in driver.can:
        for n, (scope, words) in enumerate(pins):
            on_session = scope == "session"
            driver.pin(
                tagged(words),
                f"{session}-pin{n}",
                session=session if on_session else None,
                user=None if on_session else user,
            )
    got = driver.send(session, user, f"{query}?", budget)
    assert got.got == got.chosen
    if got.messages:  # a door that sends a conversation: one every provider accepts
        assert conversation_problem(got.messages) is None, conversation_problem(got.messages)


def test_a_question_too_large_to_fit_is_refused_never_dropped(driver: Any) -> None:
    # A call whose question alone is over the budget: the door refuses it (the core's
    # BudgetExceededError, as the caller gets it), or what is received holds the question.
    # Never a request without it (an agent's model called with no messages at all).
    needs(driver, "send")
    takes = getattr(driver, "takes", None)
    if takes is not None and "budget" not in takes:
        pytest.skip(f"{driver.name} takes no budget (its driver's takes): nothing is fitted")
    session, user = fresh("s"), fresh("u")
    if "add" in driver.can:
        driver.add(session, user, turns_of([["lisbon", "cat"], ["garden", "train"]], session))
    question = tagged(WORDS * 30)  # about 700 tokens
    try:
        got = driver.send(session, user, f"{question}?", 200)
    except Exception as exc:  # noqa: BLE001 - the door's refusal, whatever form it takes
        assert "budget" in str(exc).lower() or "tokens" in str(exc).lower(), repr(exc)
        return
    if got.sent_tokens is None:
        return  # a door that returns items (documents, nodes): no question is sent
    assert any(question in text for text in got.texts), got.texts
