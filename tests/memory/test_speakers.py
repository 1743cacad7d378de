"""Who said it, however it was stored (`ctxbudget.memory.reading.speakers`).

Properties: a name-like speaker stored in ``name`` or as a ``Name: `` prefix gives the same
`speaker_of` (for message dicts, stored records and context items); texts that merely contain a
colon (URLs, times, headings, code) are no speakers; any input is answered without an error, and
a speaker found in the text is the text's own start. Then the retrieval that uses it: the same
session stored in name form and in prefix form gets the same candidate scores, and a query that
names a speaker weighs that speaker's turns the same way in both forms.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxbudget import ContextItem
from ctxbudget.core.render import Format
from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.memory.context import ContextMemory
from ctxbudget.memory.policy.config import MemoryConfig
from ctxbudget.memory.policy.scoring import Scoring
from ctxbudget.memory.reading.lexical import lexical_terms
from ctxbudget.memory.reading.session_index import Query, SessionIndex
from ctxbudget.memory.reading.speakers import (
    HEADINGS,
    find_speaker,
    speaker_of,
    speaker_prefix,
    spoken,
)
from ctxbudget.store.chroma_store import ChromaStore
from ctxbudget.store.records import Record, embedding_text

FAST = settings(max_examples=300, deadline=None, derandomize=True)

# -- strategies --------------------------------------------------------------------------------

lower = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=9)
capitalized = st.builds(
    lambda head, tail: head + tail,
    st.sampled_from("ABCDEFGHIJKLMNOPRSTUVWZ"),
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz'-", min_size=1, max_size=10).filter(
        lambda t: t[0].isalpha()
    ),
).filter(lambda w: w.casefold() not in HEADINGS)
initial = st.sampled_from("ABCDEFGHJKLMNPRSTVW").map(lambda c: c + ".")
title = st.sampled_from(["Dr.", "Mr.", "Mrs.", "Ms.", "Prof.", "St."])
upper = capitalized.map(str.upper).filter(lambda w: w.casefold().strip("'-") not in HEADINGS)
cjk = st.text(alphabet="李王张刘陈杨黄赵雷梅", min_size=2, max_size=3)


@st.composite
def names(draw: st.DrawFn) -> str:
    """1-4 name-like words: Caroline, Dr. Ana Lima, J. R. Tolkien, Ludwig van Beethoven, MEL."""
    shape = draw(st.sampled_from(["plain", "titled", "initials", "particle", "upper", "cjk"]))
    if shape == "cjk":
        return draw(cjk)
    if shape == "upper":
        return draw(upper)
    words = draw(st.lists(capitalized, min_size=1, max_size=3))
    if shape == "titled":
        words = [draw(title), *words][:4]
    elif shape == "initials":
        words = [draw(initial), *words][:4]
    elif shape == "particle" and len(words) >= 2:
        words.insert(1, draw(st.sampled_from(["van", "de", "da", "bin", "von"])))
    return " ".join(words[:4])


short = st.text(min_size=1, max_size=80).filter(lambda t: t.strip() != "")
said = st.one_of(short, st.builds(lambda t, n: t.lstrip() * n, short, st.integers(2, 40)))


def prefixed(name: str, text: str) -> str:
    colon = "\uff1a" if name[0] in "李王张刘陈杨黄赵雷梅" else ": "
    return f"{name}{colon}{text}"


# -- speaker_of ----------------------------------------------------------------------------------


@FAST
@given(name=names(), text=said, role=st.sampled_from(["user", "assistant"]))
def test_a_speaker_stored_either_way_is_the_same_speaker(name: str, text: str, role: str) -> None:
    in_name = {"role": role, "name": name, "text": text}
    in_text = {"role": role, "content": prefixed(name, text)}
    assert speaker_of(in_name) == speaker_of(in_text) == name
    record = Record(id="m", kind="message", text=prefixed(name, text), role=role)
    named = Record(id="m", kind="message", text=text, role=role, metadata={"_name": name})
    assert speaker_of(record) == speaker_of(named) == name
    item = ContextItem("m", prefixed(name, text), role=role)
    assert speaker_of(item) == speaker_of(ContextItem("m", text, role=role, name=name)) == name
    assert find_speaker(in_text) is not None and find_speaker(in_text).prefixed  # type: ignore[union-attr]
    assert find_speaker(in_name) is not None and not find_speaker(in_name).prefixed  # type: ignore[union-attr]


@FAST
@given(name=names(), text=said)
def test_the_name_field_wins_and_the_prefix_ends_where_the_words_start(
    name: str, text: str
) -> None:
    body = text.lstrip()
    found = speaker_prefix(prefixed(name, body))
    assert found is not None and found.name == name
    assert prefixed(name, body)[found.end :] == body
    assert speaker_of({"name": "Someone Else", "text": prefixed(name, text)}) == "Someone Else"


urls = st.builds(
    lambda scheme, rest: f"{scheme}://{rest}",
    st.sampled_from(["http", "https", "ftp", "HTTP", "Https", "mailto", "File"]),
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz./?=&", min_size=0, max_size=30),
)
times = st.builds(
    lambda h, m, rest: f"{h}:{m:02d}{rest}",
    st.integers(0, 23),
    st.integers(0, 59),
    st.sampled_from(["", " works", " pm: the call", ":30 exactly"]),
)
headings = st.builds(
    lambda word, case, rest: f"{case(word)}: {rest}",
    st.sampled_from(sorted(HEADINGS)),
    st.sampled_from([str.capitalize, str.upper, str.lower]),
    said,
)
code = st.builds(
    lambda ident, kind, rest: f"{ident}: {kind}{rest}",
    lower,
    st.sampled_from(["int", "str", "list[str]", "Optional[int]", "dict"]),
    st.sampled_from(["", " = 3", "\nreturn x"]),
)
other_colons = st.sampled_from(
    [
        "std::vector<int> v;",
        "C:\\Users\\ana\\notes.txt",
        "Caroline:",  # nothing said after it
        "Caroline:   ",
        "Q: what time is it?",
        "A: ten",
        "I think: maybe",
        "ratio 3:2 is fine",
        "key:value",
        "Caroline:hi (no space after the colon)",
        "Well, Caroline said: hello",
        "Five Words Are Too Many Here: x",
        "Line one\nMel: line two",
    ]
)


@FAST
@given(text=st.one_of(urls, times, headings, code, other_colons))
def test_texts_that_merely_contain_a_colon_are_not_speakers(text: str) -> None:
    assert speaker_of({"role": "user", "text": text}) is None
    assert speaker_prefix(text) is None


@settings(max_examples=500, deadline=None, derandomize=True)
@given(text=st.text(max_size=200), name=st.one_of(st.none(), st.text(max_size=20)))
def test_any_input_is_answered_and_a_found_speaker_is_the_texts_own_start(
    text: str, name: str | None
) -> None:
    found = speaker_prefix(text)
    if found is not None:
        words = text.split()
        assert found.name.split() == words[: len(found.name.split())] or "\uff1a" in text
        assert 0 < found.end <= len(text) and text[found.end :].strip()
    answer = speaker_of({"role": "user", "name": name, "text": text})
    if name is not None and name.strip():
        assert answer == " ".join(name.split())
    else:
        assert answer == (found.name if found is not None else None)


@pytest.mark.parametrize(
    "message",
    [
        None,
        42,
        "Caroline: hi",  # a bare string is not a message
        {"text": 3},
        {"content": [{"type": "text", "text": "Caroline: hi"}]},
        {"name": True, "text": "x"},
        {"name": "   ", "text": "no prefix here"},
        {"text": "\ud800: lone surrogate"},
        {"text": "Mel" * 100_000 + ": far too long a prefix"},
        {"text": ":" * 10_000},
    ],
)
def test_hostile_messages_have_no_speaker(message: object) -> None:
    assert speaker_of(message) is None


def test_a_long_text_is_read_only_at_its_start() -> None:
    text = "Caroline: " + "word " * 200_000
    assert speaker_of({"text": text}) == "Caroline"
    assert speaker_of({"text": "x" * 200_000 + " Caroline: hi"}) is None


WORDS = "cat tea train hill lake river paint guitar Porto Lisbon cake soup bike rain".split()


@FAST
@given(name=names(), text=said, role=st.sampled_from(["user", "assistant"]))
def test_what_is_embedded_is_what_was_said_in_either_form(name: str, text: str, role: str) -> None:
    body = text.lstrip()
    prefix_form = Record(id="m", kind="message", text=prefixed(name, body), role=role)
    name_form = Record(id="m", kind="message", text=body, role=role, metadata={"_name": name})
    assert embedding_text(prefix_form) == embedding_text(name_form) == body
    assert spoken(prefix_form) == spoken(name_form) == body
    assert spoken({"role": role, "content": prefixed(name, body)}) == body


def test_only_speaking_turns_lose_their_prefix() -> None:
    text = "Caroline: the notes from Monday."
    for record in (
        Record(id="t", kind="message", text=text, role="tool", tool_call_id="c1"),
        Record(id="d", kind="document", text=text, metadata={"doc_namespace": "kb"}),
        Record(id="p", kind="pinned", text=text, session_id="s"),
        Record(id="m", kind="message", text=text, role="user", metadata={"_name": "Mel"}),
    ):
        assert embedding_text(record) == spoken(record) == text
    assert spoken(ContextItem("i", text, role="tool")) == text
    assert spoken(ContextItem("i", text, role="assistant")) == "the notes from Monday."
    assert spoken({"role": "user", "text": 3}) == ""


# -- retrieval: the same session stored in name form and in prefix form ------------------------

TURNS = [
    ("Caroline", "I painted a picture of a sunrise for my art show."),
    ("Melanie", "That sounds amazing. I painted a sunset over the lake last week."),
    ("Caroline", "I went to the LGBTQ support group yesterday and it was powerful."),
    ("Melanie", "We took the kids camping in the mountains, they loved the stars."),
    ("Caroline", "I am researching adoption agencies; I want to give a child a home."),
    ("Melanie", "I signed up for a pottery class, I made a bowl with a dog face."),
    ("Caroline", "My friends gave me a necklace from my grandmother in Sweden."),
    ("Melanie", "Running has been great for my headspace lately."),
    ("Caroline", "I am going to a transgender conference in July."),
    ("Melanie", "My son had an accident at the beach but he is fine now."),
]
QUERIES = [
    "What did Caroline paint?",
    "What did Melanie paint?",
    "Where did Melanie go camping?",
    "When is Caroline going to the conference?",
    "What pottery did Melanie make?",
]


def stored(memory: ContextMemory, form: str) -> str:
    session = f"{form}-{uuid.uuid4().hex[:8]}"
    memory.add_messages(
        session,
        [
            {
                "id": f"t{i}",
                "role": "user" if speaker == "Caroline" else "assistant",
                "text": f"{speaker}: {text}" if form == "prefix" else text,
                **({"name": speaker} if form == "name" else {}),
                "timestamp": 1_700_000_000 + 60 * i,
            }
            for i, (speaker, text) in enumerate(TURNS)
        ],
        progress=False,
    )
    return session


@pytest.fixture(scope="module")
def memory(tmp_path_factory: pytest.TempPathFactory, embedder: OnnxEmbedder) -> ContextMemory:
    folder: Path = tmp_path_factory.mktemp("speakers")
    store = ChromaStore(folder / "db", embedder=embedder)
    # A recent window of 2: the other turns are retrieved, and scored.
    return ContextMemory(store=store, config=MemoryConfig(recent_messages=2), write_behind=False)


def scores(memory: ContextMemory, session: str, query: str) -> dict[str, float]:
    found = memory.candidates(session, query, budget=4000)
    return {item.id: item.score for item in found.retrieved}


@pytest.mark.parametrize("query", QUERIES)
def test_candidate_scores_do_not_depend_on_how_the_speaker_was_stored(
    memory: ContextMemory, query: str
) -> None:
    """Equal up to the vectors' spread: the same words, authors and vectors (the prefix is not
    embedded); each stored vector is moved by its own key (`ctxbudget.store.vectors.spread`:
    at most 1e-6 a component), and the two forms' keys differ."""
    by_name = scores(memory, stored(memory, "name"), query)
    by_prefix = scores(memory, stored(memory, "prefix"), query)
    assert by_name.keys() == by_prefix.keys() and len(by_name) == len(TURNS) - 2
    for key, score in by_name.items():
        assert by_prefix[key] == pytest.approx(score, rel=0, abs=1e-5), key


def test_a_named_speakers_turns_weigh_more_in_both_forms(memory: ContextMemory) -> None:
    for form in ("name", "prefix"):
        session = stored(memory, form)
        hers = scores(memory, session, "What did Caroline paint?")
        his = scores(memory, session, "What did Melanie paint?")
        assert max(hers, key=hers.__getitem__) == "t0", form  # her sunrise
        assert max(his, key=his.__getitem__) == "t1", form  # her sunset
        # The other painter's turn is weighed down when the query names someone else.
        assert hers["t1"] / hers["t0"] < his["t1"] / his["t0"], form


@pytest.mark.parametrize("fmt", ["text", "compact", "messages"])
def test_a_prefixed_turn_is_labelled_once(memory: ContextMemory, fmt: Format) -> None:
    session = stored(memory, "prefix")
    rendered = memory.assemble(session, "What did Caroline paint?", budget=2000, format=fmt)
    text = rendered.render() if fmt != "messages" else str(rendered.to_messages())
    assert "(Caroline)" not in text and "Caroline: I painted a picture" in text
    assert all(item.name is None for item in rendered.included if item.id.startswith("t"))


SLOW = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)

speakers_pair = st.lists(names(), min_size=2, max_size=3, unique=True)
turn_words = st.lists(st.sampled_from(WORDS), min_size=1, max_size=8).map(" ".join)


def index_of(turns: list[tuple[str, str]], form: str, vectors: np.ndarray) -> SessionIndex:
    index = SessionIndex(3600.0, "o200k_base")
    records = []
    for seq, (speaker, text) in enumerate(turns):
        records.append(
            Record(
                id=f"m{seq}",
                kind="message",
                text=prefixed(speaker, text) if form == "prefix" else text,
                role="user" if seq % 2 == 0 else "assistant",
                seq=seq,
                timestamp=1_700_000_000.0 + 60 * seq,
                metadata={"_name": speaker} if form == "name" else {},
            )
        )
    index.extend(zip(records, vectors, strict=True))
    return index


@SLOW
@given(
    people=speakers_pair,
    picks=st.lists(st.tuples(st.integers(0, 2), turn_words), min_size=1, max_size=25),
    asked=st.tuples(st.integers(0, 2), turn_words),
    seed=st.integers(0, 2**32 - 1),
)
def test_the_session_index_scores_both_forms_alike_given_the_same_vectors(
    people: list[str], picks: list[tuple[int, str]], asked: tuple[int, str], seed: int
) -> None:
    """Authors, BM25, named speakers and relevance are equal; only the embedded text differs."""
    turns = [(people[p % len(people)], text) for p, text in picks]
    rng = np.random.default_rng(seed)
    vectors = rng.normal(size=(len(turns), 8))
    by_name, by_prefix = index_of(turns, "name", vectors), index_of(turns, "prefix", vectors)
    assert by_name.authors == by_prefix.authors == [speaker for speaker, _ in turns]
    query = f"What did {people[asked[0] % len(people)]} say about {asked[1]}?"
    assert by_name.named_in(query) == by_prefix.named_in(query)
    terms = lexical_terms(query)
    assert np.array_equal(by_name.lexical.array(terms), by_prefix.lexical.array(terms))
    vector = rng.normal(size=8)
    results = []
    for index in (by_name, by_prefix):
        found = Query(1.0, query, terms, None, index.nearest(vector.tolist(), len(turns)))
        results.append(index.relevance([found], Scoring(), 2, index.named_in(query)))
    assert np.array_equal(results[0][0], results[1][0])
