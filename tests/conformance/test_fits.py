"""It fits as received, and everyone agrees on the count.

What the framework or client actually receives (counted here from scratch, with tiktoken and
the provider's published message overheads) fits the tokens available; the report, the span
and that count are one number.
"""

from __future__ import annotations

from typing import Any

import pytest
from _suite import PROPERTY, WORDS, conversations, fresh, needs, turns_of
from hypothesis import given
from hypothesis import strategies as st

SHARES_SERVERS = True  # each test uses fresh ids: an MCP server door is the session's one
queries = st.lists(st.sampled_from(WORDS), min_size=1, max_size=8).map(" ".join)
budgets = st.integers(min_value=80, max_value=1500)


def _sent(driver: Any, conversation: list[list[str]], query: str, budget: int) -> Any:
    needs(driver, "send")
    session, user = fresh("s"), fresh("u")
    if "add" in driver.can:
        driver.add(session, user, turns_of(conversation, session))
    return driver.send(session, user, f"{query}?", budget)


@PROPERTY
@given(conversation=conversations, query=queries, budget=budgets)
def test_what_is_received_fits(
    driver: Any, conversation: list[list[str]], query: str, budget: int
) -> None:
    takes = getattr(driver, "takes", None)
    if takes is not None and "budget" not in takes:
        pytest.skip(f"{driver.name} takes no budget (its driver's takes): nothing is fitted")
    got = _sent(driver, conversation, query, budget)
    assert got.available <= budget
    if got.sent_tokens is None:
        return  # a door that returns items, not a prompt: nothing is sent as such
    assert got.sent_tokens <= got.available, got


@PROPERTY
@given(conversation=conversations, query=queries, budget=budgets)
def test_the_report_the_span_and_the_client_agree_on_the_count(
    driver: Any, conversation: list[list[str]], query: str, budget: int
) -> None:
    needs(driver, "report")
    got = _sent(driver, conversation, query, budget)
    counts = {"report": got.report_tokens, "received": got.sent_tokens}
    if "span" in driver.can:
        counts["span"] = got.span_tokens
    assert counts["report"] is not None, "the door's report gives no count"
    given_counts = {k: v for k, v in counts.items() if v is not None or k == "span"}
    assert len(set(given_counts.values())) == 1, given_counts
