"""Whether a list of chat messages is a conversation every provider accepts.

Anthropic, Gemini and OpenAI each refuse some of: a conversation whose first turn after the
system messages is not the user's, a system message after the conversation began, a tool
result that does not answer a call of the assistant turn right before it, an assistant turn
whose tool calls are not all answered by the results that follow it, and tool calls in a turn
that is not the assistant's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["conversation_problem"]


def _call_ids(message: Mapping[str, Any]) -> list[str]:
    return [str(call.get("id")) for call in message.get("tool_calls") or []]


def conversation_problem(messages: Sequence[Mapping[str, Any]]) -> str | None:
    """What a provider would refuse in ``messages`` (OpenAI form), or None."""
    roles = [str(m.get("role")) for m in messages]
    start = next((n for n, role in enumerate(roles) if role not in ("system", "developer")), None)
    if start is None:
        return "no message after the system messages"
    if roles[start] != "user":
        return f"message {start} ({roles[start]}) is the first after the system messages"
    if late := [n for n in range(start, len(roles)) if roles[n] in ("system", "developer")]:
        return f"message {late[0]} is a system message after the conversation began"
    waiting: list[str] = []  # the tool calls of the last assistant turn not answered yet
    for n in range(start, len(messages)):
        message, role = messages[n], roles[n]
        if role == "tool":
            answered = str(message.get("tool_call_id"))
            if answered not in waiting:
                return f"message {n} answers tool call {answered!r}, not one just made"
            waiting.remove(answered)
            continue
        if waiting:
            return f"message {n} ({role}) comes before tool calls {waiting} are answered"
        if role != "assistant" and message.get("tool_calls"):
            return f"message {n} ({role}) makes tool calls: only an assistant turn may"
        if role == "assistant":
            waiting = _call_ids(message)
    if waiting:
        return f"tool calls {waiting} are never answered"
    return None
