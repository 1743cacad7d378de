"""A session's timeline is shown by pages: what a page decodes and sends is bounded by the page.

Before 2026-11-30 the timeline listed every logged assembly and every message of the session
(1.25 MB of HTML for 3,000 messages). Now a page shows `CALLS_PER_PAGE` assemblies and
`MESSAGES_PER_PAGE` messages, the newest by default, ``?start=N`` and ``?messages=N`` the
others; the pages of a session, put together, are the whole timeline, numbered as the assembly
page numbers its calls, and the links between them lead there. The page sizes are made small
here (3); real parts otherwise (embedded Chroma, the default embedder, the served inspector).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from html import unescape

import pytest
from inspect_helpers import get, get_json

from ctxbudget import ContextMemory
from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.inspect import serve, timeline
from ctxbudget.inspect.pages import session_url

CALLS = 7
MESSAGES = 8


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, embedder: OnnxEmbedder) -> Iterator[str]:
    memory = ContextMemory(tmp_path_factory.mktemp("pages"), embedder=embedder)
    for n in range(MESSAGES):
        memory.add_message("s1", "user", f"note {n}: the locker code is {n}417.", id=f"m{n}")
    for n in range(CALLS):
        memory.assemble("s1", f"what was note {n}?", budget=200 + n)
    with serve(memory, port=0) as server:
        yield server.url.rstrip("/")
    memory.close()


@pytest.fixture(autouse=True)
def small_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(timeline, "CALLS_PER_PAGE", 3)
    monkeypatch.setattr(timeline, "MESSAGES_PER_PAGE", 3)


def page(base: str, query: str = "") -> dict[str, object]:
    return get_json(f"{base}{session_url('s1')}" + (f"?{query}" if query else ""))


def test_the_newest_page_by_default(served: str) -> None:
    doc = page(served)
    assert [c["call"] for c in doc["assemblies"]] == [5, 6, 7]
    assert [c["budget"] for c in doc["assemblies"]] == [204, 205, 206]
    assert [m["id"] for m in doc["message_list"]] == ["m5", "m6", "m7"]
    assert doc["calls"] == {"from": 4, "to": 7, "of": 7, "previous": 1, "next": None}
    assert doc["messages"] == MESSAGES


def test_the_pages_together_are_the_whole_timeline(served: str) -> None:
    calls, messages = [], []
    for start in (0, 3, 6):
        doc = page(served, f"start={start}&messages={start}")
        calls += [c["call"] for c in doc["assemblies"]]
        messages += [m["id"] for m in doc["message_list"]]
    assert calls == list(range(1, CALLS + 1))
    assert messages == [f"m{n}" for n in range(MESSAGES)]


def test_the_links_lead_to_the_pages_beside(served: str) -> None:
    status, _, html = get(f"{served}{session_url('s1')}?start=3&messages=0")
    assert status == 200
    assert "assemblies 4 to 6 of 7" in html and "messages 1 to 3 of 8" in html
    links = {
        (rel, unescape(href))
        for href, rel in re.findall(r'<a class="(?:previous|next)" href="([^"]+)">(\w+)</a>', html)
    }
    assert ("previous", f"{session_url('s1')}?start=0&messages=0") in links
    assert ("next", f"{session_url('s1')}?start=6&messages=0") in links
    assert ("next", f"{session_url('s1')}?start=3&messages=3") in links
    for _, href in links:
        status, _, body = get(served + href)
        assert status == 200 and "Assemblies" in body


PAST = ["start=7", "messages=8", "start=-1", "start=x", "start=" + "9" * 30]


@pytest.mark.parametrize("query", PAST)
def test_no_page_there_is_404(served: str, query: str) -> None:
    status, _, _ = get(f"{served}{session_url('s1')}?{query}")
    assert status == 404
