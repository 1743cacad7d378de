"""It explains itself: every offered item is included or pruned with its reason, never both.

Over random conversations longer than their budget (two sessions of one user, a session pin
where the door pins, tight budgets: most calls prune), the door's own report, in the shape its
caller reads it (`explained`):

- no item is included twice;
- every pruned item has one of the core's reasons (`PruneReason`), and an item is both
  included and pruned only as a ``duplicate`` (the same text twice); a duplicate's kept item,
  where the report names it, is included;
- what was offered is exactly what was included or pruned (the report's per-tier ``offered``
  counts, where it gives them; summaries packing made count as included, not offered);
- nothing pruned reached the caller: no pruned item's own id is among what the caller got.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from _suite import WORDS, fresh, needs, tagged, turns_of
from explained import explained
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ctxbudget import PruneReason

SHARES_SERVERS = True  # each test uses fresh ids: an MCP server door is the session's one
REASONS = {r.value for r in PruneReason}
DUPLICATE = PruneReason.DUPLICATE.value
MADE = "ctxbudget:summary:"  # summaries packing writes in the call: included, never offered

longer = st.lists(
    st.lists(st.sampled_from(WORDS), min_size=4, max_size=16), min_size=4, max_size=14
)
queries = st.lists(st.sampled_from(WORDS), min_size=1, max_size=8).map(" ".join)


@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    conversation=longer,
    other=st.one_of(st.none(), longer),
    pin=st.one_of(st.none(), st.lists(st.sampled_from(WORDS), min_size=2, max_size=6)),
    query=queries,
    budget=st.integers(min_value=80, max_value=400),  # tight: most calls prune
)
@example(  # an agent's message cut, then dropped for its memory copy, which was cut too
    conversation=[
        ["lisbon"] * 4,
        ["lisbon"] * 4,
        ["lisbon", "lisbon", "cat", "cat"],
        ["lisbon"] * 5,
    ],
    other=None,
    pin=None,
    query="lisbon",
    budget=80,
)
def test_every_offered_item_is_included_or_pruned_with_its_reason(
    driver: Any,
    conversation: list[list[str]],
    other: list[list[str]] | None,
    pin: list[str] | None,
    query: str,
    budget: int,
) -> None:
    needs(driver, "send")
    needs(driver, "report")
    session, user = fresh("s"), fresh("u")
    if "add" in driver.can:
        driver.add(session, user, turns_of(conversation, session))
        if other is not None:
            earlier = fresh("s")
            driver.add(earlier, user, turns_of(other, earlier))
    if pin is not None and "pin" in driver.can:
        driver.pin(tagged(pin), f"{session}-pin", session=session, user=None)
    got = driver.send(session, user, f"{query}?", budget)
    report = explained(got.report)

    included = Counter(report.included)
    assert max(included.values(), default=1) == 1, f"included twice: {included.most_common(3)}"
    for pruned in report.pruned:
        what = f"{pruned.id} pruned for {pruned.reason!r}"
        assert pruned.reason in REASONS, f"{what}: not a reason of the core"
        if pruned.id in included:
            assert pruned.reason == DUPLICATE, f"{what}, and included"
        if pruned.reason == DUPLICATE and pruned.duplicate_of is not None:
            assert pruned.duplicate_of in included, f"{what} of {pruned.duplicate_of}: not kept"
    assert len({p.id for p in report.pruned}) == len(report.pruned), "an item pruned twice"
    if report.offered is not None:
        made = sum(1 for i in report.included if i.startswith(MADE))
        assert len(report.included) + len(report.pruned) == report.offered + made, (
            f"{report.offered} offered, {len(report.included)} included (of which {made} made "
            f"in the call), {len(report.pruned)} pruned"
        )
    received = {caller_id for caller_id, _ in got.got}
    included_refs = {caller_id for caller_id, _ in got.chosen}
    for pruned in report.pruned:
        if pruned.caller_id is not None and pruned.caller_id not in included_refs:
            assert pruned.caller_id not in received, f"{pruned.caller_id} pruned but received"
