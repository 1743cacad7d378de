"""LangChain messages, tools and records to ctxbudget items and back.

`to_record_payload` and `from_record` are the names both adapters give the conversion of a
message to what `ContextMemory.add_messages` takes and of a stored record back to a message
(``llama_index.ctxbudget.convert`` has the same two).

Every message is read through its OpenAI form (``convert_to_openai_messages``), so what the core
counts for a message is exactly what ``TokenCounter.count_messages`` gives for the message as
sent: role, content, name, tool calls and tool call id.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from functools import lru_cache
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal

from langchain_core.language_models import BaseLanguageModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.utils import convert_to_openai_messages, count_tokens_approximately
from langchain_core.utils.function_calling import convert_to_openai_tool

from ctxbudget import ContextItem, Tier, TokenCounter
from ctxbudget.core.items import ROLES, Shrink
from ctxbudget.core.tool_schemas import tool_schema_json
from ctxbudget.core.toolcalls import normalize_tool_calls, parse_arguments
from ctxbudget.errors import ConfigurationError, InvalidItemError, UnknownModelError
from ctxbudget.store.chroma_store import Record
from langchain_ctxbudget.answers import links_of
from langchain_ctxbudget.blocks import citation_parts, content_parts, convertible, stored_text
from langchain_ctxbudget.message_checks import check_call_args, check_unicode, framework_summary

if TYPE_CHECKING:
    from ctxbudget.memory.context import ContextMemory

__all__ = [
    "check_storable",
    "counter_for",
    "from_record",
    "item_of",
    "openai_message",
    "resolve_counter",
    "to_record_payload",
    "tool_schema",
    "tool_tokens",
]

logger = logging.getLogger(__name__)

_FAST_ROLES = {"human": "user", "ai": "assistant", "system": "system"}
_NO_METADATA: Mapping[str, Any] = MappingProxyType({})
# OpenAI's "developer" role (o-series) is the system role; both names are one token.
_ROLE_ALIASES: Mapping[object, str] = MappingProxyType({"developer": "system"})


@lru_cache(maxsize=64)
def counter_for(model: str, unknown: str = "raise") -> TokenCounter:
    """The (cached) counter of a model (`TokenCounter.for_model`); loads its encoding.

    With ``unknown="approximate"``, a model the registry does not know counts approximately,
    and a warning says so once (a misspelt name would otherwise lose exact counts quietly).
    """
    try:
        return TokenCounter.for_model(model)
    except UnknownModelError as exc:
        if unknown == "raise":
            raise
        logger.warning("counting approximately for %s", str(exc).split("; ", 1)[0])
        return TokenCounter.for_model(model, unknown="approximate")


def chat_model_name(chat_model: object) -> str | None:
    """The model name a LangChain chat model carries (``model_name``, ``model``, ``model_id``)."""
    for attribute in ("model_name", "model", "model_id"):
        name = getattr(chat_model, attribute, None)
        if isinstance(name, str) and name.strip():
            return name
    return None


def resolve_counter(token_counter: object, model: object) -> TokenCounter:
    """A `TokenCounter` from a counter, a model name, a chat model, or ``"approximate"``.

    A chat model counts with its model's tokenizer (approximate, labelled, for a model the
    registry does not know). LangChain's ``count_tokens_approximately`` is the approximate
    counter. Other functions are refused: the core counts each piece it renders, and
    ``BaseLanguageModel.get_num_tokens`` returns 0 offline.
    """
    if token_counter is None:
        token_counter = "gpt-4o" if model is None else model
    if isinstance(token_counter, TokenCounter):
        return token_counter
    if token_counter == "approximate" or token_counter is count_tokens_approximately:
        return TokenCounter.approximate()
    if isinstance(token_counter, str):
        # The window is given wherever a counter is resolved for an unregistered name (the
        # middleware's budget= or budget_messages' max_tokens=); a budget needing the
        # registry's window raises for it there.
        return counter_for(token_counter, "approximate")
    if isinstance(token_counter, BaseLanguageModel):
        name = chat_model_name(token_counter)
        if name is not None:
            return counter_for(name, "approximate")
        msg = (
            f"{type(token_counter).__name__} does not say which model it runs (no model_name, "
            "model or model_id); pass the model's name, e.g. token_counter='gpt-4o'"
        )
        raise ConfigurationError(msg)
    msg = (
        f"token_counter must be a model name (e.g. 'gpt-4o'), a chat model, a ctxbudget "
        f"TokenCounter, 'approximate' or count_tokens_approximately, got "
        f"{type(token_counter).__name__}; other functions cannot be used: ctxbudget counts "
        "every piece it renders with the model's tokenizer"
    )
    raise ConfigurationError(msg)


def _plain_text(message: BaseMessage) -> tuple[str, str] | None:
    """``(role, text)`` of a plain text message (no blocks, kwargs or tool calls), else None."""
    content = message.content
    role = _FAST_ROLES.get(message.type)
    if (
        role is not None
        and isinstance(content, str)
        and not message.additional_kwargs
        and not (
            isinstance(message, AIMessage) and (message.tool_calls or message.invalid_tool_calls)
        )
    ):
        return role, content
    return None


def openai_message(message: BaseMessage) -> dict[str, Any]:
    """The OpenAI chat form of a message (plain text messages skip LangChain's converter)."""
    plain = _plain_text(message)
    if plain is not None:
        out: dict[str, Any] = {"role": plain[0]}
        if message.name:
            out["name"] = message.name
        out["content"] = plain[1]
        return out
    return _openai_form(message, "string")


def _where(message: BaseMessage, index: int | None) -> str:
    return f"message {index} ({message.type})" if index is not None else message.type


def _openai_form(
    message: BaseMessage, text_format: Literal["string", "block"], index: int | None = None
) -> dict[str, Any]:
    """``convert_to_openai_messages`` of one message; a block it cannot convert is an error."""
    where = _where(message, index)
    if isinstance(message, RemoveMessage):
        msg = (
            f"{where} is a RemoveMessage (id {message.id!r}): an update of a LangGraph state "
            "that removes the message it names, not a message to send or store; apply it "
            "first (langgraph.graph.message.add_messages(messages, [remove])) and give the "
            "messages that remain"
        )
        raise InvalidItemError(msg)
    if (content := convertible(message.content)) is not None:  # Anthropic's images by URL
        message = message.model_copy(update={"content": content})
    check_call_args(message, where)  # the converter would write NaN as a bare NaN
    try:
        return dict(convert_to_openai_messages(message, text_format=text_format))
    except (ValueError, TypeError) as exc:
        msg = (
            f"{where} has content LangChain cannot convert to OpenAI's form ({exc}); keep its "
            "text and image blocks only, or convert the others to text"
        )
        raise InvalidItemError(msg) from exc


def item_of(
    message: BaseMessage,
    *,
    id: str,  # noqa: A002 - the ContextItem field
    index: int,
    tier: int = Tier.RECENT,
    shrink: Shrink = Shrink.DROP,
    timestamp: float | None = None,
) -> ContextItem:
    """A history item that counts exactly as the message will be sent.

    Content given as a list of blocks becomes the item's ``parts``: text blocks are counted
    exactly, images by OpenAI's rule (`ctxbudget.image_tokens`; an image of unknown size as
    the most an image can cost), a text block's citations as their JSON text
    (`langchain_ctxbudget.blocks.citation_parts`). Invalid tool calls count too: chat models
    send them.

    Raises:
        InvalidItemError: a role the core does not know, or a block that is neither text nor an
            image (the message names the message, the block and what to do).
    """
    plain = _plain_text(message)
    if plain is not None:
        # Plain text: the hot path of long histories (same result as the general one below).
        if not (plain[1].isascii() and (message.name or "").isascii()):
            check_unicode({"content": plain[1], "name": message.name}, _where(message, index))
        return ContextItem(
            id,
            plain[1],
            tier,
            1.0,
            plain[0],
            timestamp,
            None,
            (),
            "history",
            _NO_METADATA,
            shrink,
            (),
            None,
            message.name or None,
        )
    data = _openai_form(message, "block" if isinstance(message.content, list) else "string", index)
    check_unicode(data, _where(message, index))
    role = _ROLE_ALIASES.get(data.get("role"), data.get("role"))
    if role not in ROLES:
        msg = (
            f"message {index} has the role {role!r}; ctxbudget packs system, user, assistant and "
            "tool messages (convert others first)"
        )
        raise InvalidItemError(msg)
    text = data.get("content")
    parts: list[Any] | None = None
    if text is None:
        text = ""
    elif not isinstance(text, str):
        calls_of = {str(c.get("id")) for c in data.get("tool_calls") or ()}
        parts, text = content_parts(text, index, message.type, calls_of, message.content)
        if isinstance(message.content, list):  # citations: dropped from the OpenAI form
            parts.extend(citation_parts(message.content))
    calls = list(data.get("tool_calls") or [])
    if isinstance(message, AIMessage):
        calls.extend(_invalid_call(call) for call in message.invalid_tool_calls)
    metadata: dict[str, Any] = {"tool_calls": calls} if calls else {}
    role, awaited, answer = links_of(message, role, data.get("tool_call_id"))  # answered items
    call_ids = [*(str(call.get("id") or "") for call in calls), *awaited]
    return ContextItem(
        id,
        text,
        tier=tier,
        role=role,
        name=data.get("name") or None,
        tool_calls=tuple(call_ids),
        tool_call_id=answer,
        metadata=metadata,
        shrink=shrink,
        timestamp=timestamp,
        source="history",
        parts=None if parts is None else tuple(parts),
    )


def _invalid_call(call: Mapping[str, Any]) -> dict[str, Any]:
    """An invalid tool call as chat models send it (langchain-openai: as a tool call)."""
    function = {"name": call.get("name"), "arguments": call.get("args") or ""}
    return {"type": "function", "id": call.get("id"), "function": function}


def tool_schema(tool: object) -> dict[str, Any]:
    """The OpenAI schema of a tool as a chat model binds it."""
    return dict(convert_to_openai_tool(tool))  # type: ignore[arg-type]


def tool_tokens(counter: TokenCounter, tools: Sequence[object]) -> int:
    """Tokens of tool schemas: each one's compact JSON (`ctxbudget.core.tool_schemas`)."""
    return sum(counter.count(tool_schema_json(tool_schema(t))) for t in tools)


def check_storable(
    memory: ContextMemory,
    messages: Sequence[BaseMessage],
    keys: Sequence[str],
    ids: tuple[str, str | None],
    only: Sequence[int] | None = None,
) -> None:
    """Refuse what `ContextMemory.add_messages` would refuse of ``messages``; nothing written.

    The middleware stores a call's messages in the background: a message the memory cannot
    keep (over `MemoryConfig.max_message_chars`, a lone surrogate) fails the call here, before
    the model is called, with the memory's own error (never a question sent without itself).
    ``only``: the positions to check (None: all), those not stored yet as they are: a message
    the memory stored with this content passed these checks then.

    Raises:
        StoreInputError: the first message that cannot be stored (by its index among those kept).
    """
    given_at = range(len(messages)) if only is None else only
    chosen = [i for i in given_at if not framework_summary(messages[i])]  # never stored
    payloads = [to_record_payload(messages[i], id=keys[i], timestamp=0.0) for i in chosen]
    given = [p for p in payloads if p is not None]
    memory.writes.check_messages(ids[0], given, user_id=ids[1])


def to_record_payload(
    message: BaseMessage,
    *,
    id: str,  # noqa: A002 - the record's id
    timestamp: float,
) -> dict[str, Any] | None:
    """What `ContextMemory.add_messages` takes for a message; None when there is nothing to keep.

    Tool calls are kept in OpenAI's form, invalid ones too (with the raw argument text the
    model produced): their results name them. Non-text parts (images) are not stored: only
    the text is, and a refusal's text after it (`langchain_ctxbudget.blocks.stored_text`).
    """
    data = _openai_form(message, "string")
    role = _ROLE_ALIASES.get(data.get("role"), data.get("role"))  # "developer": system
    if role not in ROLES:
        return None
    content = data.get("content")
    text = content if isinstance(content, str) else stored_text(content or (), message.text)
    calls = list(data.get("tool_calls") or [])
    if isinstance(message, AIMessage):
        calls.extend(_invalid_call(call) for call in message.invalid_tool_calls)
    if not (text or "").strip() and not calls and role != "tool":
        return None  # a tool result with no output is kept: its call needs it
    payload: dict[str, Any] = {
        "role": role,
        "text": text or "",
        "id": id,
        "timestamp": timestamp,
        "tool_calls": calls,
        "tool_call_id": data.get("tool_call_id"),
    }
    if data.get("name"):
        payload["name"] = data["name"]
    if isinstance(message, ToolMessage) and message.status == "error":
        payload["status"] = "error"  # sent as is_error by Anthropic's and others' adapters
    return payload


def from_record(record: Record) -> BaseMessage:
    """The LangChain message of a stored message record (id, name and tool calls restored).

    A stored call whose arguments are not a JSON object comes back in ``invalid_tool_calls``
    with its raw text, as LangChain parses a model's malformed call.
    """
    name = record.metadata.get("_name")
    common: dict[str, Any] = {"id": record.id}
    if name:
        common["name"] = str(name)
    if record.role == "assistant":
        tool_calls: list[dict[str, Any]] = []
        invalid: list[dict[str, Any]] = []
        for call in _stored_calls(record):
            function = call["function"]
            args = parse_arguments(function["arguments"])
            if args is None:
                invalid.append(
                    {
                        "type": "invalid_tool_call",
                        "id": call["id"],
                        "name": function["name"],
                        "args": function["arguments"],
                        "error": "the arguments are not a JSON object",
                    }
                )
            else:
                tool_calls.append(
                    {"type": "tool_call", "id": call["id"], "name": function["name"], "args": args}
                )
        return AIMessage(
            content=record.text, tool_calls=tool_calls, invalid_tool_calls=invalid, **common
        )
    if record.role == "tool":
        status = "error" if record.metadata.get("_status") == "error" else "success"
        return ToolMessage(
            content=record.text, tool_call_id=record.tool_call_id or "", status=status, **common
        )
    if record.role == "system":
        return SystemMessage(content=record.text, **common)
    return HumanMessage(content=record.text, **common)


def _stored_calls(record: Record) -> list[dict[str, Any]]:
    """The canonical tool calls of a record; one that cannot be read is logged and left out."""
    raw = record.metadata.get("_tool_calls")
    if not isinstance(raw, str):
        return []
    try:
        calls = json.loads(raw)
    except ValueError:
        logger.warning("record %r: stored tool calls are not JSON; read without them", record.id)
        return []
    out: list[dict[str, Any]] = []
    for position, call in enumerate(calls if isinstance(calls, list) else [calls]):
        try:
            out.extend(normalize_tool_calls([call], f"record {record.id!r}, call {position}"))
        except InvalidItemError as exc:
            logger.warning("%s; read without that call", exc)
    return out
