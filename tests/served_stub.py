"""A stand-in local model server (Ollama, vLLM or LM Studio) on 127.0.0.1, for tests.

It answers with the JSON the servers document: Ollama's docs/api.md (``/api/show``, ``/api/ps``,
``/api/version``, its OpenAI-compatible ``/v1/models``), vLLM's ``ModelCard``/``ModelList``
(``/v1/models``), LM Studio's REST API (``/api/v1/models``, ``/api/v0/models``, ``/v1/models``),
for the models a test puts in it. Every request is recorded (`StubServer.hits`).
"""

from __future__ import annotations

import json
import socket
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

Kind = Literal["ollama", "vllm", "lmstudio"]


@dataclass
class Served:
    """One model the stand-in serves.

    Ollama: ``num_ctx`` in its Modelfile, ``trained`` its ``<arch>.context_length``, ``loaded``
    the ``context_length`` of ``/api/ps`` (None: not loaded; 0: loaded by an Ollama older than
    0.9.7, which does not report it). vLLM: ``max_model_len`` (``parent``: a LoRA adapter).
    LM Studio: ``trained`` is ``max_context_length``, ``loaded`` the loaded instance's context.
    """

    name: str
    num_ctx: int | None = None
    trained: int | None = 131_072
    loaded: int | None = None
    max_model_len: int | None = None
    parent: str | None = None


@dataclass
class StubServer:
    """A local model server stand-in; use as a context manager (``with StubServer() as s``)."""

    kind: Kind = "ollama"
    version: str = "0.12.3"
    lmstudio_v1: bool = True
    api_key: str | None = None
    models: dict[str, Served] = field(default_factory=dict)
    raw: dict[tuple[str, str], tuple[int, bytes]] = field(default_factory=dict)
    hits: list[tuple[str, str]] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None

    def add(self, served: Served) -> StubServer:
        self.models[served.name] = served
        return self

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def count(self, method: str, path: str) -> int:
        return self.hits.count((method, path))

    def __enter__(self) -> StubServer:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                stub.answer(self, "GET", None)

            def do_POST(self) -> None:
                size = int(self.headers.get("Content-Length") or 0)
                stub.answer(self, "POST", json.loads(self.rfile.read(size) or b"null"))

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        ).start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()

    # -- answering ------------------------------------------------------------------------------
    def answer(self, handler: BaseHTTPRequestHandler, method: str, body: object) -> None:
        path = handler.path
        self.hits.append((method, path))
        if (method, path) in self.raw:
            status, raw = self.raw[(method, path)]
            return self._send(handler, status, raw)
        wanted = f"Bearer {self.api_key}"
        if self.api_key and handler.headers.get("Authorization") != wanted:
            return self._json(handler, 401, {"error": "Unauthorized"})
        routes = {"ollama": self._ollama, "vllm": self._vllm, "lmstudio": self._lmstudio}
        status, payload = routes[self.kind](method, path, body)
        if isinstance(payload, bytes):
            return self._send(handler, status, payload)
        return self._json(handler, status, payload)

    def _send(self, handler: BaseHTTPRequestHandler, status: int, raw: bytes) -> None:
        handler.send_response(status)
        handler.send_header("Content-Length", str(len(raw)))
        handler.end_headers()
        handler.wfile.write(raw)

    def _json(self, handler: BaseHTTPRequestHandler, status: int, payload: object) -> None:
        raw = json.dumps(payload).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json; charset=utf-8")
        handler.send_header("Content-Length", str(len(raw)))
        handler.end_headers()
        handler.wfile.write(raw)

    def _ollama_model(self, name: str) -> Served | None:
        # As Ollama resolves a name: case-insensitive, ":latest" when no tag is given.
        asked = name.lower() if ":" in name else f"{name.lower()}:latest"
        for served in self.models.values():
            full = served.name if ":" in served.name else f"{served.name}:latest"
            if asked == full.lower():
                return served
        return None

    def _ollama(self, method: str, path: str, body: object) -> tuple[int, object]:
        if (method, path) == ("POST", "/api/show"):
            name = body.get("model") if isinstance(body, dict) else None
            served = self._ollama_model(str(name))
            if served is None:
                return 404, {"error": f"model '{name}' not found"}
            return 200, ollama_show(served)
        if (method, path) == ("GET", "/api/ps"):
            return 200, {
                "models": [ollama_ps(s) for s in self.models.values() if s.loaded is not None]
            }
        if (method, path) == ("GET", "/api/version"):
            return 200, {"version": self.version}
        if (method, path) == ("GET", "/v1/models"):  # Ollama's OpenAI-compatible list
            data = [
                {"id": s.name, "object": "model", "created": 1718000000, "owned_by": "library"}
                for s in self.models.values()
            ]
            return 200, {"object": "list", "data": data}
        return 404, b"404 page not found"  # gin's answer to an unknown route

    def _vllm(self, method: str, path: str, body: object) -> tuple[int, object]:
        if (method, path) == ("GET", "/v1/models"):
            return 200, {"object": "list", "data": [vllm_card(s) for s in self.models.values()]}
        return 404, {"detail": "Not Found"}  # FastAPI's

    def _lmstudio(self, method: str, path: str, body: object) -> tuple[int, object]:
        if (method, path) == ("GET", "/api/v1/models") and self.lmstudio_v1:
            return 200, {"models": [lmstudio_v1(s) for s in self.models.values()]}
        if (method, path) == ("GET", "/api/v0/models"):
            return 200, {"object": "list", "data": [lmstudio_v0(s) for s in self.models.values()]}
        if (method, path) == ("GET", "/v1/models"):
            data = [
                {"id": s.name, "object": "model", "owned_by": "organization_owner"}
                for s in self.models.values()
            ]
            return 200, {"object": "list", "data": data}
        return 200, {"error": f"Unexpected endpoint or method. ({method} {path})"}


# -- the documented shapes ----------------------------------------------------------------------
def ollama_show(served: Served) -> dict[str, Any]:
    """``POST /api/show`` as Ollama's docs/api.md shows it."""
    lines = ['stop                           "<|eot_id|>"']
    if served.num_ctx is not None:
        lines.insert(0, f"num_ctx                        {served.num_ctx}")
    info: dict[str, Any] = {
        "general.architecture": "llama",
        "general.file_type": 2,
        "general.parameter_count": 8030261248,
        "llama.attention.head_count": 32,
        "llama.embedding_length": 4096,
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.tokens": [],
    }
    if served.trained is not None:
        info["llama.context_length"] = served.trained
    modelfile = "FROM /models/blobs/sha256-abc\n" + "".join(f"PARAMETER {p}\n" for p in lines)
    return {
        "modelfile": modelfile,
        "parameters": "\n".join(lines),
        "template": "{{ .Prompt }}",
        "details": {
            "parent_model": "",
            "format": "gguf",
            "family": "llama",
            "families": ["llama"],
            "parameter_size": "8.0B",
            "quantization_level": "Q4_0",
        },
        "model_info": info,
        "capabilities": ["completion", "tools"],
    }


def ollama_ps(served: Served) -> dict[str, Any]:
    """One model of ``GET /api/ps`` (``context_length`` from Ollama 0.9.7)."""
    name = served.name if ":" in served.name else f"{served.name}:latest"
    entry: dict[str, Any] = {
        "name": name,
        "model": name,
        "size": 5137025024,
        "digest": "2ae6f6dd7a3dd734790bbbf58b8909a606e0e7e97e94b7604e0aa7ae4490e6d8",
        "details": {"format": "gguf", "family": "llama", "parameter_size": "8.0B"},
        "expires_at": "2024-06-04T14:38:31.83753-07:00",
        "size_vram": 5137025024,
    }
    if served.loaded:
        entry["context_length"] = served.loaded
    return entry


def vllm_card(served: Served) -> dict[str, Any]:
    """One ``ModelCard`` of vLLM's ``GET /v1/models``."""
    return {
        "id": served.name,
        "object": "model",
        "created": 1718000000,
        "owned_by": "vllm",
        "root": f"/models/{served.name}",
        "parent": served.parent,
        "max_model_len": served.max_model_len,
        "permission": [{"id": "modelperm-1", "object": "model_permission", "allow_view": True}],
    }


def lmstudio_v1(served: Served) -> dict[str, Any]:
    """One model of LM Studio's ``GET /api/v1/models`` (0.4+)."""
    instances = []
    if served.loaded is not None:
        config = {"context_length": served.loaded, "eval_batch_size": 512, "parallel": 4}
        instances.append({"id": served.name, "config": config})
    return {
        "type": "llm",
        "publisher": "lmstudio-community",
        "key": served.name,
        "display_name": served.name,
        "architecture": "llama",
        "quantization": {"name": "Q4_K_M", "bits_per_weight": 4},
        "size_bytes": 4920739232,
        "params_string": "8B",
        "loaded_instances": instances,
        "max_context_length": served.trained,
        "format": "gguf",
        "capabilities": {"vision": False, "trained_for_tool_use": True},
    }


def lmstudio_v0(served: Served) -> dict[str, Any]:
    """One model of LM Studio's ``GET /api/v0/models`` (0.3.6+)."""
    entry: dict[str, Any] = {
        "id": served.name,
        "object": "model",
        "type": "llm",
        "publisher": "lmstudio-community",
        "arch": "llama",
        "compatibility_type": "gguf",
        "quantization": "Q4_K_M",
        "state": "loaded" if served.loaded is not None else "not-loaded",
        "max_context_length": served.trained,
    }
    if served.loaded is not None:
        entry["loaded_context_length"] = served.loaded
    return entry


def closed_port_url() -> str:
    """The URL of a port on 127.0.0.1 nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"
