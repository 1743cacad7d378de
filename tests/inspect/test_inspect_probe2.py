r"""The inspector answers every request, and a damaged log is shown, never a dropped connection.

Before 2026-11-30:

- ``/?start=`` followed by more than 4,300 digits raised Python's limit on converting digits and
  the connection was dropped unanswered; a start past the last session drew "sessions 1,000 to
  999 of 1";
- a request with two ``Host`` headers was served when the first was the server's own;
- one logged record with an out-of-range time (``"t": 1e20``, NaN) or an infinite count
  (``"used": 1e999``, which the decoder let out as an OverflowError) dropped the connection of
  the session's timeline, its message pages and that assembly's page; a lone surrogate escape
  in a record's item id did the same to the assembly page; the JSON twins wrote ``NaN`` (not
  JSON); and the timeline numbered its calls skipping a damaged record while the assembly page
  counted it, so "call 3" opened "Call 4 of 5".

Real parts: a `ContextMemory` on an embedded Chroma with the default embedder, the inspector
served on 127.0.0.1, records written into the log as a damaged or foreign writer would.
"""

from __future__ import annotations

import http.client
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from inspect_helpers import get

from ctxbudget import ContextMemory
from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.inspect import InspectServer, serve
from ctxbudget.inspect.pages import session_url
from ctxbudget.memory.log.entries import encode_record
from ctxbudget.store.log_partitions import LogEntry

DAMAGED: dict[str, dict[str, Any]] = {
    "used-infinite": {"used": math.inf},  # skipped (the decoder cannot read it): call 2
    "time-huge": {"t": 1e20},
    "time-negative": {"t": -1e20},
    "time-nan": {"t": math.nan},
    "score-nan": {"isc": "nan"},  # NaN for each included item
    "model-surrogate": {"model": "\ud800"},
    "item-surrogate": {"inc": [["m\udfff", 40, 2]], "isc": None},
}
READABLE = [name for name in DAMAGED if name != "used-infinite"]
#: Each damaged record's key: after the good one's (a time-ordered number), in this order.
KEY = {name: f"z{n}-{name}" for n, name in enumerate(DAMAGED, 1)}


@pytest.fixture(scope="module")
def page(
    tmp_path_factory: pytest.TempPathFactory, embedder: OnnxEmbedder
) -> Iterator[InspectServer]:
    memory = ContextMemory(tmp_path_factory.mktemp("probe2"), embedder=embedder)
    memory.add_message("s1", "user", "My locker code is 4417.", id="m1", user_id="ana")
    memory.assemble("s1", "what is my locker code?", budget=300)
    good = memory.contexts("s1", limit=1)[0]
    document = json.loads(encode_record(good))
    for n, (name, change) in enumerate(DAMAGED.items(), 1):
        if change.get("isc") == "nan":
            change = {"isc": [math.nan] * len(document["inc"])}
        # json.dumps writes NaN, Infinity and "\ud800" as another writer of the log may have.
        text = json.dumps({**document, **change, "id": KEY[name]})
        entry = LogEntry(
            memory.namespace, "s1", "ana", KEY[name], good.time + n, lambda t=text: t, 200
        )
        memory.store.logs.append(entry)
    memory.store.logs.flush()
    with serve(memory, port=0) as served:
        yield served
    memory.close()


def answer(
    page: InspectServer, path: str, headers: dict[str, str] | None = None
) -> tuple[int, str]:
    """(status, body) of a GET: raises if the connection is dropped unanswered."""
    connection = http.client.HTTPConnection("127.0.0.1", page.port, timeout=60)
    try:
        connection.request("GET", path, headers=headers or {})
        response = connection.getresponse()
        return response.status, response.read().decode("utf-8")
    finally:
        connection.close()


# -- the start of a page ----------------------------------------------------------------------
@pytest.mark.parametrize("digits", [19, 4301, 5000])
@pytest.mark.parametrize("search", ["", "q=locker&"])
def test_a_start_of_any_length_is_answered(page: InspectServer, digits: int, search: str) -> None:
    for suffix in ("", "&format=json"):
        status, body = answer(page, f"/?{search}start={'1' * digits}{suffix}")
        assert status == 404, body[:300]
    assert answer(page, "/")[0] == 200


@pytest.mark.parametrize("search", ["", "q=locker&"])
def test_a_start_past_the_last_session_is_no_page(page: InspectServer, search: str) -> None:
    assert answer(page, f"/?{search}start=1")[0] == 404  # one session: the next page is none
    status, body = answer(page, f"/?{search}start=0")
    assert status == 200 and "s1" in body


# -- the Host header ---------------------------------------------------------------------------
@pytest.mark.parametrize("foreign_first", [False, True])
def test_two_host_headers_are_refused(page: InspectServer, foreign_first: bool) -> None:
    own = f"127.0.0.1:{page.port}"
    hosts = ["evil.example", own] if foreign_first else [own, "evil.example"]
    connection = http.client.HTTPConnection("127.0.0.1", page.port, timeout=60)
    try:
        connection.putrequest("GET", "/?format=json", skip_host=True)
        for host in hosts:
            connection.putheader("Host", host)
        connection.endheaders()
        response = connection.getresponse()
        status, body = response.status, json.loads(response.read())
    finally:
        connection.close()
    assert status == 403, body
    assert "2 Hosts" in body["message"], body
    assert answer(page, "/")[0] == 200


# -- a damaged log -----------------------------------------------------------------------------
def test_the_timeline_shows_each_readable_record_numbered_by_its_place(
    page: InspectServer,
) -> None:
    status, body = answer(page, session_url("s1") + "?format=json")
    assert status == 200, body[:300]
    document = json.loads(body)  # strict JSON: NaN would not parse below
    json.loads(body, parse_constant=lambda token: pytest.fail(f"not JSON: {token}"))
    calls = {c["id"]: c["call"] for c in document["assemblies"]}
    assert {KEY[name] for name in READABLE} <= set(calls) and len(calls) == len(
        READABLE
    ) + 1  # and the good one
    assert sorted(calls.values()) == [1, *range(3, len(DAMAGED) + 2)]  # call 2 is unreadable
    for name, number in calls.items():
        status, one = answer(page, session_url("s1", "assembly", name) + "?format=json")
        assert status == 200, (name, one[:300])
        assert json.loads(one)["call"] == number, name  # the timeline's number is the page's
    status, html = answer(page, session_url("s1"))
    assert status == 200 and "1e+20 (not a time)" in html and "nan (not a time)" in html


@pytest.mark.parametrize("name", READABLE)
def test_each_damaged_record_has_its_page_and_json_twin(page: InspectServer, name: str) -> None:
    path = session_url("s1", "assembly", KEY[name])
    status, html = answer(page, path)
    assert status == 200, html[:300]
    status, body = answer(page, path + "?format=json")
    assert status == 200, body[:300]
    json.loads(body, parse_constant=lambda token: pytest.fail(f"not JSON: {token}"))
    if name == "time-nan":
        assert json.loads(body)["summary"]["time"] is None
    if name == "model-surrogate":
        assert json.loads(body)["summary"]["model"] == "\ud800"  # as the record holds it


def test_an_unreadable_record_is_not_found_and_the_rest_is_served(page: InspectServer) -> None:
    assert answer(page, session_url("s1", "assembly", KEY["used-infinite"]))[0] == 404
    status, body = answer(page, session_url("s1", "message", "m1") + "?format=json")
    assert status == 200, body[:300]
    fates = {c["id"]: c["status"] for c in json.loads(body)["calls"]}
    assert "included" in fates.values()
    assert get(page.url)[0] == 200


def test_a_message_named_with_escapes_is_followed(tmp_path: Path, embedder: OnnxEmbedder) -> None:
    """A record whose writer escaped non-ASCII ids (json.dumps' default) still names the message."""
    with ContextMemory(tmp_path, embedder=embedder) as memory:
        memory.add_message("s", "user", "Je m'appelle Zoé.", id="café", user_id="zoé")
        memory.assemble("s", "comment je m'appelle ?", budget=300)
        good = memory.contexts("s", limit=1)[0]
        assert "café" in good.included_ids
        text = json.dumps({**json.loads(encode_record(good)), "id": "escaped"})
        assert "caf\\u00e9" in text
        memory.store.logs.append(
            LogEntry(memory.namespace, "s", "zoé", "escaped", good.time + 1, lambda: text, 200)
        )
        memory.store.logs.flush()
        with serve(memory, port=0) as served:
            status, body = answer(served, session_url("s", "message", "café") + "?format=json")
    assert status == 200, body[:300]
    assert [c["status"] for c in json.loads(body)["calls"]] == ["included", "included"]
