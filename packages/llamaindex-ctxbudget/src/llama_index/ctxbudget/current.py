"""The current message: the user's message being answered, sent with the caller's own blocks.

The store keeps a message's text only (an ``[image]`` mark stands in for each image,
`llama_index.ctxbudget.convert`). The message being answered must reach the model as it was
given, so `CtxBudgetMemory` keeps the last user message put with other blocks than text
(`current_of`), keyed by the id of the record it was stored as: a record id is never reused,
so the copy can only stand for that message. When ``get`` answers that record, the query is
counted as its content parts (`content_parts`: text as text, an image by its size, as
`ctxbudget.image_tokens` bills it) and the caller's own message is returned (`CurrentMessage.sent`).

Blocks ctxbudget cannot count (audio, video, documents, citations) are refused when the
message would be sent (`CurrentMessage.parts`), never replaced by a mark the model cannot see.
Messages in history stay text: the store has nowhere to keep their blocks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from llama_index.core.base.llms.types import (
    CachePoint,
    ChatMessage,
    ImageBlock,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
)

from ctxbudget.errors import InvalidItemError
from ctxbudget.tokens.images import image_size
from llama_index.ctxbudget.convert import role_of

__all__ = ["CurrentMessage", "content_parts", "current_of", "has_own_blocks", "plain_text"]

_TEXT_ONLY = (TextBlock, ToolCallBlock)


def has_own_blocks(message: ChatMessage) -> bool:
    """Whether ``message`` has blocks the stored text does not hold (images, thinking...)."""
    return any(not isinstance(block, _TEXT_ONLY) for block in message.blocks)


def plain_text(message: ChatMessage) -> str:
    """The text of the message's text blocks, joined as LlamaIndex's agents join them."""
    return "\n".join(b.text for b in message.blocks if isinstance(b, TextBlock))


def _image_part(block: ImageBlock) -> dict[str, Any]:
    """An image as the core counts it: its size read from its bytes, never fetched by URL.

    Only the size and the detail are kept, never the image's data (the report is logged).
    An image known by an http(s) URL only has an unknown size: counted as the most an image
    can cost.
    """
    part: dict[str, Any] = {"type": "image_url", "image_url": {"url": str(block.url or "")}}
    if block.detail:
        part["image_url"]["detail"] = block.detail
    local = block.image is not None or block.path is not None
    if local or str(block.url or "").startswith("data:"):
        try:
            data = block.resolve_image().read()
        except (OSError, ValueError):  # unreadable: counted as the most an image can cost
            data = b""
        finally:
            if block.image is not None and hasattr(block.image, "seek"):
                block.image.seek(0)  # a caller's stream is left as it was given
        size = image_size(data) if data else None
        if size is not None:
            part["width"], part["height"] = size
    return part


def content_parts(message: ChatMessage, where: str) -> list[Any]:
    """The message's blocks as content parts the core counts, in order.

    A text block is a text part, an image an image part (`_image_part`), a thinking block the
    text it holds (sent back as it is, so counted as its text); a cache point and tool calls
    carry no content of their own.

    Raises:
        InvalidItemError: a block ctxbudget cannot count (the message says which and what to do).
    """
    parts: list[Any] = []
    for number, block in enumerate(message.blocks):
        if isinstance(block, TextBlock):
            parts.append({"type": "text", "text": block.text})
        elif isinstance(block, ImageBlock):
            parts.append(_image_part(block))
        elif isinstance(block, ThinkingBlock):
            parts.append({"type": "text", "text": block.content or ""})
        elif not isinstance(block, CachePoint | ToolCallBlock):
            msg = (
                f"{where} holds a {type(block).__name__} (block {number}) that ctxbudget cannot "
                "count (it counts text, image and thinking blocks), so it cannot send it within "
                "token_limit; convert it to text (a transcript, the document's text) and put "
                "the message again, or leave the block out"
            )
            raise InvalidItemError(msg)
    return parts


@dataclass(frozen=True, slots=True)
class CurrentMessage:
    """The last user message put with its own blocks, and the record it was stored as.

    Attributes:
        record_id: the stored record (text only) that stands for it in the session.
        message: a copy of the caller's message.
        text: its text blocks' text (what an agent asks ``get(input=...)`` with).
    """

    record_id: str
    message: ChatMessage
    text: str

    def parts(self, session_id: str) -> tuple[Any, ...]:
        """Its content parts as counted (`content_parts`).

        Raises:
            InvalidItemError: it holds a block ctxbudget cannot count.
        """
        where = f"the current message of session {session_id!r}"
        return tuple(content_parts(self.message, where))

    def sent(self) -> ChatMessage:
        """The caller's message as sent: a copy, so an edit by the caller changes nothing kept."""
        return self.message.model_copy(deep=True)


def current_of(last: ChatMessage | None, record_id: str | None) -> CurrentMessage | None:
    """The current message of a write, when its last stored message is a user's with own blocks.

    ``last`` is the last message of the write that was stored (a system message after it is
    stored apart and changes nothing), ``record_id`` the record it was stored as (a retry: the
    one it repeats); None when nothing was stored.
    """
    if last is None or record_id is None:
        return None
    if role_of(last) != "user" or not has_own_blocks(last):
        return None
    return CurrentMessage(record_id, last.model_copy(deep=True), plain_text(last))
