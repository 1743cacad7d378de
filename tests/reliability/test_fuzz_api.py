"""Hypothesis fuzz of the public API with hostile arguments: only ctxbudget errors, never damage.

Every call gets arguments drawn from plausible values mixed with hostile ones (None, bools,
huge ints, NaN, bytes, lone surrogates, NUL, nested lists and dicts, datetimes, objects). The
properties, for each call:

- it succeeds or raises a `CtxBudgetError` subclass: never a TypeError, KeyError,
  AttributeError, a chromadb or tiktoken exception from inside;
- after an error the store holds exactly what it held before (whole-collection count and every
  record of the namespace);
- after a write, what was written reads back as given; after an assembly, the reported tokens fit
  the budget and equal a count of the output from scratch.

One memory (real model, embedded Chroma) for the module; examples add to it.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from ctxbudget import (
    Budget,
    ContextAssembler,
    ContextItem,
    CtxBudgetError,
    TokenCounter,
)
from ctxbudget.core.report import AssembledContext
from ctxbudget.embed.local import LocalEmbedder
from ctxbudget.memory.context import ContextMemory
from ctxbudget.store.chroma_store import ChromaStore, Record

SETTINGS = settings(
    deadline=None,
    max_examples=200,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

surrogates = st.tuples(
    st.text(max_size=4), st.sampled_from(["\ud800", "\udbff\udbff", "\udc80", "\udfff"])
).map("".join)
weird_text = st.one_of(
    st.text(max_size=40),
    st.text(st.characters(codec="utf-8"), min_size=1, max_size=40),
    surrogates,
    st.sampled_from(["", " ", "\x00", "a\x00b", "<|endoftext|>", "\u202e", "🇫🇷", "\n" * 3]),
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(),
    weird_text,
    st.binary(max_size=8),
    st.datetimes(timezones=st.sampled_from([None, UTC])),
    st.builds(object),
)
hostile = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.tuples(inner, inner),
        st.dictionaries(st.one_of(st.text(max_size=6), st.integers()), inner, max_size=3),
    ),
    max_leaves=6,
)


@st.composite
def _either(draw: st.DrawFn, plausible: st.SearchStrategy[Any], odds: int) -> Any:
    # Shrinks towards the plausible value (0), so a failure shows the one hostile argument.
    return draw(hostile) if draw(st.integers(0, odds)) == odds else draw(plausible)


def either(plausible: st.SearchStrategy[Any], odds: int = 6) -> st.SearchStrategy[Any]:
    """A plausible value, or a hostile one (1 time in ``odds + 1``)."""
    return _either(plausible, odds)


def keys(plausible: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Dict keys: plausible, sometimes any hashable hostile value."""
    return st.integers(0, 6).flatmap(lambda k: scalars if k == 6 else plausible)


texts = either(st.text(min_size=1, max_size=80))
sessions = either(st.sampled_from(["s1", "s2", "s3"]))
roles = either(st.sampled_from(["user", "assistant", "system", "tool"]))
ids = either(st.one_of(st.none(), st.text(min_size=1, max_size=6)))
metadata_values = either(
    st.one_of(st.text(max_size=10), st.integers(-(2**63), 2**63 - 1), st.floats(allow_nan=False))
)
metadatas = either(
    st.one_of(
        st.none(),
        st.dictionaries(keys(st.text(max_size=8)), metadata_values, max_size=3),
    )
)
timestamps = either(
    st.one_of(
        st.none(),
        st.floats(min_value=0, max_value=4e9),
        st.datetimes(timezones=st.sampled_from([None, UTC])).map(lambda d: d.isoformat()),
    )
)
budgets = either(
    st.one_of(
        st.integers(min_value=1, max_value=5000),
        st.integers(min_value=-5, max_value=10**30),
        st.builds(
            Budget,
            window=st.integers(min_value=50, max_value=6000),
            reserve=st.integers(min_value=0, max_value=40),
        ),
    )
)


@st.composite
def messages(draw: st.DrawFn) -> Any:
    if draw(st.integers(0, 19)) == 19:
        return draw(hostile)
    if draw(st.booleans()):
        return (draw(roles), draw(texts))
    message: dict[Any, Any] = {"role": draw(roles), "text": draw(texts)}
    for key, strategy in (
        ("id", ids),
        ("timestamp", timestamps),
        ("metadata", metadatas),
        ("name", either(st.text(max_size=8))),
        ("tool_calls", either(st.lists(st.text(min_size=1, max_size=5), max_size=2))),
        ("tool_call_id", either(st.text(min_size=1, max_size=5))),
        ("user_id", either(st.text(min_size=1, max_size=5))),
    ):
        if draw(st.integers(0, 5)) == 5:
            message[key] = draw(strategy)
    return message


@pytest.fixture(scope="module")
def memory(
    tmp_path_factory: pytest.TempPathFactory, embedder: LocalEmbedder
) -> Iterator[ContextMemory]:
    store = ChromaStore(tmp_path_factory.mktemp("fuzz-api"), embedder=embedder)
    mem = ContextMemory(store=store, namespace=f"fuzz-{uuid.uuid4().hex[:8]}")
    mem.add_messages("s1", [("user", "I moved to Porto."), ("assistant", "Nice!")], user_id="u1")
    mem.pin(user_id="u1", text="User is vegetarian.")
    mem.add_documents(["Porto is in the north of Portugal."])
    yield mem
    store.close()


def snapshot(mem: ContextMemory) -> tuple[int, list[Record]]:
    mem.flush()  # what it acknowledged, stored (reads of the store itself do not wait)
    return mem.store.count(), sorted(mem.store.find(namespace=mem.namespace), key=lambda r: r.id)


def attempt(call: Callable[[], Any]) -> tuple[Any, CtxBudgetError | None]:
    """Run the call; a ctxbudget error is an answer, anything else fails the test."""
    try:
        result = call()
    except CtxBudgetError as exc:
        event(f"refused: {type(exc).__name__}")
        assert str(exc).strip(), "an error says what was wrong"
        assert "Traceback" not in str(exc)
        return None, exc
    event("accepted")
    return result, None


def check_assembled(ctx: AssembledContext, counter: TokenCounter) -> None:
    assert ctx.tokens_used <= ctx.tokens_available
    exact = counter.count_messages(ctx.to_messages())
    if ctx.format != "messages":
        exact = max(exact, counter.count(ctx.render()))
    assert ctx.tokens_used == exact


@SETTINGS
@given(
    session=sessions,
    role=roles,
    text=texts,
    extra=st.fixed_dictionaries(
        {},
        optional={
            "id": ids,
            "timestamp": timestamps,
            "metadata": metadatas,
            "name": either(st.text(max_size=8)),
            "tool_calls": either(st.lists(st.text(min_size=1, max_size=5), max_size=2)),
            "tool_call_id": either(st.text(min_size=1, max_size=5)),
            "user_id": either(st.sampled_from(["u1", "u2"])),
        },
    ),
)
def test_add_message(
    memory: ContextMemory, session: Any, role: Any, text: Any, extra: dict[str, Any]
) -> None:
    before = snapshot(memory)
    result, error = attempt(lambda: memory.add_message(session, role, text, **extra))
    if error is not None:
        assert snapshot(memory) == before
        return
    memory.flush()
    stored = memory.store.get([result], namespace=memory.namespace, session_id=session)
    # A turn that only calls tools is stored with empty text: no placeholder.
    assert [r.text for r in stored] == [text if text.strip() else ""]
    assert stored[0].session_id == session and stored[0].role == role


@SETTINGS
@given(
    session=sessions,
    batch=either(st.lists(messages(), min_size=1, max_size=5)),
    batch_size=either(st.sampled_from([256, 1, 2, 0, -1])),
)
def test_add_messages(memory: ContextMemory, session: Any, batch: Any, batch_size: Any) -> None:
    before = snapshot(memory)
    result, error = attempt(
        lambda: memory.add_messages(session, batch, batch_size=batch_size, progress=False)
    )
    if error is not None:
        assert snapshot(memory) == before
        return
    assert len(result) == len(batch)
    memory.flush()
    found = {
        r.id: r for r in memory.store.get(result, namespace=memory.namespace, session_id=session)
    }
    assert set(found) == set(result)


@SETTINGS
@given(
    session=st.one_of(st.none(), sessions),
    text=either(st.text(min_size=1, max_size=60)),
    user=st.one_of(st.none(), either(st.just("u1"))),
    pin_id=ids,
    metadata=metadatas,
)
def test_pin(
    memory: ContextMemory, session: Any, text: Any, user: Any, pin_id: Any, metadata: Any
) -> None:
    before = snapshot(memory)
    result, error = attempt(
        lambda: memory.pin(session, text, user_id=user, id=pin_id, metadata=metadata)
    )
    if error is not None:
        assert snapshot(memory) == before
        return
    scope = {"session_id": session} if session is not None else {"user_id": user}
    stored = memory.store.get([result], namespace=memory.namespace, **scope)
    assert [r.text for r in stored] == [text]


@settings(SETTINGS, max_examples=100)
@given(
    documents=either(
        st.lists(
            st.one_of(
                texts,
                st.tuples(st.text(min_size=1, max_size=5), texts),
                st.fixed_dictionaries(
                    {"text": texts}, optional={"id": ids, "metadata": metadatas, "source": texts}
                ),
            ),
            min_size=1,
            max_size=3,
        )
    ),
    collection=either(st.sampled_from(["kb", "notes"])),
    chunk_tokens=either(st.one_of(st.just(200), st.integers(min_value=-2, max_value=40))),
    overlap=either(st.one_of(st.just(30), st.integers(min_value=-2, max_value=40))),
)
def test_add_documents(
    memory: ContextMemory, documents: Any, collection: Any, chunk_tokens: Any, overlap: Any
) -> None:
    before = snapshot(memory)
    result, error = attempt(
        lambda: memory.add_documents(
            documents, collection=collection, chunk_tokens=chunk_tokens, overlap=overlap
        )
    )
    if error is not None:
        assert snapshot(memory) == before
        return
    stored_in = "kb" if collection is None else collection  # None: the default collection
    chunks = memory.store.get(result, namespace=memory.namespace, collection=stored_in)
    assert len(chunks) == len(set(result))  # a text given twice without an id is stored once
    counter = memory.counter
    assert all(counter.count(c.text) <= chunk_tokens for c in chunks)


@settings(SETTINGS, max_examples=150)
@given(
    session=sessions,
    query=texts,
    budget=budgets,
    options=st.fixed_dictionaries(
        {},
        optional={
            "model": either(st.sampled_from(["gpt-4o", "gpt-4", "claude-sonnet-4"])),
            "system": either(st.text(max_size=40)),
            "format": either(st.sampled_from(["messages", "text", "compact"])),
            "tools": either(
                st.lists(
                    st.one_of(
                        st.text(max_size=20),
                        st.fixed_dictionaries({"name": st.text(max_size=8)}),
                    ),
                    max_size=2,
                )
            ),
            "documents": either(st.sampled_from([True, False, "kb", ["kb", "notes"], []])),
            "user_id": either(st.just("u1")),
            "other_sessions": st.one_of(st.none(), st.booleans()),
        },
    ),
)
def test_assemble(
    memory: ContextMemory, session: Any, query: Any, budget: Any, options: dict[str, Any]
) -> None:
    before = snapshot(memory)
    ctx, error = attempt(lambda: memory.assemble(session, query, budget=budget, **options))
    assert snapshot(memory) == before  # reading never writes
    if error is None:
        check_assembled(ctx, memory.counter_for(options.get("model")))


COUNTER = TokenCounter.for_model("gpt-4o")
image_parts = st.fixed_dictionaries(
    {"type": st.sampled_from(["image_url", "image", "input_image"])},
    optional={k: hostile for k in ("image_url", "width", "height", "detail", "data")},
)


@settings(SETTINGS, max_examples=300)
@given(
    value=either(weird_text),
    message_list=either(
        st.lists(
            st.fixed_dictionaries(
                {"role": roles},
                optional={
                    "content": st.one_of(
                        texts,
                        st.lists(
                            st.one_of(
                                texts,
                                st.fixed_dictionaries({"type": st.just("text"), "text": texts}),
                                st.fixed_dictionaries({"type": hostile}),
                                image_parts,
                                hostile,
                            ),
                            max_size=3,
                        ),
                    ),
                    "name": either(st.text(max_size=5)),
                    "tool_calls": hostile,
                    "tool_call_id": hostile,
                },
            ),
            max_size=3,
        )
    ),
)
def test_token_counter(value: Any, message_list: Any) -> None:
    count, error = attempt(lambda: COUNTER.count(value))
    if error is None:
        assert count == len(COUNTER.encode(value))
    attempt(lambda: COUNTER.count_many([value, value]))
    total, error = attempt(lambda: COUNTER.count_messages(message_list))
    if error is None:
        assert isinstance(total, int) and total >= COUNTER.reply_priming


item_args = st.fixed_dictionaries(
    {"id": either(st.text(min_size=1, max_size=5)), "text": texts},
    optional={
        "tier": either(st.sampled_from([0, 1, 2, 3, 4, 5, 6, 7])),
        "score": either(st.floats(min_value=0, max_value=5)),
        "role": roles,
        "shrink": either(st.sampled_from(["never", "drop", "truncate", "summarize"])),
        "timestamp": either(st.floats(min_value=0, max_value=4e9)),
        "name": either(st.text(max_size=5)),
        "tokens": either(st.none()),
        "cluster_id": either(st.sampled_from(["c1", "c2"])),
        "summary_of": either(st.lists(st.sampled_from(["0", "1"]), max_size=2).map(tuple)),
        "source": either(st.text(max_size=5)),
        "tool_calls": either(st.lists(st.text(min_size=1, max_size=3), max_size=2).map(tuple)),
        "tool_call_id": either(st.text(min_size=1, max_size=3)),
        "metadata": either(st.dictionaries(st.text(max_size=3), st.integers(), max_size=2)),
        "embedding": either(st.lists(st.floats(-1, 1), min_size=2, max_size=2)),
    },
)


@settings(SETTINGS, max_examples=200)
@given(
    raw_items=st.lists(either(item_args), max_size=6),
    budget=budgets,
    fmt=either(st.sampled_from(["messages", "text", "compact"])),
)
def test_context_assembler(raw_items: list[Any], budget: Any, fmt: Any) -> None:
    items: list[Any] = []
    for raw in raw_items:
        if isinstance(raw, dict) and "id" in raw and "text" in raw:
            item, error = attempt(lambda raw=raw: ContextItem(**raw))
            items.append(item if error is None else raw)
        else:
            items.append(raw)
    ctx, error = attempt(
        lambda: ContextAssembler(COUNTER).assemble(items, budget=budget, format=fmt)
    )
    if error is None:
        check_assembled(ctx, COUNTER)


@settings(SETTINGS, max_examples=300)
@given(
    window=either(st.integers(min_value=-10, max_value=10**20)),
    reserve=either(st.integers(min_value=-2, max_value=10**3)),
    safety=either(st.integers(min_value=-2, max_value=10**2)),
    floors=either(st.dictionaries(keys(st.integers(0, 7)), either(st.floats(0, 0.3)), max_size=3)),
    caps=either(
        st.dictionaries(keys(st.integers(0, 7)), either(st.integers(0, 10**4)), max_size=3)
    ),
)
def test_budget(window: Any, reserve: Any, safety: Any, floors: Any, caps: Any) -> None:
    budget, error = attempt(
        lambda: Budget(window=window, reserve=reserve, safety=safety, floors=floors, caps=caps)
    )
    if error is None:
        assert budget.available == window - reserve - safety > 0
        assert sum(budget.floor_tokens(t) for t in budget.floors) <= budget.available
        for tier in budget.caps:
            cap = budget.cap_tokens(tier)
            assert cap is not None and cap >= budget.floor_tokens(tier)
            assert not math.isnan(cap)
