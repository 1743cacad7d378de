"""Closed means one clear error; a cancelled call has no effect or ends before the next starts.

- After ``close``, every call of the door raises one `CtxBudgetError` that says it is closed
  (not an ``AttributeError`` from deep inside a client).
- A call the close overtakes (closed from another thread while it runs) ends with its answer
  or that same clear error: the store is not released under it into a raw client error.
- A door that traces its calls ends the span of a call refused after close in error: a trace
  never shows a refused call as a success.
- An async door's writes made side by side (tasks created in turn, then gathered) are kept in
  the order they were made, as if each were awaited in turn.
- An async door's cancelled call either has no effect, or finishes before the same caller's
  next call starts: a session delete cancelled right after it started, then a turn added to
  that session, leaves the session either as it was plus the turn, or holding only the turn;
  never without the turn the caller added (and was acknowledged) after the cancellation.
"""

from __future__ import annotations

from typing import Any

import pytest
from _suite import eventually, fresh, kept, needs, tagged
from drivers.base import Place, Turn
from drivers.common import SPANS, overtaken_by_thread
from opentelemetry.trace import StatusCode

from ctxbudget.errors import CtxBudgetError

ROUNDS = 6


def _clear(error: BaseException | None) -> bool:
    return isinstance(error, CtxBudgetError) and "close" in str(error).lower()


def test_a_call_after_close_raises_one_clear_error(driver: Any) -> None:
    needs(driver, "close")
    driver.close()
    error = driver.after_close()
    assert _clear(error), f"{driver.name} after close: {error!r}"


def test_a_call_refused_after_close_ends_its_spans_in_error(driver: Any) -> None:
    needs(driver, "close")  # a door that makes no span passes: none ends well
    driver.close()
    SPANS.clear()
    error = driver.after_close()
    assert _clear(error), f"{driver.name} after close: {error!r}"
    spans = [s for s in SPANS.get_finished_spans() if s.name.startswith("ctxbudget")]
    passed = [s.name for s in spans if s.status.status_code is not StatusCode.ERROR]
    assert not passed, f"{driver.name}: a refused call's spans ended without an error: {passed}"


def test_every_call_after_close_raises_the_same_clear_error(driver: Any) -> None:
    needs(driver, "close_each")
    driver.close()
    SPANS.clear()
    raised = driver.after_close_each()
    unclear = {name: repr(error) for name, error in raised.items() if not _clear(error)}
    assert not unclear, f"{driver.name} after close: {unclear}"
    assert len({type(error) for error in raised.values()}) == 1, raised
    spans = [s for s in SPANS.get_finished_spans() if s.name.startswith("ctxbudget")]
    passed = [s.name for s in spans if s.status.status_code is not StatusCode.ERROR]
    assert not passed, f"{driver.name}: refused calls' spans ended without an error: {passed}"


@pytest.mark.parametrize(
    "place_kind", ["embedded", pytest.param("server", marks=pytest.mark.integration)]
)
@pytest.mark.parametrize("delay", [0.0, 0.02])
def test_a_call_the_close_overtakes_ends_with_its_answer_or_the_closed_error(
    driver: Any, delay: float
) -> None:
    needs(driver, "close")
    needs(driver, "send")
    session, user = fresh("s"), fresh("u")
    if "add" in driver.can:
        words = ["lisbon", "trip", "train", "museum"]
        turns = [
            Turn("user" if i % 2 == 0 else "assistant", tagged(words[i % 4 :]), f"{session}-{i}")
            for i in range(6)
        ]
        driver.add(session, user, turns)
    question = "Which museum on the trip?"
    overtaken = getattr(driver, "overtaken", None)  # an async door: aclose on the call's loop
    if overtaken is not None:
        error = overtaken(session, user, question, 400, delay)
    else:
        send = lambda: driver.send(session, user, question, 400)  # noqa: E731
        error = overtaken_by_thread(send, driver.close, delay)
    assert error is None or _clear(error), (
        f"{driver.name}: a call overtaken by close ended with {error!r}, not its answer or "
        "the closed error"
    )


def test_a_cancelled_call_has_no_effect_or_ends_before_the_next(driver: Any, place: Place) -> None:
    needs(driver, "cancel")
    needs(driver, "add")
    user = fresh("u")
    rounds: dict[str, tuple[list[str], str]] = {}
    for _ in range(ROUNDS):
        session = fresh("s")
        before = [
            Turn(
                "user" if i % 2 == 0 else "assistant", tagged(["lisbon", "trip"]), f"{session}-{i}"
            )
            for i in range(4)
        ]
        driver.add(session, user, before)
        driver.cancel_delete(session)
        after = Turn("user", tagged(["added", "after", "cancelling"]), f"{session}-after")
        driver.add(session, user, [after])
        rounds[session] = ([t.text for t in before], after.text)
    memory = place.open_memory()
    try:
        for session, (before_texts, after_text) in rounds.items():
            allowed = ([*before_texts, after_text], [after_text])
            stored = eventually(
                lambda session=session: kept(driver, memory, session, user),
                lambda texts, allowed=allowed: texts in allowed,
            )
            assert stored in allowed, (
                f"{driver.name}: after a cancelled delete and an add, the session holds "
                f"{stored}; expected all of {before_texts} and the new turn, or the new turn only"
            )
    finally:
        memory.close()


def test_async_adds_made_at_once_are_kept_in_call_order(driver: Any, place: Place) -> None:
    needs(driver, "gather")
    user, session = fresh("u"), fresh("s")
    turns = [
        Turn("user" if i % 2 == 0 else "assistant", tagged(["turn", str(i)]), f"{session}-{i}")
        for i in range(8)
    ]
    driver.add_gathered(session, user, turns)
    memory = place.open_memory()
    try:
        stored = eventually(
            lambda: kept(driver, memory, session, user), lambda texts: len(texts) >= len(turns)
        )
    finally:
        memory.close()
    assert stored == [t.text for t in turns], (
        f"{driver.name}: async adds made at once were kept as {stored}, not in call order"
    )
