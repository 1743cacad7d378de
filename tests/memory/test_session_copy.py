"""A session kept in memory reads only what is new, and sees exactly what a fresh read sees.

`read_session` with the session's index (``held``) reads only the messages after the index's
last one while the session's version is unchanged (no message deleted or replaced), and takes
the older part of the recent window from the index. Whatever happened to the session (messages
added in batches, by several users, deleted, replaced, a window larger than the session), the
state it returns must be the one a read without the index returns.
"""

from __future__ import annotations

import uuid

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxbudget.memory.reading.held_indexes import SessionIndexes
from ctxbudget.memory.reading.session_state import SessionState, read_session
from ctxbudget.store.chroma_store import Record
from tests.conftest import StoreFactory

NS = "default"

_add = st.tuples(st.just("add"), st.integers(1, 30), st.sampled_from([None, "a", "b"]), st.just(0))
_change = st.tuples(
    st.sampled_from(["delete", "replace"]), st.just(0), st.just(None), st.integers(0, 10**6)
)
_read = st.tuples(st.just("read"), st.just(0), st.just(None), st.just(0))


def _summary(state: SessionState) -> tuple[object, ...]:
    return (
        state.last_seq,
        [(r.id, r.seq, r.text, r.role) for r in state.recent],
        sorted(state.skip),
        state.user_id,
        sorted(r.id for r in state.pins),
        sorted(r.id for r in state.summaries),
    )


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    steps=st.lists(st.one_of(_add, _change, _read), min_size=1, max_size=12),
    window=st.sampled_from([0, 1, 5, 40]),
)
def test_a_held_copy_reads_only_whats_new_and_gives_the_same_state(
    open_store: StoreFactory,
    steps: list[tuple[str, int, str | None, int]],
    window: int,
) -> None:
    store = open_store(collection=f"c{uuid.uuid4().hex[:16]}")  # a fresh store per example
    indexes = SessionIndexes()
    ids: list[str] = []
    made = 0
    try:
        for op, count, user, pick in [*steps, ("read", 0, None, 0)]:
            if op == "add":
                start, made = made, made + count
                batch = [
                    Record(
                        id=f"m{start + i}",
                        kind="message",
                        text=f"message {start + i}",
                        role="user" if (start + i) % 2 == 0 else "assistant",
                        session_id="s",
                        user_id=user,
                    )
                    for i in range(count)
                ]
                store.add(batch)
                ids += [r.id for r in batch]
            elif op in ("delete", "replace") and ids:
                target = ids[pick % len(ids)]
                if op == "delete":
                    store.delete([target], namespace=NS, session_id="s")
                    ids.remove(target)
                else:
                    edited = Record(
                        id=target, kind="message", text=f"{target}, edited", session_id="s"
                    )
                    store.add([edited], replace=True)
            held = indexes.held("s", 3600.0)
            kept = read_session(
                store, NS, "s", query="q", user_id=None, recent_messages=window, held=held
            )
            fresh = read_session(store, NS, "s", query="q", user_id=None, recent_messages=window)
            assert _summary(kept) == _summary(fresh)
            # What gather does next: the index is brought up to the session's newest message.
            index = indexes.current(
                store,
                NS,
                "s",
                kept.last_seq,
                kept.stamp,
                episode_gap=3600.0,
                counter_name="cl100k_base",
                newest=kept.newest,
            )
            if index is not None:
                stored = store.session_messages(namespace=NS, session_id="s")
                assert [r.id for r in index.records] == [r.id for r in stored]
    finally:
        store.close()
