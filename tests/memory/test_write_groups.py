"""`store_groups`: which acknowledged batches write-behind stores in one store call.

Properties over any queue of batches: the groups hold the batches in order, no key twice in a
group, no more records than the call's size unless one batch alone is larger, and each session's
first user named in a group is the first user named by the first batch of it that writes to that
session (the store gives a new session that user as owner and home: calls stored together
decide as calls stored one by one).
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ctxbudget.memory.writing.batching import pending_key, store_groups
from ctxbudget.store.journal import JournalBatch
from ctxbudget.store.records import Record

records = st.builds(
    lambda n, session, user: Record(
        id=f"m{n}", kind="message", text="hi", session_id=session, user_id=user, role="user"
    ),
    st.integers(0, 6),
    st.sampled_from(["s1", "s2"]),
    st.sampled_from([None, "ann", "bob"]),
)


def batch_of(number: int, rows: list[Record]) -> JournalBatch:
    unique = list({pending_key(r): r for r in rows}.values())  # a call stores an id once
    return JournalBatch(id=f"b{number}", records=tuple(unique))


def first_user(rows: list[Record], session: str) -> str | None:
    return next((r.user_id for r in rows if r.session_id == session and r.user_id), None)


@given(st.lists(st.lists(records, min_size=1, max_size=4), max_size=8), st.integers(1, 8))
def test_groups_decide_a_sessions_first_user_as_calls_one_by_one(
    calls: list[list[Record]], size: int
) -> None:
    work = [batch_of(n, rows) for n, rows in enumerate(calls)]
    groups = store_groups(work, size)
    assert [b for group in groups for b in group] == work
    for group in groups:
        keys = [pending_key(r) for b in group for r in b.records]
        assert len(keys) == len(set(keys))
        assert len(group) == 1 or len(keys) <= size
        rows = [r for b in group for r in b.records]
        for session in {r.session_id for r in rows if r.session_id is not None}:
            first = next(b for b in group if any(r.session_id == session for r in b.records))
            assert first_user(rows, session) == first_user(list(first.records), session)
