"""Ids a browser would read as path steps (".", "..") reach their pages; errors have a JSON twin.

A link's path is resolved by the browser before it is requested: a segment "." or ".." is a
step (``/session/..`` is ``/``), so a session or message with such an id could not be opened
from the page. The links are followed here as a browser follows them: the ``href`` of each
link on the page, resolved against the page's URL with `urllib.parse.urljoin` (which removes
dot segments as browsers do), then requested. And ``?format=json`` answers JSON on a refused
request (403) and on a closed memory (503), as it does on a 404.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urljoin

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from inspect_helpers import get, get_json

from ctxbudget import ContextMemory
from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.inspect import InspectServer, serve
from ctxbudget.inspect.pages import path_part, session_url

#: Ids that are path steps to a browser, and ids of the "~" that `session_url` adds to them.
DOTTED = [".", "..", "~x", "~..", "~", "..."]


class Links(HTMLParser):
    """The ``(class, href, text)`` of each link of a page, and its title (not an SVG's)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[tuple[str, str, str]] = []
        self.titles: list[str] = []
        self._open: list[str] | None = None
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            found = dict(attrs)
            self._open = [found.get("class") or "", found.get("href") or "", ""]
        elif tag == "title":
            self._in_title = True
            self.titles.append("")

    def handle_data(self, data: str) -> None:
        if self._open is not None:
            self._open[2] += data
        if self._in_title:
            self.titles[-1] += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._open is not None:
            self.links.append((self._open[0], self._open[1], self._open[2]))
            self._open = None
        elif tag == "title":
            self._in_title = False

    @property
    def title(self) -> str:
        return self.titles[0] if self.titles else ""


def read(url: str) -> Links:
    status, headers, body = get(url)
    assert status == 200, (url, status, body[:300])
    assert headers["Content-Type"].startswith("text/html")
    parser = Links()
    parser.feed(body)
    parser.close()
    return parser


def followed(page_url: str, kind: str) -> dict[str, str]:
    """Each link of class ``kind`` on the page: its text -> the URL a browser requests."""
    return {
        text: urljoin(page_url, href) for cls, href, text in read(page_url).links if cls == kind
    }


@pytest.fixture(scope="module")
def page(
    tmp_path_factory: pytest.TempPathFactory, embedder: OnnxEmbedder
) -> Iterator[InspectServer]:
    memory = ContextMemory(tmp_path_factory.mktemp("inspect-dots"), embedder=embedder)
    for session in DOTTED:
        memory.add_message(session, "user", f"the text of session {session}", id="m1")
        memory.assemble(session, "what was said?", budget=200)
    memory.add_messages(
        "ok",
        [{"id": ident, "role": "user", "text": f"message with id {ident}"} for ident in DOTTED],
    )
    memory.flush()
    with serve(memory, port=0) as served:
        yield served
    memory.close()


@pytest.mark.parametrize("session", DOTTED)
def test_a_session_link_opens_that_session(page: InspectServer, session: str) -> None:
    links = followed(page.url, "session")
    assert session in links, links
    target = links[session]
    assert target.startswith(page.url + "session/"), target
    shown = read(target)
    assert shown.title == f"Session {session}", (target, shown.title)
    assert get_json(target)["session"] == session
    # and from there, its message and its logged assembly
    message = followed(target, "message")["m1"]
    assert read(message).title == "Message m1", message
    doc = get_json(message)
    assert (doc["session"], doc["message"]["id"]) == (session, "m1")
    (assembly,) = followed(target, "assembly").values()
    assert read(assembly).title == f"Call 1 of 1 in {session}", assembly


@pytest.mark.parametrize("ident", DOTTED)
def test_a_message_link_opens_that_message(page: InspectServer, ident: str) -> None:
    session_page = urljoin(page.url, followed(page.url, "session")["ok"])
    links = followed(session_page, "message")
    assert ident in links, links
    target = links[ident]
    assert target.startswith(page.url + "session/ok/message/"), target
    shown = read(target)
    assert shown.title == f"Message {ident}", (target, shown.title)
    doc = get_json(target)
    assert (doc["session"], doc["message"]["id"]) == ("ok", ident)
    assert doc["message"]["text"] == f"message with id {ident}"


def test_the_sessions_page_still_opens_at_its_address(page: InspectServer) -> None:
    # "/session/.." is a step up to a browser: the page there is the sessions page, not "..".
    assert read(urljoin(page.url, "/session/..")).title == "Sessions"
    assert read(page.url + "session/~..").title == "Session .."
    assert read(page.url + "session/~~x").title == "Session ~x"
    assert html.escape("~..") in get(page.url + "session/~~..")[2]


#: Any id the store holds: text, without a lone surrogate (the store refuses those); and ids
#: made of the characters of a step, of its escape and of the "~" prefix.
IDS = st.one_of(
    st.text(st.characters(exclude_categories=["Cs"])),
    st.text(alphabet=".~%2eE/", max_size=6),
)
STEPS = {".", "..", "%2e", "%2e%2e", ".%2e", "%2e."}  # a browser reads "%2e" as "."


@settings(max_examples=300, deadline=None)
@given(session=IDS, ident=IDS)
@example(session=".", ident="..")
@example(session="..", ident=".")
@example(session="~..", ident="~x")
def test_a_page_path_holds_no_step_and_reads_back(session: str, ident: str) -> None:
    for kind in ("message", "assembly"):
        path = session_url(session, kind, ident)
        segments = path.split("/")[1:]
        assert len(segments) == 4 and segments[0] == "session" and segments[2] == kind
        assert not {s.lower() for s in segments} & STEPS, segments
        assert path_part(segments[1]) == session
        assert path_part(segments[3]) == ident
        for base in ("http://127.0.0.1:8765/", "http://127.0.0.1:8765/session/a/message/b"):
            assert urljoin(base, path) == "http://127.0.0.1:8765" + path
    alone = session_url(session)
    assert alone.split("/")[2].lower() not in STEPS
    assert path_part(alone.split("/")[2]) == session
    assert urljoin("http://127.0.0.1:8765/", alone) == "http://127.0.0.1:8765" + alone


# -- the JSON twin of an error ----------------------------------------------------------------
def assert_json_error(answer: tuple[int, object, str], status: int, needle: str) -> None:
    code, headers, body = answer
    assert code == status, (code, body[:300])
    assert headers["Content-Type"].startswith("application/json"), headers["Content-Type"]  # type: ignore[index]
    doc = json.loads(body)
    assert doc["error"] == status and needle in doc["message"], doc


@pytest.mark.parametrize(
    "headers",
    [{"Host": "evil.example"}, {"Host": "127.0.0.1:1"}, {"Origin": "http://evil.example"}],
    ids=["host", "host-port", "origin"],
)
def test_a_refused_request_has_a_json_twin(page: InspectServer, headers: dict[str, str]) -> None:
    for path in ("?format=json", "session/ok?format=json"):
        answer = get(page.url + path, headers=headers)
        assert_json_error(answer, 403, "is not this server")
        assert "message with id" not in answer[2]
    status, answer_headers, body = get(page.url, headers=headers)
    assert status == 403 and answer_headers["Content-Type"].startswith("text/html"), body


def test_a_closed_memory_has_a_json_twin(tmp_path: Path, embedder: OnnxEmbedder) -> None:
    memory = ContextMemory(tmp_path, embedder=embedder)
    memory.add_message("s1", "user", "My locker code is 4417.", id="m1")
    with serve(memory, port=0) as served:
        assert get_json(served.url + "session/s1")["messages"] == 1
        memory.close()
        for path in ("?format=json", "session/s1?format=json", "session/s1/message/m1?format=json"):
            assert_json_error(get(served.url + path), 503, "the memory is closed")
        status, headers, body = get(served.url + "session/s1")
        assert status == 503 and headers["Content-Type"].startswith("text/html"), body
