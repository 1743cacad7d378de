"""The inspector's pages as HTML: one function per page, drawing the document of `data`.

Every stored text (a message, a session or user id, an item id, a reason) goes through
`html.escape` (`_e`) before it reaches the page, attributes included, so a message holding
``<script>`` or an ``onerror=`` attribute is shown as text. Links are built with
`urllib.parse.quote` (nothing of an id is left to the browser). The pages hold no script at
all; the server's Content-Security-Policy forbids any (`ctxbudget.inspect.server`).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote, unquote, urlencode

from ctxbudget.inspect.sent import escaped as _e
from ctxbudget.inspect.sent import sent_section
from ctxbudget.inspect.svg import budget_bar, tier_colour, usage_chart

__all__ = [
    "assembly_html",
    "path_part",
    "error_html",
    "message_html",
    "search_html",
    "search_url",
    "sessions_html",
    "session_url",
    "timeline_html",
]

_STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:1.5em auto;max-width:1100px;color:#2e3440;
padding:0 1em}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em}
table{border-collapse:collapse;width:100%}td,th{border-bottom:1px solid #d8dee9;padding:3px 6px;
text-align:left;vertical-align:top}th{background:#eceff4}
.num{text-align:right;font-variant-numeric:tabular-nums}.text{white-space:pre-wrap;
word-break:break-word;max-width:560px}.pruned{color:#7b8394}.included{color:#2e3440}
.tag{display:inline-block;padding:0 5px;border-radius:3px;color:#fff;font-size:12px}
nav a{margin-right:.6em}.muted{color:#7b8394}code{background:#eceff4;padding:0 3px}
.err{color:#bf616a}
"""


def _n(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def _when(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(seconds))
    except (OverflowError, ValueError, OSError):  # a damaged log's time (1e20, NaN): as it is
        return f"{seconds!r} (not a time)"


def _page(title: str, body: str, *, crumbs: Iterable[tuple[str, str]] = ()) -> str:
    links = "".join(f'<a href="{_e(url)}">{_e(label)}</a> / ' for url, label in crumbs)
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{_e(title)}</title><style>{_STYLE}</style></head><body>"
        f'<nav><a href="/">sessions</a> / {links}</nav><h1>{_e(title)}</h1>{body}</body></html>'
    )


def session_url(session: str, *rest: str) -> str:
    """The path of a session's page (``rest``: ``"assembly", id`` or ``"message", id``).

    >>> session_url("a/b", "message", "m 1")
    '/session/a%2Fb/message/m%201'
    """
    return "/" + "/".join(_quoted(part) for part in ("session", session, *rest))


def _quoted(part: str) -> str:
    # A browser resolves a segment "." or ".." (or "%2E") as a step in the path: such an id,
    # and so any id starting with "~", gets one "~" more (`path_part` takes it off).
    if part in (".", "..") or part.startswith("~"):
        part = "~" + part
    return quote(part, safe="", errors="surrogatepass")  # a damaged log's lone surrogate too


def path_part(segment: str) -> str:
    """The id in one segment of a page's path (`session_url` wrote it).

    >>> path_part(session_url("..")[len("/session/"):])
    '..'
    """
    part = unquote(segment)
    return part[1:] if part.startswith("~") else part


def _tag(tier: int, name: str) -> str:
    return f'<span class="tag" style="background:{tier_colour(tier)}">{_e(name)}</span>'


def _search_form(query: str = "") -> str:
    return (
        '<form method="get" action="/"><input type="search" name="q" '
        f'value="{_e(query)}" placeholder="words in messages" aria-label="search messages">'
        ' <button type="submit">Search</button></form>'
    )


def sessions_html(doc: Mapping[str, Any]) -> str:
    """The sessions page: by user, with counts and last activity, and the search box."""
    parts = [
        f'<p class="muted">namespace <code>{_e(doc["namespace"])}</code> of '
        f"<code>{_e(doc['store'])}</code></p>",
        _search_form(),
    ]
    total, start = doc.get("total", 0), doc.get("start", 0)
    if total > start + sum(len(g["sessions"]) for g in doc["users"]) or start:
        shown = sum(len(g["sessions"]) for g in doc["users"])
        parts.append(
            f'<p class="muted pages">sessions {start + 1:,} to {start + shown:,} of {total:,}'
            + "".join(
                f' <a class="{rel}" href="/?start={doc[rel]}">{rel}</a>'
                for rel in ("previous", "next")
                if doc.get(rel) is not None
            )
            + "</p>"
        )
    if not doc["users"]:
        parts.append("<p>No sessions in this namespace.</p>")
    for group in doc["users"]:
        user = group["user"]
        parts.append(f"<h2>{'user ' + _e(user) if user else 'no user'}</h2>")
        rows = "".join(
            f'<tr><td><a class="session" href="{_e(session_url(s["session"]))}">'
            f'{_e(s["session"])}</a></td><td class="num messages">{s["messages"]:,}</td>'
            f'<td class="num assemblies">{s["assemblies"]:,}</td>'
            f"<td>{_e(_when(s['last_activity']))}</td></tr>"
            for s in group["sessions"]
        )
        parts.append(
            "<table><tr><th>session</th><th>messages</th><th>logged assemblies</th>"
            f"<th>last activity</th></tr>{rows}</table>"
        )
    return _page("Sessions", "".join(parts))


def search_html(doc: Mapping[str, Any]) -> str:
    """The search page: messages holding every word."""
    hits = doc["hits"]
    rows = "".join(
        f'<tr><td><a href="{_e(session_url(h["session"]))}">{_e(h["session"])}</a></td>'
        f'<td><a class="message" href="{_e(session_url(h["session"], "message", h["id"]))}">'
        f"{_e(h['id'])}</a></td><td>{_e(h['role'])}</td>"
        f'<td class="text">{_e(h["text"])}</td></tr>'
        for h in hits
    )
    more = f"<p>and {doc['more']:,} more (narrow the search)</p>" if doc["more"] else ""
    searched = doc.get("sessions")
    if searched and (searched["from"] or doc.get("next") is not None):
        link = (
            f' <a class="next" href="/?{_e(urlencode({"q": doc["query"], "start": doc["next"]}))}">'
            "search the next sessions</a>"
            if doc.get("next") is not None
            else ""
        )
        more += (
            f'<p class="muted pages">searched sessions {searched["from"] + 1:,} to '
            f"{searched['to']:,} of {searched['of']:,}{link}</p>"
        )
    body = (
        f"{_search_form(doc['query'])}<p>{len(hits):,} messages hold every word.</p>"
        f"<table><tr><th>session</th><th>message</th><th>role</th><th>text</th></tr>{rows}"
        f"</table>{more}"
    )
    return _page(f"Search: {doc['query']}", body)


def timeline_html(doc: Mapping[str, Any]) -> str:
    """A session's timeline: each logged assembly as a bar, and budget use as a chart."""
    session = doc["session"]
    calls = doc["assemblies"]
    points = [(c["call"], c["tokens_used"], c["budget"]) for c in calls]
    rows = []
    for c in calls:
        reasons = ", ".join(f"{_e(r)} {n}" for r, n in c["prune_reasons"].items())
        error = f'<br><span class="err">{_e(c["error"])}</span>' if c["error"] else ""
        link = session_url(session, "assembly", c["id"])
        rows.append(
            f'<tr><td class="num"><a class="assembly" href="{_e(link)}">{c["call"]}</a></td>'
            f"<td>{_e(_when(c['time']))}</td>"
            f"<td>{budget_bar(c['tiers'], budget=c['budget'], used=c['tokens_used'])}</td>"
            f'<td class="num used">{c["tokens_used"]:,}</td>'
            f'<td class="num budget">{c["budget"]:,}</td>'
            f'<td class="num">{c["included"]:,}</td><td class="num">{c["pruned"]:,}</td>'
            f"<td>{reasons}{error}</td></tr>"
        )
    legend = " ".join(
        _tag(t["tier"], t["name"]) for t in (calls[-1]["tiers"] if calls else ()) if t["tokens"]
    )
    messages = "".join(
        f'<tr><td class="num">{m["seq"]}</td><td><a class="message" '
        f'href="{_e(session_url(session, "message", m["id"]))}">{_e(m["id"])}</a></td>'
        f'<td>{_e(m["role"])}</td><td class="text">{_e(_short(m["text"]))}</td></tr>'
        for m in doc["message_list"]
    )
    body = (
        f"<p>user <code>{_e(doc['user'])}</code>; {doc['messages']:,} messages; "
        f"{doc['calls']['of']:,} logged assemblies</p>"
        f"<h2>Budget use over the conversation</h2>{usage_chart(points)}"
        f"<h2>Assemblies</h2>{_pages(doc, 'calls', 'start', 'assemblies')}<p>{legend}</p>"
        "<table><tr><th>call</th><th>time</th><th>tokens by tier against the budget</th>"
        "<th>used</th><th>budget</th><th>included</th><th>pruned</th><th>prune reasons</th>"
        f"</tr>{''.join(rows)}</table>"
        f"<h2>Messages</h2>{_pages(doc, 'message_range', 'messages', 'messages')}"
        "<table><tr><th>seq</th><th>id</th><th>role</th><th>text</th></tr>"
        f"{messages}</table>"
    )
    return _page(f"Session {session}", body, crumbs=[(session_url(session), session)])


def _pages(doc: Mapping[str, Any], field: str, param: str, noun: str) -> str:
    """A line "assemblies 1 to 500 of 3,000" with links to the pages beside (or nothing)."""
    shown = doc[field]
    if shown["previous"] is None and shown["next"] is None:
        return ""
    here = {"start": doc["calls"]["from"], "messages": doc["message_range"]["from"]}
    links = "".join(
        f' <a class="{rel}" href="{_e(session_url(doc["session"]))}?'
        f'{_e(urlencode({**here, param: shown[rel]}))}">{rel}</a>'
        for rel in ("previous", "next")
        if shown[rel] is not None
    )
    return (
        f'<p class="muted pages">{noun} {shown["from"] + 1:,} to {shown["to"]:,} of '
        f"{shown['of']:,}{links}</p>"
    )


def _short(text: str, limit: int = 240) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def assembly_html(doc: Mapping[str, Any]) -> str:
    """One assembly: every item offered, what entered and left, the prefix shared."""
    session, s = doc["session"], doc["summary"]
    rows = []
    for item in doc["items"]:
        ref = item["ref"]
        name = item["id"] if ref is None else f"{ref['id']} ({ref['scope'][0]} {ref['scope'][1]})"
        if ref is not None and ref["scope"][0] == "session":
            url = session_url(ref["scope"][1], "message", ref["id"])
            name_html = f'<a class="message" href="{_e(url)}">{_e(name)}</a>'
        else:
            name_html = _e(name)
        text = item["text"]
        shown = _e(text) if text is not None else '<span class="muted">(not stored)</span>'
        status = item["status"] if item["reason"] is None else f"pruned: {item['reason']}"
        detail = item.get("detail")
        status_html = _e(status) + (
            f'<br><span class="detail">{_e(detail)}</span>' if detail else ""
        )
        score = item.get("score")
        rows.append(
            f'<tr class="{_e(item["status"])}"><td>{name_html}</td>'
            f"<td>{_tag(item['tier'], item['tier_name'])}</td><td>{status_html}</td>"
            f'<td class="num">{_n(item["tokens"])}</td>'
            f'<td class="num score">{"-" if score is None else f"{score:.4g}"}</td>'
            f'<td>{_e(item["role"] or item["kind"])}</td><td class="text">{shown}</td></tr>'
        )
    tiers = "".join(
        f'<tr><td>{_tag(t["tier"], t["name"])}</td><td class="num">{t["offered"]}</td>'
        f'<td class="num">{t["kept"]}</td><td class="num">{t["pruned"]}</td>'
        f'<td class="num tier-tokens">{t["tokens"]:,}</td><td class="num">{t["floor"]:,}</td>'
        f'<td class="num">{_n(t["cap"])}</td></tr>'
        for t in s["tiers"]
    )
    nav = []
    if doc["previous"]:
        nav.append(
            f'<a href="{_e(session_url(session, "assembly", doc["previous"]))}">previous</a>'
        )
    if doc["next"]:
        nav.append(f'<a href="{_e(session_url(session, "assembly", doc["next"]))}">next</a>')
    prefix = doc["shared_prefix"]
    error = f'<p class="err">{_e(s["error"])}</p>' if s["error"] else ""
    body = (
        f"<p>{_e(_when(s['time']))}; model <code>{_e(s['model'])}</code>, format "
        f"<code>{_e(s['format'])}</code>; user <code>{_e(doc['user'])}</code></p>"
        f'<p>used <strong id="tokens-used">{s["tokens_used"]:,}</strong> of '
        f'<strong id="budget">{s["budget"]:,}</strong> tokens (window {s["window"]:,}, '
        f"reserve {doc['reserve']:,}, safety {doc['safety']:,}); "
        f'<span id="included-count">{s["included"]}</span> included, '
        f'<span id="pruned-count">{s["pruned"]}</span> pruned. {" ".join(nav)}</p>{error}'
        f"{budget_bar(s['tiers'], budget=s['budget'], used=s['tokens_used'])}"
        "<h2>Tiers</h2><table><tr><th>tier</th><th>offered</th><th>kept</th><th>pruned</th>"
        f"<th>tokens</th><th>floor</th><th>cap</th></tr>{tiers}</table>"
        "<h2>Since the previous call</h2>"
        f"{_changes(doc)}<p>leading items shared with it: "
        f'<span id="shared-items">{prefix["items"]}</span> '
        f"({prefix['tokens']:,} tokens of their text; what a prompt cache can reuse starts "
        "there)</p>"
        "<h2>Items offered</h2><table><tr><th>item</th><th>tier</th><th>status</th>"
        f"<th>tokens</th><th>score</th><th>role</th><th>text</th></tr>{''.join(rows)}</table>"
        f'{sent_section(doc)}<p class="muted">{_missing(doc)}Item texts are read from the store '
        "now (a record deleted since has none).</p>"
    )
    crumbs = [(session_url(session), session)]
    return _page(f"Call {doc['call']} of {doc['calls']} in {session}", body, crumbs=crumbs)


def _missing(doc: Mapping[str, Any]) -> str:
    missing = doc.get("not_logged") or []
    if not missing:
        return ""
    hint = (
        " (InclusionLogConfig(keep_context=True) keeps the query and the context)"
        if "rendered context" in missing
        else ""
    )
    return f"Not logged for this call: {_e(', '.join(missing))}{hint}. "


def _changes(doc: Mapping[str, Any]) -> str:
    if doc["previous"] is None:
        return "<p>The first logged call of this session.</p>"
    entered = ", ".join(f"<code>{_e(i)}</code>" for i in doc["entered"]) or "nothing"
    left = ", ".join(f"<code>{_e(i)}</code>" for i in doc["left"]) or "nothing"
    return f'<p>entered: <span id="entered">{entered}</span></p><p>left: {left}</p>'


def message_html(doc: Mapping[str, Any]) -> str:
    """A message, and which assemblies included it."""
    session, m = doc["session"], doc["message"]
    rows = "".join(
        f'<tr class="{_e(c["status"])}"><td class="num"><a class="assembly" '
        f'href="{_e(session_url(session, "assembly", c["id"]))}">{c["call"]}</a></td>'
        f"<td>{_e(_when(c['time']))}</td><td>{_e(c['status'])}</td>"
        f"<td>{_e(c['reason'] or '')}</td>"
        f'<td class="num">{"" if c["tokens"] is None else c["tokens"]}</td></tr>'
        for c in doc["calls"]
    )
    included = doc["included_in"]
    if not included:
        fate = "No logged assembly of this session included it."
    elif doc["stopped_at"] is None:
        fate = f"Included in {len(included):,} calls, up to the newest."
    else:
        fate = (
            f"Included in {len(included):,} calls; last in call {doc['last_included']}, "
            f"not since call {doc['stopped_at']}."
        )
    body = (
        f"<p>{_e(m['role'])}, seq {_e(m['seq'])}, {_e(_when(m['time']))}</p>"
        f'<blockquote class="text" id="message-text">{_e(m["text"])}</blockquote>'
        f'<p id="fate">{_e(fate)}</p>'
        "<table><tr><th>call</th><th>time</th><th>status</th><th>reason</th><th>tokens</th></tr>"
        f"{rows}</table>"
    )
    crumbs = [(session_url(session), session)]
    return _page(f"Message {m['id']}", body, crumbs=crumbs)


def error_html(status: int, message: str) -> str:
    """An error page (404, 403, 405): the status and one line."""
    return _page(f"{status}", f"<p>{_e(message)}</p>")


def search_url(query: str) -> str:
    """The path of a search.

    >>> search_url("locker code")
    '/?q=locker+code'
    """
    return "/?" + urlencode({"q": query})
