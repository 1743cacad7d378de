"""The content blocks of a message as ctxbudget counts them (`langchain_ctxbudget.convert`).

Text blocks count as they are, images by OpenAI's rule (`ctxbudget.image_tokens`). Reasoning
blocks (Anthropic ``thinking``/``redacted_thinking``, OpenAI Responses and LangChain's standard
``reasoning``) are sent back to the model exactly as they were (providers require a thinking
block with its signature before the tool result it led to), and count as the text they hold.
Refusal blocks (OpenAI's ``refusal`` content part, LangChain's standard ``refusal`` block since
langchain-core 1.7.5) are sent back as they were too, and count as their refusal text.
Server tool blocks (Anthropic's web search, web fetch, code execution, tool search and MCP
connector blocks, LangChain's standard ``server_tool_call``/``server_tool_result`` and
``non_standard`` blocks) and OpenAI Responses items (``web_search_call``, ``file_search_call``,
``code_interpreter_call``, ``image_generation_call``, ``computer_call``, the MCP items, ...: the
built-in tool items langchain-openai keeps in an AIMessage's content with
``output_version="responses/v1"``) are sent back as they were, and count as their compact JSON
text (`VERBATIM_BLOCKS`), but for a generated image, which counts as an image
(`generated_image_parts`); the items a later message answers go with it
(`langchain_ctxbudget.answers`). A text block's citations (Anthropic ``citations``, OpenAI
Responses and LangChain ``annotations``), which the providers' LangChain integrations send back
with the text, count as their compact JSON text too (`citation_parts`).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from ctxbudget.errors import InvalidItemError
from ctxbudget.tokens.images import IMAGE_PARTS, TEXT_PARTS

__all__ = [
    "RESPONSES_ITEMS",
    "SERVER_TOOL_BLOCKS",
    "VERBATIM_BLOCKS",
    "citation_parts",
    "content_parts",
    "convertible",
    "generated_image_parts",
    "server_block_json",
    "sized_images",
    "stored_text",
]

# Blocks of tools the provider runs itself, inside one assistant turn (no LangChain tool call,
# no ToolMessage): the provider needs them back verbatim (an encrypted search result too).
# Anthropic's (as langchain-anthropic sends them back), then LangChain's standard ones.
SERVER_TOOL_BLOCKS = frozenset(
    {
        "server_tool_use",
        "mcp_tool_use",
        "mcp_tool_result",
        "web_search_tool_result",
        "web_fetch_tool_result",
        "code_execution_tool_result",
        "bash_code_execution_tool_result",
        "text_editor_code_execution_tool_result",
        "tool_search_tool_result",
        "server_tool_call",
        "server_tool_result",
        "non_standard",
    }
)
# Items of OpenAI's Responses API that langchain-openai keeps in an AIMessage's content as the
# API returned them (``output_version="responses/v1"``, the default with use_responses_api=True:
# ``_construct_lc_result_from_responses_api``) and sends back as input items as given
# (``_construct_responses_api_input``; an ``image_generation_call`` as its id alone unless
# ``store=False``), as of langchain-openai 1.7.4. The built-in tools' calls (each holds its
# result: search sources, code outputs, the image's base64 ``result``), the MCP items, and
# ``compaction`` (encrypted context). The client's answers langchain-openai takes from a user
# message (``mcp_approval_response``, a client ``tool_search_output`` or
# ``apply_patch_call_output``) go back as given too. ``reasoning`` items count as reasoning,
# ``function_call``/``custom_tool_call`` items with the message's tool calls (`_call_of`).
RESPONSES_ITEMS = frozenset(
    {
        "web_search_call",
        "file_search_call",
        "code_interpreter_call",
        "image_generation_call",
        "computer_call",
        "mcp_call",
        "mcp_list_tools",
        "mcp_approval_request",
        "mcp_approval_response",
        "tool_search_call",
        "tool_search_output",
        "apply_patch_call",
        "apply_patch_call_output",
        "compaction",
    }
)
# The blocks sent back exactly as given and counted as their compact JSON (`server_block_json`).
VERBATIM_BLOCKS = SERVER_TOOL_BLOCKS | RESPONSES_ITEMS


def content_parts(
    content: Sequence[Any],
    index: int,
    kind: str,
    calls: Collection[str],
    given: Sequence[Any] = (),
) -> tuple[list[Any], str]:
    """The blocks of a message in OpenAI form, checked, as counted; and the message's text.

    Text and images count as they are. A reasoning block (Anthropic ``thinking`` and
    ``redacted_thinking``, OpenAI Responses and LangChain's standard ``reasoning``) is sent back
    as it was, so it counts as the text it holds (its opaque data too: more, never less); a
    standard ``tool_call`` block (or OpenAI Responses ``function_call`` item) of a call the
    message makes counts with its tool calls. A ``refusal`` block counts as its refusal text
    (an empty one counts nothing). A server tool block or OpenAI Responses item
    (`VERBATIM_BLOCKS`) counts as its compact JSON text (`server_block_json`), a generated
    image as an image (`generated_image_parts`). ``given``: the message's own blocks, whose
    images' ``width`` and ``height`` the OpenAI form leaves out (`sized_images`).
    """
    content = sized_images(content, given)
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
        image = generated_image_parts(part) if isinstance(part, Mapping) else None
        if image is not None:
            parts.extend(image)
            continue
        served = server_block_json(part) if isinstance(part, Mapping) else None
        if served is not None:
            parts.append({"type": "text", "text": served})
            continue
        msg = (
            f"message {index} ({kind}) has a content block {number} of type {block!r} that "
            "ctxbudget cannot count (it counts text, image, reasoning, refusal, server tool and "
            "OpenAI Responses tool item blocks); convert that block to text, or leave it out of "
            "the messages given"
        )
        raise InvalidItemError(msg)
    return parts, "\n".join(texts)


def convertible(content: object) -> list[Any] | None:
    """``content`` with Anthropic's images by URL as LangChain's standard image blocks.

    langchain-anthropic sends ``{"type": "image", "source": {"type": "url", "url": ...}}`` as
    it is, but LangChain's OpenAI form cannot read it (it expects base64 ``data`` in a
    ``source``): the standard block with the same url (and size) is what gets counted and
    stored. None: nothing to change.
    """
    if not isinstance(content, list) or not any(_url_source(b) for b in content):
        return None
    return [
        {k: v for k, v in {**b, "url": b["source"]["url"]}.items() if k != "source"}
        if _url_source(b)
        else b
        for b in content
    ]


def _url_source(block: object) -> bool:
    source = block.get("source") if isinstance(block, Mapping) else None
    return (
        isinstance(block, Mapping)
        and block.get("type") == "image"
        and isinstance(source, Mapping)
        and source.get("type") == "url"
        and isinstance(source.get("url"), str)
    )


def sized_images(content: Sequence[Any], given: Sequence[Any]) -> Sequence[Any]:
    """``content`` (a message's OpenAI form) with the size its own image blocks declare.

    LangChain's OpenAI form of an image keeps its url or data only: a ``width`` and ``height``
    given on the message's block (or in its ``image_url``, ``source`` or ``extras``) would be
    lost, and the image counted as the most one can cost. The images of both are in the same
    order; when their numbers differ nothing is added (then counted as they are).
    """
    images = [n for n, part in enumerate(content) if _is_image(part)]
    blocks = given if isinstance(given, list) else []  # a str content has no blocks
    sizes = [_declared_size(block) for block in blocks if _is_image(block)]
    if not images or len(images) != len(sizes) or not any(sizes):
        return content
    out = list(content)
    for number, size in zip(images, sizes, strict=True):
        if size is not None and _declared_size(out[number]) is None:
            out[number] = {**out[number], "width": size[0], "height": size[1]}
    return out


def _is_image(block: object) -> bool:
    return isinstance(block, Mapping) and block.get("type") in IMAGE_PARTS


def _declared_size(block: Mapping[str, Any]) -> tuple[int, int] | None:
    """The ``(width, height)`` an image block declares, on it or in a nested field."""
    for fields in (block, *(block.get(key) for key in ("image_url", "source", "extras"))):
        if not isinstance(fields, Mapping):
            continue
        width, height = _pixels(fields.get("width")), _pixels(fields.get("height"))
        if width is not None and height is not None:
            return width, height
    return None


def _pixels(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def generated_image_parts(block: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """The parts an ``image_generation_call`` with its image counts as (None: not one).

    Its base64 ``result`` counts as an image, as the standard form of the same item (an
    ``image`` block) does: by its size read from the file's header, at most `IMAGE_TOKENS_MAX`
    (`ctxbudget.image_tokens`); the rest of the item as its compact JSON text, with an empty
    ``result``. langchain-openai sends the item's id alone (no image) unless ``store=False``.

    >>> [p["type"] for p in generated_image_parts(
    ...     {"type": "image_generation_call", "id": "ig_1", "result": "iVBORw0K"})]
    ['text', 'image']
    """
    result = block.get("result")
    if block.get("type") != "image_generation_call" or not isinstance(result, str) or not result:
        return None
    rest = _compact_json({**block, "result": ""})
    if rest is None:
        return None
    return [{"type": "text", "text": rest}, {"type": "image", "base64": result}]


def server_block_json(block: Mapping[str, Any]) -> str | None:
    """The text a `VERBATIM_BLOCKS` block counts as: its compact JSON (None: not one, or not JSON).

    The whole block as given, keys in order, non-ASCII kept (``separators=(",", ":")``): the
    provider is sent the block itself (or less of it), and bills its tool calls and results as
    input tokens (an ``image_generation_call`` with its image counts as `generated_image_parts`).
    A ``non_standard`` block must wrap a ``value`` object.
    """
    kind = block.get("type")
    if kind not in VERBATIM_BLOCKS:
        return None
    if kind == "non_standard" and not isinstance(block.get("value"), Mapping):
        return None
    return _compact_json(block)


def citation_parts(content: Sequence[Any]) -> list[dict[str, str]]:
    """Text parts for the citations of a message's text blocks: each list's compact JSON.

    LangChain's OpenAI form of a message keeps only a text block's text, but langchain-anthropic
    sends a text block's ``citations`` back with it, and langchain-openai (Responses API) its
    ``annotations``: a non-empty list counts as its compact JSON text (more, never less).
    """
    parts: list[dict[str, str]] = []
    for block in content:
        if not isinstance(block, Mapping) or block.get("type") != "text":
            continue
        for name in ("citations", "annotations"):
            cited = block.get(name)
            if cited:
                text = _compact_json(cited)
                parts.append({"type": "text", "text": str(cited) if text is None else text})
    return parts


def _compact_json(value: object) -> str | None:
    """``value`` as compact JSON, keys in order, non-ASCII kept (None: JSON cannot hold it)."""
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError):  # bytes, a cycle, nesting too deep
        return None


def _call_of(block: Mapping[str, Any]) -> str | None:
    """The id of the tool call a call block stands for (None: not a call block).

    A standard ``tool_call`` block's ``id``; an OpenAI Responses ``function_call`` or
    ``custom_tool_call`` item's ``call_id`` (``output_version="responses/v1"``; langchain-openai
    makes a custom tool's call a tool call with its input as ``{"__arg1": input}``).
    """
    kind = block.get("type")
    if kind == "tool_call":
        return str(block.get("id"))
    if kind in ("function_call", "custom_tool_call"):
        return str(block.get("call_id"))
    return None


def stored_text(content: Sequence[Any], text: str) -> str:
    """What is stored of a message with content blocks: its ``text``, then any refusal's text.

    A refusal is the model's answer to its turn: a message that holds only one is stored as
    it (not left out as empty), so the history read back still shows what the model said. A
    message of media only (an image, a file: no text) is stored as a mark per block
    (``[image]``, ``[audio]``, ``[video]``, ``[document]``, as the LlamaIndex adapter marks
    them), so the turn is not lost and the history read back keeps its exchanges.
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
        if text.strip():
            return text
        marks = [_MEDIA.get(str(p.get("type"))) for p in content if isinstance(p, Mapping)]
        return " ".join(m for m in marks if m) or text
    return "\n".join([text, *refusals] if text.strip() else refusals)


# Media blocks (OpenAI's and LangChain's standard types) and the mark a text-only store keeps.
_MEDIA = {
    "image_url": "[image]",
    "image": "[image]",
    "input_audio": "[audio]",
    "audio": "[audio]",
    "video": "[video]",
    "file": "[document]",
    "document": "[document]",
}


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
