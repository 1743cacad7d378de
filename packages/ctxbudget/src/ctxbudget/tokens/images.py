"""Image content parts: which parts are images, their size and their token cost.

The pixel size is read from the file header; the cost is OpenAI's tile rule.
"""

from __future__ import annotations

import base64
import math
import re
from collections.abc import Mapping
from typing import Any

from ctxbudget.errors import InvalidItemError

__all__ = [
    "IMAGE_PARTS",
    "IMAGE_TOKENS_MAX",
    "TEXT_PARTS",
    "image_part",
    "image_size",
    "image_size_unknown",
    "image_tokens",
]


IMAGE_TOKENS_MAX = 85 + 170 * 8
"""The most one image can cost by `image_tokens` (1,445): fitted in 2048 x 2048 with its short side
at most 768 px, it covers at most 4 x 2 tiles. Images of unknown size are counted as this."""


def image_tokens(width: int | None, height: int | None, *, detail: str | None = "auto") -> int:
    """Tokens an image costs on gpt-4o / gpt-4.1 class models, by OpenAI's published rule.

    ``detail="low"`` costs 85. Otherwise the image is scaled down to fit in 2048x2048, then
    down so its shortest side is at most 768 px, and costs 85 + 170 per 512 px tile (``auto``
    is counted as ``high``: the most it can cost). Without a known size the image is counted as
    `IMAGE_TOKENS_MAX`, the most any image can cost: an over-count for small images, never an
    under-count, so give the size when you have it. Some models bill images differently
    (gpt-4o-mini: far more tokens per image); keep headroom for image-heavy prompts to those.

    >>> image_tokens(1024, 1024, detail="high"), image_tokens(None, None)
    (765, 1445)
    """
    if detail == "low":
        return 85
    if width is None or height is None:
        return IMAGE_TOKENS_MAX
    if width <= 0 or height <= 0:
        msg = f"image size must be positive, got {width}x{height}"
        raise InvalidItemError(msg)
    try:
        w, h = float(width), float(height)
    except OverflowError:  # an int beyond a float (10**400 px): the same shape, smaller
        over = max(width, height).bit_length() - 1000
        w, h = float(max(width >> over, 1)), float(max(height >> over, 1))
    fit = min(1.0, 2048 / max(w, h))
    w, h = w * fit, h * fit
    shrink = min(1.0, 768 / min(w, h))  # only ever scaled down (as OpenAI describes it)
    w, h = w * shrink, h * shrink
    # At least one tile each way: a side scaled to a sliver of a pixel is still covered.
    tiles = max(1, math.ceil(w / 512 - 1e-9)) * max(1, math.ceil(h / 512 - 1e-9))
    return 85 + 170 * tiles


TEXT_PARTS = frozenset({"text", "input_text", "output_text"})


IMAGE_PARTS = frozenset({"image_url", "image", "input_image"})


_DATA_URL = re.compile(r"data:[^,;]*(?:;[^,;]*)*;base64,", re.IGNORECASE)


_HEADER_CHARS = 65_536  # base64 characters decoded to look for the size (48 KiB of the file)


def _image_fields(part: Mapping[str, Any]) -> dict[str, Any]:
    fields: dict[str, Any] = dict(part)
    for nested in ("image_url", "source"):  # OpenAI chat form; Anthropic form
        spec = part.get(nested)
        if isinstance(spec, Mapping):
            fields.update(spec)
    return fields


def _image_data(fields: Mapping[str, Any]) -> str | None:
    """The base64 payload of an inline image (data URL, ``base64`` or ``data`` field)."""
    for key in ("url", "image_url", "base64", "data"):
        value = fields.get(key)
        if not isinstance(value, str):
            continue
        match = _DATA_URL.match(value)
        if match is not None:
            return value[match.end() :]
        if key in ("base64", "data"):
            return value
    return None


def image_size(data: bytes) -> tuple[int, int] | None:
    """Width and height read from the header of a PNG, GIF, JPEG or WebP file (None: unknown).

    >>> image_size(bytes.fromhex("89504e470d0a1a0a0000000d494844520000028000000168"))
    (640, 360)
    """
    if data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) >= 24:
        return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    if data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
        return int.from_bytes(data[6:8], "little"), int.from_bytes(data[8:10], "little")
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP" and len(data) >= 30:
        chunk = data[12:16]
        if chunk == b"VP8X":
            width = int.from_bytes(data[24:27], "little") + 1
            return width, int.from_bytes(data[27:30], "little") + 1
        if chunk == b"VP8L":
            bits = int.from_bytes(data[21:25], "little")
            return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
        if chunk == b"VP8 ":
            width = int.from_bytes(data[26:28], "little") & 0x3FFF
            return width, int.from_bytes(data[28:30], "little") & 0x3FFF
        return None
    if data[:2] == b"\xff\xd8":
        return _jpeg_size(data)
    return None


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    at = 2
    while at + 9 <= len(data):
        if data[at] != 0xFF:
            return None
        marker = data[at + 1]
        if marker == 0xFF:  # fill byte
            at += 1
            continue
        if marker in (0x01, *range(0xD0, 0xD8)):  # markers without a length
            at += 2
            continue
        if marker in (0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF):
            height = int.from_bytes(data[at + 5 : at + 7], "big")
            return int.from_bytes(data[at + 7 : at + 9], "big"), height
        at += 2 + int.from_bytes(data[at + 2 : at + 4], "big")
    return None


def _image_of(part: Mapping[str, Any]) -> tuple[int | None, int | None, str]:
    """An image part's width, height (None: unknown) and detail."""
    fields = _image_fields(part)
    width, height, detail = fields.get("width"), fields.get("height"), fields.get("detail")
    if isinstance(width, bool) or not isinstance(width, int) or width <= 0:
        width = None
    if isinstance(height, bool) or not isinstance(height, int) or height <= 0:
        height = None
    if width is None or height is None:
        payload = _image_data(fields)
        if payload is not None:
            head = payload[:_HEADER_CHARS].strip()
            try:
                size = image_size(base64.b64decode(head[: len(head) // 4 * 4]))
            except ValueError:  # not base64 (binascii.Error): the size stays unknown
                size = None
            if size is not None and size[0] > 0 and size[1] > 0:
                width, height = size
    return width, height, detail if isinstance(detail, str) else "auto"


def image_part(part: Mapping[str, Any]) -> int:
    """Tokens of one image content part (OpenAI's rule; size from the part)."""
    width, height, detail = _image_of(part)
    return image_tokens(width, height, detail=detail)


def image_size_unknown(part: Mapping[str, Any]) -> bool:
    """Whether a content part is an image counted as `IMAGE_TOKENS_MAX` (its size unknown)."""
    if part.get("type") not in IMAGE_PARTS:
        return False
    width, height, detail = _image_of(part)
    return detail != "low" and (width is None or height is None)
