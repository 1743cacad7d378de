"""Text made safe for the inspector's pages (`escaped`), and the context as it was sent.

Everything stored (a message, an id, a tool call's arguments) goes through `escaped` before
it reaches a page: `html.escape`, attributes included, and the characters a browser would
hide or use to turn the page's own text around shown as their code.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping
from typing import Any

__all__ = ["escaped", "sent_section"]


# Bidi embeddings, overrides and isolates: shown as their code, so a stored "\u202e" cannot
# turn the page's own text around it (a user id reversing "2 messages" after it); control
# characters too (a browser drops a NUL: sessions "a\0b" and "ab" looked the same).
_CONTROLS = (*range(0x09), 0x0B, 0x0C, *range(0x0E, 0x20), 0x7F)
_BIDI = {c: f"[U+{c:04X}]" for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A), *_CONTROLS)}


def escaped(value: object) -> str:
    """``value`` as text safe anywhere in the page (element content or a quoted attribute)."""
    return html.escape("" if value is None else str(value), quote=True).translate(_BIDI)


def sent_section(doc: Mapping[str, Any]) -> str:
    """The query and the rendered context as sent, where the log kept them."""
    parts = []
    if doc.get("query") is not None:
        query = escaped(doc["query"])
        parts.append(f'<h2>Query</h2><blockquote class="text" id="query">{query}</blockquote>')
    context = doc.get("context")
    if context is not None and "messages" in context:
        rows = "".join(
            f'<tr><td>{escaped(m.get("role"))}</td><td class="text">{_said(m)}</td></tr>'
            for m in context["messages"]
        )
        parts.append(
            '<h2>The context as sent</h2><table id="context"><tr><th>role</th><th>content</th>'
            f"</tr>{rows}</table>"
        )
    elif context is not None:
        parts.append(
            "<h2>The context as sent</h2>"
            f'<pre class="text" id="context">{escaped(context["text"])}</pre>'
        )
    return "".join(parts)


def _said(message: Mapping[str, Any]) -> str:
    """A sent message's content, then the calls it makes or the call it answers (escaped)."""
    said = [escaped(message.get("content"))]
    for call in message.get("tool_calls") or ():
        named = call.get("function", call) if isinstance(call, Mapping) else {}
        what = f"{named.get('name')}({_args(named)}) {call.get('id') if named else call}"
        said.append(f'<div class="muted">calls {escaped(what)}</div>')
    if message.get("tool_call_id"):
        said.append(f'<div class="muted">answers {escaped(message["tool_call_id"])}</div>')
    return "".join(said)


def _args(call: Mapping[str, Any]) -> str:
    given = call.get("arguments", call.get("args"))
    return given if isinstance(given, str) else json.dumps(given, ensure_ascii=False)
