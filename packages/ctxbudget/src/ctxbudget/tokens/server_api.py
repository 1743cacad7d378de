"""What Ollama, vLLM and LM Studio answer about a served model's window (their documented JSON).

For `ctxbudget.tokens.served` (which lists the endpoints and fields read): one reader per server
that takes only the fields its server documents and ignores any other or malformed one; the
requests themselves are `ctxbudget.tokens.server_http`'s.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ctxbudget.errors import WindowDetectionError
from ctxbudget.tokens.names import Server
from ctxbudget.tokens.server_http import PASS_WINDOW, Ask, error_text, json_object, not_served

__all__ = [
    "MAX_WINDOW",
    "Found",
    "Server",
    "WindowSource",
    "is_lmstudio",
    "lmstudio_window",
    "ollama_default_window",
    "ollama_version",
    "ollama_window",
    "openai_models",
    "vllm_window",
    "window_field",
    "at_most",
]


WindowSource = Literal["loaded", "num_ctx", "server_default", "max_model_len"]
"""Where a window came from: the loaded model (Ollama ``/api/ps``, LM Studio's loaded instance),
the Modelfile's ``num_ctx`` (Ollama), Ollama's default for models without one, or vLLM's
``max_model_len``."""


@dataclass(frozen=True, slots=True)
class Found:
    """A window read from a server: tokens, source, the model's maximum and what was read."""

    window: int
    source: WindowSource
    model_max: int | None
    detail: str


MAX_WINDOW = 16_777_216
"""The largest window a server's reply may give (2**24 tokens, above any model served today:
Llama 4 Scout's 10M). A model's trained length, when the server reports it, bounds it further."""

_DIGITS = re.compile(r"[0-9]+")


# -- Ollama -------------------------------------------------------------------------------------
def ollama_version(ask: Ask) -> str | None:
    """The ``version`` of Ollama's ``GET /api/version``; None when the server does not answer it."""
    reply = ask("/api/version", None)
    version = reply.body.get("version") if isinstance(reply.body, dict) else None
    return version if isinstance(version, str) else None


def ollama_default_window(version: str | None) -> int:
    """The context Ollama ``version`` gives a model no ``num_ctx`` sets (the smallest it may be).

    2,048 before 0.6.7 (and for a version it cannot read), 4,096 since; from 0.15.5 that is the
    tier of servers with less than 24 GiB of VRAM (more VRAM: 32,768 or 262,144).
    ``OLLAMA_CONTEXT_LENGTH`` on the server replaces it.

    >>> ollama_default_window("0.5.7"), ollama_default_window("0.12.3")
    (2048, 4096)
    """
    parts = re.match(r"v?(\d+)\.(\d+)\.(\d+)", version or "")
    if parts is None:
        return 2048
    return 2048 if tuple(int(p) for p in parts.groups()) < (0, 6, 7) else 4096


def ollama_window(root: str, name: str, ask: Ask) -> Found:
    """The window Ollama serves ``name`` with: loaded, else ``num_ctx``, else its default.

    Raises:
        WindowDetectionError: Ollama does not have the model, or answered something else.
    """
    shown = ask("/api/show", {"model": name})
    if shown.status == 404:
        msg = (
            f"Ollama at {root} does not have the model {name!r} ({error_text(shown)}); pull it "
            f"(`ollama pull {name}`) or use a name `ollama list` shows, {PASS_WINDOW}"
        )
        raise WindowDetectionError(msg, url=root)
    info = json_object(shown, root, "Ollama")
    model_max = _trained_length(root, info.get("model_info"))
    running = ask("/api/ps", None)
    if running.status == 200:
        loaded = _loaded_context(root, json_object(running, root, "Ollama"), name)
        if loaded is not None:
            detail = f"loaded with a context of {loaded:,} tokens (GET /api/ps)"
            return Found(at_most(root, loaded, model_max, detail), "loaded", model_max, detail)
    configured = _num_ctx(root, info.get("parameters"))
    if configured is not None:
        window = configured if model_max is None else min(configured, model_max)
        capped = "" if window == configured else f", capped at its trained {window:,}"
        return Found(
            window, "num_ctx", model_max, f"its Modelfile sets num_ctx {configured}{capped}"
        )
    known = ollama_version(ask)
    default = ollama_default_window(known)
    window = default if model_max is None else min(default, model_max)
    detail = (
        f"not loaded and no num_ctx in its Modelfile: the default context of Ollama "
        f"{known or '(version unknown)'}, {window:,} tokens (OLLAMA_CONTEXT_LENGTH on the "
        "server changes it, and from 0.15.5 a server with 24 GiB of VRAM or more uses more; "
        "GET /api/ps shows the real one once the model is loaded)"
    )
    return Found(window, "server_default", model_max, detail)


def _trained_length(root: str, model_info: object) -> int | None:
    if not isinstance(model_info, dict):
        return None
    where = "POST /api/show: model_info"
    arch = model_info.get("general.architecture")
    if isinstance(arch, str):
        key = f"{arch}.context_length"
        found = window_field(root, model_info.get(key), f"{where}[{key!r}]")
        if found is not None:
            return found
    lengths = [
        window_field(root, v, f"{where}[{k!r}]")
        for k, v in model_info.items()
        if str(k).endswith(".context_length")
    ]
    return min((n for n in lengths if n is not None), default=None)


def _num_ctx(root: str, parameters: object) -> int | None:
    # Modelfile parameters, one per line: "num_ctx                        8192".
    if not isinstance(parameters, str):
        return None
    for line in parameters.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0] == "num_ctx":
            # ASCII digits only: str.isdigit() takes '²', which int() refuses.
            value: object = int(parts[1]) if _DIGITS.fullmatch(parts[1]) else parts[1]
            return window_field(root, value, "POST /api/show: parameters num_ctx")
    return None


def _ollama_name(name: str) -> str:
    key = name.strip().lower()
    for prefix in ("registry.ollama.ai/", "library/"):
        key = key.removeprefix(prefix)
    return key if ":" in key.rsplit("/", 1)[-1] else f"{key}:latest"


def _loaded_context(root: str, running: Mapping[str, Any], name: str) -> int | None:
    wanted = _ollama_name(name)
    for entry in _dicts(running.get("models")):
        names = {entry.get("model"), entry.get("name")}
        if any(isinstance(n, str) and _ollama_name(n) == wanted for n in names):
            where = "GET /api/ps: models[].context_length"
            return window_field(root, entry.get("context_length"), where)  # absent before 0.9.7
    return None


# -- vLLM and other OpenAI-compatible servers ---------------------------------------------------
def openai_models(root: str, ask: Ask, *, required: bool) -> list[dict[str, Any]] | None:
    """``data`` of ``GET /v1/models``; None when the server has no such list (unless required).

    Raises:
        WindowDetectionError: a 200 that is not JSON, or (``required``) no list at all.
    """
    reply = ask("/v1/models", None)
    data = reply.body.get("data") if isinstance(reply.body, dict) else None
    if reply.status == 200 and isinstance(data, list):
        return _dicts(data)
    if required or (reply.status == 200 and reply.body is None):
        json_object(reply, root, "vLLM" if required else "the server")
        msg = f"the server at {root} answered GET /v1/models without a model list; {PASS_WINDOW}"
        raise WindowDetectionError(msg, url=root)
    return None


def vllm_window(root: str, listed: Sequence[Mapping[str, Any]], name: str) -> Found | None:
    """``max_model_len`` of ``name`` in ``GET /v1/models`` (a LoRA adapter: its parent's).

    Raises:
        WindowDetectionError: a ``max_model_len`` that is not a window (`window_field`).
    """
    by_id = {entry["id"]: entry for entry in listed if isinstance(entry.get("id"), str)}
    entry = by_id.get(name)
    if entry is None:
        return None
    where = "GET /v1/models: data[].max_model_len"
    length = window_field(root, entry.get("max_model_len"), where)
    whose = ""
    parent = by_id.get(str(entry.get("parent")))
    if length is None and parent is not None:
        length = window_field(root, parent.get("max_model_len"), where)
        whose = f" of its base {parent['id']}"
    if length is None:
        return None
    detail = f"served with max_model_len {length:,}{whose} (GET /v1/models)"
    return Found(length, "max_model_len", length, detail)


# -- LM Studio ----------------------------------------------------------------------------------
_LMSTUDIO_LISTS = (("/api/v1/models", "models"), ("/api/v0/models", "data"))


def is_lmstudio(ask: Ask) -> bool:
    """Whether the server answers LM Studio's ``/api/v1/models`` or ``/api/v0/models``."""
    return any(_lmstudio_list(ask, path, key) is not None for path, key in _LMSTUDIO_LISTS)


def lmstudio_window(root: str, name: str, ask: Ask) -> Found:
    """The context LM Studio loaded ``name`` with.

    Raises:
        WindowDetectionError: LM Studio does not have the model, has not loaded it, or did not
            answer its model lists.
    """
    models = _lmstudio_list(ask, "/api/v1/models", "models")
    if models is not None:
        for model in models:
            loaded = _dicts(model.get("loaded_instances"))
            if model.get("key") != name and all(i.get("id") != name for i in loaded):
                continue
            chosen = [i for i in loaded if i.get("id") == name] or loaded
            configs = [i.get("config") for i in chosen]
            where = "GET /api/v1/models: loaded_instances[].config.context_length"
            lengths = [
                window_field(root, c.get("context_length"), where)
                for c in configs
                if isinstance(c, dict)
            ]
            return _lmstudio_found(root, name, model, [n for n in lengths if n], "/api/v1/models")
        keyed = [{"id": m.get("key")} for m in models]
        raise not_served(root, name, "LM Studio", keyed, "/api/v1/models")
    data = _lmstudio_list(ask, "/api/v0/models", "data")
    if data is None:
        msg = (
            f"the server at {root} answered neither GET /api/v1/models nor GET /api/v0/models "
            f"as LM Studio 0.3.6 or later does; {PASS_WINDOW}"
        )
        raise WindowDetectionError(msg, url=root)
    for model in data:
        if model.get("id") == name:
            where = "GET /api/v0/models: data[].loaded_context_length"
            length = window_field(root, model.get("loaded_context_length"), where)
            return _lmstudio_found(root, name, model, [length] if length else [], "/api/v0/models")
    raise not_served(root, name, "LM Studio", data, "/api/v0/models")


def _lmstudio_list(ask: Ask, path: str, key: str) -> list[dict[str, Any]] | None:
    reply = ask(path, None)
    found = reply.body.get(key) if isinstance(reply.body, dict) else None
    return _dicts(found) if reply.status == 200 and isinstance(found, list) else None


def _lmstudio_found(
    root: str, name: str, model: Mapping[str, Any], lengths: list[int], path: str
) -> Found:
    model_max = window_field(
        root, model.get("max_context_length"), f"GET {path}: max_context_length"
    )
    if lengths:
        detail = f"loaded with a context of {min(lengths):,} tokens (GET {path})"
        return Found(at_most(root, min(lengths), model_max, detail), "loaded", model_max, detail)
    most = f"; it allows up to {model_max:,}" if model_max else ""
    msg = (
        f"LM Studio at {root} has {name!r} but has not loaded it, so the context it will be "
        f"served with is not known yet{most}; load it with the context you want (`lms load "
        f"{name} --context-length <tokens>`), {PASS_WINDOW}"
    )
    raise WindowDetectionError(msg, url=root)


# -- reading answers ----------------------------------------------------------------------------
def _dicts(value: object) -> list[dict[str, Any]]:
    return [entry for entry in value if isinstance(entry, dict)] if isinstance(value, list) else []


def window_field(root: str, value: object, where: str) -> int | None:
    """A window a server reported: None when absent, else a whole number in [1, `MAX_WINDOW`].

    Raises:
        WindowDetectionError: any other value (a string, a float, 0, 10**20...), quoted.
    """
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_WINDOW:
        return value
    shown = repr(value) if not isinstance(value, int) or abs(value) < 10**30 else "a huge int"
    msg = (
        f"the server at {root} answered {where} = {shown[:80]}, which is not a context window "
        f"(a whole number of tokens from 1 to {MAX_WINDOW:,}); check the server's settings "
        f"for that model, {PASS_WINDOW}"
    )
    raise WindowDetectionError(msg, url=root)


def at_most(root: str, window: int, model_max: int | None, detail: str) -> int:
    """``window``, checked against the model's trained length the server reported.

    Raises:
        WindowDetectionError: ``window`` is larger than ``model_max``.
    """
    if model_max is None or window <= model_max:
        return window
    msg = (
        f"the server at {root} says the model is {detail}, more than the {model_max:,} tokens "
        f"it reports the model supports; check the server's settings for that model, "
        f"{PASS_WINDOW}"
    )
    raise WindowDetectionError(msg, url=root)
