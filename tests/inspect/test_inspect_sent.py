"""The assembly page's "context as sent" shows each message as the model got it.

An assistant turn that only called a tool showed as an empty row until 2026-12-01 (the table
wrote role and content only), and a tool result did not say which call it answered. Control
characters are shown as their code, as bidi ones are: a browser drops a NUL, so sessions
"a\\0b" and "ab" looked the same.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from inspect_helpers import get, get_json

from ctxbudget import ContextMemory
from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.inspect import serve
from ctxbudget.inspect.sent import escaped
from ctxbudget.memory import InclusionLogConfig

CALL = {
    "id": "c1",
    "type": "function",
    "function": {"name": "get_weather", "arguments": '{"city": "<Lisbon>"}'},
}


def test_the_calls_a_turn_makes_and_answers_are_on_the_page(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    config = InclusionLogConfig(keep_context=True)
    with ContextMemory(tmp_path / "m", embedder=embedder, inclusion_log=config) as memory:
        memory.add_message("s", "user", "weather in Lisbon?", id="u1")
        memory.add_message("s", "assistant", "", id="a1", tool_calls=[CALL])
        memory.add_message("s", "tool", "22C sunny", id="t1", tool_call_id="c1")
        sent = memory.assemble("s", "and tomorrow?", budget=300).to_messages()
        with serve(memory, port=0) as page:
            record = get_json(page.url + "session/s")["assemblies"][0]["id"]
            status, _, html = get(page.url + f"session/s/assembly/{record}")
    assert status == 200, html
    table = re.search(r'<table id="context">.*?</table>', html, re.S)
    assert table is not None, html
    rows = re.findall(r"<tr><td>(\w+)</td><td[^>]*>(.*?)</td></tr>", table.group(0), re.S)
    assert [role for role, _ in rows] == [m["role"] for m in sent]
    called = next(cell for role, cell in rows if role == "assistant")
    arguments = escaped(CALL["function"]["arguments"])  # type: ignore[index]
    assert f"calls get_weather({arguments}) c1" in called, called
    assert "<Lisbon>" not in html  # escaped, as every stored text
    answered = next(cell for role, cell in rows if role == "tool")
    assert answered.startswith("22C sunny") and "answers c1" in answered, answered
    assert json.dumps(sent[1]["tool_calls"][0]["function"]["name"]) == '"get_weather"'


def test_control_characters_are_shown_as_their_code() -> None:
    assert escaped("a\x00b\x1b[31m\x7f") == "a[U+0000]b[U+001B][31m[U+007F]"
    assert escaped("line\nnext\ttab\r") == "line\nnext\ttab\r"  # text's own layout stays
