"""The model registry: lookups as providers spell names, errors, and users' own models."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxbudget.core.budget import Budget
from ctxbudget.errors import InvalidBudgetError, InvalidItemError, UnknownModelError
from ctxbudget.tokens import models
from ctxbudget.tokens.counter import TokenCounter
from ctxbudget.tokens.models import ModelInfo, known_models, lookup_model, register_model


@pytest.fixture
def registry() -> Iterator[None]:
    """Restore the registry after a test that registers models."""
    saved = dict(models._REGISTRY)
    yield
    models._REGISTRY.clear()
    models._REGISTRY.update(saved)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("gpt-4o", "gpt-4o"),
        ("GPT-4o", "gpt-4o"),
        ("  gpt-4o ", "gpt-4o"),
        ("gpt-4o-2024-08-06", "gpt-4o"),
        ("gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
        ("gpt-4-0613", "gpt-4"),
        ("gpt-4-32k-0613", "gpt-4-32k"),
        ("gpt-4-turbo-2024-04-09", "gpt-4-turbo"),
        ("gpt-4-1106-preview", "gpt-4-1106"),
        ("gpt-4.1-mini-2025-04-14", "gpt-4.1-mini"),
        ("gpt-4.1", "gpt-4.1"),
        ("gpt-5-mini-2025-08-07", "gpt-5-mini"),
        ("gpt-5-chat-latest", "gpt-5-chat"),
        ("o1-2024-12-17", "o1"),
        ("o3-mini-2025-01-31", "o3-mini"),
        ("o4-mini", "o4-mini"),
        ("gpt-3.5-turbo-0125", "gpt-3.5-turbo"),
        ("claude-3-5-sonnet-20241022", "claude-3-5-sonnet"),
        ("claude-3-5-sonnet-latest", "claude-3-5-sonnet"),
        ("claude-3-5-sonnet@20240620", "claude-3-5-sonnet"),
        ("claude-3.5-sonnet", "claude-3-5-sonnet"),
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
        ("claude-opus-4-1-20250805", "claude-opus-4-1"),
        ("claude-opus-4-20250514", "claude-opus-4"),
        ("claude-haiku-4-5", "claude-haiku-4-5"),
        ("gemini-2.5-flash-preview-05-20", "gemini-2.5-flash"),
        ("gemini-2.5-flash-lite", "gemini-2.5-flash-lite"),
        ("gemini-1.5-pro-002", "gemini-1.5-pro"),
        ("llama3.1:8b", "llama-3.1"),
        ("llama-3-70b", "llama-3"),
        ("mistral-large-latest", "mistral-large"),
        ("open-mistral-nemo-2407", "mistral-nemo"),
        ("codestral-2501", "codestral-2501"),
        ("codestral-latest", "codestral"),
        ("qwen2.5-coder-32b-instruct", "qwen2.5-coder"),
        ("qwen3-8b", "qwen3"),
    ],
)
def test_exact_and_longest_prefix(name: str, expected: str) -> None:
    assert lookup_model(name).name == expected


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("openai/gpt-4o", "gpt-4o"),
        ("openai/gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
        ("models/gemini-2.5-pro", "gemini-2.5-pro"),
        ("anthropic/claude-3.5-sonnet", "claude-3-5-sonnet"),
        ("openrouter/anthropic/claude-sonnet-4.5", "claude-sonnet-4-5"),
        ("meta-llama/Llama-3.3-70B-Instruct", "llama-3.3"),
        ("meta-llama/Meta-Llama-3-8B-Instruct", "llama-3"),
        ("meta-llama/Meta-Llama-3.1-8B-Instruct", "llama-3.1"),
        ("Qwen/Qwen2.5-7B-Instruct", "qwen2.5"),
        ("mistralai/Mistral-7B-Instruct-v0.3", "mistral-7b"),
        ("us.anthropic.claude-sonnet-4-5-20250929-v1:0", "claude-sonnet-4-5"),
        ("bedrock/anthropic.claude-3-5-sonnet-20240620-v1:0", "claude-3-5-sonnet"),
        ("google/gemma-3-27b-it", "gemma-3"),
        ("google/gemma-3-1b-it", "gemma-3-1b"),
    ],
)
def test_provider_prefixes_are_stripped(name: str, expected: str) -> None:
    assert lookup_model(name).name == expected


def test_published_windows_and_encodings() -> None:
    windows = {
        "gpt-4": 8_192,
        "gpt-4-32k": 32_768,
        "gpt-4-turbo": 128_000,
        "gpt-3.5-turbo": 16_385,
        "gpt-4o": 128_000,
        "gpt-4.1": 1_047_576,
        "gpt-5": 400_000,
        "o3": 200_000,
        "claude-3-5-haiku": 200_000,
        "claude-opus-4-1": 200_000,
        "gemini-1.5-pro": 2_097_152,
        "gemini-1.5-flash": 1_048_576,
        "gemini-2.0-flash": 1_048_576,
        "gemini-2.5-pro": 1_048_576,
        "llama-3": 8_192,
        "llama-3.1": 131_072,
        "llama-3.3": 131_072,
    }
    for name, window in windows.items():
        assert lookup_model(name).context_window == window, name
    for name in ("gpt-5", "gpt-5-nano", "gpt-4.1-nano", "gpt-4o-mini", "o1", "o3-mini", "o4-mini"):
        assert lookup_model(name).encoding == "o200k_base", name
    for name in ("gpt-4", "gpt-4-32k", "gpt-4-turbo", "gpt-3.5-turbo"):
        assert lookup_model(name).encoding == "cl100k_base", name
    for name in ("claude-sonnet-4-5", "gemini-2.5-pro", "llama-3.1", "mistral-large", "qwen3"):
        assert lookup_model(name).encoding is None, name


def test_every_entry_is_consistent() -> None:
    for name in known_models():
        info = lookup_model(name)
        assert info.name == info.name.lower()
        assert info.context_window > 0
        if info.max_output_tokens is not None:
            assert 0 < info.max_output_tokens <= info.context_window, name
        assert (info.encoding is not None) == (info.provider == "openai"), name


def test_prefixes_match_only_at_a_boundary() -> None:
    with pytest.raises(UnknownModelError):
        lookup_model("gpt-4oo")
    with pytest.raises(UnknownModelError):
        lookup_model("o1x")


def test_unknown_model_lists_close_matches_and_what_to_do() -> None:
    with pytest.raises(UnknownModelError) as info:
        lookup_model("gpt-4x-turbo")
    message = str(info.value)
    assert message.startswith("unknown model 'gpt-4x-turbo'")
    assert "'gpt-4-turbo'" in message
    assert "close matches:" in message
    assert message.count("'gpt-") <= 4  # the name and at most 3 matches
    assert "window=" in message
    assert "register_model" in message
    assert isinstance(info.value, KeyError)


def test_unknown_model_without_close_match() -> None:
    with pytest.raises(UnknownModelError, match="no close match among"):
        lookup_model("zzzzqqqq")
    with pytest.raises(UnknownModelError, match="non-empty string"):
        lookup_model("")


@pytest.mark.usefixtures("registry")
def test_register_model() -> None:
    register_model(ModelInfo("Acme-Chat", "acme", context_window=65_536, max_output_tokens=8_192))
    assert lookup_model("acme-chat").context_window == 65_536
    assert lookup_model("acme/ACME-chat-2025-06-01").name == "Acme-Chat"
    assert "acme-chat" in known_models()
    counter = TokenCounter.for_model("acme-chat")
    assert counter.approximate


@pytest.mark.usefixtures("registry")
def test_register_model_can_replace_and_count_exactly() -> None:
    register_model(ModelInfo("gpt-4o", "openai", context_window=64_000, encoding="o200k_base"))
    assert lookup_model("gpt-4o-2024-08-06").context_window == 64_000
    register_model(ModelInfo("my-finetune", "openai", 16_000, encoding="cl100k_base"))
    assert TokenCounter.for_model("my-finetune-v2").name == "cl100k_base"


def test_register_model_rejects_other_things() -> None:
    with pytest.raises(InvalidItemError, match="expects a ModelInfo"):
        register_model({"name": "x"})  # type: ignore[arg-type]


def test_model_info_validates() -> None:
    with pytest.raises(InvalidBudgetError, match="context_window must be a positive int"):
        ModelInfo("m", "p", context_window=0)
    with pytest.raises(InvalidBudgetError, match="max_output_tokens"):
        ModelInfo("m", "p", context_window=10, max_output_tokens=-1)
    with pytest.raises(InvalidItemError, match="cannot be loaded offline"):
        ModelInfo("m", "p", context_window=10, encoding="p50k_base")
    with pytest.raises(InvalidItemError, match="name must be a non-empty string"):
        ModelInfo(" ", "p", context_window=10)


def test_model_info_is_a_frozen_slotted_value() -> None:
    info = lookup_model("gpt-4o")
    with pytest.raises(dataclasses.FrozenInstanceError):
        info.context_window = 1  # type: ignore[misc]
    assert not hasattr(info, "__dict__")
    assert info == ModelInfo("gpt-4o", "openai", 128_000, 16_384, "o200k_base")


def test_known_models_is_sorted_and_has_aliases() -> None:
    names = known_models()
    assert names == sorted(names)
    assert {"gpt-4o", "claude-3.5-sonnet", "llama3.1", "gemini-2.5-pro"} <= set(names)


# -- model names as the frameworks write them ---------------------------------------------------

_PROVIDERS = [
    "openai",
    "azure_openai",
    "anthropic",
    "google_genai",
    "google_vertexai",
    "bedrock",
    "bedrock_converse",
    "mistralai",
    "groq",
    "together",
    "fireworks",
    "deepseek",
    "xai",
]


@given(name=st.sampled_from(sorted(known_models())), provider=st.sampled_from(_PROVIDERS))
def test_a_provider_prefix_names_the_same_model(name: str, provider: str) -> None:
    assert lookup_model(f"{provider}:{name}") == lookup_model(name)
    assert Budget.for_model(f"{provider}:{name}") == Budget.for_model(name)


@given(tag=st.from_regex(r"[a-z]{2,6}[0-9](\.[0-9])?:[0-9]{1,2}b", fullmatch=True))
def test_an_unknown_local_model_is_usable_with_its_window(tag: str) -> None:
    budget = Budget.for_model(tag, window=4096)
    assert (budget.window, budget.reserve) == (4096, 1024)
    counter = TokenCounter.for_model(tag, unknown="approximate")
    assert counter.approximate and counter.model == tag


def test_an_ollama_model_needs_the_window_it_is_served_with() -> None:
    with pytest.raises(InvalidBudgetError, match="num_ctx"):
        Budget.for_model("ollama:llama3.1:8b")
    assert Budget.for_model("ollama:llama3.1:8b", window=8192).window == 8192
    assert Budget.for_model("llama3.1:8b", window=8192).window == 8192  # the window wins
    with pytest.raises(UnknownModelError, match=r"Budget.for_model\(name, window=") as error:
        Budget.for_model("phi3:mini")
    assert "pass window=" not in str(error.value)  # only options that exist are suggested
