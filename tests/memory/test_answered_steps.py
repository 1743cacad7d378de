"""`answered_steps`: a session's messages as a conversation providers accept, for a chat history.

A run cancelled while its tool ran leaves an assistant message whose call no result answers;
read back as stored, that history is refused by OpenAI's and Anthropic's APIs on every later
turn (found 2026-12-01: `CtxBudgetChatMessageHistory.messages` after a cancelled ``ainvoke``).
A property over every order of user turns, calls and results: what comes out has no call
without its result (but the newest step's, whose results may still come), no result without
its call before it, each result within its call's step, and is the records in their order
(only calls removed).
"""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from ctxbudget.memory.reading.tool_steps import answered_steps, tool_steps_together
from ctxbudget.store.records import Record

CALL_IDS = ["c1", "c2", "c3", "c4"]


def _call(n: int, ids: list[str], text: str) -> Record:
    calls = [{"id": c, "name": "f", "args": {"n": n}} for c in ids]
    return Record(
        id=f"a{n}",
        kind="message",
        text=text,
        role="assistant",
        tool_calls=tuple(ids),
        metadata={"_tool_calls": json.dumps(calls)},
    )


def _message(n: int, kind: tuple[str, object]) -> Record:
    role, what = kind
    if role == "assistant":
        ids, text = what  # type: ignore[misc]
        return _call(n, list(dict.fromkeys(ids)), text or ("" if ids else "ok"))  # as stored
    if role == "tool":
        return Record(id=f"t{n}", kind="message", text="42", role="tool", tool_call_id=str(what))
    return Record(id=f"u{n}", kind="message", text=f"hi {n}", role=role)


kinds = st.one_of(
    st.tuples(st.just("user"), st.none()),
    st.tuples(
        st.just("assistant"),
        st.tuples(st.lists(st.sampled_from(CALL_IDS), max_size=3), st.sampled_from(["", "ok"])),
    ),
    st.tuples(st.just("tool"), st.sampled_from(CALL_IDS)),
)


@given(st.lists(kinds, max_size=12))
def test_what_a_history_hands_a_model_is_a_conversation_providers_accept(
    given_kinds: list[tuple[str, object]],
) -> None:
    records = tool_steps_together([_message(n, k) for n, k in enumerate(given_kinds)])
    out = answered_steps(records)
    ids = [r.id for r in records]
    assert [r.id for r in out] == [i for i in ids if i in {r.id for r in out}]  # in order
    assert answered_steps(out) == out  # nothing more to leave out
    open_calls: set[str] = set()  # the calls of the step being read
    for n, record in enumerate(out):
        if record.role == "tool":
            assert record.tool_call_id in open_calls, (record, out)
            continue
        unanswered = open_calls - {r.tool_call_id for r in out[:n] if r.role == "tool"}
        assert not unanswered, (unanswered, out)  # a step over: every call answered
        open_calls = set(record.tool_calls) if record.role == "assistant" else set()
        if record.role == "assistant":
            assert record.text.strip() or record.tool_calls  # nothing empty is handed on
            stored = json.loads(str(record.metadata.get("_tool_calls", "[]")))
            assert [c["id"] for c in stored] == list(record.tool_calls)


def test_a_call_a_cancelled_run_left_is_left_out_once_the_talk_went_on() -> None:
    question = Record(id="q1", kind="message", text="weather?", role="user")
    call = _call(1, ["c1"], "")
    told = _call(2, ["c2", "c3"], "Checking both.")
    result = Record(id="t3", kind="message", text="rain", role="tool", tool_call_id="c3")
    later = Record(id="q2", kind="message", text="and now?", role="user")
    out = answered_steps([question, call, later, told, result, later])
    assert [r.id for r in out] == ["q1", "q2", "a2", "t3", "q2"]
    assert out[2].tool_calls == ("c3",)
    assert [c["id"] for c in json.loads(str(out[2].metadata["_tool_calls"]))] == ["c3"]
    # The newest step's calls stay while only their results follow: those may still come.
    assert [r.id for r in answered_steps([question, call])] == ["q1", "a1"]
