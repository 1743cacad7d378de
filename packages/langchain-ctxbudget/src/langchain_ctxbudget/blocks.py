"""The content blocks of a message as ctxbudget counts them (`langchain_ctxbudget.convert`).

Text blocks count as they are, images by OpenAI's rule (`ctxbudget.image_tokens`). Reasoning
blocks (Anthropic ``thinking``/``redacted_thinking``, OpenAI Responses and LangChain's standard
``reasoning``) are sent back to the model exactly as they were (providers require a thinking
block with its signature before the tool result it led to), and count as the text they hold.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from ctxbudget.errors import InvalidItemError
from ctxbudget.tokens.images import IMAGE_PARTS, TEXT_PARTS

__all__ = ["content_parts"]


def content_parts(
    content: Sequence[Any], index: int, kind: str, calls: Collection[str]
) -> tuple[list[Any], str]:
    """The blocks of a message in OpenAI form, checked, as counted; and the message's text.

    Text and images count as they are. A reasoning block (Anthropic ``thinking`` and
    ``redacted_thinking``, OpenAI Responses and LangChain's standard ``reasoning``) is sent back
    as it was, so it counts as the text it holds (its opaque data too: more, never less); a
    standard ``tool_call`` block of a call the message makes counts with its tool calls.
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
        if isinstance(part, Mapping) and block == "tool_call" and str(part.get("id")) in calls:
            continue
        reasoning = _reasoning_text(part) if isinstance(part, Mapping) else None
        if reasoning is not None:
            parts.append({"type": "text", "text": reasoning})
            continue
        msg = (
            f"message {index} ({kind}) has a content block {number} of type {block!r} that "
            "ctxbudget cannot count (it counts text, image and reasoning blocks); convert "
            "that block to text, or leave it out of the messages given"
        )
        raise InvalidItemError(msg)
    return parts, "\n".join(texts)


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
