"""ContextMemory end to end: a real Chroma (embedded and server) and the real embedding model.

Every test runs twice through the parametrized ``store`` fixture (the server run is marked
``integration``). Texts are short and counts small: the embedding model is real.
"""

from __future__ import annotations

from typing import Any, get_args

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ctxbudget.core.ids import internal_id
from ctxbudget.core.items import ContextItem, Shrink, Tier
from ctxbudget.core.render import Format
from ctxbudget.core.report import AssembledContext
from ctxbudget.errors import BudgetExceededError, StoreInputError
from ctxbudget.memory.context import ContextMemory
from ctxbudget.memory.policy.config import MemoryConfig
from ctxbudget.store.chroma_store import ChromaStore
from ctxbudget.store.records import scoped_item_id

NS = "default"
FORMATS: tuple[Format, ...] = get_args(Format)
SYSTEM, QUERY = internal_id("system"), internal_id("query")
FIXED = {SYSTEM, QUERY}
TOPICS = (
    "the weather",
    "groceries",
    "the train timetable",
    "a football match",
    "houseplants",
    "a podcast",
    "coffee beans",
    "a birthday card",
    "the laundry",
    "a museum visit",
)


def filler(count: int, prefix: str, *, start: int = 0) -> list[dict[str, Any]]:
    """Alternating small talk with ids ``<prefix><n>``: many distinct, unrelated turns."""
    return [
        {
            "id": f"{prefix}{n:03d}",
            "role": "user" if n % 2 == 0 else "assistant",
            "text": f"Small talk {n} about {TOPICS[n % len(TOPICS)]}.",
        }
        for n in range(start, start + count)
    ]


def ids_of(messages: list[dict[str, Any]]) -> set[str]:
    return {m["id"] for m in messages}


def check_accounting(memory: ContextMemory, ctx: AssembledContext, budget: int) -> None:
    """The reported count is the exact count of what is sent, and it is within the budget."""
    assert ctx.tokens_available == budget
    assert ctx.tokens_used <= budget
    assert memory.counter.count_messages(ctx.to_messages()) == ctx.tokens_used
    assert memory.counter.count(ctx.render()) <= ctx.tokens_used


@pytest.fixture
def memory(store: ChromaStore) -> ContextMemory:
    """A memory over the parametrized store with a small recent window (10 messages)."""
    return ContextMemory(store=store, config=MemoryConfig(recent_messages=10))


# -- writing messages ------------------------------------------------------------------------


def test_add_messages_accepts_every_message_shape(memory: ContextMemory) -> None:
    given_ids = memory.add_messages(
        "s1",
        [
            {"role": "user", "text": "I grow tomatoes on my balcony.", "id": "m-text"},
            {"role": "assistant", "content": "Tomatoes love the sun.", "id": "m-content"},
            ("user", "They get six hours of sun a day."),
        ],
        user_id="u1",
    )
    single = memory.add_message("s1", "assistant", "That is plenty.", id="m-one", user_id="u1")
    generated = memory.add_message("s1", "user", "Should I water daily?", user_id="u1")

    assert given_ids[:2] == ["m-text", "m-content"]
    assert single == "m-one"
    every = [*given_ids, single, generated]
    assert len(set(every)) == 5
    history = memory.history("s1")
    assert [r.id for r in history] == every
    assert [(r.role, r.text) for r in history] == [
        ("user", "I grow tomatoes on my balcony."),
        ("assistant", "Tomatoes love the sun."),
        ("user", "They get six hours of sun a day."),
        ("assistant", "That is plenty."),
        ("user", "Should I water daily?"),
    ]
    assert [r.seq for r in history] == [0, 1, 2, 3, 4]
    assert {r.user_id for r in history} == {"u1"}
    assert [r.id for r in memory.history("s1", limit=2)] == every[-2:]

    ctx = memory.assemble("s1", "How much sun do tomatoes need?", budget=4096)
    assert set(every) <= set(ctx.included_ids)
    assert ctx.included_ids[-1] == QUERY


GOOD = ("user", "This one is fine.")
BAD_MESSAGES = [
    pytest.param({"role": "robot", "text": "beep"}, "role must be one of", id="bad-role"),
    pytest.param({"text": "no role at all"}, "role must be one of", id="no-role"),
    pytest.param({"role": "user", "text": 42}, "text must be a str", id="non-str-text"),
    pytest.param({"role": "user"}, "text must be a str", id="no-text"),
    pytest.param({"role": "user", "text": "   "}, "empty text", id="empty-text"),
    pytest.param("just a string", "is a str", id="non-dict"),
    pytest.param(("user", "too", "long"), "is a tuple", id="three-tuple"),
    pytest.param(
        {"role": "user", "text": "hi", "timestamp": "yesterday"}, "not ISO-8601", id="bad-time"
    ),
    pytest.param(
        {"role": "user", "text": "hi", "metadata": "oops"},
        "metadata",
        id="metadata-not-a-dict",
    ),
    pytest.param(
        {"role": "assistant", "text": "hi", "tool_calls": 5},
        "tool_calls",
        id="tool-calls-not-a-list",
    ),
]


@pytest.mark.parametrize(("bad", "problem"), BAD_MESSAGES)
def test_bad_message_names_its_index_and_nothing_is_written(
    memory: ContextMemory, bad: object, problem: str
) -> None:
    memory.add_message("s1", "user", "Already stored.", id="m0", user_id="u1")
    memory.flush()  # the store itself is read next
    before = memory.store.count(namespace=NS)

    messages: list[Any] = [GOOD, bad, ("assistant", "So is this.")]
    with pytest.raises(StoreInputError, match=r"message 1\b") as caught:
        memory.add_messages("s1", messages, user_id="u1")

    assert problem in str(caught.value)
    memory.flush()
    assert memory.store.count(namespace=NS) == before
    assert [r.id for r in memory.history("s1")] == ["m0"]


def test_bad_single_message_is_message_0(memory: ContextMemory) -> None:
    with pytest.raises(StoreInputError, match=r"message 0: role must be one of"):
        memory.add_message("s1", "robot", "beep")
    with pytest.raises(StoreInputError, match=r"message 0 has empty text"):
        memory.add_message("s1", "user", "")
    assert memory.store.count(namespace=NS) == 0


def test_a_bad_message_in_a_later_batch_writes_nothing(memory: ContextMemory) -> None:
    messages: list[Any] = [("user", "first"), ("assistant", "second")]
    messages.append({"role": "user", "text": "third", "metadata": {"tags": ["a", "b"]}})

    with pytest.raises(StoreInputError, match=r"message 2\b"):
        memory.add_messages("s1", messages, batch_size=2)
    assert memory.store.count(namespace=NS) == 0


# -- assembling ------------------------------------------------------------------------------


def test_assemble_fits_every_budget_and_format(memory: ContextMemory) -> None:
    memory.add_messages("s1", filler(40, "m"), user_id="u1")
    memory.pin("s1", "The user prefers short answers.")
    memory.add_documents(["Office hours are nine to five on weekdays."], collection="kb")
    system = "You are a helpful assistant. Use the context."
    query = "What did we say about houseplants?"

    for budget in (256, 1024, 4096):
        for fmt in FORMATS:
            ctx = memory.assemble("s1", query, budget=budget, system=system, format=fmt)
            check_accounting(memory, ctx, budget)
            assert ctx.format == fmt
            assert ctx.included_ids[0] == SYSTEM
            assert ctx.included_ids[-1] == QUERY
            messages = ctx.to_messages()
            assert messages[0]["role"] == "system"
            assert messages[0]["content"].startswith(system)
            assert messages[-1] == {"role": "user", "content": query}
            assert ctx.render().count(query) == 1
            if budget == 256:  # the budget binds: something was left out
                assert ctx.pruned


def test_a_query_stored_as_the_last_message_is_not_repeated(memory: ContextMemory) -> None:
    query = "What is my dog's name?"
    memory.add_messages(
        "s1",
        [
            {"id": "dog", "role": "user", "text": "My dog is called Rex."},
            {"id": "ack", "role": "assistant", "text": "Rex is a fine name."},
            {"id": "asked", "role": "user", "text": query},
        ],
        user_id="u1",
    )
    for fmt in FORMATS:
        ctx = memory.assemble("s1", query, budget=1024, format=fmt)
        assert "asked" not in ctx.included_ids
        assert {"dog", "ack"} <= set(ctx.included_ids)
        assert ctx.included_ids[-1] == QUERY
        contents = [m["content"] for m in ctx.to_messages()]
        assert sum(c.count(query) for c in contents) == 1
        assert contents[-1] == query


# -- pinned facts ----------------------------------------------------------------------------


def test_pins_survive_a_long_session_and_stay_with_their_user(memory: ContextMemory) -> None:
    memory.add_messages(
        "a1", [("user", "Help me plan a trip."), ("assistant", "Sure.")], user_id="A"
    )
    memory.add_messages(
        "a2", [("user", "Another chat."), ("assistant", "Hello again.")], user_id="A"
    )
    memory.add_messages("b1", [("user", "Hi there."), ("assistant", "Hello!")], user_id="B")
    seat = memory.pin("a1", "Prefers aisle seats on flights.")
    shellfish_id = memory.pin(user_id="A", text="A is allergic to shellfish.")
    # A user-wide pin is not of the session: its item id is qualified with its scope.
    shellfish = scoped_item_id(("user", "A"), shellfish_id)
    teal = scoped_item_id(
        ("user", "B"), memory.pin(user_id="B", text="B's favourite colour is teal.")
    )
    memory.add_messages("a1", filler(300, "late"), user_id="A")
    query = "Book a dinner and a flight for me."

    for fmt in FORMATS:
        ctx = memory.assemble("a1", query, budget=512, format=fmt)
        check_accounting(memory, ctx, 512)
        assert {seat, shellfish} <= set(ctx.included_ids)
        assert teal not in ctx.included_ids
        assert "teal" not in ctx.render()
        assert ctx.tiers[Tier.PINNED].kept == 2

    other = memory.assemble("a2", query, budget=512)
    assert shellfish in other.included_ids
    assert seat not in other.included_ids  # a session pin stays in its session

    ctx_b = memory.assemble("b1", query, budget=512)
    assert teal in ctx_b.included_ids
    assert not {seat, shellfish} & set(ctx_b.included_ids)
    assert "shellfish" not in ctx_b.render()
    assert "aisle" not in ctx_b.render()

    assert memory.unpin(shellfish_id, user_id="B") is False  # another user's scope
    assert memory.unpin(shellfish_id, session_id="a1") is False
    assert memory.unpin(shellfish_id, user_id="A") is True
    assert memory.unpin(shellfish_id, user_id="A") is False
    after = memory.assemble("a1", query, budget=512)
    assert shellfish not in after.included_ids
    assert "shellfish" not in after.render()
    assert seat in after.included_ids


def test_pin_needs_text_and_an_owner(memory: ContextMemory) -> None:
    with pytest.raises(StoreInputError, match="pin needs the text"):
        memory.pin("s1", "   ")
    with pytest.raises(StoreInputError, match="session_id or a user_id"):
        memory.pin(text="An ownerless fact.")
    assert memory.store.count(namespace=NS) == 0


# -- retrieval -------------------------------------------------------------------------------


def test_an_early_fact_outside_the_recent_window_is_retrieved(memory: ContextMemory) -> None:
    early = [
        {"id": "fact", "role": "user", "text": "My passport number ends in 4417."},
        {"id": "ack", "role": "assistant", "text": "Noted, I will remember that."},
    ]
    memory.add_messages("s1", early + filler(40, "m"), user_id="u1")

    ctx = memory.assemble("s1", "Which digits does my passport number end with?", budget=400)

    check_accounting(memory, ctx, 400)
    included = {item.id: item for item in ctx.included}
    assert "fact" in included
    assert included["fact"].tier == Tier.RETRIEVED  # not in the 10 recent messages
    assert "4417" in ctx.render()
    assert ctx.tiers[Tier.RETRIEVED].pruned > 0  # it won against other candidates


def test_other_sessions_of_the_same_user_only(memory: ContextMemory) -> None:
    a_old = [
        {"id": "a-dog", "role": "user", "text": "My dog is a beagle called Biscuit."},
        {"id": "a-ack", "role": "assistant", "text": "Biscuit sounds adorable."},
    ]
    a_new = [
        {"id": "a-now", "role": "user", "text": "I am planning the weekend."},
        {"id": "a-now2", "role": "assistant", "text": "What do you have in mind?"},
    ]
    b_old = [
        {"id": "b-dog", "role": "user", "text": "My dog is a poodle called Rex."},
        {"id": "b-ack", "role": "assistant", "text": "Rex is a classic."},
    ]
    b_new = [
        {"id": "b-now", "role": "user", "text": "Weekend plans again."},
        {"id": "b-now2", "role": "assistant", "text": "Tell me more."},
    ]
    memory.add_messages("a-old", a_old, user_id="A")
    memory.add_messages("a-new", a_new, user_id="A")
    memory.add_messages("b-old", b_old, user_id="B")
    memory.add_messages("b-new", b_new, user_id="B")
    query = "What is my dog's name?"
    # Another session's records come with their ids qualified by their session.
    a_ids = ids_of(a_new) | {scoped_item_id(("session", "a-old"), i) for i in ids_of(a_old)}
    b_ids = ids_of(b_new) | {scoped_item_id(("session", "b-old"), i) for i in ids_of(b_old)}
    a_dog = scoped_item_id(("session", "a-old"), "a-dog")

    ctx_a = memory.assemble("a-new", query, budget=2048)
    assert a_dog in ctx_a.included_ids
    assert set(ctx_a.included_ids) <= a_ids | FIXED
    assert "Biscuit" in ctx_a.render()
    assert "Rex" not in ctx_a.render() and "poodle" not in ctx_a.render()

    for user_id in (None, "B"):
        ctx_b = memory.assemble("b-new", query, budget=2048, user_id=user_id)
        assert scoped_item_id(("session", "b-old"), "b-dog") in ctx_b.included_ids
        assert set(ctx_b.included_ids) <= b_ids | FIXED
        assert "Biscuit" not in ctx_b.render() and "beagle" not in ctx_b.render()

    off = memory.assemble("a-new", query, budget=2048, other_sessions=False)
    assert set(off.included_ids) <= ids_of(a_new) | FIXED
    configured = ContextMemory(store=memory.store, config=MemoryConfig(other_sessions=False))
    assert a_dog not in configured.assemble("a-new", query, budget=2048).included_ids


def test_documents_are_retrieved_and_filtered_by_collection(memory: ContextMemory) -> None:
    kb = memory.add_documents(
        [{"id": "refunds", "text": "Refunds are paid within 14 days of receiving a return."}],
        collection="kb",
    )
    other = memory.add_documents(
        [("shipping", "Refunds for shipping fees are paid only for damaged parcels.")],
        collection="other",
    )
    assert kb == ["refunds#0"]
    assert other == ["shipping#0"]
    memory.add_messages("s1", [("user", "Hi, I sent an order back."), ("assistant", "Ok.")])
    query = "How long do refunds take?"

    refunds = scoped_item_id(("collection", "kb"), "refunds#0")
    shipping = scoped_item_id(("collection", "other"), "shipping#0")
    every = memory.assemble("s1", query, budget=2048)
    assert {refunds, shipping} <= set(every.included_ids)
    assert "14 days" in every.render()

    none = memory.assemble("s1", query, budget=2048, documents=False)
    assert not {refunds, shipping} & set(none.included_ids)
    assert "14 days" not in none.render()

    only_other = memory.assemble("s1", query, budget=2048, documents=["other"])
    assert shipping in only_other.included_ids
    assert refunds not in only_other.included_ids

    only_kb = memory.assemble("s1", query, budget=2048, documents="kb")
    assert refunds in only_kb.included_ids
    assert shipping not in only_kb.included_ids


# -- summaries -------------------------------------------------------------------------------


def test_summarize_folds_each_old_stretch_once(memory: ContextMemory) -> None:
    first = filler(70, "m")
    memory.add_messages("s1", first, user_id="u1")
    order = [m["id"] for m in first]

    made = memory.summarize("s1", keep_recent=10)
    assert made == [internal_id("summary", "0-29"), internal_id("summary", "30-59")]
    assert memory.summarize("s1", keep_recent=10) == []
    memory.flush()
    assert memory.store.count(namespace=NS) == 72

    stored = memory.store.find(namespace=NS, kinds=["summary"], session_id="s1")
    covered = {r.id: r.summary_of for r in stored}
    assert covered == {made[0]: tuple(order[:30]), made[1]: tuple(order[30:60])}
    assert all(r.text.strip() and r.user_id == "u1" for r in stored)

    included_somewhere = False
    for budget in (300, 500, 1000):
        ctx = memory.assemble("s1", "What did we say about houseplants?", budget=budget)
        check_accounting(memory, ctx, budget)
        assert ctx.tiers[Tier.SUMMARY].offered == 2
        summaries = {i for i in ctx.included_ids if i.startswith(internal_id("summary"))}
        assert summaries <= set(made)
        included_somewhere |= bool(summaries)
    assert included_somewhere

    memory.add_messages("s1", filler(30, "m", start=70), user_id="u1")
    assert memory.summarize("s1", keep_recent=10) == [internal_id("summary", "60-89")]
    assert memory.summarize("s1", keep_recent=10) == []


# -- tasks -----------------------------------------------------------------------------------


def test_task_stack_is_always_in_the_context(memory: ContextMemory) -> None:
    memory.add_messages("agent", filler(60, "m"), user_id="u1")
    root = memory.push_task("agent", "Migrate the billing service to Postgres")
    inventory = memory.push_task("agent", "Inventory the current MySQL tables")
    assert memory.pop_task("agent", "Found 42 tables; 3 use triggers") == inventory
    script = memory.push_task("agent", "Write the schema conversion script")
    query = "What should I do next?"

    for budget in (256, 1024):
        ctx = memory.assemble("agent", query, budget=budget)
        check_accounting(memory, ctx, budget)
        included = {item.id: item for item in ctx.included}
        assert included[root].tier == Tier.PINNED
        assert included[script].tier == Tier.PINNED
        text = ctx.render()
        assert "Overall goal: Migrate the billing service to Postgres" in text
        assert "Current task: Write the schema conversion script" in text
        assert inventory in included  # the finished sibling with its result
        assert "Found 42 tables; 3 use triggers" in text

    assert memory.pop_task("agent", "Script written") == script
    assert memory.pop_task("agent", "Billing runs on Postgres") == root
    with pytest.raises(StoreInputError, match="'agent' has no open task; push_task first"):
        memory.pop_task("agent", "nothing left")
    done = memory.assemble("agent", query, budget=1024)
    assert not {root, script} & set(done.included_ids)
    assert "Overall goal" not in done.render()


def test_pop_without_a_task_and_an_empty_goal_are_refused(memory: ContextMemory) -> None:
    with pytest.raises(StoreInputError, match="'fresh' has no open task"):
        memory.pop_task("fresh", "a result")
    with pytest.raises(StoreInputError, match="push_task needs a goal"):
        memory.push_task("fresh", "   ")
    assert memory.store.count(namespace=NS) == 0


# -- deleting --------------------------------------------------------------------------------


def test_delete_session_and_delete_user_remove_everything_of_theirs(
    memory: ContextMemory,
) -> None:
    a1 = [
        {"id": "a1-0", "role": "user", "text": "My locker code is 3141."},
        {"id": "a1-1", "role": "assistant", "text": "Got it, locker 3141."},
        {"id": "a1-2", "role": "user", "text": "And my gym is on Elm Street."},
        {"id": "a1-3", "role": "assistant", "text": "Elm Street, noted."},
    ]
    a2 = [
        {"id": "a2-0", "role": "user", "text": "I collect vintage stamps."},
        {"id": "a2-1", "role": "assistant", "text": "A lovely hobby."},
    ]
    b1 = [
        {"id": "b1-0", "role": "user", "text": "My locker code is 2718."},
        {"id": "b1-1", "role": "assistant", "text": "Locker 2718, noted."},
    ]
    memory.add_messages("a1", a1, user_id="A")
    memory.add_messages("a2", a2, user_id="A")
    memory.add_messages("b1", b1, user_id="B")
    (summary,) = memory.summarize("a1", keep_recent=0, stretch=4)
    a_pin = memory.pin(user_id="A", text="A is training for a marathon.")
    b_pin = memory.pin(user_id="B", text="B is training for a triathlon.")
    total = memory.store.count(namespace=NS)
    assert total == 4 + 2 + 2 + 1 + 2
    query = "What is my locker code?"

    assert memory.delete_session("a1") == 5  # four messages and the summary
    assert memory.store.count(namespace=NS) == total - 5
    assert memory.history("a1") == []
    ctx = memory.assemble("a1", query, budget=2048, user_id="A")
    assert not (ids_of(a1) | {summary}) & set(ctx.included_ids)
    assert "3141" not in ctx.render()
    assert scoped_item_id(("user", "A"), a_pin) in ctx.included_ids  # not the session's
    assert "a2-0" in memory.assemble("a2", "What do I collect?", budget=2048).included_ids

    assert memory.delete_user("A") == 3  # a2's messages and the user pin
    assert memory.store.count(namespace=NS) == 3
    assert memory.history("a2") == []
    for session in ("a1", "a2"):
        gone = memory.assemble(session, query, budget=2048, user_id="A")
        assert set(gone.included_ids) <= FIXED
    ctx_b = memory.assemble("b1", query, budget=2048)
    assert set(ctx_b.included_ids) == ids_of(b1) | {scoped_item_id(("user", "B"), b_pin), QUERY}
    assert "2718" in ctx_b.render()
    assert "3141" not in ctx_b.render() and "marathon" not in ctx_b.render()


def test_delete_user_removes_the_pins_and_tasks_of_their_sessions(memory: ContextMemory) -> None:
    memory.add_messages("a1", [("user", "Hello."), ("assistant", "Hi.")], user_id="A")
    memory.pin("a1", "The door code is PELICAN.")
    memory.push_task("a1", "Plan A's trip to Oslo")

    memory.delete_user("A")

    assert memory.store.count(namespace=NS) == 0
    ctx = memory.assemble("a1", "What is the door code?", budget=1024, user_id="A")
    assert "PELICAN" not in ctx.render()


# -- the budget invariant --------------------------------------------------------------------


def test_assembled_tokens_never_exceed_the_budget(memory: ContextMemory) -> None:
    memory.add_messages(
        "s1",
        [("user", "I keep the spare key under the blue flowerpot.")] + filler(30, "m"),
        user_id="u1",
    )
    pin = "The user lives in a ground-floor flat."
    memory.pin("s1", pin)
    memory.add_documents(["Spare keys should be kept with a trusted neighbour."])
    query = "Where did I say I keep the spare key?"
    sentence = "Answer briefly and cite the context."

    @settings(
        max_examples=10,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(
        budget=st.integers(64, 3000),
        fmt=st.sampled_from(FORMATS),
        repeats=st.integers(0, 120),
    )
    @example(budget=64, fmt="messages", repeats=120)  # the system prompt alone is too big
    @example(budget=3000, fmt="compact", repeats=0)
    def check(budget: int, fmt: Format, repeats: int) -> None:
        system = " ".join([sentence] * repeats) or None
        # What the never-pruned items (pinned facts too) need on their own: nothing else offered.
        pinned = ContextItem("pin", pin, tier=Tier.PINNED, shrink=Shrink.NEVER)
        alone = memory.assemble(
            "empty", query, budget=10**6, system=system, format=fmt, documents=False, extra=[pinned]
        ).tokens_used
        try:
            ctx = memory.assemble("s1", query, budget=budget, system=system, format=fmt)
        except BudgetExceededError as exc:
            assert alone > budget
            assert (exc.required, exc.available) == (alone, budget)
            assert f"only {budget:,} are available" in str(exc)
            return
        assert alone <= budget
        check_accounting(memory, ctx, budget)
        assert ctx.included_ids[-1] == QUERY
        assert (ctx.included_ids[0] == SYSTEM) is (system is not None)

    check()
