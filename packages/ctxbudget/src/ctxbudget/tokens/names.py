"""One parser for every way a model name is spelt: who serves it, who makes it, its own name.

Frameworks and providers prefix a model's name with where it runs: LangChain's
``init_chat_model`` and ``create_agent`` write ``provider:model`` (``ollama:llama3.1:8b``,
``openai:gpt-4o``), LiteLLM writes ``provider/model`` (``ollama/llama3.1:8b``,
``ollama_chat/...``, ``hosted_vllm/...``, ``lm_studio/...``). A name routed to a local server
(Ollama, vLLM, LM Studio) gets the window *that server* serves it with, never the model card's:
`ctxbudget.Budget.for_model`, `ctxbudget.detect_window` and both adapters read the prefix here,
whichever client the name came through (``ChatOllama``, ``ChatLiteLLM``, ``ChatOpenAI``
pointed at vLLM...).

>>> parse_model_name("ollama/llama3.1:8b")
ModelName(given='ollama/llama3.1:8b', name='llama3.1:8b', server='ollama')
>>> parse_model_name("openai:gpt-4o").server is None
True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ctxbudget.errors import ConfigurationError

__all__ = [
    "SERVED_PREFIXES",
    "ModelName",
    "Server",
    "parse_model_name",
    "served_window_message",
]

Server = Literal["ollama", "vllm", "lmstudio"]
"""The local model servers ctxbudget can ask for a window (`ctxbudget.detect_window`)."""

SERVED_PREFIXES: tuple[tuple[str, Server | None], ...] = (
    ("ollama:", "ollama"),
    ("ollama/", "ollama"),
    ("ollama_chat/", "ollama"),
    ("vllm:", "vllm"),
    ("vllm/", "vllm"),
    ("hosted_vllm/", "vllm"),
    ("lmstudio:", "lmstudio"),
    ("lmstudio/", "lmstudio"),
    ("lm_studio/", "lmstudio"),
    ("openai:", None),
)
"""Routing prefixes (case-insensitive) and the local server each names (None: a hosted API)."""

_MAX_NAME = 512


@dataclass(frozen=True, slots=True)
class ModelName:
    """A model name, parsed.

    Attributes:
        given: the name as given (surrounding blanks removed).
        name: the name the server or provider knows it by (routing prefix dropped).
        server: the local server its prefix routes it to, or None.
    """

    given: str
    name: str
    server: Server | None

    @property
    def served(self) -> bool:
        """Whether a local server serves it (its window is the server's, not the card's)."""
        return self.server is not None


def parse_model_name(model: object, *, what: str = "model") -> ModelName:
    """Parse a model name as any framework or provider spells it.

    Args:
        model: the name (``"ollama:llama3.1:8b"``, ``"hosted_vllm/Qwen/Qwen2.5-7B"``...).
        what: where it came from, for the error (``"--model"``, ``"CtxBudgetMiddleware(model=)"``).

    Raises:
        ConfigurationError: ``model`` is not a non-empty string of at most 512 characters.

    >>> parse_model_name("LM_Studio/qwen2.5-7b-instruct").server
    'lmstudio'
    """
    if not isinstance(model, str) or not model.strip():
        msg = f"{what} must be a model name (non-empty text), got {model!r:.80}"
        raise ConfigurationError(msg)
    given = model.strip()
    if len(given) > _MAX_NAME:
        msg = f"{what} is {len(given):,} characters long; a model name has at most {_MAX_NAME}"
        raise ConfigurationError(msg)
    lowered = given.lower()
    for prefix, server in SERVED_PREFIXES:
        if lowered.startswith(prefix) and len(given) > len(prefix):
            return ModelName(given, given[len(prefix) :], server)
    return ModelName(given, given, None)


_SERVED_BY: dict[Server, tuple[str, str, str]] = {
    "ollama": (
        "Ollama",
        "the context its num_ctx option sets (a longer prompt is cut silently)",
        "http://127.0.0.1:11434",
    ),
    "vllm": (
        "vLLM",
        "the context its --max-model-len sets (a longer prompt is refused)",
        "http://127.0.0.1:8000/v1",
    ),
    "lmstudio": (
        "LM Studio",
        "the context length it was loaded with (a longer prompt is cut or refused)",
        "http://127.0.0.1:1234",
    ),
}


def served_window_message(model: str, server: Server, *, how: str | None = None) -> str:
    """Why a served model has no window without one given or asked, and what to do.

    ``how`` says how to give it where the model came from (default: the Python call).
    """
    who, what, url = _SERVED_BY[server]
    advice = how or (
        f"pass window=<tokens>, e.g. Budget.for_model({model!r}, window=8192), or the "
        f"adapters' window or budget option; or ask the server with base_url='{url}'"
    )
    return (
        f"{model!r} runs on {who}, which serves it with {what}, not the model's published "
        f"window; {advice}"
    )
