"""The window a local model server actually serves a model with: Ollama, vLLM, LM Studio.

A model card gives the window a model was trained for; a local server usually serves less and
cuts (Ollama) or refuses (vLLM) a longer prompt. `detect_window` asks the server:

* **Ollama** (its docs/api.md): the context the model is loaded with (``GET /api/ps`` →
  ``models[].context_length``, Ollama 0.9.7 and later), else the ``num_ctx`` its Modelfile sets
  (``POST /api/show`` → the ``parameters`` text, a ``num_ctx 8192`` line), else the server's
  default for a model without one (``GET /api/version``): 2,048 tokens before Ollama 0.6.7,
  4,096 since; from 0.15.5 that is the smallest of its VRAM tiers (a server with 24 GiB of VRAM
  or more loads 32,768 or 262,144, which ``/api/ps`` shows once the model is loaded).
  ``OLLAMA_CONTEXT_LENGTH`` set on the server replaces that default and cannot be seen from
  here: load the model first, or pass ``window=``. Never more than the model's trained length
  (``model_info["<arch>.context_length"]`` of ``/api/show``), where Ollama caps ``num_ctx`` too.
  A model Ollama does not have is ``404 {"error": "model '<name>' not found"}``.
* **vLLM** (``GET /v1/models`` → ``data[].max_model_len``, its ``--max-model-len``): a LoRA
  adapter has its base model's (``parent``).
* **LM Studio**: the context length of the loaded instance (0.4 and later: ``GET
  /api/v1/models`` → ``models[].loaded_instances[].config.context_length``; 0.3.6 and later:
  ``GET /api/v0/models`` → ``data[].loaded_context_length``, which LM Studio sends but its v0
  reference does not list). A model that is not loaded has no window yet (the load sets it, not
  its ``max_context_length``): load it (``lms load <model> --context-length N``) or pass
  ``window=``.

Routing by the name's prefix (`ctxbudget.tokens.names.parse_model_name`): ``ollama:``,
``ollama/``, ``ollama_chat/`` ask Ollama; ``vllm:``, ``vllm/`` and ``hosted_vllm/`` vLLM;
``lmstudio:``, ``lmstudio/`` and ``lm_studio/`` LM Studio. Any other name (``openai:``
is dropped) is looked up on ``GET /v1/models``: its ``max_model_len`` when the server gives one
(vLLM), else the server is asked as Ollama (when ``/api/version`` answers), else as LM Studio.
``base_url`` is the server's root or the OpenAI-compatible base under it (``/v1`` is dropped).

Results are kept per (server, model) for the process: `detect_window` asks once
(``refresh=True`` asks again, `clear_window_cache` forgets all). Failures are not kept.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass
from urllib.parse import urlsplit

from ctxbudget.core.numbers import real
from ctxbudget.errors import ConfigurationError, WindowDetectionError
from ctxbudget.tokens.names import parse_model_name
from ctxbudget.tokens.server_api import (
    Found,
    Server,
    WindowSource,
    is_lmstudio,
    lmstudio_window,
    ollama_version,
    ollama_window,
    openai_models,
    vllm_window,
)
from ctxbudget.tokens.server_http import Ask, ask_json, not_served

__all__ = [
    "DEFAULT_TIMEOUT",
    "OLLAMA_DEFAULT_URL",
    "DetectedWindow",
    "Server",
    "WindowSource",
    "clear_window_cache",
    "detect_window",
    "ollama_url",
    "server_root",
]

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 2.0
"""Seconds each request to the server may take (a local server answers in milliseconds)."""

OLLAMA_DEFAULT_URL = "http://127.0.0.1:11434"
"""Where Ollama clients connect when neither a URL nor ``OLLAMA_HOST`` says otherwise."""

_API_SUFFIXES = ("/api/v0", "/api/v1", "/api", "/v1")
_START: dict[Server, str] = {
    "ollama": "`ollama serve`",
    "vllm": "`vllm serve <model>`",
    "lmstudio": "`lms server start`",
}


@dataclass(frozen=True, slots=True)
class DetectedWindow:
    """The window a server serves a model with, and where that figure came from.

    Attributes:
        model: the model's name as the server was asked (routing prefix dropped).
        base_url: the server's root URL.
        server: ``"ollama"``, ``"vllm"`` or ``"lmstudio"``.
        window: tokens one request may hold (prompt and reply), as served.
        source: where ``window`` came from (`WindowSource`).
        model_max: the longest context the model supports, when the server says (the trained
            length on Ollama, ``max_context_length`` on LM Studio, ``max_model_len`` on vLLM).
        detail: one sentence saying what was read, for logs and error messages.

    >>> DetectedWindow("llama3.1:8b", "http://127.0.0.1:11434", "ollama", 8192, "num_ctx",
    ...                131072, "its Modelfile sets num_ctx 8192").window
    8192
    """

    model: str
    base_url: str
    server: Server
    window: int
    source: WindowSource
    model_max: int | None
    detail: str


_LOCK = threading.Lock()
_CACHE: dict[tuple[str, str, Server | None], DetectedWindow] = {}


def clear_window_cache() -> None:
    """Forget every window `detect_window` found (the next calls ask the servers again)."""
    with _LOCK:
        _CACHE.clear()


def ollama_url(base_url: str | None = None) -> str:
    """The URL an Ollama client connects to: ``base_url``, else ``$OLLAMA_HOST``, else the default.

    As the ``ollama`` client library reads them: a host without a scheme is ``http://`` on
    port 11434 (``OLLAMA_HOST=0.0.0.0`` is ``http://0.0.0.0:11434``).

    >>> ollama_url("localhost")
    'http://localhost:11434'
    """
    given = base_url if base_url else os.environ.get("OLLAMA_HOST", "").strip()
    if not given:
        return OLLAMA_DEFAULT_URL
    if "://" in given:
        return given
    host = given.rstrip("/")
    return f"http://{host}" if urlsplit(f"http://{host}").port else f"http://{host}:11434"


def server_root(base_url: str) -> str:
    """The server's root URL: ``base_url`` without a trailing ``/``, ``/v1`` or ``/api``.

    Raises:
        ConfigurationError: ``base_url`` is not an http(s) URL with a host.

    >>> server_root("http://localhost:8000/v1/")
    'http://localhost:8000'
    """
    given: object = base_url
    if not isinstance(given, str) or not given.strip():
        msg = f"base_url must be the server's URL, e.g. 'http://127.0.0.1:11434', got {given!r}"
        raise ConfigurationError(msg)
    url = given.strip()
    if "://" not in url:
        url = f"http://{url}"
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        msg = (
            f"base_url {given!r} is not an http(s) URL with a host; pass the server's URL, "
            "e.g. 'http://127.0.0.1:11434' (Ollama) or 'http://127.0.0.1:8000/v1' (vLLM)"
        )
        raise ConfigurationError(msg)
    root = url.split("?", 1)[0].split("#", 1)[0].rstrip("/")
    for suffix in _API_SUFFIXES:
        if root.endswith(suffix):
            return root[: -len(suffix)].rstrip("/")
    return root


def _route(model: str) -> tuple[Server | None, str]:
    """``(server, name)``: the server a model name's prefix says (None: find out) and its name."""
    parsed = parse_model_name(model)
    return parsed.server, parsed.name


def detect_window(
    model: str,
    *,
    base_url: str,
    timeout: float = DEFAULT_TIMEOUT,
    api_key: str | None = None,
    refresh: bool = False,
) -> DetectedWindow:
    """Ask the server at ``base_url`` the window it serves ``model`` with.

    Args:
        model: the model as the server names it, with an optional routing prefix
            (``"ollama:llama3.1:8b"``, ``"vllm:Qwen/Qwen2.5-7B-Instruct"``; see the module).
        base_url: the server (``"http://127.0.0.1:11434"``, ``"http://localhost:8000/v1"``).
        timeout: seconds each request may take.
        api_key: sent as ``Authorization: Bearer`` (vLLM ``--api-key``, LM Studio tokens).
        refresh: ask again even if this process already asked (the model was reloaded).

    Returns:
        The `DetectedWindow`: ``window``, and which ``source`` it came from.

    Raises:
        WindowDetectionError: the server is unreachable, does not serve the model, does not say
            its window, or answered something else than its documented JSON. The message names
            the URL and what to do (start the server, pull or load the model, or pass
            ``window=``).
        ConfigurationError: ``base_url``, ``model`` or ``timeout`` cannot be used.

    >>> detect_window("ollama:llama3.1:8b", base_url="http://127.0.0.1:11434")  # doctest: +SKIP
    DetectedWindow(model='llama3.1:8b', ..., window=8192, source='num_ctx', ...)
    """
    given: object = model
    if not isinstance(given, str) or not given.strip():
        msg = f"model must be the name the server serves it under, got {given!r}"
        raise ConfigurationError(msg)
    seconds = real(timeout, "detect_window: timeout", above=0.0, hint="a number of seconds")
    root = server_root(base_url)
    server, name = _route(given.strip())
    key = (root, name, server)
    if not refresh:
        with _LOCK:
            found = _CACHE.get(key)
        if found is not None:
            return found
    start = _START[server] if server else None
    ask: Ask = ask_json(root, timeout=seconds, api_key=api_key, start=start)
    detected = _detect(root, server, name, ask)
    logger.info(
        "%s serves %s with %d tokens (%s: %s)",
        root,
        name,
        detected.window,
        detected.source,
        detected.detail,
    )
    with _LOCK:
        _CACHE[key] = detected
    return detected


def _detect(root: str, server: Server | None, name: str, ask: Ask) -> DetectedWindow:
    if server == "ollama":
        return _found(root, name, "ollama", ollama_window(root, name, ask))
    if server == "lmstudio":
        return _found(root, name, "lmstudio", lmstudio_window(root, name, ask))
    listed = openai_models(root, ask, required=server == "vllm")
    if listed is not None:
        found = vllm_window(root, listed, name)
        if found is not None:
            return _found(root, name, "vllm", found)
    if server != "vllm":
        if ollama_version(ask) is not None:
            return _found(root, name, "ollama", ollama_window(root, name, ask))
        if is_lmstudio(ask):
            return _found(root, name, "lmstudio", lmstudio_window(root, name, ask))
    who = "vLLM" if server == "vllm" else "the server"
    if listed is not None and any(entry.get("id") == name for entry in listed):
        msg = (
            f"{who} at {root} serves {name!r} but does not say its context length (GET "
            "/v1/models has no max_model_len, and it is neither Ollama nor LM Studio); pass "
            "the window it was started with: Budget.for_model(name, window=<tokens>)"
        )
        raise WindowDetectionError(msg, url=root)
    raise not_served(root, name, who, listed, "/v1/models")


def _found(root: str, name: str, server: Server, found: Found) -> DetectedWindow:
    return DetectedWindow(
        name, root, server, found.window, found.source, found.model_max, found.detail
    )
