"""The sessions and search pages read a page of sessions at a time: cost bounded by the page.

Before 2026-11-29 it read every session's messages and log on each load (about 1 s at 400
sessions of 20 messages, growing with the store). Now at most `SESSIONS_PER_PAGE` sessions are
read, the page says which of how many it shows, and links the pages beside it; following the
``next`` links visits every session once.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote, urljoin

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from inspect_helpers import get, get_json
from test_inspect_dots import read

from ctxbudget import ContextMemory
from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.inspect import InspectServer, data, serve

PER_PAGE = 3
SESSIONS = [f"s{n:02d}" for n in range(8)]


@pytest.fixture
def served(tmp_path: Path, embedder: OnnxEmbedder) -> Iterator[tuple[InspectServer, list[str]]]:
    with ContextMemory(tmp_path / "m", embedder=embedder) as memory:
        for n, session in enumerate(SESSIONS):
            memory.add_message(session, "user", f"hello {n}", user_id=f"u{n % 2}")
    memory = ContextMemory(tmp_path / "m", embedder=embedder, inclusion_log=False)
    read_sessions: list[str] = []
    history = memory.history

    def counted(session_id: str, **kwargs: object) -> object:
        read_sessions.append(session_id)
        return history(session_id, **kwargs)  # type: ignore[arg-type]

    memory.history = counted  # type: ignore[method-assign]
    server = serve(memory, port=0)
    try:
        yield server, read_sessions
    finally:
        server.close()
        memory.close()


def test_a_page_reads_and_lists_its_sessions_only(
    served: tuple[InspectServer, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(data, "SESSIONS_PER_PAGE", PER_PAGE)
    server, read_sessions = served
    first = get_json(server.url)
    listed = [s["session"] for g in first["users"] for s in g["sessions"]]
    assert sorted(listed) == SESSIONS[:PER_PAGE]
    assert sorted(read_sessions) == SESSIONS[:PER_PAGE]  # the others were not read
    assert (first["total"], first["start"], first["next"], first["previous"]) == (8, 0, 3, None)
    last = get_json(urljoin(server.url, "/?start=6"))
    assert sorted(s["session"] for g in last["users"] for s in g["sessions"]) == SESSIONS[6:]
    assert (last["next"], last["previous"]) == (None, 3)


def test_following_next_visits_every_session_once(
    served: tuple[InspectServer, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(data, "SESSIONS_PER_PAGE", PER_PAGE)
    server, _ = served
    seen: list[str] = []
    url: str | None = server.url
    while url is not None:
        page = read(url)
        seen += [text for kind, _, text in page.links if kind == "session"]
        nexts = [href for kind, href, _ in page.links if kind == "next"]
        url = urljoin(url, nexts[0]) if nexts else None
    assert sorted(seen) == SESSIONS  # each once (a page lists its sessions by user)


@pytest.mark.parametrize("start", ["x", "-1", "1.5", "٣"])
def test_a_start_that_is_no_place_is_not_found(
    served: tuple[InspectServer, list[str]], start: str
) -> None:
    server, _ = served
    status, _, _ = get(urljoin(server.url, "/?start=" + quote(start)))
    assert status == 404


def test_a_search_reads_a_page_of_sessions_and_links_the_rest(
    served: tuple[InspectServer, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(data, "SESSIONS_PER_PAGE", PER_PAGE)
    server, read_sessions = served
    first = get_json(urljoin(server.url, "/?q=hello"))
    assert sorted(read_sessions) == SESSIONS[:PER_PAGE]  # the others were not read
    assert first["sessions"] == {"from": 0, "to": PER_PAGE, "of": len(SESSIONS)}
    url: str | None = urljoin(server.url, "/?q=hello")
    found: list[str] = []
    while url is not None:  # as a browser follows the page's link
        page = read(url)
        nexts = [href for kind, href, _ in page.links if kind == "next"]
        found += [h["session"] for h in get_json(url)["hits"]]
        url = urljoin(url, nexts[0]) if nexts else None
    assert found == SESSIONS  # every session's "hello", each once


# -- what a word matches ----------------------------------------------------------------------
@settings(max_examples=500, deadline=None)
@given(st.text())
def test_each_word_of_a_message_finds_it_as_written_lowered_or_folded(text: str) -> None:
    held = set(data._words(text))
    for word in data._WORD.findall(text):
        for form in (word, word.lower(), word.casefold()):
            assert set(data._words(form)) <= held, (text, word, form)


@pytest.mark.parametrize("query", ["İstanbul", "istanbul", "ISTANBUL", "cafe", "CAFÉ", "strasse"])
def test_a_word_is_found_in_any_case_or_accent(
    tmp_path: Path, embedder: OnnxEmbedder, query: str
) -> None:
    # Before 2026-12-01: the message was folded before it was split, so "İstanbul" became "i"
    # and "stanbul" and no query found it, not even the word as stored.
    with ContextMemory(tmp_path / "m", embedder=embedder) as memory:
        memory.add_message("trip", "user", "We fly to İstanbul, then a Café in the Straße")
        memory.add_message("other", "user", "nothing to see")
        memory.flush()
        hits = data.search_page(memory, query)["hits"]
    assert [hit["session"] for hit in hits] == ["trip"], hits
