"""OpenAI Responses items a later message answers, linked as a tool call and its result.

Some items langchain-openai keeps in an AIMessage's content (``output_version="responses/v1"``)
wait for the client's answer, and the Responses API refuses one side of such a pair without the
other (as a ``function_call`` without its output):

- a ``computer_call`` is answered by a ToolMessage (its screenshot; langchain-openai sends it
  as the ``computer_call_output``), whose ``tool_call_id`` is the item's ``call_id``;
- an ``mcp_approval_request`` by an ``mcp_approval_response`` (``approval_request_id`` = the
  request's ``id``), and an ``apply_patch_call`` by an ``apply_patch_call_output`` (same
  ``call_id``), which langchain-openai takes from a user message's content and sends as input
  items of their own (``_construct_responses_api_input``, as of langchain-openai 1.7.4).

The core keeps an assistant message with the results of all its calls, or drops them together
(`ctxbudget.core.history`), so these pairs become the same unit: the assistant message awaits
the ``call_id`` of each ``computer_call`` (`awaited_calls`), and `USER_ANSWER` for the items a
user message must answer; the user message that holds such answers is that result
(`links_of`: its item takes the ``tool`` role and `USER_ANSWER` as its ``tool_call_id``).
`USER_ANSWER` is the empty id, which costs no token (``count_messages`` counts a non-empty
``tool_call_id`` only) and the role ``tool`` costs what ``user`` does with every counter
ctxbudget has, so the message counts exactly as the user message it is sent as. The empty id
links the user message to the assistant message right before it (what a user answering an
approval does), by position, not by the ids the items name; an item answered in the same
assistant message awaits nothing. The items stay
counted as their JSON (`langchain_ctxbudget.blocks`): these links are not tool calls.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

__all__ = ["USER_ANSWER", "answers_items", "awaited_calls", "links_of"]

USER_ANSWER = ""
"""The call id an assistant message awaits from a user message's answers (no token)."""

# Responses items a ToolMessage answers (its tool_call_id is the item's ``call_id``), with no
# LangChain tool call: langchain-openai sends that ToolMessage as the ``computer_call_output``.
_TOOL_ANSWERED = frozenset({"computer_call"})
# Items a user message answers: each one's answer type, the answer's field naming the item and
# the item's field it names.
_USER_ANSWERED = {
    "mcp_approval_request": ("mcp_approval_response", "approval_request_id", "id"),
    "apply_patch_call": ("apply_patch_call_output", "call_id", "call_id"),
}
_ANSWER_FIELD = {answer: field for answer, field, _ in _USER_ANSWERED.values()}


def _items(content: Sequence[Any]) -> Iterator[Mapping[str, Any]]:
    """The Responses items of a content list, unwrapped from LangChain's ``non_standard``."""
    for block in content:
        # LangChain's standard form (output_version="v1") wraps the item in a non_standard block
        wrapped = isinstance(block, Mapping) and block.get("type") == "non_standard"
        item = block.get("value") if wrapped else block
        if isinstance(item, Mapping):
            yield item


def awaited_calls(content: Sequence[Any]) -> tuple[str, ...]:
    """The calls of an assistant message's items that a later message answers.

    The ``call_id`` of each ``computer_call`` (a ToolMessage answers it), then `USER_ANSWER`
    once when an ``mcp_approval_request`` or ``apply_patch_call`` is not answered in the
    message itself (a user message answers it). A ``non_standard`` block holding one
    (``output_version="v1"``) counts too.

    They are the message's calls as the history sees them (its answers are never orphans, and
    the message goes with all its answers or not at all); they are not counted as tool calls
    (the items count as their JSON).

    >>> awaited_calls([{"type": "mcp_approval_request", "id": "mcpr_1"}]) == (USER_ANSWER,)
    True
    """
    items = list(_items(content))
    calls = [
        str(item["call_id"])
        for item in items
        if item.get("type") in _TOOL_ANSWERED and item.get("call_id") is not None
    ]
    answered = {
        (kind, str(item.get(_ANSWER_FIELD[kind])))
        for item in items
        if (kind := item.get("type")) in _ANSWER_FIELD
    }
    for item in items:
        kind = item.get("type")
        if kind in _USER_ANSWERED:
            answer, _, named = _USER_ANSWERED[kind]
            if (answer, str(item.get(named))) not in answered:
                calls.append(USER_ANSWER)
                break
    return tuple(calls)


def answers_items(content: Sequence[Any]) -> bool:
    """Whether a user message's content answers items (an ``mcp_approval_response``, ...).

    >>> answers_items([{"type": "mcp_approval_response", "approval_request_id": "mcpr_1"}])
    True
    """
    return any(item.get("type") in _ANSWER_FIELD for item in _items(content))


def links_of(
    message: BaseMessage, role: str, tool_call_id: str | None
) -> tuple[str, tuple[str, ...], str | None]:
    """The role, awaited calls and ``tool_call_id`` of a message's item, with these links.

    An assistant message awaits its items' answers (`awaited_calls`); a user message that
    answers items is their result: role ``tool``, ``tool_call_id`` `USER_ANSWER`. Any other
    message keeps ``role`` and ``tool_call_id`` and awaits nothing.
    """
    content = message.content
    if not isinstance(content, list):
        return role, (), tool_call_id
    if isinstance(message, AIMessage):
        return role, awaited_calls(content), tool_call_id
    if role == "user" and answers_items(content):
        return "tool", (), USER_ANSWER
    return role, (), tool_call_id
