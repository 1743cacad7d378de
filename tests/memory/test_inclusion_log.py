"""The inclusion log: every assembly recorded as it was assembled, kept per session, deleted with
its session and user, never visible to another session, user or namespace, and never able to
break an assembly. A real Chroma (embedded, then a server) and the real embedder throughout.
"""

from __future__ import annotations

import logging
import math
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import chromadb.errors
import pytest
from chromadb.api.models.Collection import Collection
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxbudget.core.assemble import ContextAssembler
from ctxbudget.core.items import ContextItem, Tier
from ctxbudget.core.report import AssembledContext
from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.errors import BudgetExceededError, ConfigurationError
from ctxbudget.memory.context import ContextMemory
from ctxbudget.memory.log.analytics import access_counts
from ctxbudget.memory.log.api import InclusionLogConfig
from ctxbudget.memory.policy.config import MemoryConfig
from ctxbudget.store.chroma_store import ChromaStore
from ctxbudget.store.partitions import log_partition
from ctxbudget.tokens.counter import TokenCounter

NS = "default"
SYSTEM = "You are a helpful assistant. Answer from the context."
TURNS = [
    ("user", "I adopted a beagle called Pixel last spring."),
    ("assistant", "Pixel is a lovely name for a beagle."),
    ("user", "We are planning a trip to Lisbon in May."),
    ("assistant", "Lisbon in May is warm; book the tram tours early."),
    ("user", "My sister Ana lives in Porto and teaches piano."),
    ("assistant", "Porto is three hours from Lisbon by train."),
    ("user", "I started running 10k on Tuesdays."),
    ("assistant", "Tuesday runs are a good habit."),
]


def chat(memory: ContextMemory, session: str, user: str | None) -> None:
    memory.add_messages(session, TURNS, user_id=user, progress=False)


def collections(store: ChromaStore) -> set[str]:
    return {c.name for c in store._client.list_collections()}


@pytest.fixture
def store(open_store: Any) -> ChromaStore:
    opened: ChromaStore = open_store()
    return opened


@pytest.fixture
def memory(store: ChromaStore) -> Iterator[ContextMemory]:
    mem = ContextMemory(store=store)
    chat(mem, "s1", "u1")
    yield mem
    mem.flush()


# -- what a record holds ---------------------------------------------------------------------


def test_each_assembly_is_logged_as_it_was_assembled(memory: ContextMemory) -> None:
    counter = TokenCounter.for_model("gpt-4o")
    results = [
        memory.assemble("s1", query, budget=120, system=SYSTEM)
        for query in ("Where does my sister live?", "What is my dog called?", "Trip plans?")
    ]
    records = memory.contexts("s1")
    assert len(records) == 3
    assert [r.id for r in records] == sorted((r.id for r in records), reverse=True)
    assert records[0].time >= records[1].time >= records[2].time
    for record, result in zip(records, reversed(results), strict=True):
        assert record.session_id == "s1" and record.user_id == "u1"
        assert (record.model, record.format) == ("gpt-4o", "messages")
        assert record.error is None and not record.over_budget
        assert record.included_ids == result.included_ids
        texts = {item.id: item for item in result.included}
        for entry in record.included:
            item = texts[entry.id]
            assert entry.tier == int(item.tier)
            assert entry.tokens == (
                item.tokens if item.tokens is not None else counter.count(item.text)
            )
        assert [(p.id, p.tier, p.reason) for p in record.pruned] == [
            (p.item.id, int(p.item.tier), p.reason.value) for p in result.pruned
        ]
        assert record.pruned, "a budget of 120 tokens cannot hold the whole session"
        assert {t.tier: (t.offered, t.kept, t.pruned, t.tokens) for t in record.tiers} == {
            t: (u.offered, u.kept, u.pruned, u.tokens) for t, u in result.tiers.items()
        }
        assert (record.window, record.tokens_available) == (
            result.budget.window,
            result.tokens_available,
        )
        assert record.tokens_used == result.tokens_used
        floors = {t.tier: t.floor for t in record.tiers}
        assert floors.get(int(Tier.RETRIEVED), 0) == result.budget.floor_tokens(Tier.RETRIEVED)
    assert [r.id for r in memory.contexts("s1", limit=2)] == [r.id for r in records[:2]]
    assert memory.contexts("s1", limit=0) == []
    with pytest.raises(ConfigurationError, match="limit"):
        memory.contexts("s1", limit=-1)


def test_an_over_budget_error_is_logged_and_still_raised(memory: ContextMemory) -> None:
    with pytest.raises(BudgetExceededError) as raised:
        memory.assemble("s1", "Where does Ana live?", budget=20, system=SYSTEM * 5)
    (record,) = memory.contexts("s1")
    assert record.over_budget and record.error == str(raised.value)
    assert record.required == raised.value.required and record.tokens_available == 20
    assert record.included == () and record.pruned == () and record.tokens_used == 0


def test_the_log_can_be_off(store: ChromaStore) -> None:
    silent = ContextMemory(store=store, inclusion_log=False)
    chat(silent, "s1", "u1")
    silent.assemble("s1", "Where does Ana live?", budget=200)
    assert silent.contexts("s1") == []
    assert log_partition(store.collection, NS, "s1") not in collections(store)


def test_bad_options_are_refused(store: ChromaStore) -> None:
    with pytest.raises(ConfigurationError, match="inclusion_log"):
        ContextMemory(store=store, inclusion_log="yes")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="retain"):
        InclusionLogConfig(retain=0)
    with pytest.raises(ConfigurationError, match="access_salience"):
        MemoryConfig(access_salience=-0.5)
    with pytest.raises(ConfigurationError, match="access_salience"):
        MemoryConfig(access_salience=math.nan)
    with pytest.raises(ConfigurationError, match="inclusion_log=False"):
        ContextMemory(store=store, config=MemoryConfig(access_salience=1.0), inclusion_log=False)


# -- retention, reopening ----------------------------------------------------------------------


def test_retention_keeps_the_newest_records(store: ChromaStore) -> None:
    memory = ContextMemory(store=store, inclusion_log=InclusionLogConfig(retain=3))
    chat(memory, "s1", "u1")
    for budget in range(1000, 1006):
        memory.assemble("s1", "Where does Ana live?", budget=budget)
        if budget == 1002:
            memory.flush()  # two writes: the limit holds across them
    assert [r.window for r in memory.contexts("s1")] == [1005, 1004, 1003]
    assert len(store.logs.read(NS, "s1")) == 3


def test_the_log_survives_close_and_reopen(tmp_path: Path, embedder: OnnxEmbedder) -> None:
    folder = tmp_path / "memory"
    first = ContextMemory(path=folder, embedder=embedder)
    chat(first, "s1", "u1")
    first.assemble("s1", "Where does Ana live?", budget=300)
    first.assemble("s1", "What is my dog called?", budget=300)
    first.close()  # no flush: closing writes what is queued
    again = ContextMemory(path=folder, embedder=embedder)
    try:
        assert len(again.contexts("s1")) == 2
        assert again.budget_stats("s1").assemblies == 2
    finally:
        again.close()


# -- deletion ----------------------------------------------------------------------------------


def test_delete_session_deletes_its_log_and_the_records_that_recalled_it(
    memory: ContextMemory, store: ChromaStore
) -> None:
    # Until 2026-11-30 the records of other sessions' logs that recalled it stayed
    # (tests/memory/test_delete_session_logs.py: with their text, queued ones, a server).
    counter = TokenCounter.for_model("gpt-4o")
    chat(memory, "s2", "u1")  # u1's other session: recalls s1's messages
    chat(memory, "s3", "u2")  # another user's: never recalls them
    memory.assemble("s1", "Where does Ana live?", budget=300)
    memory.assemble("s2", "What is my dog called?", budget=300)
    memory.inclusion_log.log(
        assembled(counter, 3), session_id="s2", user_id="u1", model="gpt-4o", counter=counter
    )
    memory.assemble("s3", "What is my dog called?", budget=300)
    memory.flush()
    assert memory.inclusion_log.sessions() == ["s1", "s2", "s3"]
    named = [(r, [*r.included_ids, *(p.id for p in r.pruned)]) for r in memory.contexts("s2")]
    recalled = [r for r, ids in named if any('["s1",' in i for i in ids)]
    assert len(recalled) == 1, "s2's assembly named messages of s1"
    kept = [r.id for r in memory.contexts("s2") if r not in recalled]
    assert len(kept) == 1
    others = [r.id for r in memory.contexts("s3")]
    memory.delete_session("s1")
    assert memory.contexts("s1") == []
    assert [r.id for r in memory.contexts("s2")] == kept
    assert [r.id for r in memory.contexts("s3")] == others
    assert memory.inclusion_log.sessions() == ["s2", "s3"]
    assert log_partition(store.collection, NS, "s1") not in collections(store)


def test_records_queued_when_their_session_is_deleted_are_never_written(
    memory: ContextMemory, store: ChromaStore
) -> None:
    store.logs.linger = store.logs.max_wait = 60.0  # the record stays queued until the deletion
    memory.assemble("s1", "Where does Ana live?", budget=300)
    memory.delete_session("s1")
    memory.flush()
    assert memory.contexts("s1") == []
    assert log_partition(store.collection, NS, "s1") not in collections(store)


def test_delete_user_deletes_their_records_in_every_log(store: ChromaStore) -> None:
    memory = ContextMemory(store=store)
    chat(memory, "s1", "u1")  # u1's session
    chat(memory, "s2", "u2")  # u2's session, where u1 is assembled for too
    chat(memory, "s3", "u2")  # u2's session, only ever assembled for u1
    memory.assemble("s1", "Where does Ana live?", budget=300)
    memory.assemble("s2", "Where does Ana live?", budget=300, user_id="u1")
    memory.assemble("s2", "What is my dog called?", budget=300, user_id="u2")
    memory.assemble("s3", "What is my dog called?", budget=300, user_id="u1")
    memory.flush()
    assert memory.inclusion_log.sessions(user_id="u1") == ["s1", "s2", "s3"]
    memory.delete_user("u1")
    assert memory.contexts("s1") == [] and memory.contexts("s3") == []
    assert [r.user_id for r in memory.contexts("s2")] == ["u2"]
    assert memory.inclusion_log.sessions(user_id="u1") == []
    assert memory.inclusion_log.sessions() == ["s2"]
    assert log_partition(store.collection, NS, "s3") not in collections(store)
    assert memory.budget_stats(user_id="u1").assemblies == 0
    assert memory.budget_stats(user_id="u2").assemblies == 1
    assert log_partition(store.collection, NS, "s1") not in collections(store)


def test_a_store_level_delete_user_drops_the_logs_of_sessions_left_empty(
    store: ChromaStore,
) -> None:
    memory = ContextMemory(store=store)
    chat(memory, "s1", "u1")
    memory.assemble("s1", "Where does Ana live?", budget=300)
    memory.flush()
    store.delete_user(namespace=NS, user_id="u1")  # not through ContextMemory.delete_user
    assert memory.contexts("s1") == []
    assert log_partition(store.collection, NS, "s1") not in collections(store)


# -- isolation ---------------------------------------------------------------------------------


def assembled(counter: TokenCounter, n: int) -> AssembledContext:
    items = [ContextItem(f"m{i}", f"fact number {i}", tier=Tier.RETRIEVED) for i in range(n)]
    items.append(ContextItem("ctxbudget:query", "what?", tier=Tier.QUERY, role="user"))
    return ContextAssembler(counter).assemble(items, budget=40)


logs = st.lists(
    st.tuples(
        st.sampled_from(["a", "b"]),
        st.sampled_from(["s1", "s2"]),
        st.sampled_from([None, "u1", "u2"]),
        st.integers(1, 12),
    ),
    min_size=1,
    max_size=8,
)


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(logs)
def test_no_session_user_or_namespace_sees_another_ones_log(
    store: ChromaStore, ops: list[tuple[str, str, str | None, int]]
) -> None:
    run = uuid.uuid4().hex[:8]  # each example in namespaces of its own
    counter = TokenCounter.for_model("gpt-4o")
    memories = {ns: ContextMemory(store=store, namespace=f"{ns}-{run}") for ns in ("a", "b")}
    expected: dict[tuple[str, str], list[tuple[str | None, list[str]]]] = {}
    for ns, session, user, n in ops:
        result = assembled(counter, n)
        memories[ns].inclusion_log.log(
            result, session_id=session, user_id=user, model="gpt-4o", counter=counter
        )
        expected.setdefault((ns, session), []).append((user, result.included_ids))
    for ns, memory in memories.items():
        for session in ("s1", "s2"):
            got = [(r.user_id, r.included_ids) for r in reversed(memory.contexts(session))]
            assert got == expected.get((ns, session), [])
        for user in ("u1", "u2"):
            mine = [u for (n, _), rows in expected.items() if n == ns for u, _ in rows]
            assert memory.budget_stats(user_id=user).assemblies == mine.count(user)
        # Log records are never records: no read, count or session list of the store sees them.
        assert store.count(namespace=memory.namespace) == 0
        assert store.list_sessions(namespace=memory.namespace) == []


# -- failures ----------------------------------------------------------------------------------


def test_write_failures_never_break_an_assembly(
    memory: ContextMemory,
    store: ChromaStore,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    upsert = Collection.upsert

    def failing(self: Collection, *args: Any, **kwargs: Any) -> Any:
        if ".l-" in self.name:
            raise chromadb.errors.ChromaError("disk full")
        return upsert(self, *args, **kwargs)

    monkeypatch.setattr(Collection, "upsert", failing)
    with caplog.at_level(logging.WARNING, logger="ctxbudget.store.context_log"):
        result = memory.assemble("s1", "Where does Ana live?", budget=300)
        memory.flush()
    assert result.included_ids
    assert store.logs.failed == 1
    assert "context log entries dropped" in caplog.text
    assert memory.contexts("s1") == []
    monkeypatch.setattr(Collection, "upsert", upsert)
    memory.assemble("s1", "Where does Ana live?", budget=300)
    assert len(memory.contexts("s1")) == 1


def test_a_full_queue_drops_records_instead_of_waiting(
    memory: ContextMemory, store: ChromaStore
) -> None:
    store.logs.linger = store.logs.max_wait = 60.0
    store.logs.max_pending = 2
    for _ in range(4):
        memory.assemble("s1", "Where does Ana live?", budget=300)
    assert store.logs.dropped == 2
    memory.flush()
    assert len(memory.contexts("s1")) == 2


# -- access counts and access salience -----------------------------------------------------------


def test_access_counts_count_the_memories_each_assembly_included(memory: ContextMemory) -> None:
    for query in ("Where does Ana live?", "What is my dog called?", "Where does Ana live?"):
        memory.assemble("s1", query, budget=150, system=SYSTEM)
    counts = memory.access_counts("s1")
    records = memory.contexts("s1")
    assert counts == access_counts(records)
    assert counts and max(counts.values()) <= 3
    assert not any(key.startswith("ctxbudget:") and "query" in key for key in counts)
    included = {i for r in records for i in r.included_ids}
    assert set(counts) <= included


def test_access_salience_scores_up_what_was_included(store: ChromaStore) -> None:
    # A short recent window: older turns are retrieved candidates, with scores.
    plain = ContextMemory(store=store, config=MemoryConfig(recent_messages=2))
    chat(plain, "s1", "u1")
    weighed = ContextMemory(
        store=store, config=MemoryConfig(recent_messages=2, access_salience=1.0)
    )
    for _ in range(2):
        plain.assemble("s1", "Where does Ana live?", budget=150)
    counts = weighed.access_counts("s1")
    before = {i.id: i.score for i in plain.candidates("s1", "Tell me about Porto").retrieved}
    found = weighed.candidates("s1", "Tell me about Porto")
    after = {i.id: i.score for i in found.retrieved}
    assert before.keys() == after.keys()
    boosted = [key for key in after if counts.get(key)]
    assert boosted, "some retrieved candidate was included before"
    for key, score in after.items():
        factor = 1.0 + math.log1p(counts.get(key, 0))
        assert score == pytest.approx(before[key] * factor)
    scores = [i.score for i in found.retrieved]
    assert scores == sorted(scores, reverse=True)
    # The counts of this process follow what it logs next, within the retention limit.
    weighed.assemble("s1", "Tell me about Porto", budget=150)
    assert weighed.access_counts("s1") == access_counts(weighed.contexts("s1"))


def test_a_record_that_cannot_be_read_is_skipped_with_a_warning(
    memory: ContextMemory, store: ChromaStore, caplog: pytest.LogCaptureFixture
) -> None:
    memory.assemble("s1", "Where does Ana live?", budget=300)
    memory.flush()
    log = store._client.get_collection(log_partition(store.collection, NS, "s1"))
    log.upsert(ids=["00000000000000000001-broken"], embeddings=[[1.0]], metadatas=[{"r": "z1:!!"}])
    with caplog.at_level(logging.WARNING, logger="ctxbudget.memory.log.api"):
        records = memory.contexts("s1")
    assert len(records) == 1 and "skipped" in caplog.text
    assert memory.budget_stats("s1").assemblies == 1
