"""The model registry: context windows, output limits and local tokenizers of common models.

`lookup_model` resolves a name the way providers and frameworks spell it: exact name
(case-insensitive), then the longest registered prefix, after dropping routing prefixes such as
``openai/``, ``models/``, Bedrock's ``us.anthropic.`` or the ``provider:`` of LangChain's
``init_chat_model`` and ``create_agent`` (``openai:gpt-4o``, ``ollama:llama3.1:8b``).

>>> lookup_model("gpt-4o-mini-2024-07-18").name
'gpt-4o-mini'
>>> lookup_model("models/gemini-2.5-pro").context_window
1048576

Windows are the providers' published figures (late 2025); each entry's ``source`` names where.
Dated snapshots that served less than their family's newest are entries of their own
(``mistral-large-2402``: 32,768, ``gpt-3.5-turbo-instruct``: 4,096), so the longest-prefix match
never gives an old snapshot a newer window. Where a family's windows differ by host, the registry
keeps the smaller one and says so in a comment; pass ``window=`` or `register_model` your own
entry when you know better.
"""

from __future__ import annotations

import difflib
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from ctxbudget.core.numbers import shown
from ctxbudget.errors import InvalidBudgetError, InvalidItemError, UnknownModelError

__all__ = ["ModelInfo", "known_models", "lookup_model", "register_model", "registered"]

#: tiktoken encodings that ship with ctxbudget's dependencies and load offline.
LOCAL_ENCODINGS = frozenset({"cl100k_base", "o200k_base", "o200k_harmony"})


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """What ctxbudget needs to know about a model.

    Args:
        name: the model name (``"gpt-4o"``); lookups match it case-insensitively.
        provider: who makes it: ``"openai"``, ``"anthropic"``, ``"google"``, ``"meta"``,
            ``"mistral"``, ``"qwen"``, ``"deepseek"``...
        context_window: input plus output tokens the model accepts in one request.
        max_output_tokens: the most tokens one reply may have, if the provider publishes it.
        encoding: the tiktoken encoding that counts its tokens exactly here, or None when no
            local tokenizer is known (counts are then approximate, see `TokenCounter`).
        source: where the window and output limit come from (every built-in entry names the
            provider's page it was read from); not compared.

    >>> ModelInfo("my-llm", "acme", context_window=32_768, max_output_tokens=4_096).encoding is None
    True
    """

    name: str
    provider: str
    context_window: int
    max_output_tokens: int | None = None
    encoding: str | None = None
    source: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            msg = f"ModelInfo.name must be a non-empty string, got {self.name!r}"
            raise InvalidItemError(msg)
        if not isinstance(self.provider, str) or not self.provider:
            msg = f"ModelInfo {self.name!r}: provider must be a non-empty string"
            raise InvalidItemError(msg)
        window = self.context_window
        if isinstance(window, bool) or not isinstance(window, int) or window <= 0:
            msg = (
                f"ModelInfo {self.name!r}: context_window must be a positive int "
                f"(tokens), got {window!r}"
            )
            raise InvalidBudgetError(msg)
        out = self.max_output_tokens
        if out is not None and (isinstance(out, bool) or not isinstance(out, int) or out <= 0):
            msg = (
                f"ModelInfo {self.name!r}: max_output_tokens must be a positive int or None, "
                f"got {out!r}"
            )
            raise InvalidBudgetError(msg)
        if self.encoding is not None and self.encoding not in LOCAL_ENCODINGS:
            msg = (
                f"ModelInfo {self.name!r}: encoding {self.encoding!r} cannot be loaded offline; "
                f"use one of {sorted(LOCAL_ENCODINGS)} or None (approximate counting)"
            )
            raise InvalidItemError(msg)


# Where the built-in windows come from: each provider's model reference (read late 2025), unless
# an entry names its own (a dated snapshot, a model card).
_SOURCES = {
    "openai": "OpenAI API docs, models page of the model (context window, max output tokens)",
    "anthropic": "Anthropic docs, models overview (context window, max output)",
    "google": "Google AI for Developers, Gemini/Gemma model pages (input and output token limits)",
    "meta": "Meta Llama model cards (context length)",
    "mistral": "Mistral AI docs, models overview and the model's page (context length)",
    "qwen": "Qwen model cards and Alibaba Cloud Model Studio model list (context length)",
    "deepseek": "DeepSeek API docs, models and pricing (context length, max output)",
}


def _m(
    name: str,
    provider: str,
    window: int,
    out: int | None,
    encoding: str | None = None,
    source: str | None = None,
) -> ModelInfo:
    return ModelInfo(name, provider, window, out, encoding, source or _SOURCES[provider])


_O200K = "o200k_base"
_CL100K = "cl100k_base"
_OPENAI_LEGACY = "OpenAI API docs, legacy and deprecated models (GPT-3.5 Turbo snapshots)"
_MISTRAL_LEGACY = "Mistral AI docs, models overview: legacy and retired models"

_BUILTIN: tuple[ModelInfo, ...] = (
    # OpenAI: exact counting with tiktoken.
    _m("gpt-5", "openai", 400_000, 128_000, _O200K),
    _m("gpt-5-mini", "openai", 400_000, 128_000, _O200K),
    _m("gpt-5-nano", "openai", 400_000, 128_000, _O200K),
    _m("gpt-5-codex", "openai", 400_000, 128_000, _O200K),
    _m("gpt-5-chat", "openai", 128_000, 16_384, _O200K),  # gpt-5-chat-latest: a smaller window
    _m("gpt-5.1", "openai", 400_000, 128_000, _O200K),
    _m("gpt-4.1", "openai", 1_047_576, 32_768, _O200K),
    _m("gpt-4.1-mini", "openai", 1_047_576, 32_768, _O200K),
    _m("gpt-4.1-nano", "openai", 1_047_576, 32_768, _O200K),
    _m("gpt-4.5-preview", "openai", 128_000, 16_384, _O200K),
    _m("gpt-4o", "openai", 128_000, 16_384, _O200K),  # gpt-4o-2024-05-13 replies <= 4,096
    _m("gpt-4o-mini", "openai", 128_000, 16_384, _O200K),
    _m("chatgpt-4o-latest", "openai", 128_000, 16_384, _O200K),
    _m("o1", "openai", 200_000, 100_000, _O200K),
    _m("o1-mini", "openai", 128_000, 65_536, _O200K),
    _m("o1-preview", "openai", 128_000, 32_768, _O200K),
    _m("o3", "openai", 200_000, 100_000, _O200K),
    _m("o3-mini", "openai", 200_000, 100_000, _O200K),
    _m("o4-mini", "openai", 200_000, 100_000, _O200K),
    # gpt-oss uses o200k_harmony, whose ranks and regex are o200k_base's: text counts are equal.
    _m("gpt-oss-120b", "openai", 131_072, 131_072, _O200K),
    _m("gpt-oss-20b", "openai", 131_072, 131_072, _O200K),
    _m("gpt-4", "openai", 8_192, 8_192, _CL100K),
    _m("gpt-4-32k", "openai", 32_768, 32_768, _CL100K),
    _m("gpt-4-turbo", "openai", 128_000, 4_096, _CL100K),
    _m("gpt-4-1106", "openai", 128_000, 4_096, _CL100K),  # gpt-4-1106-preview
    _m("gpt-4-0125", "openai", 128_000, 4_096, _CL100K),  # gpt-4-0125-preview
    _m("gpt-3.5-turbo", "openai", 16_385, 4_096, _CL100K),  # 0125, 1106
    # Dated snapshots and variants that served less than their family's newest: matched before
    # the family's prefix, so a prompt budgeted to them fits what they served.
    _m("gpt-3.5-turbo-instruct", "openai", 4_096, 4_096, _CL100K, _OPENAI_LEGACY),
    _m("gpt-3.5-turbo-0613", "openai", 4_096, 4_096, _CL100K, _OPENAI_LEGACY),
    _m("gpt-3.5-turbo-0301", "openai", 4_096, 4_096, _CL100K, _OPENAI_LEGACY),
    _m("gpt-3.5-turbo-16k", "openai", 16_385, 4_096, _CL100K, _OPENAI_LEGACY),
    _m("gpt-4o-2024-05-13", "openai", 128_000, 4_096, _O200K),
    _m("text-embedding-3-small", "openai", 8_191, None, _CL100K),
    _m("text-embedding-3-large", "openai", 8_191, None, _CL100K),
    _m("text-embedding-ada-002", "openai", 8_191, None, _CL100K),
    # Anthropic: 200k (1M for Sonnet 4/4.5 only behind a beta header: not assumed here).
    _m("claude-3-opus", "anthropic", 200_000, 4_096),
    _m("claude-3-sonnet", "anthropic", 200_000, 4_096),
    _m("claude-3-haiku", "anthropic", 200_000, 4_096),
    _m("claude-3-5-sonnet", "anthropic", 200_000, 8_192),
    _m("claude-3-5-haiku", "anthropic", 200_000, 8_192),
    _m("claude-3-7-sonnet", "anthropic", 200_000, 64_000),
    _m("claude-sonnet-4", "anthropic", 200_000, 64_000),
    _m("claude-opus-4", "anthropic", 200_000, 32_000),
    _m("claude-opus-4-1", "anthropic", 200_000, 32_000),
    _m("claude-sonnet-4-5", "anthropic", 200_000, 64_000),
    _m("claude-haiku-4-5", "anthropic", 200_000, 64_000),
    _m("claude-opus-4-5", "anthropic", 200_000, 64_000),
    # Google.
    _m("gemini-1.5-pro", "google", 2_097_152, 8_192),
    _m("gemini-1.5-flash", "google", 1_048_576, 8_192),
    _m("gemini-2.0-flash", "google", 1_048_576, 8_192),
    _m("gemini-2.0-flash-lite", "google", 1_048_576, 8_192),
    _m("gemini-2.5-pro", "google", 1_048_576, 65_536),
    _m("gemini-2.5-flash", "google", 1_048_576, 65_536),
    _m("gemini-2.5-flash-lite", "google", 1_048_576, 65_536),
    _m("gemini-3-pro", "google", 1_048_576, 65_536),  # gemini-3-pro-preview
    _m("gemma-3", "google", 131_072, 8_192),  # 4B, 12B, 27B
    _m("gemma-3-1b", "google", 32_768, 8_192),
    # Meta. Hosts often serve less than Meta's figure (Groq, Bedrock...): pass window= then.
    _m("llama-3", "meta", 8_192, None),
    _m("llama-3.1", "meta", 131_072, None),
    _m("llama-3.2", "meta", 131_072, None),
    _m("llama-3.3", "meta", 131_072, None),
    _m("llama-4-scout", "meta", 10_000_000, None),
    _m("llama-4-maverick", "meta", 1_000_000, None),
    # Mistral. Older releases of a family had smaller windows; the smaller one is kept.
    _m("mistral-large", "mistral", 131_072, None),  # 2407 and later
    _m("mistral-large-2402", "mistral", 32_768, None, None, _MISTRAL_LEGACY),  # Mistral Large 1
    _m("mistral-medium", "mistral", 131_072, None),  # Medium 3 (2505) and later
    _m("mistral-medium-2312", "mistral", 32_768, None, None, _MISTRAL_LEGACY),  # the first Medium
    _m("mistral-small", "mistral", 32_768, None),  # 3.1+ (2503, 2506) have 131,072: see below
    _m("mistral-small-2402", "mistral", 32_768, None, None, _MISTRAL_LEGACY),
    _m("mistral-small-2501", "mistral", 32_768, None),  # Small 3
    _m("mistral-small-2503", "mistral", 131_072, None),
    _m("mistral-small-2506", "mistral", 131_072, None),
    _m("mistral-nemo", "mistral", 131_072, None),
    _m("codestral", "mistral", 32_768, None),  # the 22B of 2024; 2501 and 2508 have 256k
    _m("codestral-2501", "mistral", 256_000, None),
    _m("codestral-2508", "mistral", 256_000, None),
    _m("ministral-8b", "mistral", 131_072, None),
    _m("ministral-3b", "mistral", 131_072, None),
    _m("mistral-7b", "mistral", 32_768, None),
    _m("mixtral-8x7b", "mistral", 32_768, None),
    _m("mixtral-8x22b", "mistral", 65_536, None),
    _m("pixtral-large", "mistral", 131_072, None),
    _m("magistral-medium", "mistral", 40_000, None),  # conservative: later releases allow more
    _m("magistral-small", "mistral", 40_000, None),
    _m("devstral-small", "mistral", 131_072, None),
    # Qwen: the native windows (YaRN extends them to 131,072 when the host enables it).
    _m("qwen2.5", "qwen", 32_768, 8_192),
    _m("qwen2.5-coder", "qwen", 32_768, 8_192),
    _m("qwen3", "qwen", 32_768, None),
    _m("qwen3-coder", "qwen", 262_144, 65_536),
    _m("qwen-max", "qwen", 32_768, 8_192),
    _m("qwen-plus", "qwen", 131_072, 8_192),
    # DeepSeek API (V3.x): 128K.
    _m("deepseek-chat", "deepseek", 128_000, 8_192),
    _m("deepseek-reasoner", "deepseek", 128_000, 65_536),
)

# Spellings users and frameworks use for the same models.
_ALIASES: dict[str, str] = {
    "claude-3.5-sonnet": "claude-3-5-sonnet",
    "claude-3.5-haiku": "claude-3-5-haiku",
    "claude-3.7-sonnet": "claude-3-7-sonnet",
    "claude-opus-4.1": "claude-opus-4-1",
    "claude-sonnet-4.5": "claude-sonnet-4-5",
    "claude-haiku-4.5": "claude-haiku-4-5",
    "claude-opus-4.5": "claude-opus-4-5",
    "claude-4-sonnet": "claude-sonnet-4",
    "claude-4-opus": "claude-opus-4",
    "llama3": "llama-3",
    "llama3.1": "llama-3.1",
    "llama3.2": "llama-3.2",
    "llama3.3": "llama-3.3",
    "meta-llama-3": "llama-3",
    "meta-llama-3.1": "llama-3.1",
    "open-mistral-nemo": "mistral-nemo",
    "open-mistral-7b": "mistral-7b",
    "open-mixtral-8x7b": "mixtral-8x7b",
    "open-mixtral-8x22b": "mixtral-8x22b",
    "qwen2.5-coder-32b": "qwen2.5-coder",
}

_LOCK = threading.Lock()
_REGISTRY: dict[str, ModelInfo] = {info.name: info for info in _BUILTIN}
_REGISTRY.update({alias: _REGISTRY[target] for alias, target in _ALIASES.items()})

# Characters that end a registered prefix inside a longer name ("gpt-4o" in "gpt-4o-2024-08-06").
_BOUNDARY = "-_.:@ "
# Bedrock / Vertex style routing prefixes: "us.anthropic.", "meta.", "mistral."...
_DOTTED_PROVIDER = re.compile(
    r"^(?:(?:us|eu|apac|global)\.)?(?:anthropic|meta|mistral|openai|google|qwen|deepseek)\."
)


def register_model(info: ModelInfo) -> None:
    """Register (or replace) a model so `lookup_model` and ``TokenCounter.for_model`` know it.

    The name is matched case-insensitively, and as a prefix of longer names like the built-ins.

    >>> register_model(ModelInfo("acme-chat", "acme", context_window=65_536))
    >>> lookup_model("acme-chat-2025-01").context_window
    65536
    """
    given: object = info
    if not isinstance(given, ModelInfo):
        msg = f"register_model expects a ModelInfo, got {type(given).__name__}"
        raise InvalidItemError(msg)
    key = info.name.strip().lower()
    with _LOCK:
        _REGISTRY[key] = info


@contextmanager
def registered(info: ModelInfo) -> Iterator[ModelInfo]:
    """``info`` registered for the duration of a ``with`` block; what was there before after.

    For a caller that knows a model for one task only (the command line's ``--model`` with
    its window), without changing the registry of the rest of the process.

    >>> with registered(ModelInfo("tmp-llm", "acme", context_window=2048)):
    ...     lookup_model("tmp-llm").context_window
    2048
    >>> "tmp-llm" in known_models()
    False
    """
    key = info.name.strip().lower() if isinstance(info, ModelInfo) else ""
    with _LOCK:
        before = _REGISTRY.get(key)
    register_model(info)
    try:
        yield info
    finally:
        with _LOCK:
            if before is None:
                _REGISTRY.pop(key, None)
            else:
                _REGISTRY[key] = before


def known_models() -> list[str]:
    """Every registered name and alias, sorted.

    >>> "gpt-4o" in known_models()
    True
    """
    return sorted(_REGISTRY)


def _resolve(key: str) -> ModelInfo | None:
    info = _REGISTRY.get(key)
    if info is not None:
        return info
    # The longest registered prefix that ends at a boundary character.
    for end in range(len(key) - 1, 0, -1):
        if key[end] in _BOUNDARY:
            info = _REGISTRY.get(key[:end])
            if info is not None:
                return info
    return None


# LangChain's "provider:model" (init_chat_model, create_agent): a provider is letters and _ or -,
# so Ollama tags (llama3.1:8b, phi3:mini) are never taken for one.
_COLON_PROVIDER = re.compile(r"^[a-z][a-z_-]*:(?=.)")


def _candidates(name: str) -> list[str]:
    key = name.strip().lower()
    out = [key]
    unprefixed = _COLON_PROVIDER.sub("", key)
    if unprefixed != key:
        out.append(unprefixed)
    base = unprefixed.rsplit("/", 1)[-1]
    if base != unprefixed:
        out.append(base)
    stripped = _DOTTED_PROVIDER.sub("", base)
    if stripped != base:
        out.append(stripped)
    return out


def lookup_model(name: str) -> ModelInfo:
    """The registered model ``name`` refers to.

    Tries the exact name (case-insensitive), then the longest registered prefix ending at ``-``,
    ``.``, ``:``, ``@`` or ``_``, each after removing provider prefixes (``openai:gpt-4o``,
    ``openai/gpt-4o``, ``models/gemini-2.5-pro``,
    ``us.anthropic.claude-sonnet-4-5-20250929-v1:0``).

    Args:
        name: a model name or id as a provider or framework spells it.

    Returns:
        The model's `ModelInfo` (aliases return the canonical entry).

    Raises:
        UnknownModelError: no registered model matches; the message lists close matches.

    >>> lookup_model("gpt-4o-mini-2024-07-18").name
    'gpt-4o-mini'
    >>> lookup_model("anthropic/claude-3.5-sonnet").name
    'claude-3-5-sonnet'
    >>> lookup_model("openai:gpt-4o").name
    'gpt-4o'
    """
    if not isinstance(name, str) or not name.strip():
        msg = f"model name must be a non-empty string, got {shown(name)}"
        raise UnknownModelError(msg)
    candidates = _candidates(name)
    for key in candidates:
        info = _resolve(key)
        if info is not None:
            return info
    close = difflib.get_close_matches(candidates[-1], list(_REGISTRY), n=3, cutoff=0.6)
    hint = (
        f"close matches: {', '.join(repr(c) for c in close)}"
        if close
        else f"no close match among {len(_REGISTRY)} known models"
    )
    msg = (
        f"unknown model {name!r} ({hint}); give its context window in tokens with the name "
        "(Budget.for_model(name, window=...), or the adapters' window or budget option; "
        "counts are then approximate) or register it with "
        "register_model(ModelInfo(name, provider, context_window=...))"
    )
    raise UnknownModelError(msg)
