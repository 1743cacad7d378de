"""The newer statement wins (issue 42, item 3): `ctxbudget.memory.reading.successors`.

A user says a fact, talks about other things, then says it changed, in words that share little
with the first statement. Asked about the fact at a small budget, the context never holds only
the earlier statement, and the rendering lets a model tell which is newer (read back with
`parse_rendered`: each statement under its date line, the earlier one marked). On a real store
and the real embedder; no model at write time.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxbudget.core.readback import parse_rendered
from ctxbudget.core.report import AssembledContext, PruneReason
from ctxbudget.memory.context import ContextMemory
from ctxbudget.memory.policy.config import MemoryConfig
from ctxbudget.memory.reading.successors import says_update
from ctxbudget.store.chroma_store import ChromaStore


@dataclass(frozen=True)
class Update:
    name: str
    first: str
    later: str
    question: str


CASES = [
    Update(
        "home", "I live in Lisbon.", "We moved to Porto, the new flat is great.", "Where do I live?"
    ),
    Update(
        "job",
        "I work as a nurse at the city hospital.",
        "I quit the hospital, now I'm writing code for a startup.",
        "What is my job?",
    ),
    Update(
        "pet",
        "My dog is called Rex.",
        "We renamed the puppy, he answers to Biscuit now.",
        "What is my dog's name?",
    ),
    Update(
        "meeting",
        "The team meeting is on Tuesday at 10.",
        "Heads up: the sync got pushed to Thursday afternoon.",
        "When is the team meeting?",
    ),
    Update(
        "trip",
        "We're planning a trip to Japan in May.",
        "Change of plans, we're going to Mexico instead.",
        "Where is our trip going?",
    ),
    Update("diet", "I'm vegetarian.", "These days I eat fish again.", "Am I vegetarian?"),
    Update(
        "car",
        "I drive a red Toyota.",
        "Sold the car, I cycle everywhere now.",
        "What car do I drive?",
    ),
    Update(
        "flatmate",
        "My sister Ana lives with me.",
        "Ana moved out, she has her own apartment across town.",
        "Who lives with me?",
    ),
    Update(
        "gym",
        "I go to the gym every morning before work.",
        "I stopped the gym, I swim in the evenings instead.",
        "When do I work out?",
    ),
    Update(
        "phone",
        "My phone number is 555-0101.",
        "I switched carriers, the new number is 555-0199.",
        "What is my phone number?",
    ),
    Update(
        "employer",
        "I work at a bank downtown.",
        "Started my new job at a game studio on Monday, loving it.",
        "Where do I work?",
    ),
    Update(
        "city",
        "I grew up in Leeds and still live there.",
        "We now live in Glasgow, closer to my parents.",
        "Which city do I live in?",
    ),
    Update(
        "office",
        "My office is on the fifth floor of the Harbour building.",
        "I'm working from the Dublin office now, the commute is much shorter.",
        "Where is my office?",
    ),
]

FILLER = [
    ("user", "How was your weekend?"),
    ("assistant", "Quiet, thanks. I read a novel about sailors."),
    ("user", "I watched a great movie yesterday."),
    ("assistant", "Which one? I like thrillers."),
    ("user", "The weather is lovely today."),
    ("assistant", "Perfect for a walk in the park."),
    ("user", "Do you have a good pasta recipe?"),
    ("assistant", "Garlic, olive oil, chili and parsley: simple and quick."),
    ("user", "My favourite band plays next month."),
    ("assistant", "Get tickets early, those shows sell out."),
]

SESSIONS = itertools.count()
MARCH = "2024-03-{day:02d}T10:00:00Z"
JUNE = "2024-06-{day:02d}T10:00:00Z"


def _store_case(memory: ContextMemory, case: Update, session: str, filler: int = 10) -> None:
    messages = [
        {"id": "first", "role": "user", "content": case.first, "timestamp": MARCH.format(day=1)}
    ]
    for n in range(filler):
        role, text = FILLER[n % len(FILLER)]
        messages.append(
            {
                "id": f"f{n}",
                "role": role,
                "content": text,
                "timestamp": MARCH.format(day=2 + n % 27),
            }
        )
    messages.append(
        {"id": "later", "role": "user", "content": case.later, "timestamp": JUNE.format(day=1)}
    )
    for n in range(filler, 2 * filler):
        role, text = FILLER[n % len(FILLER)]
        messages.append(
            {"id": f"f{n}", "role": role, "content": text, "timestamp": JUNE.format(day=2 + n % 27)}
        )
    memory.add_messages(session, messages, progress=False)


def _memory(store: ChromaStore, **options: object) -> ContextMemory:
    config = MemoryConfig(recent_messages=4, **options)  # type: ignore[arg-type]
    return ContextMemory(store=store, config=config, inclusion_log=False, write_behind=False)


def _checked(context: AssembledContext) -> None:
    """Never only the earlier statement; when both are sent, the earlier one reads as earlier."""
    ids = set(context.included_ids)
    assert not ("first" in ids and "later" not in ids), context.explain()
    text = context.to_messages()[0]["content"]
    rows = {row.text: row for row in parse_rendered(text, "text") if row.section == "knowledge"}
    for row in rows.values():
        assert not row.earlier or row.date is not None
    firsts = [r for r in rows.values() if r.earlier]
    if "first" in ids:
        assert len(firsts) == 1 and firsts[0].date == "2024-03-01"
    pruned = {p.item.id: p for p in context.pruned}
    if "first" in pruned and pruned["first"].reason is PruneReason.SUPERSEDED:
        assert "later" in pruned["first"].detail


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
@pytest.mark.parametrize("budget", [100, 150, 250, 400])
def test_the_context_never_holds_only_the_earlier_statement(
    store: ChromaStore, case: Update, budget: int
) -> None:
    memory = _memory(store)
    _store_case(memory, case, "s")
    context = memory.assemble("s", case.question, budget=budget, format="text")
    _checked(context)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_newer_statement_is_found_and_reads_as_newer(store: ChromaStore, case: Update) -> None:
    memory = _memory(store)
    _store_case(memory, case, "s")
    found = memory.candidates("s", case.question, budget=400).retrieved
    assert [it.newer for it in found if it.id == "first"] == [("later",)]
    context = memory.assemble("s", case.question, budget=400, format="text")
    ids = set(context.included_ids)
    assert "later" in ids, context.explain()
    if "first" in ids:
        text = context.to_messages()[0]["content"]
        rows = [r for r in parse_rendered(text, "text") if r.section == "knowledge"]
        first = next(r for r in rows if r.text == case.first)
        later = next(r for r in rows if r.text == case.later)
        assert first.earlier and not later.earlier
        assert (first.date, later.date) == ("2024-03-01", "2024-06-01")


def test_old_code_fails_the_home_case_without_the_mechanism(store: ChromaStore) -> None:
    """With `newer_statements` off (the code before), the March turn is sent alone; on, not."""
    memory = _memory(store, newer_statements=False)
    _store_case(memory, CASES[0], "s")
    context = memory.assemble("s", CASES[0].question, budget=100, format="text")
    assert "first" in context.included_ids and "later" not in context.included_ids
    _checked(_memory(store).assemble("s", CASES[0].question, budget=100, format="text"))


@settings(
    max_examples=12,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    case=st.sampled_from(CASES),
    filler=st.integers(0, 14),
    budget=st.integers(60, 600),
    fmt=st.sampled_from(["text", "compact", "messages"]),
)
def test_any_filler_and_budget_keep_the_pair_coherent(
    store: ChromaStore, case: Update, filler: int, budget: int, fmt: str
) -> None:
    """For random filler and budgets: never the earlier alone; a true report; it fits."""
    memory = _memory(store)
    session = f"s{next(SESSIONS)}"
    _store_case(memory, case, session, filler=filler)
    context = memory.assemble(session, case.question, budget=budget, format=fmt)  # type: ignore[arg-type]
    assert context.tokens_used <= context.tokens_available
    ids = set(context.included_ids)
    assert not ("first" in ids and "later" not in ids), context.explain()
    pruned = [p.item.id for p in context.pruned]
    assert len(pruned) == len(set(pruned)) and not set(pruned) & ids
    for entry in context.pruned:
        if entry.reason is PruneReason.SUPERSEDED:
            assert entry.item.newer
    for item in context.included:
        assert set(item.newer) <= ids
    if fmt != "messages":
        text = "".join(m["content"] for m in context.to_messages())
        marked = [r.text for r in parse_rendered(text, fmt) if r.earlier]  # type: ignore[arg-type]
        linked = [it.text for it in context.included if it.newer]
        assert marked == linked and set(marked) <= {case.first}


@pytest.mark.parametrize(
    "text",
    [
        "Don't quit, remember, failures lead you closer to success.",
        "Thanks! I won't quit, no matter what.",
        "Have you made any more art lately?",
        "That book really changed my perspective on life.",
        "You should get to the point where anyone else would quit.",
        "Did you move to Porto?",
    ],
)
def test_chatter_does_not_read_as_an_update(text: str) -> None:
    assert not says_update(text)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_each_update_reads_as_one_and_its_first_statement_does_not(case: Update) -> None:
    assert says_update(case.later) and not says_update(case.first)
