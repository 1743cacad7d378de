"""The suite's own check of a conversation (`conversation_problem`) refuses what providers do."""

from __future__ import annotations

from typing import Any

import pytest
from conversation import conversation_problem

CALL = {"role": "assistant", "content": "", "tool_calls": [{"id": "c1"}, {"id": "c2"}]}


def tool(call_id: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": "42"}


SYSTEM, USER, ANSWER = ({"role": r, "content": "x"} for r in ("system", "user", "assistant"))


@pytest.mark.parametrize(
    ("messages", "problem"),
    [
        ([SYSTEM], "no message after the system messages"),
        ([SYSTEM, ANSWER, USER], "message 1 (assistant) is the first"),
        ([USER, SYSTEM, USER], "message 1 is a system message after"),
        ([USER, tool("c1")], "answers tool call 'c1', not one just made"),
        ([USER, CALL, tool("c1"), USER], "message 3 (user) comes before tool calls ['c2']"),
        ([USER, CALL, tool("c2")], "tool calls ['c1'] are never answered"),
        ([USER, CALL, tool("c1"), tool("c1")], "answers tool call 'c1', not one just made"),
        ([{**USER, "tool_calls": [{"id": "c1"}]}, tool("c1")], "message 0 (user) makes tool calls"),
    ],
)
def test_what_a_provider_refuses_is_named(messages: list[dict[str, Any]], problem: str) -> None:
    found = conversation_problem(messages)
    assert found is not None and problem in found, found


def test_a_conversation_providers_accept_passes() -> None:
    good = [SYSTEM, SYSTEM, USER, CALL, tool("c2"), tool("c1"), ANSWER, USER, USER]
    assert conversation_problem(good) is None
