"""`budget_messages` against `trim_messages`, and the guarantees trim_messages does not give.

trim_messages is given an independent counter: tiktoken's ``o200k_base`` (gpt-4o) with the
OpenAI per-message rule (3 per message, 1 more for a name, 3 to prime the reply), the rule
LangChain's own trim_messages guide shows. The settings compared are the rows of the table in
docs/langchain.md.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

import pytest
import tiktoken
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    trim_messages,
)
from langchain_core.messages.utils import convert_to_openai_messages, count_tokens_approximately
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import Runnable

from ctxbudget import BudgetExceededError, InvalidBudgetError, InvalidItemError, TokenCounter
from langchain_ctxbudget import budget_messages
from langchain_ctxbudget.convert import openai_message

COUNTER = TokenCounter.for_model("gpt-4o")  # also makes the encodings available offline
ENCODING = tiktoken.get_encoding("o200k_base")
WORDS = (
    "the a to and of in we you it is for on plan trip Lisbon Porto train budget design test "
    "users naïve café 東京 🙂 don't x=1; {json} \n"
).split(" ")


def tiktoken_counter(messages: Sequence[BaseMessage]) -> int:
    """OpenAI's rule with tiktoken, independent of ctxbudget."""
    total = 3
    for message in convert_to_openai_messages(list(messages)):
        total += (
            3 + len(ENCODING.encode(message["role"])) + len(ENCODING.encode(message["content"]))
        )
        if message.get("name"):
            total += 1 + len(ENCODING.encode(message["name"]))
    return total


def sent_tokens(messages: Sequence[BaseMessage]) -> int:
    return COUNTER.count_messages(convert_to_openai_messages(list(messages)))


texts = st.lists(st.sampled_from(WORDS), min_size=1, max_size=40).map(" ".join)


@st.composite
def conversations(draw: st.DrawFn, *, end_with_human: bool = True) -> list[BaseMessage]:
    """Alternating human/ai turns without tool calls, with or without a system message."""
    n = draw(st.integers(min_value=1, max_value=14))
    messages: list[BaseMessage] = []
    if draw(st.booleans()):
        messages.append(SystemMessage(draw(texts)))
    for i in range(n):
        cls = HumanMessage if i % 2 == 0 else AIMessage
        messages.append(cls(draw(texts), name=draw(st.sampled_from([None, None, "ana"]))))
    if end_with_human and not isinstance(messages[-1], HumanMessage):
        messages.append(HumanMessage(draw(texts)))
    return messages


@st.composite
def budgets(draw: st.DrawFn, messages: list[BaseMessage]) -> int:
    """Budgets around the exact cost of each suffix, where off-by-one errors show."""
    suffix = draw(st.integers(min_value=0, max_value=len(messages)))
    base = tiktoken_counter(messages[suffix:]) if suffix < len(messages) else 3
    return max(1, base + draw(st.integers(min_value=-3, max_value=3)))


def trimmed(messages: list[BaseMessage], max_tokens: int) -> list[BaseMessage]:
    """The equivalent trim_messages call (table row 1 of docs/langchain.md).

    trim_messages counts the system message in a call of its own, so its counter adds the
    3-token reply priming twice; it is given those 3 tokens back.
    """
    extra = 3 if messages and isinstance(messages[0], SystemMessage) else 0
    return trim_messages(
        messages,
        max_tokens=max_tokens + extra,
        token_counter=tiktoken_counter,
        strategy="last",
        include_system=True,
        start_on="human",
    )


def same_objects(a: Sequence[BaseMessage], b: Sequence[BaseMessage]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


REFUSED = "refused"


def kept_or_refused(call: Callable[[], list[BaseMessage]]) -> list[BaseMessage] | str:
    """What ``call`` keeps, or REFUSED: the never-dropped messages alone are over the budget.

    Where trim_messages would return no question (the model called without it), budget_messages
    raises `BudgetExceededError` saying how many tokens they need.
    """
    try:
        return call()
    except BudgetExceededError as exc:
        assert exc.required > exc.available
        return REFUSED


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_same_result_as_trim_messages_on_histories_ending_with_a_question(
    data: st.DataObject,
) -> None:
    messages = data.draw(conversations())
    max_tokens = data.draw(budgets(messages))
    system = messages[0] if isinstance(messages[0], SystemMessage) else None
    needed = tiktoken_counter([system]) if system is not None else 3
    assume(needed <= max_tokens)  # trim_messages returns more than max_tokens otherwise
    # Trimmed by message, as trim_messages trims (the default, in steps, keeps a cached prefix).
    theirs = trimmed(messages, max_tokens)
    try:
        ours = budget_messages(messages, max_tokens=max_tokens, history_trim="message")
    except BudgetExceededError:
        # Exactly where trim_messages keeps no question: the model would be called without it.
        assert not any(isinstance(m, HumanMessage) for m in theirs)
        return
    assert same_objects(ours, theirs)
    assert sent_tokens(ours) <= max_tokens


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_same_result_as_trim_messages_when_the_newest_exchange_fits(data: st.DataObject) -> None:
    """Histories ending with an answer: the same, except where trim_messages keeps no exchange.

    There budget_messages keeps the newest question without its answer (documented).
    """
    messages = data.draw(conversations(end_with_human=False))
    max_tokens = data.draw(budgets(messages))
    system = messages[0] if isinstance(messages[0], SystemMessage) else None
    assume((tiktoken_counter([system]) if system is not None else 3) <= max_tokens)
    theirs = trimmed(messages, max_tokens)
    try:
        ours = budget_messages(messages, max_tokens=max_tokens, history_trim="message")
    except BudgetExceededError:
        # The newest question alone is over the budget: trim_messages keeps no exchange.
        assert all(isinstance(m, SystemMessage) for m in theirs)
        return
    if any(not isinstance(m, SystemMessage) for m in theirs):
        assert same_objects(ours, theirs)
    else:
        assert len(ours) - len(theirs) <= 1
        assert all(isinstance(m, HumanMessage) for m in ours[len(theirs) :])
    assert sent_tokens(ours) <= max_tokens


@pytest.mark.parametrize("max_tokens", [20, 45, 60, 80, 200])
def test_langchain_docs_example_matches(max_tokens: int) -> None:
    messages: list[BaseMessage] = [
        SystemMessage("you're a good assistant, you always respond with a joke."),
        HumanMessage("i wonder why it's called langchain"),
        AIMessage(
            'Well, I guess they thought "WordRope" and "SentenceString" just didn\'t have '
            "the same ring to it!"
        ),
        HumanMessage("and who is harrison chasing anyways"),
        AIMessage(
            "Hmmm let me think.\n\nWhy, he's probably chasing after the last cup of coffee "
            "in the office!"
        ),
        HumanMessage("what do you call a speechless parrot"),
    ]
    theirs = trimmed(messages, max_tokens)
    ours = kept_or_refused(
        lambda: budget_messages(messages, max_tokens=max_tokens, history_trim="message")
    )
    if ours == REFUSED:  # where trim_messages sends no question (20 tokens: the system alone)
        assert not any(isinstance(m, HumanMessage) for m in theirs)
    else:
        assert same_objects(ours, theirs)


def test_system_message_that_does_not_fit_raises_where_trim_messages_overflows() -> None:
    messages = [SystemMessage("Be brief. " * 50), HumanMessage("hi")]
    theirs = trimmed(messages, 40)
    assert tiktoken_counter(theirs) > 40  # trim_messages returns more than it was allowed
    with pytest.raises(BudgetExceededError) as caught:
        budget_messages(messages, max_tokens=40)
    assert caught.value.available == 40
    assert caught.value.required > 40


# -- tool calls ---------------------------------------------------------------------------------


@st.composite
def agent_histories(draw: st.DrawFn) -> list[BaseMessage]:
    """Turns with tool calls (single, parallel, chained), as an agent writes them."""
    rng = random.Random(draw(st.integers(min_value=0, max_value=10_000)))
    messages: list[BaseMessage] = [SystemMessage("You are terse.")]
    for t in range(draw(st.integers(min_value=1, max_value=10))):
        messages.append(HumanMessage(" ".join(rng.choices(WORDS, k=rng.randint(1, 30)))))
        for step in range(rng.choice([0, 0, 1, 2])):
            ids = [f"c{t}-{step}-{i}" for i in range(rng.randint(1, 3))]
            calls = [{"name": "lookup", "args": {"q": rng.choice(WORDS)}, "id": i} for i in ids]
            messages.append(AIMessage(rng.choice(["", "Checking."]), tool_calls=calls))
            messages.extend(
                ToolMessage(" ".join(rng.choices(WORDS, k=rng.randint(1, 60))), tool_call_id=i)
                for i in ids
            )
        if rng.random() < 0.8:
            messages.append(AIMessage(" ".join(rng.choices(WORDS, k=rng.randint(1, 40)))))
    return messages


def assert_whole_tool_steps(history: Sequence[BaseMessage]) -> None:
    if history:
        assert isinstance(history[0], HumanMessage)
    expected: set[str] = set()
    for message in history:
        if isinstance(message, ToolMessage):
            assert message.tool_call_id in expected
            expected.discard(message.tool_call_id)
        else:
            assert not expected
            if isinstance(message, AIMessage):
                expected = {c["id"] for c in message.tool_calls if c["id"]}
    assert not expected


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages=agent_histories(), max_tokens=st.integers(min_value=20, max_value=900))
def test_tool_calls_are_never_split_and_the_budget_holds(
    messages: list[BaseMessage], max_tokens: int
) -> None:
    assume(tiktoken_counter(messages[:1]) <= max_tokens)
    ours = kept_or_refused(lambda: budget_messages(messages, max_tokens=max_tokens))
    if ours == REFUSED:
        return  # the system message and the newest question alone do not fit
    # Tool calls are counted too (their function name and JSON arguments).
    assert sent_tokens(ours) <= max_tokens
    assert ours[0] is messages[0]
    assert_whole_tool_steps(ours[1:])
    positions = [next(i for i, m in enumerate(messages) if m is o) for o in ours]
    assert positions == sorted(positions)


def test_trim_messages_can_start_on_an_orphan_tool_result_budget_messages_cannot() -> None:
    messages: list[BaseMessage] = [
        HumanMessage("Weather in Lisbon?"),
        AIMessage("", tool_calls=[{"name": "weather", "args": {"city": "Lisbon"}, "id": "c1"}]),
        ToolMessage("Sunny, 24 C, light wind from the north west all day long.", tool_call_id="c1"),
    ]
    budget = tiktoken_counter(messages[2:])
    theirs = trim_messages(
        messages, max_tokens=budget, token_counter=tiktoken_counter, strategy="last"
    )
    assert isinstance(theirs[0], ToolMessage)  # an orphan: providers reject this request
    ours = budget_messages(messages, max_tokens=budget, start_on=None)
    assert ours == [messages[0]]  # the question alone: its tool step does not fit whole


# -- options, LCEL, errors ----------------------------------------------------------------------


def test_runnable_in_an_lcel_chain() -> None:
    trimmer = budget_messages(max_tokens=60, model="gpt-4o")
    assert isinstance(trimmer, Runnable)
    prompt = ChatPromptTemplate.from_messages(
        [("system", "You are terse."), MessagesPlaceholder("history"), ("human", "{question}")]
    )
    history = [
        HumanMessage("word " * 30),
        AIMessage("answer " * 30),
        HumanMessage("hi"),
        AIMessage("hello"),
    ]
    out = (prompt | trimmer).invoke({"history": history, "question": "And now?"})
    assert [m.type for m in out] == ["system", "human", "ai", "human"]
    assert out[-1].content == "And now?"
    assert sent_tokens(out) <= 60


def test_pinned_facts_join_the_system_message_and_are_always_kept() -> None:
    messages = [SystemMessage("Be brief."), *[HumanMessage(f"message {i} " * 20) for i in range(5)]]
    out = budget_messages(
        messages, max_tokens=120, pinned=["User is vegan.", "User lives in Porto."]
    )
    assert isinstance(out[0], SystemMessage) and out[0] is not messages[0]
    assert out[0].text.startswith("Be brief.")
    assert "User is vegan." in out[0].text and "User lives in Porto." in out[0].text
    assert out[-1] is messages[-1]
    assert sent_tokens(out) <= 120
    with pytest.raises(BudgetExceededError):
        budget_messages(messages, max_tokens=30, pinned=["A long fact. " * 20])


def test_include_system_false_treats_it_as_history() -> None:
    messages = [
        SystemMessage("Be brief."),
        HumanMessage("one " * 40),
        AIMessage("two"),
        HumanMessage("three"),
    ]
    out = budget_messages(messages, max_tokens=25, include_system=False)
    assert out == [messages[-1]]
    everything = budget_messages(messages, max_tokens=500, include_system=False, start_on=None)
    assert everything == messages


def test_end_on_drops_trailing_messages_like_trim_messages() -> None:
    messages = [HumanMessage("a"), AIMessage("b"), HumanMessage("c"), AIMessage("d")]
    assert budget_messages(messages, max_tokens=100, end_on="human") == messages[:3]
    assert budget_messages(messages, max_tokens=100, end_on=[HumanMessage]) == messages[:3]


def test_accepts_message_likes_and_prompt_values() -> None:
    out = budget_messages(
        [("system", "s"), ("human", "hello"), {"role": "assistant", "content": "hi"}],
        max_tokens=100,
    )
    assert [m.type for m in out] == ["system", "human", "ai"]
    prompt = ChatPromptTemplate.from_messages([("system", "s"), ("human", "{q}")]).invoke(
        {"q": "x"}
    )
    assert [m.type for m in budget_messages(prompt, max_tokens=100)] == ["system", "human"]


def test_token_counter_can_be_a_counter_a_model_name_or_approximate() -> None:
    messages = [HumanMessage("hello " * 50)]
    exact = budget_messages(messages, max_tokens=60, token_counter=TokenCounter.for_model("gpt-4o"))
    by_name = budget_messages(messages, max_tokens=60, token_counter="gpt-4o")
    assert exact == by_name == messages
    # The approximate counter over-estimates: it keeps no more than the exact one.
    approximate = kept_or_refused(
        lambda: budget_messages(messages, max_tokens=60, token_counter="approximate")
    )
    assert approximate in (REFUSED, messages)
    # cl100k_base (gpt-4) counts the same text differently from o200k_base.
    assert budget_messages(messages, max_tokens=60, model="gpt-4") == messages


class NamedFakeChatModel(GenericFakeChatModel):
    """LangChain's fake chat model, naming its model as provider integrations do."""

    model_name: str = "gpt-4o"


@given(
    name=st.sampled_from(["gpt-4o", "openai:gpt-4o", "gpt-4o-2024-08-06", "azure_openai:gpt-4o"]),
    words=st.integers(1, 120),
)
def test_a_chat_model_or_a_provider_prefixed_name_counts_as_the_model(
    name: str, words: int
) -> None:
    messages = [HumanMessage("hello " * words)]
    exact = kept_or_refused(lambda: budget_messages(messages, max_tokens=60, model="gpt-4o"))
    llm = NamedFakeChatModel(messages=iter([]), model_name=name)
    assert kept_or_refused(lambda: budget_messages(messages, max_tokens=60, model=name)) == exact
    assert kept_or_refused(lambda: budget_messages(messages, max_tokens=60, model=llm)) == exact
    by_llm = kept_or_refused(lambda: budget_messages(messages, max_tokens=60, token_counter=llm))
    assert by_llm == exact


def test_an_unknown_chat_model_and_langchains_approximate_counter_count_approximately() -> None:
    messages = [HumanMessage("hello " * 50)]
    local = NamedFakeChatModel(messages=iter([]), model_name="phi3:mini")
    approximate = kept_or_refused(
        lambda: budget_messages(messages, max_tokens=60, token_counter="approximate")
    )
    assert kept_or_refused(lambda: budget_messages(messages, max_tokens=60, model=local)) == (
        approximate
    )
    by_function = kept_or_refused(
        lambda: budget_messages(messages, max_tokens=60, token_counter=count_tokens_approximately)
    )
    assert by_function == approximate


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"strategy": "first"}, "strategy='last'"),
        ({"allow_partial": True}, "whole"),
        ({"text_splitter": str.split}, "allow_partial"),
        ({"start_on": "ai"}, "whole exchanges"),
        ({"token_counter": len}, "functions"),
    ],
)
def test_unsupported_trim_messages_options_say_why(options: dict[str, Any], words: str) -> None:
    with pytest.raises(ValueError, match=words):
        budget_messages([HumanMessage("hi")], max_tokens=50, **options)


def test_bad_budgets_and_messages_raise_clear_errors() -> None:
    with pytest.raises(InvalidBudgetError):
        budget_messages([HumanMessage("hi")], max_tokens=0)
    audio = HumanMessage(
        [
            {"type": "text", "text": "listen"},
            {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
        ]
    )  # images are counted (tests/reliability/test_framework_input.py); audio cannot be
    with pytest.raises(InvalidItemError, match="message 0 .*block 1 of type 'input_audio'"):
        budget_messages([audio], max_tokens=500)


@pytest.mark.parametrize(
    "message",
    [
        HumanMessage("hi", name="ana"),
        AIMessage("plain"),
        AIMessage("", tool_calls=[{"name": "f", "args": {"x": "ü"}, "id": "1"}]),
        AIMessage([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]),
        SystemMessage("s"),
        SystemMessage("dev", additional_kwargs={"__openai_role__": "developer"}),
        ToolMessage("r", tool_call_id="1", name="f"),
    ],
)
def test_fast_conversion_matches_langchain(message: BaseMessage) -> None:
    assert openai_message(message) == convert_to_openai_messages(message, text_format="string")


@example(n=10_000)
@given(n=st.integers(min_value=0, max_value=50))
@settings(max_examples=10, deadline=None)
def test_long_histories_keep_only_what_fits(n: int) -> None:
    messages: list[BaseMessage] = [SystemMessage("s")]
    messages += [(HumanMessage if i % 2 == 0 else AIMessage)(f"turn {i}") for i in range(n)]
    out = budget_messages(messages, max_tokens=200)
    assert sent_tokens(out) <= 200
    assert out[0] is messages[0]
    if n:
        assert out[-1] is messages[-1]


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    lines=st.lists(
        st.text(alphabet="abcdefghij (){}=:.", min_size=0, max_size=60), min_size=1, max_size=80
    ),
    max_tokens=st.integers(min_value=120, max_value=900),
)
def test_extra_files_are_sent_in_the_system_message_cut_at_whole_lines(
    tmp_path_factory: pytest.TempPathFactory, lines: list[str], max_tokens: int
) -> None:
    from ctxbudget import file_item

    folder = tmp_path_factory.mktemp("src")
    path = folder / "app.py"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    item = file_item(path, root=folder)
    history = [
        SystemMessage("Be brief."),
        HumanMessage("Hi"),
        AIMessage("Hello!"),
        HumanMessage("Fix app.py"),
    ]
    seen: list[Any] = []
    try:
        kept = budget_messages(history, max_tokens=max_tokens, extra=[item], on_context=seen.append)
    except BudgetExceededError:
        return
    counter = TokenCounter.for_model("gpt-4o")
    assert counter.count_messages(convert_to_openai_messages(kept)) <= max_tokens
    assert isinstance(kept[0], SystemMessage) and kept[0].text.startswith("Be brief.")
    assert kept[-1].text == "Fix app.py"
    ctx = seen[-1].context
    assert (item.id in ctx.included_ids) != (item.id in [p.item.id for p in ctx.pruned])
    if item.id in ctx.included_ids:
        sent = kept[0].text
        assert "### app.py\n" in sent
        body = sent.split("### app.py\n", 1)[1].splitlines()
        original = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]
        shown = [line.strip() for line in body if not line.strip().startswith("… [")]
        # What is sent of the file is whole lines of it, in order (the elided runs aside).
        position = 0
        for line in (x for x in shown if x):
            assert line in original[position:], line
            position = original.index(line, position) + 1


def test_extra_refuses_history_query_and_non_items() -> None:
    from ctxbudget import ContextItem, Tier

    history = [HumanMessage("Hi")]
    with pytest.raises(InvalidItemError, match=r"extra\[0\].*history"):
        budget_messages(history, max_tokens=100, extra=[ContextItem("h", "x", tier=Tier.RECENT)])
    with pytest.raises(InvalidItemError, match=r"extra\[1\].*ContextItem"):
        budget_messages(
            history,
            max_tokens=100,
            extra=[ContextItem("f", "x", tier=Tier.FILES), "text"],  # type: ignore[list-item]
        )
