"""The content blocks of a message as ctxbudget counts them (`langchain_ctxbudget.convert`).

Text blocks count as they are, images by OpenAI's rule (`ctxbudget.image_tokens`). Reasoning
blocks (Anthropic ``thinking``/``redacted_thinking``, OpenAI Responses and LangChain's standard
``reasoning``) are sent back to the model exactly as they were (providers require a thinking
block with its signature before the tool result it led to), and count as the text they hold.
Refusal blocks (OpenAI's ``refusal`` content part, LangChain's standard ``refusal`` block since
langchain-core 1.7.5) are sent back as they were too, and count as their refusal text.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from ctxbudget.errors import InvalidItemError
from ctxbudget.tokens.images import IMAGE_PARTS, TEXT_PARTS

__all__ = ["content_parts", "stored_text"]


def content_parts(
    content: Sequence[Any], index: int, kind: str, calls: Collection[str]
) -> tuple[list[Any], str]:
    """The blocks of a message in OpenAI form, checked, as counted; and the message's text.

    Text and images count as they are. A reasoning block (Anthropic ``thinking`` and
    ``redacted_thinking``, OpenAI Responses and LangChain's standard ``reasoning``) is sent back
    as it was, so it counts as the text it holds (its opaque data too: more, never less); a
    standard ``tool_call`` block (or OpenAI Responses ``function_call`` item) of a call the
    message makes counts with its tool calls. A ``refusal`` block counts as its refusal text
    (an empty one counts nothing).
    """
    parts: list[Any] = []
    texts: list[str] = []
    for number, part in enumerate(content):
        block = part.get("type") if isinstance(part, Mapping) else type(part).__name__
        if isinstance(part, Mapping) and block in TEXT_PARTS:
            if isinstance(part.get("text"), str):
                parts.append(part)
                texts.append(part["text"])
                continue
            got = type(part.get("text")).__name__
            msg = f"message {index} ({kind}): text block {number} has a {got} text, not a str"
            raise InvalidItemError(msg)
        if isinstance(part, Mapping) and block in IMAGE_PARTS:
            parts.append(part)
            continue
        if isinstance(part, Mapping) and _call_of(part) in calls:
            continue
        if (
            isinstance(part, Mapping)
            and block == "refusal"
            and isinstance(part.get("refusal"), str)
        ):
            parts.append({"type": "text", "text": part["refusal"]})
            continue
        reasoning = _reasoning_text(part) if isinstance(part, Mapping) else None
        if reasoning is not None:
            parts.append({"type": "text", "text": reasoning})
            continue
        msg = (
            f"message {index} ({kind}) has a content block {number} of type {block!r} that "
            "ctxbudget cannot count (it counts text, image, reasoning and refusal blocks); "
            "convert that block to text, or leave it out of the messages given"
        )
        raise InvalidItemError(msg)
    return parts, "\n".join(texts)


def _call_of(block: Mapping[str, Any]) -> str | None:
    """The id of the tool call a call block stands for (None: not a call block).

    A standard ``tool_call`` block's ``id``; an OpenAI Responses ``function_call`` item's
    ``call_id`` (``output_version="responses/v1"``).
    """
    kind = block.get("type")
    if kind == "tool_call":
        return str(block.get("id"))
    if kind == "function_call":
        return str(block.get("call_id"))
    return None


def stored_text(content: Sequence[Any], text: str) -> str:
    """What is stored of a message with content blocks: its ``text``, then any refusal's text.

    A refusal is the model's answer to its turn: a message that holds only one is stored as
    it (not left out as empty), so the history read back still shows what the model said.
    """
    refusals = [
        part["refusal"]
        for part in content
        if isinstance(part, Mapping)
        and part.get("type") == "refusal"
        and isinstance(part.get("refusal"), str)
        and part["refusal"].strip()
    ]
    if not refusals:
        return text
    return "\n".join([text, *refusals] if text.strip() else refusals)


_REASONING_FIELDS = {
    "thinking": ("thinking",),
    "redacted_thinking": ("data",),
    "reasoning": ("reasoning", "summary", "content", "encrypted_content"),
}


def _reasoning_text(block: Mapping[str, Any]) -> str | None:
    """The text a reasoning block holds (None: not one, or not readable as one)."""
    fields = _REASONING_FIELDS.get(str(block.get("type")))
    if fields is None:
        return None
    texts: list[str] = []
    for name in fields:
        value = block.get(name)
        if isinstance(value, str):
            texts.append(value)
        elif isinstance(value, Sequence):  # OpenAI: summary_text / reasoning_text entries
            for entry in value:
                text = entry.get("text") if isinstance(entry, Mapping) else None
                if not isinstance(text, str):
                    return None
                texts.append(text)
        elif value is not None:
            return None
    return "\n".join(texts)
