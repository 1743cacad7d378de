"""`budget_messages` returns exactly what its report includes (issue 39, "returned is chosen").

Messages that repeat ids (a client that reuses them), texts (people repeat themselves) and
empty-ish texts: the messages returned are the given objects, in the order given, and they
are, one for one, the items the call's `AssembledContext` lists as included (role and text).
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from ctxbudget import AssembledContext
from langchain_ctxbudget import budget_messages
from langchain_ctxbudget.observe import CallContext

TEXTS = ["Same text.", "same  TEXT.", " ", ".", "Ünïcødé — 🍞 ok.", "Where do we eat?"]
ROLES = {"human": "user", "ai": "assistant", "system": "system"}
ids = st.sampled_from([None, "m1", "m2"])  # ids repeat


@st.composite
def conversations(draw: st.DrawFn) -> list[BaseMessage]:
    messages: list[BaseMessage] = []
    if draw(st.booleans()):
        messages.append(SystemMessage(draw(st.sampled_from(TEXTS)), id=draw(ids)))
    for i in range(draw(st.integers(min_value=1, max_value=10))):
        cls = HumanMessage if i % 2 == 0 else AIMessage
        text = draw(st.one_of(st.sampled_from(TEXTS), st.text(max_size=30).filter(str.strip)))
        messages.append(cls(text, id=draw(ids)))
    return messages


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages=conversations(), max_tokens=st.integers(min_value=20, max_value=200))
def test_property_returned_messages_are_the_reports_included(
    messages: list[BaseMessage], max_tokens: int
) -> None:
    seen: list[AssembledContext] = []

    def keep(call: CallContext) -> None:
        seen.append(call.context)

    try:
        out = budget_messages(messages, max_tokens=max_tokens, on_context=keep)
    except ValueError:  # the system message alone does not fit (BudgetExceededError)
        return
    [context] = seen
    positions = [next(i for i, m in enumerate(messages) if m is kept) for kept in out]
    assert positions == sorted(set(positions))  # the given objects, each once, in order
    assert [(ROLES[m.type], m.text) for m in out] == [
        (item.role or "system", item.text) for item in context.included
    ]
