"""What is returned or sent is exactly what the report includes: the same ids, texts, order.

(A door without a report whose choice can be read back, ``chosen``: exactly what it chose.)

Over random conversations: one or two sessions of one user (the other session's turns reach
the context by search), pinned facts where the door pins, and budgets from tight to roomy.
"""

from __future__ import annotations

from typing import Any

from _suite import PROPERTY, WORDS, conversations, fresh, needs, tagged, turns_of
from hypothesis import given
from hypothesis import strategies as st

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
