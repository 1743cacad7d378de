"""The window a local server serves a model with: asked from a stand-in Ollama, vLLM, LM Studio.

The stand-in (`served_stub.StubServer`) answers on 127.0.0.1 with the JSON shapes the servers
document; nothing else is faked (real HTTP, real sockets, the real `Budget`).
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from served_stub import Served, StubServer, closed_port_url

from ctxbudget import (
    Budget,
    DetectedWindow,
    InvalidBudgetError,
    WindowDetectionError,
    detect_window,
)
from ctxbudget.errors import ConfigurationError
from ctxbudget.tokens.served import clear_window_cache, ollama_url, server_root
from ctxbudget.tokens.server_api import ollama_default_window


@pytest.fixture(autouse=True)
def fresh_cache() -> Iterator[None]:
    clear_window_cache()
    yield
    clear_window_cache()


@pytest.fixture
def ollama() -> Iterator[StubServer]:
    with StubServer(kind="ollama") as server:
        yield server


# -- Ollama -------------------------------------------------------------------------------------
def test_ollama_num_ctx_of_the_modelfile_is_the_window_not_the_model_card(
    ollama: StubServer,
) -> None:
    ollama.add(Served("llama3.1:8b", num_ctx=8192, trained=131_072))
    found = detect_window("ollama:llama3.1:8b", base_url=ollama.url)
    assert found == DetectedWindow(
        "llama3.1:8b", ollama.url, "ollama", 8192, "num_ctx", 131_072, found.detail
    )
    assert "num_ctx 8192" in found.detail
    budget = Budget.for_model("ollama:llama3.1:8b", base_url=ollama.url)
    assert (budget.window, budget.reserve) == (8192, 2048)  # a quarter of the served window


def test_ollama_loaded_context_wins_over_num_ctx(ollama: StubServer) -> None:
    ollama.add(Served("llama3.1:8b", num_ctx=8192, loaded=16_384))
    found = detect_window("ollama:llama3.1:8b", base_url=ollama.url)
    assert (found.window, found.source) == (16_384, "loaded")
    assert ollama.count("GET", "/api/ps") == 1


@pytest.mark.parametrize(
    "asked", ["ollama:mistral", "ollama:Mistral:latest", "ollama_chat/mistral"]
)
def test_ollama_names_without_a_tag_are_latest(ollama: StubServer, asked: str) -> None:
    ollama.add(Served("mistral", loaded=32_768))  # /api/ps lists it as "mistral:latest"
    assert detect_window(asked, base_url=ollama.url).source == "loaded"


def test_ollama_model_loaded_by_an_old_server_without_context_length(ollama: StubServer) -> None:
    ollama.add(Served("qwen2.5", num_ctx=4096, loaded=0))  # /api/ps has no context_length
    found = detect_window("ollama/qwen2.5", base_url=ollama.url)
    assert (found.model, found.window, found.source) == ("qwen2.5", 4096, "num_ctx")


def test_ollama_num_ctx_above_the_trained_length_is_capped(ollama: StubServer) -> None:
    ollama.add(Served("phi3:mini", num_ctx=32_768, trained=4096))
    found = detect_window("ollama:phi3:mini", base_url=ollama.url)
    assert (found.window, found.model_max) == (4096, 4096)


@pytest.mark.parametrize(
    ("version", "trained", "window"),
    [
        ("0.12.3", 131_072, 4096),
        ("0.5.7", 131_072, 2048),
        ("0.15.5", 2048, 2048),
        ("dev", None, 2048),
    ],
)
def test_ollama_default_context_by_server_version(
    version: str, trained: int | None, window: int
) -> None:
    with StubServer(kind="ollama", version=version) as server:
        server.add(Served("llama3.2", trained=trained))
        found = detect_window("ollama:llama3.2", base_url=server.url)
    assert (found.window, found.source, found.model_max) == (window, "server_default", trained)
    assert "OLLAMA_CONTEXT_LENGTH" in found.detail
    assert ollama_default_window(version) == (4096 if version in ("0.12.3", "0.15.5") else 2048)


def test_an_ollama_model_the_server_does_not_have(ollama: StubServer) -> None:
    ollama.add(Served("llama3.1:8b", num_ctx=8192))
    with pytest.raises(WindowDetectionError) as caught:
        detect_window("ollama:mistral", base_url=ollama.url)
    text = str(caught.value)
    assert ollama.url in text and "model 'mistral' not found" in text
    assert "ollama pull mistral" in text and "window=" in text
    assert caught.value.url == ollama.url


def test_an_unreachable_server_says_where_and_what_to_do() -> None:
    url = closed_port_url()
    with pytest.raises(WindowDetectionError) as caught:
        Budget.for_model("ollama:llama3.1:8b", base_url=url)
    error = caught.value
    assert isinstance(error, ConnectionError) and isinstance(error, InvalidBudgetError)
    text = str(error)
    assert url in text and "ollama serve" in text and "num_ctx" in text and "window=" in text


def test_a_server_that_never_answers_times_out() -> None:
    with socket.socket() as listening:  # accepts connections (backlog), never replies
        listening.bind(("127.0.0.1", 0))
        listening.listen(1)
        url = f"http://127.0.0.1:{listening.getsockname()[1]}"
        with pytest.raises(WindowDetectionError, match=r"no answer within 0\.2 s"):
            detect_window("vllm:m", base_url=url, timeout=0.2)


@pytest.mark.parametrize("path", ["/api/show", "/api/ps"])
def test_malformed_json_is_an_error_naming_the_request(ollama: StubServer, path: str) -> None:
    ollama.add(Served("llama3.1:8b", num_ctx=8192, loaded=8192))
    method = "POST" if path == "/api/show" else "GET"
    ollama.raw[(method, path)] = (200, b'{"model_info": {"llama.context_length": 8')
    with pytest.raises(WindowDetectionError, match=f"{method} {path} with something else"):
        detect_window("ollama:llama3.1:8b", base_url=ollama.url)


def test_a_server_error_is_quoted(ollama: StubServer) -> None:
    ollama.raw[("POST", "/api/show")] = (500, b'{"error": "unable to load model blob"}')
    with pytest.raises(WindowDetectionError, match="HTTP 500 .'unable to load model blob'"):
        detect_window("ollama:llama3.1:8b", base_url=ollama.url)


# -- caching ------------------------------------------------------------------------------------
def test_the_server_is_asked_once_per_process(ollama: StubServer) -> None:
    ollama.add(Served("llama3.1:8b", num_ctx=8192))
    for _ in range(3):
        assert Budget.for_model("ollama:llama3.1:8b", base_url=ollama.url).window == 8192
    assert detect_window("ollama:llama3.1:8b", base_url=f"{ollama.url}/").window == 8192
    assert ollama.count("POST", "/api/show") == 1
    ollama.models["llama3.1:8b"].loaded = 32_768  # reloaded with a larger context
    assert detect_window("ollama:llama3.1:8b", base_url=ollama.url).window == 8192
    assert detect_window("ollama:llama3.1:8b", base_url=ollama.url, refresh=True).window == 32_768
    clear_window_cache()
    assert detect_window("ollama:llama3.1:8b", base_url=ollama.url).source == "loaded"
    assert ollama.count("POST", "/api/show") == 3


def test_failures_are_not_kept(ollama: StubServer) -> None:
    with pytest.raises(WindowDetectionError):
        detect_window("ollama:llama3.1:8b", base_url=ollama.url)
    ollama.add(Served("llama3.1:8b", num_ctx=8192))  # pulled since
    assert detect_window("ollama:llama3.1:8b", base_url=ollama.url).window == 8192


def test_a_given_window_wins_and_asks_nothing(ollama: StubServer) -> None:
    budget = Budget.for_model("ollama:llama3.1:8b", window=2048, base_url=ollama.url)
    assert budget.window == 2048 and ollama.hits == []


# -- vLLM ---------------------------------------------------------------------------------------
def test_vllm_max_model_len_and_a_lora_adapter() -> None:
    with StubServer(kind="vllm") as vllm:
        vllm.add(Served("Qwen/Qwen2.5-7B-Instruct", max_model_len=32_768))
        vllm.add(Served("sql-lora", parent="Qwen/Qwen2.5-7B-Instruct"))
        base = f"{vllm.url}/v1"  # as an OpenAI client is configured
        found = detect_window("vllm:Qwen/Qwen2.5-7B-Instruct", base_url=base)
        assert (found.server, found.window, found.source) == ("vllm", 32_768, "max_model_len")
        assert found.base_url == vllm.url
        assert detect_window("sql-lora", base_url=base).window == 32_768  # auto: vLLM
        budget = Budget.for_model("openai:Qwen/Qwen2.5-7B-Instruct", base_url=base)
        assert budget.window == 32_768 and budget.reserve == 4096
        with pytest.raises(WindowDetectionError, match="serves 'Qwen/Qwen2.5-7B-Instruct'"):
            detect_window("vllm:meta-llama/Llama-3.1-8B", base_url=base)
        vllm.add(Served("orphan-lora", parent="gone"))
        with pytest.raises(WindowDetectionError, match="serves 'orphan-lora' but does not say"):
            detect_window("vllm:orphan-lora", base_url=base)


def test_vllm_malformed_model_list() -> None:
    with StubServer(kind="vllm") as vllm:
        vllm.raw[("GET", "/v1/models")] = (200, b"<html>proxy login</html>")
        with pytest.raises(WindowDetectionError, match="GET /v1/models with something else"):
            detect_window("vllm:m", base_url=vllm.url)
        with pytest.raises(WindowDetectionError, match="'<html>proxy login</html>'"):
            detect_window("m", base_url=vllm.url)


def test_a_server_with_an_api_key() -> None:
    with StubServer(kind="vllm", api_key="sk-local") as vllm:
        vllm.add(Served("m", max_model_len=4096))
        with pytest.raises(WindowDetectionError, match="HTTP 401.*api_key="):
            detect_window("vllm:m", base_url=vllm.url)
        assert detect_window("vllm:m", base_url=vllm.url, api_key="sk-local").window == 4096


# -- LM Studio ----------------------------------------------------------------------------------
@pytest.mark.parametrize("v1", [True, False])
def test_lmstudio_loaded_context(v1: bool) -> None:
    with StubServer(kind="lmstudio", lmstudio_v1=v1) as studio:
        studio.add(Served("qwen2.5-7b-instruct", trained=32_768, loaded=8192))
        studio.add(Served("meta-llama-3.1-8b-instruct", trained=131_072))
        found = detect_window("lmstudio:qwen2.5-7b-instruct", base_url=f"{studio.url}/v1")
        assert (found.server, found.window, found.source, found.model_max) == (
            "lmstudio",
            8192,
            "loaded",
            32_768,
        )
        assert detect_window("qwen2.5-7b-instruct", base_url=studio.url).server == "lmstudio"
        with pytest.raises(WindowDetectionError, match="has not loaded it.*lms load"):
            detect_window("lm_studio/meta-llama-3.1-8b-instruct", base_url=studio.url)
        with pytest.raises(WindowDetectionError, match="does not serve 'gemma'.*serves 'meta"):
            detect_window("lmstudio:gemma", base_url=studio.url)


# -- routing and URLs ---------------------------------------------------------------------------
def test_a_name_without_prefix_on_ollama_is_found_through_its_api(ollama: StubServer) -> None:
    ollama.add(Served("llama3.1:8b", num_ctx=8192))
    found = detect_window("llama3.1:8b", base_url=f"{ollama.url}/v1")  # ChatOpenAI on Ollama
    assert (found.server, found.window) == ("ollama", 8192)


def test_a_model_no_known_server_describes() -> None:
    with StubServer(kind="lmstudio", lmstudio_v1=False) as other:
        other.raw[("GET", "/api/v0/models")] = (404, b"not found")
        other.add(Served("tiny"))
        with pytest.raises(WindowDetectionError, match="serves 'tiny' but does not say"):
            detect_window("tiny", base_url=other.url)


def test_urls(monkeypatch: pytest.MonkeyPatch) -> None:
    assert server_root(" http://localhost:8000/v1/ ") == "http://localhost:8000"
    assert server_root("localhost:11434") == "http://localhost:11434"
    assert server_root("https://gpu.lan/ollama/api") == "https://gpu.lan/ollama"
    for bad in ("", "ftp://x", "http://", 11434):
        with pytest.raises(ConfigurationError, match="base_url"):
            detect_window("ollama:x", base_url=bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="timeout"):
        detect_window("ollama:x", base_url="http://127.0.0.1:1", timeout=0)
    monkeypatch.delenv("OLLAMA_HOST", raising=False)
    assert ollama_url(None) == "http://127.0.0.1:11434"
    assert ollama_url("http://gpu:8080") == "http://gpu:8080"
    monkeypatch.setenv("OLLAMA_HOST", "0.0.0.0")
    assert ollama_url(None) == "http://0.0.0.0:11434"
    monkeypatch.setenv("OLLAMA_HOST", "gpu.lan:9999")
    assert ollama_url(None) == "http://gpu.lan:9999"


def test_without_base_url_ollama_is_still_refused() -> None:
    with pytest.raises(InvalidBudgetError, match="num_ctx.*base_url="):
        Budget.for_model("ollama:llama3.1:8b")


# -- the property -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def shared_ollama() -> Iterator[StubServer]:
    with StubServer(kind="ollama") as server:
        yield server


windows = st.integers(min_value=1, max_value=10_000_000)


@settings(max_examples=60, deadline=None)
@given(
    num_ctx=st.none() | windows,
    loaded=st.none() | windows,
    trained=st.none() | windows,
    reserve=st.none() | st.integers(min_value=0, max_value=4096),
)
def test_any_served_window_is_returned_as_given_and_bounds_the_budget(
    shared_ollama: StubServer,
    num_ctx: int | None,
    loaded: int | None,
    trained: int | None,
    reserve: int | None,
) -> None:
    shared_ollama.models = {"m:1b": Served("m:1b", num_ctx=num_ctx, loaded=loaded, trained=trained)}
    if loaded is not None and trained is not None and loaded > trained:
        # More than the model supports, as the server itself reports: refused, quoted.
        with pytest.raises(WindowDetectionError, match=f"more than the {trained:,} tokens"):
            detect_window("ollama:m:1b", base_url=shared_ollama.url, refresh=True)
        return
    found = detect_window("ollama:m:1b", base_url=shared_ollama.url, refresh=True)
    if loaded is not None:
        expected = loaded  # what the server loaded, as it says
    elif num_ctx is not None:
        expected = num_ctx if trained is None else min(num_ctx, trained)
    else:
        expected = 4096 if trained is None else min(4096, trained)
    assert found.window == expected and found.model_max == trained
    clear_window_cache()
    if reserve is not None and reserve >= expected:
        with pytest.raises(InvalidBudgetError):
            Budget.for_model("ollama:m:1b", base_url=shared_ollama.url, reserve=reserve)
        return
    budget = Budget.for_model("ollama:m:1b", base_url=shared_ollama.url, reserve=reserve)
    assert budget.window == expected
    assert 0 < budget.available <= budget.window


@settings(max_examples=30, deadline=None)
@given(length=windows, name=st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,30}", fullmatch=True))
def test_any_vllm_max_model_len_is_returned_as_given(
    shared_vllm: StubServer, length: int, name: str
) -> None:
    shared_vllm.models = {name: Served(name, max_model_len=length)}
    found = detect_window(f"vllm:{name}", base_url=shared_vllm.url, refresh=True)
    assert (found.window, found.model, found.source) == (length, name, "max_model_len")


@pytest.fixture(scope="module")
def shared_vllm() -> Iterator[StubServer]:
    with StubServer(kind="vllm") as server:
        yield server
