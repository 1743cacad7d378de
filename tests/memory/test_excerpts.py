"""Excerpts (`MemoryConfig.excerpts`): retrieved turns as the sentences that hold the query's words.

Properties of the cut itself over any text and terms, of `excerpted` over any candidates, and
on a real store, embedder and tokenizer: what is sent is exactly the excerpts the report lists,
within the budget, and a small budget holds more distinct turns than without.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from core.fidelity import check_conversation, check_fidelity
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxbudget import ContextItem, Tier, TokenCounter
from ctxbudget.errors import ConfigurationError
from ctxbudget.memory.context import ContextMemory
from ctxbudget.memory.policy.config import MemoryConfig
from ctxbudget.memory.reading.excerpts import (
    MARKER,
    WHOLE_SHARE,
    excerpt,
    excerpt_terms,
    excerpted,
    pieces,
    sentences,
)
from ctxbudget.memory.reading.lexical import lexical_terms
from ctxbudget.memory.reading.session_index import SessionIndex
from ctxbudget.store.chroma_store import ChromaStore
from ctxbudget.store.records import Record

_WORDS = ["camping", "lake", "pottery", "kids", "violin", "garden", "paint", "blue", "race"]
_ENDS = [".", "!", "?", "...", '."', "!)"]


@st.composite
def _sentence(draw: st.DrawFn) -> str:
    words = draw(st.lists(st.sampled_from(_WORDS + ["we", "the", "it", "so", "nice"]), min_size=1))
    return " ".join(words).capitalize() + draw(st.sampled_from(_ENDS))


@st.composite
def _text(draw: st.DrawFn) -> str:
    body = " ".join(draw(st.lists(_sentence(), min_size=1, max_size=8)))
    if draw(st.booleans()):
        body += " [shares a photo of a " + draw(st.sampled_from(_WORDS)) + "]"
    return (draw(st.sampled_from(["", "Mel: ", "Caroline Smith: "])) + body).strip()


_terms = st.frozensets(st.sampled_from([t for w in _WORDS for t in lexical_terms(w)]), max_size=3)


@settings(max_examples=400, deadline=None)
@given(text=_text(), terms=_terms)
def test_an_excerpt_is_the_matching_sentences_in_order_with_a_marker_per_gap(
    text: str, terms: frozenset[str]
) -> None:
    short = excerpt(text, terms)
    prefix = re.match(r"(?:Mel|Caroline Smith): ", text)
    head = prefix.group(0) if prefix else ""
    body = text[len(head) :]
    parts = sentences(body)
    matching = [p for p in parts if not set(lexical_terms(p)).isdisjoint(terms)]
    if short is None:  # kept whole: nothing matched, one sentence, or too little saved
        cut = " ".join(p if p in matching else MARKER for p in parts)
        saved_little = len(re.sub(f"(?:{MARKER} )+", f"{MARKER} ", cut)) > 0.75 * len(body)
        assert not terms or not matching or len(parts) < 2 or saved_little
        return
    assert short.startswith(head)  # a speaker prefix stays
    pieces = short[len(head) :].split(" ")
    rebuilt = " ".join(pieces)
    # The kept sentences, in their order, each verbatim; one marker for each run of cut ones.
    shown = [p for p in re.split(f" ?{MARKER} ?", rebuilt) if p]
    assert " ".join(shown) == " ".join(matching)
    assert f"{MARKER} {MARKER}" not in short
    assert len(short) - len(head) <= 0.75 * len(body)
    assert text.count(MARKER) == 0


def test_excerpt_examples() -> None:
    text = "We went camping. It rained all week. The kids loved the tent! Then we drove home."
    assert excerpt(text, {"kid"}) == f"{MARKER} The kids loved the tent! {MARKER}"
    assert (
        excerpt(text, {"camp", "kid"})
        == f"We went camping. {MARKER} The kids loved the tent! {MARKER}"
    )
    assert excerpt("Mel: " + text, {"rain"}) == f"Mel: {MARKER} It rained all week. {MARKER}"
    assert excerpt(text, set()) is None
    assert excerpt(text, {"violin"}) is None
    assert excerpt("Only one sentence about the kids here.", {"kid"}) is None


def test_the_names_the_query_asks_about_choose_no_sentence() -> None:
    assert excerpt_terms("What did Melanie paint?", {"Melanie"}) == frozenset({"paint"})


def _item(n: int, text: str, score: float, **fields: object) -> ContextItem:
    fields.setdefault("role", "user")
    return ContextItem(f"m{n}", text, tier=Tier.RETRIEVED, score=score, **fields)  # type: ignore[arg-type]


@st.composite
def _items(draw: st.DrawFn) -> list[ContextItem]:
    items = []
    for n in range(draw(st.integers(0, 12))):
        kind = draw(st.sampled_from(["message", "message", "document", "tools", "summary"]))
        text = draw(_text())
        score = draw(st.floats(0.0, 1.0))
        if kind == "document":
            items.append(ContextItem(f"d{n}", text, tier=Tier.RETRIEVED, score=score))
        elif kind == "summary":
            items.append(ContextItem(f"s{n}", text, tier=Tier.SUMMARY, score=score, role=None))
        elif kind == "tools":
            items.append(_item(n, text, score, role="assistant", tool_calls=("c1",)))
        else:
            items.append(_item(n, text, score, timestamp=1_700_000_000.0 + n, name="Mel"))
    return sorted(items, key=lambda it: -it.score)


@settings(max_examples=200, deadline=None)
@given(items=_items(), terms=_terms, room=st.integers(0, 400))
def test_excerpted_keeps_every_item_and_cuts_only_messages_past_the_best(
    items: list[ContextItem], terms: frozenset[str], room: int
) -> None:
    counter = TokenCounter.for_model("gpt-4o")
    out = excerpted(items, terms, room, counter)
    assert [it.id for it in out] == [it.id for it in items]
    used = 0
    for before, after in zip(items, out, strict=True):
        fields = ("tier", "score", "role", "name", "timestamp", "tool_calls", "scope")
        assert all(getattr(before, f) == getattr(after, f) for f in fields)
        whole = used < WHOLE_SHARE * room
        used += counter.count(before.text) if whole else 0
        cuttable = before.tier == Tier.RETRIEVED and before.role and not before.tool_calls
        short = None if whole or not cuttable or not terms else excerpt(before.text, terms)
        if short is None:
            assert after == before and after.text == before.text
        else:
            assert after.text == short
            assert after.metadata["excerpt"] == counter.count(before.text)


@pytest.mark.parametrize("name", ["excerpts", "entities", "other_sessions"])
def test_the_on_off_settings_are_flags(name: str) -> None:
    assert getattr(MemoryConfig(**{name: np.bool_(False)}), name) is False
    assert getattr(MemoryConfig(**{name: np.bool_(True)}), name) is True
    for wrong in (1, "false", None):
        with pytest.raises(ConfigurationError, match=f"MemoryConfig.{name} must be True or False"):
            MemoryConfig(**{name: wrong})


_FILLER = [
    "The weather has been grey all week and the trains were late again.",
    "I finally finished the report for work, which took far longer than planned.",
    "My neighbour keeps asking about the fence, and I keep saying next month.",
    "We watched a long documentary about whales on Sunday evening.",
]
_HOBBIES = ["pottery", "camping", "violin", "painting", "swimming", "hiking", "baking", "chess"]


def _conversation() -> list[dict[str, object]]:
    messages: list[dict[str, object]] = []
    for n, hobby in enumerate(_HOBBIES):
        filler = " ".join(_FILLER[(n + k) % len(_FILLER)] for k in range(3))
        text = f"{filler} Also, my favourite hobby this month is {hobby}, with the kids."
        messages.append({"id": f"t{n}", "role": "user", "text": text, "name": "Mel"})
        messages.append({"id": f"r{n}", "role": "assistant", "text": "That sounds lovely!"})
    for n in range(30):  # a recent stretch about something else
        messages.append({"id": f"x{n}", "role": "user", "text": f"Note {n}: the car is fixed."})
    return messages


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory, embedder: object) -> Path:
    path = tmp_path_factory.mktemp("excerpts")
    memory = ContextMemory(path=path, embedder=embedder, inclusion_log=False, write_behind=False)
    memory.add_messages("s", _conversation(), progress=False)
    memory.close()
    return path


def _open(folder: Path, embedder: object, on: bool) -> ContextMemory:
    store = ChromaStore(folder, embedder=embedder)  # type: ignore[arg-type]
    config = MemoryConfig(excerpts=on, recent_messages=4)
    return ContextMemory(store=store, config=config, inclusion_log=False, write_behind=False)


@settings(
    max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    budget=st.integers(150, 700),
    fmt=st.sampled_from(["compact", "text", "messages"]),
)
def test_what_is_sent_is_the_excerpts_the_report_lists_within_the_budget(
    folder: Path, embedder: object, budget: int, fmt: str
) -> None:
    memory = _open(folder, embedder, True)
    try:
        query = "What hobbies does Mel enjoy with the kids?"
        found = memory.candidates("s", query, budget=budget, format=fmt)  # type: ignore[arg-type]
        ctx = memory.assemble("s", query, budget=budget, format=fmt)  # type: ignore[arg-type]
    finally:
        memory.close()
    assert ctx.tokens_used <= budget
    check_fidelity(ctx)  # each included item, excerpt and all, is what the model reads
    check_conversation(ctx)
    offered = Counter(it.id for it in found.items)
    listed = Counter(ctx.included_ids) + Counter(p.item.id for p in ctx.pruned)
    assert listed - offered == Counter(i for i in ctx.included_ids if i.startswith("ctxbudget:"))
    cut = [it for it in ctx.included if "excerpt" in it.metadata]
    for item in cut:
        assert MARKER in item.text and "hobby" in item.text
        assert "documentary" not in item.text  # the sentences without the query's words


def test_a_small_budget_holds_more_distinct_turns_with_excerpts(
    folder: Path, embedder: object
) -> None:
    query = "What hobbies does Mel enjoy with the kids?"
    held = {}
    for on in (False, True):
        memory = _open(folder, embedder, on)
        try:
            ctx = memory.assemble("s", query, budget=400, format="compact")
        finally:
            memory.close()
        held[on] = {i for i in ctx.included_ids if i.startswith("t")}
        if on:  # each turn held shows its hobby
            shown = ctx.render()
            assert all(f"hobby this month is {_HOBBIES[int(i[1:])]}" in shown for i in held[on])
    assert held[False] < held[True] == {f"t{n}" for n in range(len(_HOBBIES))}


@settings(max_examples=100, deadline=None)
@given(texts=st.lists(_text(), min_size=1, max_size=6), terms=_terms)
def test_the_session_copy_cuts_each_message_as_excerpt_would(
    texts: list[str], terms: frozenset[str]
) -> None:
    index = SessionIndex(3600.0, "o200k_base")
    records = [
        Record(id=f"m{n}", kind="message", text=text, role="user", seq=n)
        for n, text in enumerate(texts)
    ]
    index.extend((r, [1.0, float(n)]) for n, r in enumerate(records))
    for record in records:
        item = ContextItem(record.id, record.text, tier=Tier.RETRIEVED, role="user")
        kept = index.pieces_of(dataclasses.replace(item, record_id=record.id))
        assert kept == pieces(record.text)
        assert excerpt(record.text, terms, kept) == excerpt(record.text, terms)
        # Another session's message with the same id, or another text: not this copy's.
        other = dataclasses.replace(item, text=record.text + " More.", record_id=record.id)
        assert index.pieces_of(other) is None


# -- two objects on one folder: the session copy's cut sentences are never stale -------------

_QUERY = "What hobbies does Mel enjoy with the kids?"
_NEW_HOBBIES = ["kayaking", "juggling", "knitting", "archery"]


def _hobby_text(n: int, hobby: str) -> str:
    filler = " ".join(_FILLER[(n + k) % len(_FILLER)] for k in range(3))
    return f"{filler} Also, my favourite hobby this month is {hobby}, with the kids."


_edits = st.lists(
    st.tuples(
        st.sampled_from(["replace", "delete", "restart"]),
        st.integers(0, len(_HOBBIES) - 1),
        st.sampled_from(_NEW_HOBBIES),
    ),
    min_size=1,
    max_size=3,
)


@settings(
    max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(edits=_edits)
def test_an_edit_through_another_object_is_never_read_from_a_stale_cut(
    tmp_path_factory: pytest.TempPathFactory, embedder: object, edits: list[tuple[str, int, str]]
) -> None:
    """A reader with excerpts on cut the session's sentences; another object on the same folder
    replaces or deletes turns, or deletes the session for another user to start it again with
    the same ids: every excerpt the reader sends next is cut from the text stored now."""
    path = tmp_path_factory.mktemp("excerpt-edits")
    writer = ContextMemory(path=path, embedder=embedder, inclusion_log=False, write_behind=False)
    config = MemoryConfig(excerpts=True, recent_messages=4)
    reader = ContextMemory(path=path, embedder=embedder, config=config, inclusion_log=False)
    cut = 0
    try:
        writer.add_messages("s", _conversation(), user_id="mel", progress=False)
        stored = {str(m["id"]): str(m["text"]) for m in _conversation()}
        reader.assemble("s", _QUERY, budget=400, format="compact")  # the cut is kept now
        for op, n, hobby in edits:
            tid = f"t{n}"
            if op == "replace" and tid in stored:
                text = _hobby_text(n, hobby)
                record = Record(
                    id=tid,
                    kind="message",
                    text=text,
                    namespace=writer.namespace,
                    session_id="s",
                    user_id="mel",
                    role="user",
                    metadata={"_name": "Mel"},  # as add_messages stores a message's name
                )
                writer.store.add([record], replace=True)
                stored[tid] = text
            elif op == "delete":
                writer.store.delete([tid], namespace=writer.namespace, session_id="s")
                stored.pop(tid, None)
            elif op == "restart":  # same ids, another user's turns
                writer.delete_session("s")
                again = [
                    {**m, "text": _hobby_text(k, hobby)} if str(m["id"]).startswith("t") else m
                    for k, m in enumerate(_conversation())
                ]
                writer.add_messages("s", again, user_id="ana", progress=False)
                stored = {str(m["id"]): str(m["text"]) for m in again}
            ctx = reader.assemble("s", _QUERY, budget=400, format="compact")
            assert ctx.tokens_used <= 400
            check_fidelity(ctx)
            for item in ctx.included:
                if item.tier != Tier.RETRIEVED:
                    continue
                assert item.id in stored, f"{item.id} offered after it was deleted"
                now = stored[item.id]
                if "excerpt" in item.metadata:
                    cut += 1
                    shown = [p.strip() for p in item.text.split(MARKER) if p.strip()]
                    assert shown and all(p in now for p in shown), (item.text, now)
                else:
                    assert item.text == now, (item.text, now)
        assert cut, "no excerpt sent: the reader's cut was not exercised"
    finally:
        reader.close()
        writer.close()
