"""Bad input gets a clear error (what, where, what to do) and leaves the store as it was.

Table-driven, on an embedded Chroma and on a real ``chroma run`` server: each case asserts the
error class, key phrases of the message, and that the store holds exactly what it held before
(the count of the whole collection and every record of the namespace, compared field by field).
Then the policies that are not errors: NUL characters and every script round-trip, a message
repeated as it was is a no-op, timestamps that go backwards keep insertion order, budgets far
over any window work, and what the CLI says for the same mistakes.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from nested_values import nested

from ctxbudget import (
    Budget,
    BudgetExceededError,
    ConfigurationError,
    ContextAssembler,
    ContextItem,
    InvalidBudgetError,
    InvalidItemError,
    Tier,
    TokenCounter,
    UnknownModelError,
)
from ctxbudget.cli.main import main
from ctxbudget.embed.local import LocalEmbedder
from ctxbudget.errors import StoreInputError
from ctxbudget.memory.context import ContextMemory
from ctxbudget.memory.policy.config import MemoryConfig
from ctxbudget.store.chroma_store import ChromaStore, Record

HUGE = "x" * 10_485_760  # a 10 MB message
SURROGATE = "ok \ud800 ok"


@pytest.fixture(
    scope="module", params=["embedded", pytest.param("server", marks=pytest.mark.integration)]
)
def shared_store(
    request: pytest.FixtureRequest,
    embedder: LocalEmbedder,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[ChromaStore]:
    collection = f"bad-input-{uuid.uuid4().hex[:12]}"
    if request.param == "server":
        url = request.getfixturevalue("chroma_server").url
        store = ChromaStore(url=url, embedder=embedder, collection=collection)
    else:
        store = ChromaStore(tmp_path_factory.mktemp("bad-input"), embedder=embedder)
    yield store
    store.close()


def seeded(store: ChromaStore) -> ContextMemory:
    """A memory in its own namespace, holding two messages, a pinned fact and a document."""
    mem = ContextMemory(store=store, namespace=f"ns-{uuid.uuid4().hex[:12]}")
    mem.add_messages(
        "s1",
        [
            {"role": "user", "text": "I moved to Porto in May.", "id": "m1", "timestamp": 1e9},
            {"role": "assistant", "text": "Porto is lovely.", "id": "m2", "metadata": {"k": 1}},
        ],
        user_id="u1",
    )
    mem.pin("s1", "User is vegetarian.", id="p1")
    mem.add_documents([{"id": "d1", "text": "Porto is in the north of Portugal."}])
    return mem


@pytest.fixture(scope="module")
def seeded_memory(shared_store: ChromaStore) -> ContextMemory:
    """One seeded memory for all the error cases: each checks it is unchanged after its error."""
    return seeded(shared_store)


@pytest.fixture
def memory(shared_store: ChromaStore) -> ContextMemory:
    """A seeded memory of its own, for tests that write."""
    return seeded(shared_store)


def snapshot(mem: ContextMemory) -> tuple[int, list[Record]]:
    mem.flush()  # acknowledged messages, stored: the store itself is read next
    records = mem.store.find(namespace=mem.namespace)
    return mem.store.count(), sorted(records, key=lambda r: (r.kind, r.id))


Call = Callable[[ContextMemory], object]


def case(
    name: str, call: Call, error: type[Exception], *needles: str
) -> Any:  # a pytest ParameterSet
    return pytest.param(call, error, needles, id=name)


def msg(text: object = "hello", **fields: object) -> Call:
    """add_messages with one message dict."""
    return lambda m: m.add_messages("s1", [{"role": "user", "text": text, **fields}])


WRITE_CASES = [
    # -- text: empty, huge, not a str, not Unicode --------------------------------------------
    case("empty-text", msg(""), StoreInputError, "message 0 has empty text"),
    case("blank-text", msg(" \n\t "), StoreInputError, "message 0 has empty text"),
    case("none-text", msg(None), StoreInputError, "message 0: text must be a str, got NoneType"),
    case("bytes-text", msg(b"caf\xe9"), StoreInputError, "text must be a str, got bytes"),
    case(
        "10MB-message",
        lambda m: m.add_message("s1", "user", HUGE),
        StoreInputError,
        "message 0 is 10,485,760 characters; the limit is 1,000,000",
        "MemoryConfig.max_message_chars",
        "add_documents",
        "raise the limit",
    ),
    case(
        "10MB-pin",
        lambda m: m.pin("s1", HUGE),
        StoreInputError,
        "the pinned fact is 10,485,760 characters",
        "add_documents",
    ),
    case(
        "surrogate-text",
        msg(SURROGATE),
        StoreInputError,
        "message 0 (id 's1:",
        "text holds a lone surrogate U+D800 at index 3",
        "repair the text where it was decoded",
        "nothing was written",
    ),
    case(
        "surrogate-session",
        lambda m: m.add_message("s\udc80", "user", "hi"),
        StoreInputError,
        "session_id holds a lone surrogate U+DC80",
    ),
    case("surrogate-id", msg(id="m\udfff"), StoreInputError, "id holds a lone surrogate"),
    case("surrogate-name", msg(name="Zo\ud83d"), StoreInputError, "lone surrogate U+D83D"),
    case(
        "surrogate-user",
        lambda m: m.add_message("s1", "user", "hi", user_id="\ud800"),
        StoreInputError,
        "user_id holds a lone surrogate",
    ),
    case(
        "surrogate-pin",
        lambda m: m.pin("s1", "fact \udc00"),
        StoreInputError,
        "pinned fact 0",
        "text holds a lone surrogate U+DC00",
    ),
    case(
        "surrogate-document",
        lambda m: m.add_documents(["doc \ud800 text"]),
        StoreInputError,
        "document 0: text holds a lone surrogate U+D800 at index 4",
    ),
    # -- roles, ids, shapes -----------------------------------------------------------------
    case(
        "unknown-role",
        msg(role="robot"),
        StoreInputError,
        "message 0: role must be one of",
        "'assistant'",
        "got 'robot'",
    ),
    case("unhashable-role", msg(role=["user"]), StoreInputError, "role must be one of"),
    case("id-not-a-str", msg(id=["m9"]), StoreInputError, "message 0: id must be a str"),
    case(
        "duplicate-ids-in-one-call",
        lambda m: m.add_messages(
            "s1",
            [
                ("user", "a"),
                {"role": "user", "text": "b", "id": "x"},
                {"role": "user", "text": "c", "id": "x"},
            ],
        ),
        StoreInputError,
        "ids ['x'] appear more than once in one call",
        "give each message its own id",
        "nothing was written",
    ),
    case(
        "existing-id-other-content",
        msg("different text", id="m1"),
        StoreInputError,
        "1 message(s) are already stored with different content: ids ['m1']",
        "give new content a new id",
        "nothing was written",
    ),
    case(
        "existing-id-in-a-later-batch",
        lambda m: m.add_messages(
            "s1",
            [{"role": "user", "text": f"new {i}", "id": f"n{i}"} for i in range(5)]
            + [{"role": "user", "text": "changed", "id": "m2"}],
            batch_size=2,
        ),
        StoreInputError,
        "already stored with different content: ids ['m2']",
        "nothing was written",
    ),
    case(
        "messages-a-str",
        lambda m: m.add_messages("s1", "hello"),
        StoreInputError,
        "messages must be a list",
        "got a str",
        "add_message",
    ),
    case(
        "messages-a-dict",
        lambda m: m.add_messages("s1", {"role": "user", "text": "hi"}),
        StoreInputError,
        "messages must be a list",
        "got a dict",
    ),
    case(
        "messages-an-int",
        lambda m: m.add_messages("s1", 5),
        StoreInputError,
        "messages must be a list",
        "got a int",
    ),
    case(
        "message-an-int",
        lambda m: m.add_messages("s1", [("user", "ok"), 5]),
        StoreInputError,
        "message 1 is a int",
        "(role, text) tuples",
    ),
    case(
        "batch-size-zero",
        lambda m: m.add_messages("s1", [("user", "a")], batch_size=0),
        StoreInputError,
        "batch_size must be a positive int, got 0",
    ),
    case(
        "session-empty",
        lambda m: m.add_message("", "user", "hi"),
        StoreInputError,
        "session_id must be a non-empty str, got ''",
    ),
    case(
        "session-an-int",
        lambda m: m.add_message(5, "user", "hi"),
        StoreInputError,  # type: ignore[arg-type]
        "session_id must be a non-empty str, got 5",
    ),
    # -- timestamps ---------------------------------------------------------------------------
    case(
        "timestamp-text",
        msg(timestamp="last tuesday"),
        StoreInputError,
        "message 0: timestamp 'last tuesday' is not ISO-8601 (e.g. 2026-03-02T09:14:00Z)",
    ),
    case(
        "timestamp-nan",
        msg(timestamp=math.nan),
        StoreInputError,
        "timestamp must be a finite number or None, got nan",
    ),
    case("timestamp-inf", msg(timestamp=math.inf), StoreInputError, "finite number"),
    case("timestamp-bool", msg(timestamp=True), StoreInputError, "got True"),
    case(
        "timestamp-10**400",
        msg(timestamp=10**400),
        StoreInputError,
        "message 0: timestamp",
        "is not a date",
        "seconds since 1970-01-01 UTC",
    ),
    case(
        "timestamp-5000-digits",
        msg(timestamp=10**5000),
        StoreInputError,
        "message 0: timestamp a huge int is not a date",
        "seconds since 1970-01-01 UTC",
    ),
    case(
        "name-an-int",
        msg(name=5),
        StoreInputError,
        'message 0: name must be a str, the speaker\'s name (None or "": none), got 5',
    ),
    case(
        "name-surrogate",
        msg(name="Ana\udc80"),
        StoreInputError,
        "message 0: name holds a lone surrogate U+DC80 at index 3",
    ),
    case(
        "timestamp-in-milliseconds-by-mistake-far-future",
        msg(timestamp=1.7e15),
        StoreInputError,
        "timestamp 1700000000000000.0 is not a date between years 1 and 9999",
        "milliseconds? divide by 1000",
    ),
    case(
        "timestamp-a-list",
        msg(timestamp=[2026]),
        StoreInputError,
        "timestamp must be a number (seconds since 1970-01-01 UTC), a datetime or ISO-8601 "
        "text, got list",
    ),
    # -- metadata Chroma cannot keep, and keys that are ctxbudget's own -------------------------
    case(
        "metadata-nested",
        msg(metadata={"a": {"b": 1}}),
        StoreInputError,
        "metadata['a'] is a dict ({'b': 1}); a metadata value must be a str, an int, a float "
        "or a bool",
        "encode anything else, e.g. a date as an ISO-8601 str or a JSON string",
        "nothing was written",
    ),
    case(
        "metadata-list",
        msg(metadata={"tags": ["a", "b"]}),
        StoreInputError,
        "metadata['tags'] is a list",
    ),
    case(
        "metadata-none",
        msg(metadata={"gone": None}),
        StoreInputError,
        "metadata['gone'] is a NoneType",
    ),
    case(
        "metadata-bytes",
        msg(metadata={"raw": b"\x00"}),
        StoreInputError,
        "metadata['raw'] is a bytes",
    ),
    case(
        "metadata-nan",
        msg(metadata={"score": math.nan}),
        StoreInputError,
        "metadata['score'] = nan is not finite",
    ),
    case(
        "metadata-2**70",
        msg(metadata={"n": 2**70}),
        StoreInputError,
        "metadata['n'] = 1180591620717411303424 does not fit in 64 bits",
    ),
    case(
        "metadata-empty-key",
        msg(metadata={"": 1}),
        StoreInputError,
        "metadata key '' must be a non-empty str",
    ),
    case(
        "metadata-int-key",
        msg(metadata={1: "a"}),
        StoreInputError,
        "metadata key 1 must be a non-empty str",
    ),
    case(
        "metadata-dollar-key",
        msg(metadata={"$in": 1}),
        StoreInputError,
        "metadata key '$in' starts with '$'",
        "rename it",
    ),
    case(
        "metadata-surrogate-key",
        msg(metadata={"k\udc00": 1}),
        StoreInputError,
        "metadata key holds a lone surrogate",
    ),
    case(
        "metadata-surrogate-value",
        msg(metadata={"k": "\udc00"}),
        StoreInputError,
        "metadata['k'] holds a lone surrogate",
    ),
    case(
        "metadata-internal-_tool_calls",
        msg(metadata={"_tool_calls": "[1]"}),
        StoreInputError,
        "message 0: metadata key '_tool_calls' is reserved",
        "keys starting with '_'",
        "rename it",
    ),
    case("metadata-internal-_name", msg(metadata={"_name": "x"}), StoreInputError, "reserved"),
    case(
        "metadata-salience-text",
        msg(metadata={"salience": "high"}),
        StoreInputError,
        "metadata['salience'] multiplies the item's score",
        "number >= 0",
        "got 'high'",
    ),
    case("metadata-salience-negative", msg(metadata={"salience": -1}), StoreInputError, "got -1"),
    case(
        "metadata-not-a-dict",
        msg(metadata="k=v"),
        StoreInputError,
        "message 0: metadata must be a dict, got str",
    ),
    case(
        "pin-metadata-_task",
        lambda m: m.pin("s1", "fact", metadata={"_task": "open"}),
        StoreInputError,
        "pin: metadata key '_task' is reserved",
    ),
    case(
        "pin-metadata-list",
        lambda m: m.pin("s1", "fact", metadata=[("a", 1)]),  # type: ignore[arg-type]
        StoreInputError,
        "pin: metadata must be a dict, got list",
    ),
    case(
        "document-metadata-doc_id",
        lambda m: m.add_documents([{"text": "t", "metadata": {"doc_id": "x"}}]),
        StoreInputError,
        "document 0: metadata key 'doc_id' is reserved",
        "'doc_namespace'",
    ),
    case(
        "document-metadata-a-str",
        lambda m: m.add_documents([{"text": "t", "metadata": "x"}]),
        StoreInputError,
        "document 0: metadata must be a dict, got str",
    ),
    # -- tool calls ---------------------------------------------------------------------------
    case(
        "tool-calls-a-str",
        msg(tool_calls="call_1"),
        StoreInputError,
        "tool_calls must be a list of call ids or call dicts, got str",
    ),
    case(
        "tool-call-an-int",
        msg(tool_calls=[5]),
        StoreInputError,
        "each tool call must be an id (str) or a dict with an 'id'",
    ),
    case(
        "tool-call-no-id",
        msg(tool_calls=[{"name": "f"}]),
        StoreInputError,
        "message 0, tool call 0 ('f') has no id; give every tool call a non-empty str id",
    ),
    case(
        "tool-call-not-json",
        msg(tool_calls=[{"id": "c1", "name": "f", "args": {(1, 2): 3}}]),
        StoreInputError,
        "the arguments of tool call 'f' cannot be written as JSON",
    ),
    case(
        "tool-call-nan",
        msg(tool_calls=[{"id": "c1", "name": "f", "args": {"x": float("nan")}}]),
        StoreInputError,
        "message 0, tool call 0 (id 'c1'): the arguments of tool call 'f' hold NaN or infinity",
        "give null or a string",
    ),
    # -- pins and documents --------------------------------------------------------------------
    case(
        "pin-no-text",
        lambda m: m.pin("s1"),
        StoreInputError,
        "pin needs the text of the fact as a non-empty str",
        "mem.pin('s1',",
    ),
    case("pin-text-an-int", lambda m: m.pin("s1", 5), StoreInputError, "got 5"),  # type: ignore[arg-type]
    case(
        "pin-nowhere",
        lambda m: m.pin(text="fact"),
        StoreInputError,
        "pin needs a session_id or a user_id",
    ),
    case(
        "pin-existing-id",
        lambda m: m.pin("s1", "User eats fish.", id="p1"),
        StoreInputError,
        "1 pinned fact(s) are already stored with different content: ids ['p1']",
    ),
    case(
        "documents-a-str",
        lambda m: m.add_documents("Porto is nice."),
        StoreInputError,
        "documents must be a list of documents, got a str",
        "pass [document]",
    ),
    case(
        "document-no-text",
        lambda m: m.add_documents([{"id": "d9"}]),
        StoreInputError,
        "document 0 has no text",
    ),
    case("document-an-int", lambda m: m.add_documents([5]), StoreInputError, "document 0 is a int"),
    case(
        "chunk-tokens-zero",
        lambda m: m.add_documents(["t"], chunk_tokens=0),
        StoreInputError,
        "chunk_tokens must be an int of at least 4, got 0",
    ),
    case(
        "chunk-tokens-bool",
        lambda m: m.add_documents(["t"], chunk_tokens=True),
        StoreInputError,
        "got True",
    ),
    case(
        "overlap-too-big",
        lambda m: m.add_documents(["t"], chunk_tokens=50, overlap=50),
        StoreInputError,
        "overlap (50) must be below chunk_tokens (50)",
    ),
    case(
        "collection-empty",
        lambda m: m.add_documents(["t"], collection=""),
        StoreInputError,
        "collection must be a non-empty str (a document collection)",
    ),
    case(
        "document-changed",
        lambda m: m.add_documents([{"id": "d1", "text": "Other text."}]),
        StoreInputError,
        "document chunk(s) are already stored with different content",
        "ids ['d1#0']",
    ),
]


def refused_without_change(
    memory: ContextMemory, call: Call, error: type[Exception], needles: tuple[str, ...]
) -> str:
    """Run ``call``: it raises ``error`` naming every needle, and the store is unchanged."""
    before = snapshot(memory)
    with pytest.raises(error) as raised:
        call(memory)
    message = str(raised.value)
    for needle in needles:
        assert needle in message, message[:500]
    assert snapshot(memory) == before
    return message


@pytest.mark.parametrize(("call", "error", "needles"), WRITE_CASES)
def test_bad_writes_are_refused_clearly_and_write_nothing(
    seeded_memory: ContextMemory, call: Call, error: type[Exception], needles: tuple[str, ...]
) -> None:
    message = refused_without_change(seeded_memory, call, error, needles)
    assert message.count("nothing was written") <= 1, message
    assert len(message) < 1_000  # a 10 MB text is never echoed back


READ_CASES = [
    case(
        "budget-zero",
        lambda m: m.assemble("s1", "Where?", budget=0),
        InvalidBudgetError,
        "budget must be a positive number of tokens, got 0; a Budget or a number of tokens",
        "Budget.for_model",
    ),
    case(
        "budget-negative",
        lambda m: m.assemble("s1", "Where?", budget=-5),
        InvalidBudgetError,
        "got -5",
    ),
    case(
        "budget-bool",
        lambda m: m.assemble("s1", "Where?", budget=True),
        InvalidBudgetError,
        "budget must be an int (any integral type, numpy's too), got True (bool); a Budget",
        "e.g. budget=4096",
    ),
    case(
        "budget-float",
        lambda m: m.assemble("s1", "Where?", budget=512.5),
        InvalidBudgetError,
        "got 512.5",
    ),
    case(
        "budget-nan",
        lambda m: m.assemble("s1", "Where?", budget=math.nan),
        InvalidBudgetError,
        "got nan",
    ),
    case(
        "budget-inf",
        lambda m: m.assemble("s1", "Where?", budget=math.inf),
        InvalidBudgetError,
        "got inf",
    ),
    case(
        "budget-text",
        lambda m: m.assemble("s1", "Where?", budget="4096"),
        InvalidBudgetError,
        "got '4096'",
    ),
    case(
        "budget-all-reserve",
        lambda m: m.assemble("s1", "Where?", budget=Budget(window=1000, reserve=1000)),
        InvalidBudgetError,
        "the budget leaves no room for context: window 1,000 - reserve 1,000",
        "lower the reserve",
    ),
    case(
        "budget-too-small-for-the-query",
        lambda m: m.assemble("s1", "Where do I live? " * 50, budget=20),
        BudgetExceededError,
        "never pruned",
        "only 20 are available",
        "raise the window",
    ),
    case(
        "budget-nested-10000-deep",
        lambda m: m.assemble("s1", "Where?", budget=nested(10_000)),
        InvalidBudgetError,
        "budget must be an int (any integral type, numpy's too), got a list nested deeper than",
    ),
    case(
        "search-k-5000-digits",
        lambda m: m.search("Porto", k=10**5000),
        ConfigurationError,
        "k must be at most 2,147,483,647, got a huge int",
    ),
    case(
        "search-query-surrogate",
        lambda m: m.search("where \udc80?"),
        InvalidItemError,
        "query: text holds a lone surrogate U+DC80 at index 6",
    ),
    case(
        "unknown-model",
        lambda m: m.assemble("s1", "Where?", model="gpt4o"),
        UnknownModelError,
        "unknown model 'gpt4o'",
        "close matches: 'gpt-4o'",
        "register_model",
    ),
    case(
        "query-empty",
        lambda m: m.assemble("s1", "  "),
        InvalidItemError,
        "query must be a non-empty string",
    ),
    case(
        "query-not-a-str",
        lambda m: m.assemble("s1", 42),
        InvalidItemError,
        "query must be a non-empty string",
    ),
    case(
        "query-surrogate",
        lambda m: m.assemble("s1", "where \udc80?"),
        InvalidItemError,
        "query: text holds a lone surrogate U+DC80 at index 6",
    ),
    case(
        "session-surrogate",
        lambda m: m.assemble("s\ud800", "Where?"),
        StoreInputError,
        "session_id holds a lone surrogate",
    ),
    case(
        "session-empty",
        lambda m: m.assemble("", "Where?"),
        StoreInputError,
        "session_id must be a non-empty str",
    ),
    case(
        "tools-a-str",
        lambda m: m.assemble("s1", "Where?", tools="search"),
        InvalidItemError,
        "tools must be a list of tool schemas",
    ),
    case(
        "tool-an-int",
        lambda m: m.assemble("s1", "Where?", tools=[5]),
        InvalidItemError,
        "tool 0 must be a schema dict or JSON text",
    ),
    case(
        "documents-an-int",
        lambda m: m.assemble("s1", "Where?", documents=5),
        InvalidItemError,
        "documents must be True (all collections), False (none)",
    ),
    case(
        "format-unknown",
        lambda m: m.assemble("s1", "Where?", format="xml"),
        InvalidItemError,
        "format must be one of ['messages', 'text', 'compact'], got 'xml'",
    ),
]


@pytest.mark.parametrize(("call", "error", "needles"), READ_CASES)
def test_bad_reads_are_refused_clearly_and_change_nothing(
    seeded_memory: ContextMemory, call: Call, error: type[Exception], needles: tuple[str, ...]
) -> None:
    refused_without_change(seeded_memory, call, error, needles)


# -- policies that are not errors -----------------------------------------------------------


def test_nul_emoji_and_rtl_text_round_trip_exactly(memory: ContextMemory) -> None:
    texts = [
        "a\x00b\x00",
        "family \U0001f468\u200d\U0001f469\u200d\U0001f467 flag \U0001f1eb\U0001f1f7",
        "\u202eRTL override\u202c and \u05e9\u05dc\u05d5\u05dd",
        "e" + "".join(chr(0x300 + k) for k in range(30)),
        "\ufeffBOM and \ufffd replacement and \U000e0041 tag",
    ]
    ids = memory.add_messages(
        "s2", [{"role": "user", "text": t, "metadata": {"raw": t}} for t in texts]
    )
    memory.pin("s2", "pinned \x00 fact", id="p\x00nul")
    stored = memory.history("s2")
    assert [r.text for r in stored] == texts
    assert [r.metadata["raw"] for r in stored] == texts
    assert [r.id for r in stored] == ids
    assert [
        r.text for r in memory.store.get(["p\x00nul"], namespace=memory.namespace, session_id="s2")
    ] == ["pinned \x00 fact"]
    ctx = memory.assemble("s2", "what flag?", budget=2000)
    counter = TokenCounter.for_model("gpt-4o")
    assert ctx.tokens_used == counter.count_messages(ctx.to_messages())


def test_repeating_a_message_as_stored_is_a_no_op(memory: ContextMemory) -> None:
    before = snapshot(memory)
    again = memory.add_messages(
        "s1",
        [{"role": "user", "text": "I moved to Porto in May.", "id": "m1", "timestamp": 1e9}],
        user_id="u1",
    )
    assert again == ["m1"]
    assert snapshot(memory) == before


def test_timestamps_that_go_backwards_keep_insertion_order(memory: ContextMemory) -> None:
    days = [datetime(2026, 3, d, 9, tzinfo=UTC) for d in (9, 2, 5)]
    texts = ["Third day: booked the train.", "First day: arrived.", "Second day: museum."]
    memory.add_messages(
        "s3",
        [{"role": "user", "text": t, "timestamp": d} for t, d in zip(texts, days, strict=True)],
    )
    stored = memory.history("s3")
    assert [r.text for r in stored] == texts  # order is insertion order (seq)
    assert [r.seq for r in stored] == [0, 1, 2]
    assert [r.timestamp for r in stored] == [d.timestamp() for d in days]  # kept as given
    ctx = memory.assemble("s3", "What did I do on the first day?", budget=1500, format="text")
    rendered = ctx.render()
    for day in ("2026-03-09", "2026-03-02", "2026-03-05"):
        assert day in rendered  # every message shows its own date
    assert ctx.tokens_used <= 1500


@pytest.mark.parametrize("budget", [10**12, 2**63, 10**30, np.int64(50_000)])
def test_budgets_far_over_any_window_work(memory: ContextMemory, budget: int) -> None:
    ctx = memory.assemble("s1", "Where do I live?", budget=budget)
    assert "m1" in ctx.included_ids
    assert ctx.tokens_used <= int(budget)
    assert ctx.tokens_available == int(budget)


def test_store_add_refuses_what_chroma_cannot_take_before_writing(memory: ContextMemory) -> None:
    store = memory.store
    before = snapshot(memory)
    ok = Record(id="fine", kind="document", text="fine", namespace=memory.namespace)
    bad = [
        Record(id="s", kind="document", text="\ud800", namespace=memory.namespace),
        Record(id="m", kind="document", text="t", namespace=memory.namespace, metadata={"a": [1]}),  # type: ignore[dict-item]
        Record(id="t", kind="document", text="t", namespace=memory.namespace, timestamp=1e300),
        Record(id="n", kind="document", text="t", namespace="\udc00"),
    ]
    for record in bad:
        with pytest.raises(StoreInputError, match=r"record 1 \(id .*nothing was written$"):
            store.add([ok, record])
    assert snapshot(memory) == before


def test_budget_and_assembler_messages() -> None:
    with pytest.raises(InvalidBudgetError, match=r"window 100 - reserve 60 - safety 60 = -20"):
        Budget(window=100, reserve=60, safety=60)
    with pytest.raises(InvalidBudgetError, match=r"Budget.window must be an int .* got 8192.0"):
        Budget(window=8192.0)  # type: ignore[arg-type]
    with pytest.raises(InvalidBudgetError, match=r"a float share is a fraction in \(0, 1\]"):
        Budget(window=100, floors={int(Tier.RETRIEVED): 1.5})
    with pytest.raises(InvalidBudgetError, match="must be a finite number, got nan"):
        Budget(window=100, caps={int(Tier.RETRIEVED): math.nan})
    assert Budget(window=np.int64(4096)).window == 4096
    assert type(Budget(window=np.int64(4096)).window) is int
    with pytest.raises(UnknownModelError, match="close matches: 'gpt-4o'.*register_model"):
        Budget.for_model("gpt4o")
    with pytest.raises(UnknownModelError, match="close matches"):
        TokenCounter.for_model("gpt4o")
    assembler = ContextAssembler(TokenCounter.for_model("gpt-4o"))
    items = [ContextItem("q", "hello", tier=Tier.QUERY)]
    for budget in (0, -1, True, 1.5, math.nan, None):
        with pytest.raises(InvalidBudgetError):
            assembler.assemble(items, budget=budget)  # type: ignore[arg-type]
    assert assembler.assemble(items, budget=10**100).tokens_used < 20


# -- the same mistakes on the command line --------------------------------------------------


def run_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as exc:
            code = int(exc.code or 0)
    return code, out.getvalue(), err.getvalue()


def one_error_line(err: str) -> str:
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.startswith("ctxbudget")]
    assert len(lines) == 1, err
    assert lines[0].startswith("ctxbudget: error: ")
    return lines[0]


@pytest.fixture(scope="module")
def cli_store(tmp_path_factory: pytest.TempPathFactory, embedder: LocalEmbedder) -> Iterator[str]:
    """A store the CLI wrote one message to; the CLI uses the already loaded model."""
    folder = tmp_path_factory.mktemp("cli")
    path = folder / "chat.jsonl"
    path.write_text(json.dumps({"session": "s1", "role": "user", "text": "I live in Porto."}))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("ctxbudget.store.chroma_store.default_embedder", lambda: embedder)
        assert run_cli("--path", str(folder / "store"), "ingest", str(path))[0] == 0
        yield str(folder / "store")


def cli_records(store: str, embedder: LocalEmbedder) -> list[Record]:
    with ChromaStore(store, embedder=embedder) as opened:
        return sorted(opened.find(namespace="default"), key=lambda r: r.id)


ASK = ["assemble", "Where do I live?", "--session", "s1"]


@pytest.mark.parametrize(
    ("argv", "needles"),
    [
        ([*ASK, "--budget", "0"], ["--budget must be a positive number of tokens, got 0"]),
        ([*ASK, "--budget", "-100"], ["got -100"]),
        (
            [*ASK, "--budget", "100", "--reserve", "-200"],
            ["--reserve cannot be negative, got -200"],
        ),
        (
            [*ASK, "--budget", "1.5"],
            [
                "ctxbudget: error: assemble: argument --budget: budget must be an int "
                "(any integral type, numpy's too), got 1.5 (float)",
                "(see: ctxbudget assemble --help)",
            ],
        ),
        ([*ASK, "--budget", "nan"], ["budget must be an int", "got nan (float)"]),
        ([*ASK, "--budget", "9" * 5000], ["budget must be at most 10**100, got a huge int"]),
        ([*ASK, "--reserve=-inf"], ["argument --reserve: reserve must be an int", "got -inf"]),
        (["--model", "gpt4o", *ASK], ["unknown model 'gpt4o'", "close matches: 'gpt-4o'"]),
        (["--model", "", *ASK], ["--model must be a model name (non-empty text), got ''"]),
        ([*ASK, "--format", "xml"], ["argument --format: invalid choice: 'xml'"]),
        (["explain", "Where?", "--session", "s\udc80"], ["session_id holds a lone surrogate"]),
        (["assemble", "where \udcff", "--session", "s1"], ["query: text holds a lone surrogate"]),
        (["assemble", "Where?"], ["the following arguments are required: --session"]),
        (["assmble"], ["argument command: invalid choice: 'assmble'"]),
    ],
)
def test_cli_budget_model_and_argument_mistakes_are_one_line(
    cli_store: str,
    embedder: LocalEmbedder,
    argv: list[str],
    needles: list[str],
) -> None:
    before = cli_records(cli_store, embedder)
    code, out, err = run_cli("--path", cli_store, *argv)
    assert code == 2 and out == ""
    line = one_error_line(err)
    for needle in needles:
        assert needle in line
    assert cli_records(cli_store, embedder) == before


@pytest.mark.parametrize(
    ("name", "content", "needles"),
    [
        (
            "bad.jsonl",
            b'{"session": "s1", "role": "user", "text": "caf\xe9"}\n',
            ["not UTF-8 text (byte 46)", "convert it to UTF-8"],
        ),
        ("bad.md", b"\xff\xfe n\x00o\x00t\x00e\x00", ["not UTF-8 text (byte 0)"]),
        (
            "bad.jsonl",
            (
                json.dumps({"session": "s9", "role": "user", "text": "fine"})
                + "\n"
                + '{"session": "s8", "role": "user", "text": "x\\ud800"}'  # a JSON escape
            ).encode(),
            ["session 's8'", "lone surrogate", "nor of any other in the file, was stored"],
        ),
        (
            "bad.json",
            json.dumps(
                {
                    "sessions": {
                        "s9": [{"role": "user", "text": "fine"}],
                        "s1": [
                            {"role": "user", "text": "changed", "id": "m-dup"},
                            {"role": "user", "text": "again", "id": "m-dup"},
                        ],
                    }
                }
            ).encode(),
            ["sessions.s1[1]: session 's1': id 'm-dup' is given twice", "was stored"],
        ),
        ("bad.json", b"[" * 100_000, ["nested too deeply"]),
        (
            "bad.jsonl",
            json.dumps({"session": "s9", "role": "user", "text": "x" * 1_000_001}).encode(),
            ["1,000,001 characters; the limit is 1,000,000"],
        ),
    ],
)
def test_a_failed_ingest_stores_nothing_from_any_session(
    cli_store: str,
    tmp_path: Path,
    embedder: LocalEmbedder,
    name: str,
    content: bytes,
    needles: list[str],
) -> None:
    before = cli_records(cli_store, embedder)
    path = tmp_path / name
    path.write_bytes(content)
    code, out, err = run_cli("--path", cli_store, "ingest", str(path))
    assert code == 2 and out == ""
    line = one_error_line(err)
    for needle in needles:
        assert needle in line
    assert cli_records(cli_store, embedder) == before


def test_jsonl_lines_end_at_newlines_only(
    cli_store: str, tmp_path: Path, embedder: LocalEmbedder
) -> None:
    # U+2028 and U+0085 are line breaks to str.splitlines but plain characters in JSON text.
    text = "one\u2028two\x85three\x0cfour"
    path = tmp_path / "chat.jsonl"
    line = json.dumps({"session": "s5", "role": "user", "text": text}, ensure_ascii=False)
    path.write_text(line + "\r\n", encoding="utf-8")
    code, out, err = run_cli("--path", cli_store, "ingest", str(path))
    assert code == 0, err
    assert [r.text for r in cli_records(cli_store, embedder) if r.session_id == "s5"] == [text]


def test_the_message_limit_can_be_raised(shared_store: ChromaStore) -> None:
    mem = ContextMemory(
        store=shared_store,
        namespace=f"ns-{uuid.uuid4().hex[:12]}",
        config=MemoryConfig(max_message_chars=2_000_000),
    )
    text = "The quick brown fox jumps over the lazy dog. " * 30_000  # 1,350,000 characters
    assert mem.add_message("s1", "user", text, id="big") == "big"
    assert mem.history("s1")[0].text == text
    with pytest.raises(ValueError, match="max_message_chars must be a positive int"):
        MemoryConfig(max_message_chars=0)


# -- big input that is accepted: documents are chunked, assembly stays bounded ----------------


@pytest.mark.slow
def test_a_big_document_is_chunked_and_stored(shared_store: ChromaStore) -> None:
    import time

    mem = ContextMemory(store=shared_store, namespace=f"ns-{uuid.uuid4().hex[:12]}")
    text = "\n\n".join(
        f"Section {i}. The ferry to island {i} leaves at {i % 24:02d}:15 from pier {i % 7}."
        for i in range(4_000)
    )  # 275,000 characters of Markdown-like text
    started = time.perf_counter()
    ids = mem.add_documents([{"id": "guide", "text": text}], chunk_tokens=200, overlap=30)
    seconds = time.perf_counter() - started
    print(f"\n{len(text):,}-character document: {len(ids):,} chunks stored in {seconds:.1f} s")
    counter = mem.counter
    chunks = mem.store.get(ids, namespace=mem.namespace, collection="kb")
    assert len(chunks) == len(ids) > 400
    assert max(counter.count(c.text) for c in chunks) <= 200
    ctx = mem.assemble("s1", "When does the ferry to island 3876 leave?", budget=800)
    assert ctx.tokens_used <= 800
    assert any("island 3876" in item.text for item in ctx.included)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["prose", "base64 blob"])
def test_ten_megabytes_chunk_and_assemble_in_linear_time(kind: str) -> None:
    import base64
    import os
    import time

    from ctxbudget.memory.writing.chunking import chunk_text

    n = 10_485_760
    if kind == "prose":
        text = ("The quick brown fox jumps over the lazy dog. " * (n // 45 + 1))[:n]
    else:
        text = base64.b64encode(os.urandom(n * 3 // 4)).decode()
    counter = TokenCounter.for_model("gpt-4o")
    started = time.perf_counter()
    chunks = chunk_text(text, max_tokens=200, overlap=30, count=counter.count)
    chunked = time.perf_counter() - started
    assert max(counter.count(c) for c in chunks[:50] + chunks[-50:]) <= 200
    items = [
        ContextItem("q", "Summarize the file.", tier=Tier.QUERY),
        ContextItem("big", text, tier=Tier.RETRIEVED, shrink="truncate"),
    ]
    started = time.perf_counter()
    ctx = ContextAssembler(counter).assemble(items, budget=4000)
    assembled = time.perf_counter() - started
    print(
        f"\n10 MB {kind}: {len(chunks):,} chunks in {chunked:.1f} s; assembled in {assembled:.1f} s"
    )
    assert ctx.tokens_used <= 4000
    if kind == "prose":
        assert "big" in ctx.truncated  # cut at a sentence end to fit


def test_a_lone_surrogate_is_worded_once_whichever_check_finds_it() -> None:
    # Before: the store said "text holds a lone surrogate ..., which is not valid Unicode" and
    # the token counter "text has a lone surrogate ...: it is not valid Unicode and cannot be
    # sent", so one door's refusal depended on which check saw the text first.
    from ctxbudget.store.records import require_name
    from ctxbudget.tokens.backends import check_text

    with pytest.raises(StoreInputError) as stored:
        require_name("text", "caf\ud800e")
    with pytest.raises(InvalidItemError) as counted:
        check_text("caf\ud800e")
    assert str(stored.value) == str(counted.value)
    assert str(counted.value).startswith("text holds a lone surrogate U+D800 at index 3, ")
    assert "repair the text where it was decoded" in str(counted.value)
