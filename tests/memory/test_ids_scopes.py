"""Ids are scoped, internal ids cannot collide with caller ids, tool-call turns round-trip.

Promises (docs/reliability.md, "Ids and scopes"):

- writes, reads, pins and deletes of one session or user never touch another's records, even
  when they use the same ids (ids drawn from ctxbudget's own internal shapes included);
- a caller id in ctxbudget's own id space is refused before anything is written, and a pin or
  message with any other id never breaks or displaces the system prompt, query or tools;
- a tool-call-only turn is stored with empty text and its canonical calls (malformed JSON
  arguments kept as text), reads back, and no placeholder reaches the model;
- a store written with layout 1 (``[namespace, id]`` keys) is migrated on open, nothing lost.

Each runs on an embedded Chroma and on a server (see conftest.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxbudget.core.ids import internal_id
from ctxbudget.core.items import ContextItem, Tier
from ctxbudget.core.toolcalls import parse_arguments
from ctxbudget.errors import InvalidItemError, StoreInputError
from ctxbudget.memory.context import ContextMemory
from ctxbudget.memory.reading.record_items import history_item
from ctxbudget.store.chroma_store import ChromaStore
from ctxbudget.store.records import scoped_item_id

StoreFactory = Callable[..., ChromaStore]

# Ids shaped like ctxbudget's own items, past and present, that a caller may use.
INTERNAL_SHAPES = [
    "system",
    "query",
    "tool:x",
    "tool:0",
    "pinned:0",
    "summary:s1:0-29",
    "task:s1:0",
]
caller_ids = st.one_of(
    st.sampled_from(INTERNAL_SHAPES),
    st.from_regex(r"[a-z]{1,4}(:[a-z0-9]{1,3}){0,2}", fullmatch=True),
)
SLOW = settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
RUNS = iter(range(10**6))


@pytest.fixture
def memory(store: ChromaStore) -> ContextMemory:
    return ContextMemory(store=store)


def fresh_namespace(store: ChromaStore) -> ContextMemory:
    """A memory in a namespace of its own: the store outlives hypothesis examples."""
    return ContextMemory(store=store, namespace=f"run{next(RUNS)}")


# -- scoped ids -------------------------------------------------------------------------------


@SLOW
@given(shared=st.lists(caller_ids, min_size=1, max_size=3, unique=True))
def test_same_ids_in_two_sessions_and_users_never_touch(
    store: ChromaStore, shared: list[str]
) -> None:
    mem = fresh_namespace(store)
    for session, user in (("sa", "A"), ("sb", "B")):
        written = mem.add_messages(
            session,
            [{"id": i, "role": "user", "text": f"{user} says {i}"} for i in shared],
            user_id=user,
        )
        assert written == shared  # B learns nothing of A's ids: no conflict
        for i in shared:
            mem.pin(session, f"{user} session fact {i}", id=f"p-{i}")
            mem.pin(user_id=user, text=f"{user} user fact {i}", id=i)
    for session, user in (("sa", "A"), ("sb", "B")):
        assert [r.text for r in mem.history(session)] == [f"{user} says {i}" for i in shared]
    # B unpins and deletes; A's records of the same ids are untouched.
    for i in shared:
        assert mem.unpin(i, session_id="sb") is False  # a message, not a pin
        assert mem.unpin(f"p-{i}", session_id="sb") is True
        assert mem.unpin(i, user_id="B") is True
        assert mem.unpin(i, user_id="B") is False
    ns = mem.namespace
    assert mem.store.delete(shared, namespace=ns, session_id="sb") == len(shared)
    assert mem.history("sb") == []
    assert [r.text for r in mem.history("sa")] == [f"A says {i}" for i in shared]
    got = mem.store.get([f"p-{i}" for i in shared], namespace=ns, session_id="sa")
    assert [r.text for r in got] == [f"A session fact {i}" for i in shared]
    got = mem.store.get(shared, namespace=ns, user_id="A")
    assert [r.text for r in got] == [f"A user fact {i}" for i in shared]
    assert mem.store.get(shared, namespace=ns, user_id="B") == []


def test_unpin_needs_a_scope_and_touches_pins_only(memory: ContextMemory) -> None:
    memory.add_messages("s1", [{"id": "x", "role": "user", "text": "a message"}])
    task = memory.push_task("s1", "a goal")
    with pytest.raises(StoreInputError, match="session_id= .* or user_id="):
        memory.unpin("x")
    with pytest.raises(StoreInputError, match="exactly one"):
        memory.unpin("x", session_id="s1", user_id="u1")
    assert memory.unpin("x", session_id="s1") is False
    assert [r.id for r in memory.history("s1")] == ["x"]
    with pytest.raises(StoreInputError, match="ctxbudget"):
        memory.unpin(task, session_id="s1")


def test_conflicting_content_is_refused_only_within_a_scope(memory: ContextMemory) -> None:
    memory.add_messages("s1", [{"id": "m", "role": "user", "text": "one"}])
    memory.add_messages("s2", [{"id": "m", "role": "user", "text": "two"}])
    with pytest.raises(StoreInputError, match="already stored with different content"):
        memory.add_messages("s1", [{"id": "m", "role": "user", "text": "changed"}])
    assert [r.text for r in memory.history("s1")] == ["one"]


# -- internal ids -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call",
    [
        lambda m: m.add_messages("s1", [{"id": "ctxbudget:query", "role": "user", "text": "x"}]),
        lambda m: m.pin("s1", "a fact", id="ctxbudget:system"),
        lambda m: m.pin(user_id="u1", text="a fact", id="ctxbudget:tool:x"),
        lambda m: m.add_documents([("ctxbudget:doc", "a document")]),
    ],
    ids=["message", "session-pin", "user-pin", "document"],
)
def test_ids_in_the_internal_space_are_refused_and_nothing_is_written(
    memory: ContextMemory, call: Any
) -> None:
    with pytest.raises(StoreInputError, match="ctxbudget:.*its own items.*nothing was written"):
        call(memory)
    assert memory.store.count(namespace=memory.namespace) == 0


def test_extra_items_with_internal_ids_are_refused(memory: ContextMemory) -> None:
    extra = [ContextItem(internal_id("query"), "sneaky", tier=Tier.PINNED)]
    with pytest.raises(InvalidItemError, match=r"extra\[0\].*ctxbudget"):
        memory.assemble("s1", "hello?", extra=extra)


@SLOW
@given(ids=st.lists(caller_ids, min_size=1, max_size=4, unique=True))
def test_caller_ids_never_break_or_displace_internal_items(
    store: ChromaStore, ids: list[str]
) -> None:
    mem = fresh_namespace(store)
    mem.add_messages(
        "s1", [{"id": i, "role": "user", "text": f"msg {i}"} for i in ids], user_id="u"
    )
    mem.add_messages(
        "s2", [{"id": i, "role": "user", "text": f"old {i}"} for i in ids], user_id="u"
    )
    for i in ids:
        mem.pin(user_id="u", text=f"user fact {i}", id=i)
    mem.add_documents([(i, f"document {i}") for i in ids], collection="kb")
    tools = [{"type": "function", "function": {"name": "x", "parameters": {}}}]
    ctx = mem.assemble("s1", "what now?", budget=4096, system="Be brief.", tools=tools)
    included = ctx.included_ids
    assert len(included) == len(set(included))  # every item kept once
    assert included[0] == internal_id("system") and included[-1] == internal_id("query")
    assert internal_id("tool", "x") in included
    assert set(ids) <= set(included)  # the session's messages, under their own ids
    for i in ids:  # everything else present, qualified by its scope
        assert scoped_item_id(("user", "u"), i) in included
    text = ctx.render()
    assert "Be brief." in text and "what now?" in text
    for i in ids:
        assert f"user fact {i}" in text and f"msg {i}" in text


def test_a_session_pin_and_a_user_pin_with_one_id_both_arrive(memory: ContextMemory) -> None:
    memory.add_messages("s1", [("user", "hi")], user_id="u1")
    memory.pin("s1", "session fact", id="fact")
    memory.pin(user_id="u1", text="user fact", id="fact")
    ctx = memory.assemble("s1", "facts?", budget=2048)
    assert {"fact", scoped_item_id(("user", "u1"), "fact")} <= set(ctx.included_ids)
    assert "session fact" in ctx.render() and "user fact" in ctx.render()


# -- the same fact said twice ------------------------------------------------------------------


@SLOW
@given(
    facts=st.lists(
        st.sampled_from(["Maya is vegetarian", "maya is  vegetarian", "Likes tea"]),
        min_size=1,
        max_size=6,
    ),
    user_wide=st.booleans(),
)
def test_a_fact_pinned_again_is_one_pin_and_is_sent_once(
    store: ChromaStore, facts: list[str], user_wide: bool
) -> None:
    mem = fresh_namespace(store)
    mem.add_messages("s1", [("user", "hi")], user_id="u1")
    owner: dict[str, Any] = {"user_id": "u1"} if user_wide else {"session_id": "s1"}
    ids = [mem.pin(text=fact, **owner) for fact in facts]
    assert len(set(ids)) == len(set(facts))  # one pin per distinct text, the same id again
    kind = {"user_id": "u1"} if user_wide else {"session_id": "s1"}
    stored = store.find(namespace=mem.namespace, kinds=["pinned"], **kind)
    assert sorted(r.text for r in stored) == sorted(set(facts))
    # The README run twice: the app pins its facts again and passes them as never-pruned
    # items too; each text (as compared for duplicates: case and spacing aside) is sent once.
    extra = [
        ContextItem(f"app:{i}", fact, tier=Tier.PINNED, shrink="never")
        for i, fact in enumerate(facts)
    ]
    ctx = mem.assemble("s1", "What should I cook?", budget=2048, extra=extra)
    rendered = " ".join(ctx.render().split()).casefold()
    for text in {" ".join(f.split()).casefold() for f in facts}:
        assert rendered.count(text) == 1
    reasons = {p.item.id: p.reason.value for p in ctx.pruned}
    assert set(ctx.included_ids).isdisjoint(reasons)
    assert all(reasons[i] == "duplicate" for i in reasons if i.startswith("app:"))


def test_a_pin_said_again_with_other_metadata_keeps_one_pin_with_the_new(
    memory: ContextMemory,
) -> None:
    first = memory.pin("s1", "Maya is vegetarian", metadata={"source": "form"})
    again = memory.pin("s1", "Maya is vegetarian", metadata={"source": "chat"})
    assert first == again
    stored = memory.store.find(namespace=memory.namespace, kinds=["pinned"], session_id="s1")
    assert [r.metadata.get("source") for r in stored] == ["chat"]
    with pytest.raises(StoreInputError, match="other text|different content"):
        memory.pin("s1", "Maya eats fish", id=first)  # an explicit id keeps its text


def test_the_system_prompt_and_the_query_are_sent_even_when_a_pin_says_the_same(
    memory: ContextMemory,
) -> None:
    memory.pin("s1", "Be kind.")
    memory.pin("s1", "What is my locker?")
    ctx = memory.assemble("s1", "What is my locker?", budget=2048, system="Be kind.")
    assert {internal_id("system"), internal_id("query")} <= set(ctx.included_ids)


def test_a_message_with_the_id_query_is_not_dropped(memory: ContextMemory) -> None:
    memory.add_messages(
        "s1",
        [
            {"id": "query", "role": "user", "text": "My locker is 2718."},
            {"id": "system", "role": "assistant", "text": "Noted."},
        ],
    )
    ctx = memory.assemble("s1", "What is my locker?", budget=2048, system="Be kind.")
    assert {"query", "system"} <= set(ctx.included_ids)
    assert "2718" in ctx.render()


# -- tool-call turns --------------------------------------------------------------------------

arguments = st.one_of(
    st.dictionaries(st.text("abc", min_size=1, max_size=3), st.integers(), max_size=2),
    st.sampled_from(['{"q": ', "not json", "[1, 2]", ""]),
)


@SLOW
@given(args=st.lists(arguments, min_size=1, max_size=3), langchain_form=st.booleans())
def test_tool_call_turns_round_trip_and_no_placeholder_is_sent(
    store: ChromaStore, args: list[Any], langchain_form: bool
) -> None:
    mem = fresh_namespace(store)
    calls = [
        {"id": f"c{n}", "name": "search", "args": a}
        if langchain_form
        else {"id": f"c{n}", "type": "function", "function": {"name": "search", "arguments": a}}
        for n, a in enumerate(args)
    ]
    messages = [
        {"id": "u", "role": "user", "text": "find it"},
        {"id": "a", "role": "assistant", "text": "", "tool_calls": calls},
    ]
    messages += [
        {"id": f"r{n}", "role": "tool", "text": f"result {n}", "tool_call_id": f"c{n}"}
        for n in range(len(args))
    ]
    mem.add_messages("s1", messages)
    history = mem.history("s1")
    assert [r.id for r in history] == [m["id"] for m in messages]
    turn = history[1]
    assert turn.text == "" and turn.tool_calls == tuple(f"c{n}" for n in range(len(args)))
    assert history_item(turn).text == ""
    stored = json.loads(str(turn.metadata["_tool_calls"]))
    for call, given_args in zip(stored, args, strict=True):
        assert call["type"] == "function" and call["function"]["name"] == "search"
        text = call["function"]["arguments"]
        if isinstance(given_args, str):
            assert text == given_args  # kept as produced, valid JSON or not
        else:
            assert parse_arguments(text) == given_args
    for fmt in ("messages", "text", "compact"):
        ctx = mem.assemble("s1", "and then?", budget=4096, format=fmt)
        assert "(tool call)" not in json.dumps(
            ctx.to_messages() if fmt == "messages" else ctx.render()
        )
    ctx = mem.assemble("s1", "and then?", budget=4096)
    sent = [m for m in ctx.to_messages() if m.get("tool_calls")]
    assert [c["id"] for c in sent[0]["tool_calls"]] == [f"c{n}" for n in range(len(args))]
    assert not sent[0]["content"]


def test_call_ids_alone_are_still_accepted(memory: ContextMemory) -> None:
    memory.add_message("s1", "assistant", "", tool_calls=["c1"])
    (turn,) = memory.history("s1")
    assert turn.text == "" and turn.tool_calls == ("c1",) and "_tool_calls" not in turn.metadata


def test_a_tool_result_with_no_output_is_stored_empty_and_sent_with_its_call(
    memory: ContextMemory,
) -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "ping", "arguments": "{}"}}
    memory.add_messages(
        "s1",
        [
            {"id": "u", "role": "user", "text": "ping it"},
            {"id": "a", "role": "assistant", "text": "", "tool_calls": [call]},
            {"id": "t", "role": "tool", "text": "", "tool_call_id": "c1"},
        ],
    )
    assert [(r.id, r.text) for r in memory.history("s1")] == [
        ("u", "ping it"),
        ("a", ""),
        ("t", ""),
    ]
    ctx = memory.assemble("s1", "done?", budget=4096)
    sent = ctx.to_messages()
    result = next(m for m in sent if m["role"] == "tool")
    assert result == {"role": "tool", "content": "", "tool_call_id": "c1"}
    with pytest.raises(StoreInputError, match="empty text"):
        memory.add_message("s1", "tool", "")  # a result must name its call


def test_bad_tool_calls_are_refused_before_anything_is_written(memory: ContextMemory) -> None:
    ok = {"role": "user", "text": "hi"}
    for calls, match in (
        ([{"name": "f"}], "has no id"),
        ([{"id": "c1"}], "has no tool name"),
        ([{"id": "c1", "name": "f"}, {"id": "c1", "name": "g"}], "used by another call"),
        ([{"id": "c1", "name": "f", "args": 5}], "arguments must be a dict or JSON text"),
        (["c1", {"id": "c2", "name": "f"}], "not a mix"),
    ):
        bad = {"role": "assistant", "text": "", "tool_calls": calls}
        with pytest.raises(StoreInputError, match=match):
            memory.add_messages("s1", [ok, bad])
    assert memory.store.count(namespace=memory.namespace) == 0
