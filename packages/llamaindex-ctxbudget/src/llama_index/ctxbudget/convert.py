"""LlamaIndex `ChatMessage` to ctxbudget message dicts and back.

`to_record_payload` and `from_record` are the names both adapters give the conversion of a
message to what `ContextMemory.add_messages` takes and of a stored record back to a message
(``langchain_ctxbudget.convert`` has the same two).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from llama_index.core.base.llms.types import (
    AudioBlock,
    ChatMessage,
    ContentBlock,
    DocumentBlock,
    ImageBlock,
    MessageRole,
    TextBlock,
    ToolCallBlock,
    VideoBlock,
)

from ctxbudget.core.numbers import from_numpy, shown
from ctxbudget.core.toolcalls import normalize_tool_calls, parse_arguments
from ctxbudget.core.unicode import lone_surrogate
from ctxbudget.errors import InvalidItemError
from ctxbudget.store.chroma_store import Record

__all__ = [
    "KWARGS_KEY",
    "from_provider",
    "from_record",
    "input_text",
    "role_of",
    "sent_kwargs",
    "text_of",
    "text_of_blocks",
    "to_record_payload",
]

logger = logging.getLogger(__name__)

KWARGS_KEY = "li_kwargs"
"""Record metadata key holding a message's other ``additional_kwargs`` (JSON)."""

_ROLES = {
    MessageRole.SYSTEM: "system",
    MessageRole.DEVELOPER: "system",
    MessageRole.USER: "user",
    MessageRole.ASSISTANT: "assistant",
    MessageRole.CHATBOT: "assistant",
    MessageRole.MODEL: "assistant",
    MessageRole.TOOL: "tool",
    MessageRole.FUNCTION: "tool",
}
# additional_kwargs keys that become message fields instead of opaque metadata.
_FIELDS = frozenset({"tool_calls", "tool_call_id", "name"})


def role_of(message: ChatMessage) -> str:
    """The ctxbudget role of a message (``developer`` is a system message, ``function`` a tool)."""
    return _ROLES.get(MessageRole(message.role), "user")


# Media ctxbudget does not keep: a mark in the text says one was there.
_MARKS = (
    (ImageBlock, "[image]"),
    (AudioBlock, "[audio]"),
    (VideoBlock, "[video]"),
    (DocumentBlock, "[document]"),
)


_WARNED: set[str] = set()  # the kinds of blocks a warning named already


def text_of_blocks(blocks: Sequence[Any]) -> str:
    """The text of content blocks, with an ``[image]`` (``[audio]``...) mark per media block.

    Media are not stored (the mark is: the conversation shows that one was there, and a
    message of only an image is not lost); other blocks (thinking, citations) are left out.
    Both are logged as warnings. The message being answered is still sent with its own blocks
    (`llama_index.ctxbudget.current`); older messages are sent as their stored text.
    """
    texts: list[str] = []
    marks: list[str] = []
    skipped: set[str] = set()
    for block in blocks:
        if isinstance(block, TextBlock):
            if block.text:
                texts.append(block.text)
        elif not isinstance(block, ToolCallBlock | ChatMessage):
            skipped.add(type(block).__name__)
            marks.extend(m for kind, m in _MARKS if isinstance(block, kind))
    if skipped:  # a warning once per kind of block and process (each turn may hold one)
        new = skipped - _WARNED
        _WARNED.update(skipped)
        logger.log(
            logging.WARNING if new else logging.DEBUG,
            "ctxbudget stores text only: %s block(s) are not stored (a mark such as [image] "
            "stands in for media); the message being answered is sent with them, older "
            "messages as their stored text",
            ", ".join(sorted(skipped)),
        )
    text = "\n".join(texts)
    if marks:
        text = (text.rstrip() + " " if text.strip() else "") + " ".join(marks)
    return text


def text_of(message: ChatMessage) -> str:
    """The text of a message (its text blocks, joined by newlines)."""
    return text_of_blocks(message.blocks)


def input_text(value: str | ChatMessage | None) -> str | None:
    """The text of a ``get`` input: a str as is, a message's text (`text_of`), or None.

    Raises:
        InvalidItemError: ``value`` is none of those, or its text is not valid Unicode.
    """
    if value is None:
        return None
    given: object = value
    if not isinstance(given, str | ChatMessage):
        msg = (
            f"CtxBudgetMemory.get(input=) must be the message being answered, a str or a "
            f"ChatMessage (or None), got a {type(given).__name__}: {shown(given)}"
        )
        raise InvalidItemError(msg)
    text = text_of(given) if isinstance(given, ChatMessage) else given
    problem = lone_surrogate(text)
    if problem is not None:
        msg = f"CtxBudgetMemory.get(input=): its text {problem}"
        raise InvalidItemError(msg)
    return text


def to_record_payload(message: ChatMessage, index: int = 0) -> dict[str, Any] | None:
    """A message as `ContextMemory.add_messages` takes it; None when it holds nothing to keep.

    A tool result with no output is stored empty: its call needs it to be sent. A tool result
    (role ``tool`` or ``function``) must name the call it answers in
    ``additional_kwargs["tool_call_id"]``: without one it could never be sent (no provider
    takes a result that answers no call), so it is refused, not stored to be pruned as an
    orphan on every ``get``.

    Raises:
        InvalidItemError: a tool call without a name, arguments that are not JSON (NaN or
            infinity among them), a tool result without a ``tool_call_id``, or other
            ``additional_kwargs`` JSON cannot hold (a circular reference).
    """
    role = role_of(message)
    text = text_of(message)
    calls = _tool_calls(message, index)
    kwargs = message.additional_kwargs or {}
    call_id = kwargs.get("tool_call_id")
    if role == "tool":
        _check_answers(message, call_id, index)
    empty = not text.strip()
    if empty and not calls and role != "tool":
        return None
    metadata: dict[str, str | int | float | bool] = {}
    others = {k: v for k, v in kwargs.items() if k not in _FIELDS}
    if others:
        try:
            metadata[KWARGS_KEY] = json.dumps(others, ensure_ascii=False, default=_json_value)
        except (TypeError, ValueError) as exc:  # a circular reference, a key JSON cannot take
            msg = (
                f"message {index}: its additional_kwargs {sorted(map(str, others))} cannot be "
                f"stored as JSON ({exc}); keep plain values there (str, numbers, lists, dicts)"
            )
            raise InvalidItemError(msg) from exc
    stored: dict[str, Any] = {"role": role, "text": text, "metadata": metadata}
    if calls:
        stored["tool_calls"] = calls
    if role == "tool":
        stored["tool_call_id"] = str(call_id)
    name = kwargs.get("name")
    if isinstance(name, str) and name:
        stored["name"] = name
    return stored


def _check_answers(message: ChatMessage, call_id: object, index: int) -> None:
    """Refuse a tool result without a ``tool_call_id`` (missing, None or ``""``).

    Before 2026-12-02 it was stored, then pruned as an orphan from every ``get``: it answers
    no call, and no provider takes such a result.
    """
    if call_id is not None and not (isinstance(call_id, str) and not call_id):
        return
    msg = (
        f"message {index} is a tool result ({MessageRole(message.role).value} role) without a "
        "tool_call_id, so it answers no call and would never be sent; give it "
        'additional_kwargs={"tool_call_id": ...} with the id of the assistant\'s tool call it '
        "answers (that call's ToolCallBlock tool_call_id). None of the messages given with it "
        "was stored"
    )
    raise InvalidItemError(msg)


def _json_value(value: object) -> object:
    """What JSON stores of a value it has no form for (anything else: its text).

    numpy's values are stored as the Python values they hold (``int64(3)`` is 3, an array a
    list), as they round-trip through LlamaIndex's own memory.
    """
    plain = from_numpy(value)
    return str(value) if plain is value else plain


def _tool_calls(message: ChatMessage, index: int) -> list[dict[str, Any]]:
    """Tool calls as OpenAI-style dicts, from ToolCallBlocks and ``additional_kwargs``."""
    calls: list[dict[str, Any]] = []
    for block in message.blocks:
        if isinstance(block, ToolCallBlock):
            calls.append(_call(block.tool_call_id, block.tool_name, block.tool_kwargs, index))
    raw = (message.additional_kwargs or {}).get("tool_calls") or []
    if not isinstance(raw, list | tuple):
        msg = (
            f"message {index}: additional_kwargs['tool_calls'] must be a list of tool calls, "
            f"got {shown(raw)}; put a single call in a list"
        )
        raise InvalidItemError(msg)
    seen = {call["id"] for call in calls}
    for entry in raw:
        call = _raw_call(entry, index)
        if call["id"] not in seen:
            calls.append(call)
            seen.add(call["id"])
    return calls


def _raw_call(entry: object, index: int) -> dict[str, Any]:
    """One entry of ``additional_kwargs["tool_calls"]``: a dict, an OpenAI object or a selection."""
    if hasattr(entry, "tool_name"):  # llama_index ToolSelection
        return _call(
            getattr(entry, "tool_id", None),
            entry.tool_name,
            getattr(entry, "tool_kwargs", {}),
            index,
        )
    if hasattr(entry, "model_dump"):
        entry = entry.model_dump()
    if not isinstance(entry, Mapping):
        msg = f"message {index}: a tool call must be a dict or a ToolCallBlock, got {entry!r:.80}"
        raise InvalidItemError(msg)
    function = entry.get("function")
    function = function if isinstance(function, Mapping) else entry
    return _call(entry.get("id"), function.get("name"), function.get("arguments", ""), index)


def _call(
    call_id: object,
    name: object,
    arguments: object,
    index: int,
) -> dict[str, Any]:
    """One call in the canonical form (checked by `ctxbudget.core.toolcalls`).

    Only LlamaIndex's own convention is here: dict kwargs are written as LlamaIndex LLMs
    serialize them (``json.dumps`` with its defaults), so read back and sent again the
    arguments are the very text that was counted. NaN and infinity are refused, as the core
    and the LangChain adapter refuse them: ``json.dumps`` would write a bare ``NaN``, which
    no provider reads (until 2026-12-02 it was stored and sent so).
    """
    if isinstance(arguments, Mapping):
        where = f"message {index}: the arguments of tool call {name!r} (id {call_id!r})"
        try:
            arguments = json.dumps(dict(arguments), allow_nan=False)
        except (TypeError, ValueError) as exc:
            if "not JSON compliant" in str(exc):
                msg = (
                    f"{where} hold NaN or infinity, which JSON cannot write and providers "
                    "refuse; give null or a string for that value"
                )
            else:
                msg = (
                    f"{where} are not JSON: {exc}; give them as JSON values (str, int, float, "
                    "bool, None, lists and dicts)"
                )
            raise InvalidItemError(msg) from exc
    entry = {
        "id": None if call_id is None else str(call_id),
        "function": {"name": name, "arguments": arguments},
    }
    return normalize_tool_calls([entry], f"message {index}")[0]


def sent_kwargs(arguments: str) -> dict[str, Any] | str:
    """A call's ``tool_kwargs`` that LlamaIndex sends as exactly ``arguments``, the text counted.

    LlamaIndex LLMs send dict kwargs as ``json.dumps(kwargs)`` (ASCII escapes, ``", "`` and
    ``": "``) and str kwargs as they are. So the kwargs are a dict only when that encoding
    gives ``arguments`` back; otherwise (a model's malformed call, JSON written compactly or
    with non-ASCII text, as another writer may store it) the text itself, which LlamaIndex
    allows: what is sent is then the text that was counted, never a longer re-encoding.

    >>> sent_kwargs('{"city": "Lisbon"}'), sent_kwargs('{"city":"Lisbon"}')
    ({'city': 'Lisbon'}, '{"city":"Lisbon"}')
    """
    parsed = parse_arguments(arguments)
    if parsed is not None and arguments and json.dumps(parsed) == arguments:
        return parsed
    return arguments


def _blocks(content: str, calls: object) -> list[ContentBlock]:
    """Text and tool-call blocks, each call's kwargs as `sent_kwargs` gives them.

    LlamaIndex allows a `ToolCallBlock` its kwargs as a string: a model's malformed call is
    shown as it was made, never dropped and never an error.
    """
    blocks: list[ContentBlock] = []
    if content:
        blocks.append(TextBlock(text=content))
    for call in _canonical(calls):
        function = call["function"]
        blocks.append(
            ToolCallBlock(
                tool_call_id=call["id"],
                tool_name=function["name"],
                tool_kwargs=sent_kwargs(function["arguments"]),
            )
        )
    if not blocks:  # a tool result with no output: "" as LlamaIndex's Memory gives, not None
        blocks.append(TextBlock(text=""))
    return blocks


def _canonical(calls: object) -> list[dict[str, Any]]:
    """Tool calls in the canonical form; one that cannot be read is logged and left out."""
    out: list[dict[str, Any]] = []
    for position, call in enumerate(calls if isinstance(calls, list) else []):
        try:
            out.extend(normalize_tool_calls([call], f"tool call {position}"))
        except InvalidItemError as exc:
            logger.warning("%s; left out", exc)
    return out


def from_provider(message: Mapping[str, Any]) -> ChatMessage:
    """A `ChatMessage` from one of `AssembledContext.to_messages` (exactly what was counted)."""
    kwargs: dict[str, Any] = {}
    if message.get("tool_call_id") is not None:
        kwargs["tool_call_id"] = message["tool_call_id"]
    if message.get("name"):
        kwargs["name"] = message["name"]
    content = message.get("content") or ""
    return ChatMessage(
        role=MessageRole(message["role"]),
        blocks=_blocks(content, message.get("tool_calls")),
        additional_kwargs=kwargs,
    )


def from_record(record: Record) -> ChatMessage:
    """A stored message as the `ChatMessage` that was put (text, tool calls and extra kwargs)."""
    metadata = record.metadata
    kwargs: dict[str, Any] = {}
    extra = metadata.get(KWARGS_KEY)
    if isinstance(extra, str):
        try:
            kwargs.update(json.loads(extra))
        except ValueError:
            logger.warning("record %r: stored kwargs are not JSON; read without them", record.id)
    if record.tool_call_id is not None:
        kwargs["tool_call_id"] = record.tool_call_id
    name = metadata.get("_name")
    if name:
        kwargs["name"] = str(name)
    calls: object = []
    calls_json = metadata.get("_tool_calls")
    if isinstance(calls_json, str):
        try:
            calls = json.loads(calls_json)
        except ValueError:
            logger.warning(
                "record %r: stored tool calls are not JSON; read without them", record.id
            )
    text = record.text
    return ChatMessage(
        role=MessageRole(record.role or "user"),
        blocks=_blocks(text, calls),
        additional_kwargs=kwargs,
    )
