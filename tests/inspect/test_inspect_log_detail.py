"""The assembly page shows what the log now keeps: scores, prune details, query and context.

Scores and prune details are always logged; the query and the rendered context as sent only
with ``InclusionLogConfig(keep_context=True)`` (content: off by default, and then no prune
detail quotes a text). A record written before these were logged still reads, and the page
says "not logged" for what it lacks.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from inspect_helpers import get, get_json

from ctxbudget import ContextMemory
from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.errors import StoreError
from ctxbudget.inspect import serve
from ctxbudget.inspect.pages import session_url
from ctxbudget.memory import InclusionLogConfig
from ctxbudget.memory.log.entries import (
    ContextRecord,
    IncludedEntry,
    PrunedEntry,
    decode_record,
    encode_record,
)
from ctxbudget.store.log_partitions import LogEntry

SECRET = "The locker code is 4417 and the spare key is under the blue mat."
QUERY = "what is my locker code?"


def _memory(path: Path, embedder: OnnxEmbedder, *, keep: bool) -> ContextMemory:
    memory = ContextMemory(
        path, embedder=embedder, inclusion_log=InclusionLogConfig(keep_context=keep)
    )
    memory.add_messages(
        "s1",
        [
            {"id": "m1", "role": "user", "text": SECRET},
            {"id": "m2", "role": "assistant", "text": "Noted."},
            {"id": "m3", "role": "user", "text": SECRET},  # a duplicate of m1
            *(
                {
                    "id": f"f{n}",
                    "role": "user" if n % 2 else "assistant",
                    "text": f"filler {n} " * 30,
                }
                for n in range(12)
            ),
        ],
        user_id="ana",
    )
    return memory


def test_the_page_shows_scores_details_query_and_context_when_kept(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    memory = _memory(tmp_path, embedder, keep=True)
    ctx = memory.assemble("s1", QUERY, budget=250)
    record = memory.contexts("s1", limit=1)[0]
    with serve(memory, port=0) as page:
        url = page.url.rstrip("/") + session_url("s1", "assembly", record.id)
        doc = get_json(url)
        status, _, html = get(url)
    memory.close()
    assert doc["not_logged"] == []
    assert doc["query"] == QUERY
    assert doc["context"] == {"messages": json.loads(json.dumps(ctx.to_messages()))}
    scores = {i["id"]: i["score"] for i in doc["items"]}
    for item in ctx.included:
        assert scores[item.id] == float(f"{item.score:.6g}")
    details = {i["id"]: i["detail"] for i in doc["items"] if i["status"] == "pruned"}
    assert ctx.pruned and details == {p.item.id: p.detail[:200] for p in ctx.pruned}
    assert status == 200 and 'id="context"' in html and 'id="query"' in html
    assert "Not logged for this call" not in html


def test_by_default_the_log_holds_no_content(tmp_path: Path, embedder: OnnxEmbedder) -> None:
    memory = _memory(tmp_path, embedder, keep=False)
    ctx = memory.assemble("s1", QUERY, budget=250)
    dup = [p for p in ctx.pruned if p.reason.value == "duplicate"]
    assert dup and "locker" in dup[0].detail  # the report quotes the text it repeats ...
    record = memory.contexts("s1", limit=1)[0]
    document = encode_record(record)
    memory.close()
    assert record.query is None and record.context is None
    assert "locker" not in document and "filler" not in document  # ... the log does not
    assert all(e.score is not None for e in record.included)
    logged = {e.id: e.detail for e in record.pruned}
    assert logged[dup[0].item.id] and logged[dup[0].item.id] in dup[0].detail


def test_an_older_record_reads_and_the_page_says_not_logged(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    memory = _memory(tmp_path, embedder, keep=True)
    memory.assemble("s1", QUERY, budget=250)
    record = memory.contexts("s1", limit=1)[0]
    old = json.loads(encode_record(record))
    for key in ("isc", "csc", "cdet", "q", "ctx"):
        old.pop(key)
    back = decode_record(json.dumps(old))
    assert [e.id for e in back.included] == record.included_ids
    assert all(e.score is None for e in back.included)
    assert all(e.score is None and e.detail is None for e in back.pruned)
    assert back.query is None and back.context is None
    # The page on a store holding such a record (written as an older version wrote it).
    entry = LogEntry(
        memory.namespace, "s1", "ana", record.id + "-old", record.time + 1,
        lambda: json.dumps({**old, "id": record.id + "-old"}), 200,
    )  # fmt: skip
    memory.store.logs.append(entry)
    memory.store.logs.flush()
    with serve(memory, port=0) as page:
        url = page.url.rstrip("/") + session_url("s1", "assembly", record.id + "-old")
        doc = get_json(url)
        _, _, html = get(url)
    memory.close()
    assert doc["not_logged"] == ["score", "prune detail", "query text", "rendered context"]
    assert doc["query"] is None and doc["context"] is None
    assert "Not logged for this call: score, prune detail, query text, rendered context" in html


_text = st.text(max_size=30)
_entries = st.lists(
    st.tuples(_text, st.integers(0, 100), st.integers(0, 10**6), st.floats(-1e9, 1e9)),
    max_size=5,
)
_cuts = st.lists(
    st.tuples(_text, st.integers(0, 100), st.sampled_from(["over_budget", "duplicate"]),
              st.one_of(st.none(), st.floats(-1e9, 1e9)), st.one_of(st.none(), _text)),
    max_size=5,
)  # fmt: skip
_context = st.one_of(
    st.none(), _text, st.lists(st.fixed_dictionaries({"role": _text, "content": _text}))
)


@settings(max_examples=40, deadline=None)
@given(inc=_entries, cut=_cuts, query=st.one_of(st.none(), _text), context=_context)
def test_records_round_trip_with_or_without_the_new_fields(
    inc: list[Any], cut: list[Any], query: str | None, context: Any
) -> None:
    record = ContextRecord(
        "r", "s", None, 1.0, "gpt-4o", "messages", 100, 10, 0, 90, 50,
        included=tuple(IncludedEntry(*e) for e in inc),
        pruned=tuple(PrunedEntry(*e) for e in cut),
        query=query,
        context=context if not isinstance(context, list) else tuple(context),
    )  # fmt: skip
    assert decode_record(encode_record(record)) == record
    old = json.loads(encode_record(record))
    for key in ("isc", "csc", "cdet", "q", "ctx"):
        old.pop(key, None)
    back = decode_record(json.dumps(old))
    assert [(e.id, e.tier, e.tokens, e.score) for e in back.included] == [
        (i, t, n, None) for i, t, n, _ in inc
    ]
    assert [(e.id, e.reason, e.score, e.detail) for e in back.pruned] == [
        (i, r, None, None) for i, _, r, _, _ in cut
    ]


def test_a_column_that_does_not_match_its_items_is_refused() -> None:
    record = ContextRecord(
        "r", "s", None, 1.0, "gpt-4o", "messages", 100, 10, 0, 90, 50,
        included=(IncludedEntry("m1", 50, 3, 0.5),),
    )  # fmt: skip
    document = json.loads(encode_record(record))
    document["isc"] = [0.5, 0.25]
    with pytest.raises(StoreError, match="'isc' does not match its 1 items"):
        decode_record(json.dumps(document))
