"""The inspector's pages, served over HTTP, against the demo's store: numbers as assembled."""

from __future__ import annotations

import html
from collections import Counter
from urllib.parse import quote

import pytest
from inspect_helpers import HOSTILE_ID, HOSTILE_SESSION, IMG, SCRIPT, Written, get, get_json

from ctxbudget import ContextMemory
from ctxbudget.inspect import serve
from ctxbudget.inspect.pages import session_url


@pytest.fixture
def page(reader: ContextMemory):  # type: ignore[no-untyped-def]
    with serve(reader, port=0) as served:
        yield served


def test_sessions_by_user_with_counts(page, reader: ContextMemory, demo_store: Written) -> None:
    doc = get_json(page.url)
    users = {group["user"]: group["sessions"] for group in doc["users"]}
    assert set(users) == {"maya", "mallory<u>"}
    for group in users.values():
        for row in group:
            assert row["messages"] == len(reader.history(row["session"]))
            assert row["assemblies"] == len(demo_store.calls.get(row["session"], []))
    assert [r["session"] for r in users["mallory<u>"]] == [HOSTILE_SESSION]
    status, _, body = get(page.url)
    assert status == 200 and html.escape(demo_store.latest) in body


def test_timeline_numbers_match_the_reports(page, demo_store: Written) -> None:
    session = demo_store.latest
    doc = get_json(page.url.rstrip("/") + session_url(session))
    calls = demo_store.calls[session]
    assert [c["call"] for c in doc["assemblies"]] == list(range(1, len(calls) + 1))
    for shown, ctx in zip(doc["assemblies"], calls, strict=True):
        assert shown["tokens_used"] == ctx.tokens_used
        assert shown["budget"] == ctx.budget.available
        assert shown["included"] == len(ctx.included)
        assert shown["pruned"] == len(ctx.pruned)
        assert {t["tier"]: t["tokens"] for t in shown["tiers"]} == {
            tier: usage.tokens for tier, usage in ctx.tiers.items()
        }
        assert shown["prune_reasons"] == dict(Counter(p.reason.value for p in ctx.pruned))
    status, _, body = get(page.url.rstrip("/") + session_url(session))
    assert status == 200 and body.count("<svg") == len(calls) + 1  # a bar each, and the chart


def test_assembly_items_as_assembled(page, reader: ContextMemory, demo_store: Written) -> None:
    session = demo_store.latest
    base = page.url.rstrip("/")
    records = get_json(base + session_url(session))["assemblies"]
    calls = demo_store.calls[session]
    for n, (record, ctx) in enumerate(zip(records, calls, strict=True)):
        doc = get_json(base + session_url(session, "assembly", record["id"]))
        included = [i for i in doc["items"] if i["status"] == "included"]
        pruned = [i for i in doc["items"] if i["status"] == "pruned"]
        assert [i["id"] for i in included] == [it.id for it in ctx.included]
        assert [(i["id"], i["reason"]) for i in pruned] == [
            (p.item.id, p.reason.value) for p in ctx.pruned
        ]
        texts = {it.id: it.text for it in ctx.included}
        for item in included:  # the stored text of every stored record (not the system prompt)
            if item["text"] is not None:
                assert item["text"] == texts[item["id"]] or item["kind"] == "summary"
        assert sum(1 for i in included if i["text"] is None) <= 2  # system prompt and query
        if n == 0:
            assert doc["previous"] is None and doc["entered"] == []
        else:
            before = [it.id for it in calls[n - 1].included]
            now = [it.id for it in ctx.included]
            assert doc["entered"] == [i for i in now if i not in before]
            assert doc["left"] == [i for i in before if i not in now]
            shared = 0
            while shared < min(len(now), len(before)) and now[shared] == before[shared]:
                shared += 1
            assert doc["shared_prefix"]["items"] == shared
        status, _, body = get(base + session_url(session, "assembly", record["id"]))
        assert status == 200 and f'id="tokens-used">{ctx.tokens_used:,}<' in body


def test_message_page_says_which_calls_included_it(page, demo_store: Written) -> None:
    session = demo_store.latest
    calls = demo_store.calls[session]
    sent = [it.id for it in calls[-1].included if it.id.startswith(session)]
    message = sent[0]
    doc = get_json(page.url.rstrip("/") + session_url(session, "message", message))
    expected = [n for n, ctx in enumerate(calls, 1) if ctx.includes(message)]
    assert doc["included_in"] == expected
    assert doc["last_included"] == expected[-1] and doc["stopped_at"] is None
    dropped = [it.id for it in calls[0].included if it.id.startswith(session)]
    gone = [i for i in dropped if not calls[-1].includes(i)]
    if gone:
        doc = get_json(page.url.rstrip("/") + session_url(session, "message", gone[0]))
        assert doc["stopped_at"] is not None and doc["stopped_at"] > doc["last_included"]


def test_search_by_words_across_sessions(page, reader: ContextMemory) -> None:
    doc = get_json(page.url + "?q=" + quote("Lisbon flat"))
    assert doc["hits"], "the demo talks about the Lisbon flat"
    for hit in doc["hits"]:
        assert "lisbon" in hit["text"].lower() and "flat" in hit["text"].lower()
    everything = [m for s in ("s1", "s3") for m in reader.history(s)]
    wanted = {m.id for m in everything if {"lisbon", "flat"} <= set(m.text.lower().split())}
    assert wanted <= {h["id"] for h in doc["hits"]}


def test_hostile_texts_are_shown_as_text(page, demo_store: Written) -> None:
    base = page.url.rstrip("/")
    timeline = get_json(base + session_url(HOSTILE_SESSION))["assemblies"]
    urls = [
        page.url,
        page.url + "?q=" + quote("script document title"),
        base + session_url(HOSTILE_SESSION),
        base + session_url(HOSTILE_SESSION, "message", HOSTILE_ID),
        base + session_url(HOSTILE_SESSION, "message", "m2"),
        *(base + session_url(HOSTILE_SESSION, "assembly", r["id"]) for r in timeline),
    ]
    for url in urls:
        status, headers, body = get(url)
        assert status == 200, url
        assert "<script" not in body.lower() and "<img" not in body.lower()
        assert "<b>session" not in body and "<u>" not in body and "<i>x" not in body
        assert "script-src" not in headers["Content-Security-Policy"]
    _, _, body = get(base + session_url(HOSTILE_SESSION, "message", HOSTILE_ID))
    assert html.escape(SCRIPT) in body
    _, _, body = get(base + session_url(HOSTILE_SESSION, "message", "m2"))
    assert html.escape(IMG) in body


@pytest.mark.parametrize(
    "path",
    [
        "/session/nobody",
        "/session/nobody/message/m1",
        "/session/nobody/assembly/r1",
        "/session/s1/assembly/not-a-record",
        "/session/s1/message/not-a-message",
        "/session/s1/elsewhere/x",
        "/session//message/",
        "/nothing",
    ],
)
def test_unknown_paths_are_404(page, path: str) -> None:
    status, headers, _ = get(page.url.rstrip("/") + path)
    assert status == 404
    assert headers["Content-Security-Policy"].startswith("default-src 'none'")
