"""The same bad values are refused with the same error at every door, and the door answers on.

Each case is one argument set to one value, as the door's own caller writes it (see
`drivers.base.Inexpressible` for values a door's callers cannot write). The reference is the
core: `ContextMemory` (sync) on a place of its own, called with the same value. A door
refuses what the core refuses, with a clear error (a `CtxBudgetError`, the command line's one
error line, a tool error), whose message holds the core's (the part before the first ``;``,
without a ``message N (id ...):`` locator); where the door names error classes ("kinds"), the
same class. numpy numbers are accepted wherever a number is. An unknown argument name is
refused, naming it. After each case the door still answers a good call (servers stay up).
"""

from __future__ import annotations

import contextlib
import importlib
import re
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from _suite import fresh, needs
from drivers import DRIVERS, memory_sync
from drivers.base import Inexpressible, Place, Refusal, Turn
from nested_values import nested

from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.errors import CtxBudgetError


@dataclass(frozen=True)
class Case:
    argument: str
    value: Callable[[], object]
    accepted: bool = False


CASES: dict[str, Case] = {
    "budget-bool": Case("budget", lambda: True),
    "budget-numeric-text": Case("budget", lambda: "200"),
    "budget-nan": Case("budget", lambda: float("nan")),
    "budget-inf": Case("budget", lambda: float("inf")),
    "budget-minus-inf": Case("budget", lambda: float("-inf")),
    "budget-5000-digits": Case("budget", lambda: 10**5000),
    "budget-deep": Case("budget", nested),
    "budget-numpy": Case("budget", lambda: np.int64(300), accepted=True),
    "k-bool": Case("k", lambda: True),
    "k-numeric-text": Case("k", lambda: "7"),
    "k-5000-digits": Case("k", lambda: 10**5000),
    "k-numpy": Case("k", lambda: np.int64(3), accepted=True),
    "timestamp-bool": Case("timestamp", lambda: True),
    "timestamp-numeric-text": Case("timestamp", lambda: "1700000000"),
    "timestamp-nan": Case("timestamp", lambda: float("nan")),
    "timestamp-inf": Case("timestamp", lambda: float("inf")),
    "timestamp-5000-digits": Case("timestamp", lambda: 10**5000),
    "timestamp-numpy-int": Case("timestamp", lambda: np.int64(1_700_000_000), accepted=True),
    "timestamp-numpy-float": Case("timestamp", lambda: np.float64(1.7e9), accepted=True),
    "text-lone-surrogate": Case("text", lambda: "caf\ud800e"),
    "query-lone-surrogate": Case("query", lambda: "where\udfff now"),
    "session-lone-surrogate": Case("session_id", lambda: "s\ud800"),
    "text-10MB": Case("text", lambda: "x" * 10_000_000),
    "text-deep": Case("text", nested),
    "unknown-argument": Case("bugdet", lambda: 500),
}
KNOWN = {"budget", "k", "timestamp", "text", "query", "session_id", "user_id"}
QUERY_IS_TEXT = "query=text"  # in a driver's takes: its query is a stored or sent message too
_LOCATOR = re.compile(r"^message \d+(?: \(id '[^']*'\))?: ")


def core_phrase(message: str) -> str:
    """The part of the core's message every door must repeat."""
    return _LOCATOR.sub("", message).split("; ", 1)[0]


@pytest.fixture(scope="module")
def reference(
    tmp_path_factory: pytest.TempPathFactory, embedder: OnnxEmbedder
) -> Iterator[memory_sync.MemorySync]:
    """The core, on a place of its own (a server door may hold the suite's place)."""
    folder = tmp_path_factory.mktemp("reference") / "chroma"
    place = Place(str(folder), None, "ctxbudget", f"ref-{uuid.uuid4().hex[:8]}", embedder)
    core = memory_sync.make(place)
    yield core
    core.close()


@pytest.fixture(scope="module", params=sorted(DRIVERS), ids=sorted(DRIVERS))
def driver(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, embedder: OnnxEmbedder
) -> Iterator[Any]:
    """One door for every case of this module (the suite's is one per test): each case is
    followed by a good call, so one door that took every bad value in turn still answers.
    A server door starts its process once here, not once per case."""
    folder = tmp_path_factory.mktemp("bad-values") / "chroma"
    place = Place(str(folder), None, "ctxbudget", f"bad-{uuid.uuid4().hex[:8]}", embedder)
    door = importlib.import_module(f"drivers.{DRIVERS[request.param]}").make(place)
    yield door
    with contextlib.suppress(CtxBudgetError):
        door.close()


def still_answers(driver: Any) -> None:
    """A good call after the bad one gets its answer."""
    session, user = fresh("s"), fresh("u")
    if "add" in driver.can:
        driver.add(session, user, [Turn("user", "My cat is called Miso.", f"{session}-0")])
    if "send" in driver.can:
        got = driver.send(session, user, "What is my cat called?", 500)
        assert got.available <= 500


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_a_bad_value_is_refused_as_the_core_refuses_it(
    driver: Any, reference: memory_sync.MemorySync, case: str
) -> None:
    needs(driver, "bad")
    argument = CASES[case].argument
    takes = getattr(driver, "takes", None)
    if argument in KNOWN and takes is not None and argument not in takes:
        pytest.skip(f"{driver.name} takes no {argument!r} (its driver's takes)")
    value = CASES[case].value()
    try:
        got = driver.bad(argument, value)
    except Inexpressible as why:
        pytest.skip(f"{driver.name} cannot be given {case}: {why}")
    try:
        _judge(driver, reference, case, argument, value, got)
    finally:
        still_answers(driver)


def _judge(
    driver: Any,
    reference: memory_sync.MemorySync,
    case: str,
    argument: str,
    value: object,
    got: Refusal | None,
) -> None:
    if CASES[case].accepted:
        assert got is None, f"{driver.name} refused {case}, which the core must accept: {got}"
        return
    assert got is not None, f"{driver.name} accepted {case}"
    if argument not in KNOWN:  # an unknown name: refused, naming it (Python: a TypeError)
        assert argument in got.message, got
        return
    assert got.is_ctxbudget_error, f"{driver.name}: not a clear refusal of {case}: {got}"
    core = reference.bad(argument, value)
    assert core is not None and core.is_ctxbudget_error, f"the core itself: {core}"
    refusals = [core]
    if argument == "query" and QUERY_IS_TEXT in (getattr(driver, "takes", None) or ()):
        as_text = reference.bad("text", value)  # its query is a message too: either check
        if as_text is not None:
            refusals.append(as_text)
    assert any(core_phrase(each.message) in got.message for each in refusals), (
        f"{driver.name} refused {case} as {got.message!r}, the core as {core.message!r}"
    )
    if "kinds" in driver.can:
        assert got.kind in {each.kind for each in refusals}, (got, core)
