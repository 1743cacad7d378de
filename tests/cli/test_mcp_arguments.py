"""``ctxbudget mcp``: a tool call's arguments missing, unknown or of the wrong type, and dates.

Each refusal says which tool, which argument and what to pass, never pydantic's own text
(``1 validation error for rememberArguments ... Field required``), over stdio (raw JSON-RPC
lines: `RawServer`) and over streamable HTTP (the SDK's client: `served_http`). A value of
the wrong type still gets the core's message for it (every door refuses it the same way),
led by the argument and the type its schema asks for.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_mcp import served_http, stored_texts
from test_mcp_raw import RawServer, core_refusal, still_serving

from ctxbudget.memory.context import ContextMemory
from ctxbudget.memory.inputs import to_timestamp

PYDANTIC = ("validation error", "Field required", "errors.pydantic.dev", "type=missing")


def clear(message: str) -> None:
    assert not any(word in message for word in PYDANTIC), message
    assert "Traceback" not in message, message


def rpc_error(raw: RawServer, params: str) -> dict[str, Any]:
    """The JSON-RPC error of a tools/call with ``params`` written as given."""
    number = next(raw.ids)
    head = f'{{"jsonrpc": "2.0", "id": {number}, "method": "tools/call"'
    raw.send_line(f'{head}, "params": {params}}}')
    reply = raw.reply()
    assert reply["id"] == number and "error" in reply, reply
    error: dict[str, Any] = reply["error"]
    return error


# -- missing and unknown argument names --------------------------------------------------------
# Before: "Error executing tool remember: 1 validation error for rememberArguments\nsession_id\n
# Field required [type=missing, input_value={...}] For further information visit https://..."
MISSING = [
    (
        "remember",
        {"role": "user", "text": "x"},
        [
            "remember needs the argument 'session_id' (the conversation: an id you choose",
            "which this call does not have; pass it and call again",
        ],
    ),
    (
        "remember",
        {},
        ["remember needs the arguments 'session_id' (", "'role' (who said it) and 'text' ("],
    ),
    ("context", {"session_id": "s"}, ["context needs the argument 'question' (the user's"]),
    ("forget_session", {}, ["forget_session needs the argument 'session_id'"]),
    (
        "context",
        {"sesion_id": "s", "question": "hi"},
        ["context has no argument 'sesion_id'", "context needs the argument 'session_id'"],
    ),
]


@pytest.mark.parametrize(("tool", "arguments", "needles"), MISSING)
def test_a_missing_argument_is_named_with_what_it_is_for(
    raw: RawServer, tool: str, arguments: dict[str, Any], needles: list[str]
) -> None:
    message = raw.error(tool, json.dumps(arguments))
    for needle in needles:
        assert needle in message, message
    assert message.endswith("(nothing was done)"), message
    clear(message)
    still_serving(raw)


# -- arguments of the wrong JSON type ----------------------------------------------------------
# Before: the core's message only ("session_id must be a non-empty str, got 5"; for question:
# "query must be ...", a name the tool does not have).
def test_a_wrong_type_names_the_argument_and_its_type_then_the_core_refusal(
    raw: RawServer, core: ContextMemory
) -> None:
    message = raw.error("remember", '{"session_id": 5, "role": "user", "text": "x"}')
    assert message.startswith(
        "Error executing tool remember: argument 'session_id' (the conversation: an id you "
        "choose and keep using for it) must be a string, got an integer (5); pass a string "
        "instead. "
    ), message
    assert core_refusal(lambda: core.add_message(5, "user", "x")) in message  # type: ignore[arg-type]
    message = raw.error("context", '{"session_id": "s", "question": {"a": 1}}')
    assert "argument 'question' (the user's current message) must be a string, got an object" in (
        message
    )
    assert core_refusal(lambda: core.assemble("s", {"a": 1})) in message  # type: ignore[arg-type]
    message = raw.error("recall", '{"query": "hi", "session_id": "s", "kinds": "message"}')
    assert "argument 'kinds' (" in message and "must be an array or null, got a string" in message
    clear(message)
    still_serving(raw)


@pytest.mark.parametrize(
    ("params", "needles"),
    [
        (
            '{"name": "remember", "arguments": ["s", "user", "x"]}',
            ["tools/call remember: arguments must be an object", "got an array", "'session_id'"],
        ),
        ('{"name": "recall", "arguments": "hi"}', ["arguments must be an object", "a string"]),
        ('{"arguments": {}}', ["tools/call needs params.name", "'remember'", "got none"]),
        ('{"name": 7, "arguments": {}}', ["tools/call needs params.name", "got an integer (7)"]),
    ],
)
def test_malformed_call_params_are_an_invalid_params_error_that_says_why(
    raw: RawServer, params: str, needles: list[str]
) -> None:
    # Before: {"code": -32602, "message": "Invalid request parameters", "data": ""}
    error = rpc_error(raw, params)
    assert error["code"] == -32602, error
    for needle in needles:
        assert needle in error["message"], error
    still_serving(raw)


def test_over_streamable_http_too(tmp_path: Path, core: ContextMemory) -> None:
    store, log = tmp_path / "store", tmp_path / "stderr.txt"
    with served_http(store, log) as served:
        client = served.client
        for tool, arguments, needles in MISSING:
            message = client.error(tool, **arguments)
            assert all(needle in message for needle in needles), message
            clear(message)
        message = client.error("remember", session_id=["s"], role="user", text="x")
        assert "argument 'session_id' (" in message and "got an array" in message, message
        assert core_refusal(lambda: core.add_message(["s"], "user", "x")) in message  # type: ignore[arg-type]
        message = client.error("remember", session_id="s", role="user", text="x", tiemstamp=1)
        assert "remember has no argument 'tiemstamp'" in message, message
        message = client.error("forget", session_id="s")
        assert "no tool 'forget'" in message and "'forget_session'" in message, message
        assert client.ok("sessions")["sessions"] == []  # nothing refused was stored
    assert served.process.returncode == 0, log.read_text("utf-8")
    assert stored_texts(store, "s") == []


# -- a role or an id remember cannot take -------------------------------------------------------
def refused_and_nothing_stored(raw: RawServer, tool: str, arguments: dict[str, Any]) -> str:
    """The refusal of a call, once the session it named is checked to hold nothing."""
    message = raw.error(tool, json.dumps(arguments))
    clear(message)
    query = json.dumps({"query": arguments["text"], "session_id": arguments["session_id"]})
    found = raw.call("recall", query)
    assert found["structuredContent"]["hits"] == [], found
    still_serving(raw)
    return message


# Before 2026-12-01: role "tool" was stored (the core takes it, with a call id this tool has no
# argument for) and then pruned from every context as an orphan result.
@pytest.mark.parametrize("role", ["tool", "User", "", "function"])
def test_a_role_outside_the_schema_is_refused_and_nothing_stored(raw: RawServer, role: str) -> None:
    arguments = {"session_id": "roles", "role": role, "text": "the result"}
    message = refused_and_nothing_stored(raw, "remember", arguments)
    assert "remember's role must be one of ['user', 'assistant', 'system']" in message, message


# Before 2026-12-01: remember stored id 7 as "7" (which edit_message and forget_messages then
# refused as given) and made up an id for "", as remember_fact did.
@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("remember", {"session_id": "ids", "role": "user", "text": "seven", "id": 7}),
        ("remember", {"session_id": "ids", "role": "user", "text": "empty", "id": ""}),
        ("remember_fact", {"session_id": "ids", "text": "a fact", "id": ""}),
        ("remember_fact", {"session_id": "ids", "text": "a fact", "id": 1.5}),
    ],
)
def test_an_id_that_is_not_a_non_empty_string_is_refused(
    raw: RawServer, tool: str, arguments: dict[str, Any]
) -> None:
    message = refused_and_nothing_stored(raw, tool, arguments)
    assert f"{tool}'s id must be a non-empty string (your own id)" in message, message
    if not isinstance(arguments["id"], str):
        assert "argument 'id' (" in message and "must be a string or null" in message, message


# -- a timestamp of ISO-8601's form that is no date ---------------------------------------------
# Before: "timestamp '2024-02-30' is not ISO-8601 (e.g. 2026-03-02T09:14:00Z)".
@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("2024-02-30", "day 30 is out of range for February 2024, which has 29 days"),
        ("2023-02-29", "day 29 is out of range for February 2023, which has 28 days"),
        ("2024-04-31T10:00:00Z", "day 31 is out of range for April 2024, which has 30 days"),
        ("20240230", "day 30 is out of range for February 2024, which has 29 days"),
    ],
)
def test_an_impossible_day_is_said_with_the_days_the_month_has(text: str, said: str) -> None:
    with pytest.raises(ValueError, match="is not a date") as refused:
        to_timestamp(text)
    message = str(refused.value)
    assert said in message and "not ISO-8601" not in message, message
    assert "; pass a day from 1 to " in message


@pytest.mark.parametrize(
    ("text", "field"),
    [("2024-13-01", "month must be in 1..12"), ("2024-01-01T25:00", "hour must be in 0..23")],
)
def test_another_field_out_of_range_is_named(text: str, field: str) -> None:
    with pytest.raises(ValueError, match="has the form of ISO-8601 but is not a real date") as r:
        to_timestamp(text)
    assert field in str(r.value) and "correct that field" in str(r.value)


def test_text_that_is_not_iso_8601_is_still_said_so() -> None:
    with pytest.raises(ValueError, match=r"'last tuesday' is not ISO-8601 \(e.g. 2026"):
        to_timestamp("last tuesday")


def test_an_impossible_date_over_mcp_names_the_argument_and_the_day(
    raw: RawServer, core: ContextMemory
) -> None:
    message = raw.error(
        "remember", '{"session_id": "s", "role": "user", "text": "x", "timestamp": "2024-02-30"}'
    )
    expected = core_refusal(lambda: core.add_message("s", "user", "x", timestamp="2024-02-30"))
    assert expected in message, message
    assert message.startswith("Error executing tool remember: message 0: timestamp '2024-02-30'")
    assert "day 30 is out of range for February 2024" in message and "(e.g. 2024-02-29)" in message
    still_serving(raw)
