"""Any stored text drawn into any page stays text: no element, attribute or script comes of it."""

from __future__ import annotations

import html
from html.parser import HTMLParser
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxbudget.inspect import pages
from ctxbudget.inspect.sent import escaped

#: Every element the pages themselves write.
OURS = {
    "html", "head", "meta", "title", "style", "body", "nav", "a", "h1", "h2", "p", "table", "tr",
    "th", "td", "span", "code", "strong", "br", "form", "input", "button", "blockquote", "svg",
    "rect", "line", "polyline", "text",
}  # fmt: skip


class Elements(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []
        self.data: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))

    def handle_data(self, data: str) -> None:
        self.data.append(data)


def parsed(page: str) -> Elements:
    parser = Elements()
    parser.feed(page)
    parser.close()
    return parser


def message(text: str, ident: str, session: str, user: str) -> dict[str, Any]:
    return {"id": ident, "session": session, "user": user, "role": text, "seq": 0, "time": 0.0,
            "text": text}  # fmt: skip


def documents(text: str, ident: str, session: str, user: str) -> list[tuple[str, str]]:
    row = message(text, ident, session, user)
    tier = {"tier": 40, "name": text, "offered": 1, "kept": 1, "pruned": 0, "tokens": 5,
            "floor": 0, "cap": None}  # fmt: skip
    call = {"call": 1, "id": ident, "time": 0.0, "model": text, "format": text, "budget": 10,
            "window": 10, "tokens_used": 5, "included": 1, "pruned": 1, "tiers": [tier],
            "prune_reasons": {text: 1}, "error": text, "required": None}  # fmt: skip
    item = {"id": ident, "ref": {"id": ident, "scope": ["session", session]}, "status": "pruned",
            "tier": 40, "tier_name": text, "tokens": None, "reason": text, "text": text,
            "role": text, "kind": "message"}  # fmt: skip
    span = {"from": 500, "to": 501, "of": 1001, "previous": 0, "next": 501}  # links to both
    return [
        (pages.sessions_html({"namespace": text, "store": text, "users": [
            {"user": user, "sessions": [{"session": session, "user": user, "messages": 1,
                                         "assemblies": 1, "last_activity": None}]}]}), "s"),
        (pages.search_html({"query": text, "hits": [row], "more": 0}), "q"),
        (pages.timeline_html({"session": session, "user": user, "messages": 1,
                              "assemblies": [call], "message_list": [row], "calls": span,
                              "message_range": span}), "t"),
        (pages.assembly_html({"session": session, "call": 1, "calls": 2, "summary": call,
                              "user": user, "reserve": 0, "safety": 0, "items": [item],
                              "previous": ident, "next": ident, "entered": [text],
                              "left": [text], "shared_prefix": {"items": 0, "tokens": 0},
                              "not_logged": [text]}), "a"),
        (pages.message_html({"session": session, "message": row, "included_in": [],
                             "last_included": None, "stopped_at": None,
                             "calls": [{"call": 1, "id": ident, "time": 0.0, "status": text,
                                        "tokens": None, "reason": text}]}), "m"),
        (pages.error_html(404, text), "e"),
    ]  # fmt: skip


hostile = st.one_of(
    st.text(max_size=60),
    st.sampled_from(
        [
            "<script>document.title='pwned'</script>",
            "<img src=x onerror=\"document.title='pwned'\">",
            '"><svg onload=alert(1)>',
            "' onmouseover='x",
            "</style><script>x</script>",
            "</textarea></title><a href=javascript:alert(1)>",
            "<!--",
            "]]><![CDATA[",
        ]
    ),
)


@settings(max_examples=50, deadline=None)
@given(text=hostile, ident=hostile.filter(bool), session=hostile.filter(bool), user=hostile)
def test_stored_texts_never_become_markup(text: str, ident: str, session: str, user: str) -> None:
    for page, _ in documents(text, ident, session, user):
        found = parsed(page)
        for tag, attrs in found.tags:
            assert tag in OURS, (tag, page)
            for name, value in attrs:
                assert not name.startswith("on"), (tag, name)
                if name == "href":
                    assert value is not None and value.startswith("/"), value
        assert not any(tag == "script" for tag, _ in found.tags)
        if text.strip() and "\r" not in text:  # a control or bidi character: as its code
            shown = html.unescape(escaped(text))
            assert shown in "".join(found.data) or shown in str(found.tags)
