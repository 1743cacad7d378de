"""The reranker stage, probed as a demanding user would: chains of updates, big saliences, races.

Each test is a bug found by probing `ctxbudget.memory.reading.rerank`:

* a chain of updates (Lisbon, then Porto, then Berlin) reranked by a reranker preferring the
  oldest: the newest statement fell below the one it updates (the floor passed one link only);
* a salience above 1 with a small ``relevance_weight``: the call failed with ``OverflowError``
  (or ``RecursionError``) instead of ranking, though a reranker never fails the call;
* two calls at once whose reranker went late: only the last late thread was kept, so once it
  ended the reranker was started again while the other still hung;
* the warning of a failed reranker named it "function" (any plain function, an adapter's
  wrapper) and cut its error at 80 characters, before the part that says what to do;
* a class given for its instance (``reranker=CrossEncoder``) was taken, and every call then
  failed or returned the class's instance, logged once: it is refused at config time;
* an async reranker keeping one ``httpx.AsyncClient`` (Cohere's, OpenAI's...) failed every
  other call with "Event loop is closed" (a new loop per call): a sync caller's now runs on one
  loop (an async caller's on its own: test_rerank_loop.py).

Real parts where a memory is needed (tiktoken, an embedded Chroma, the default embedder); the
rerankers are plain functions, as a user's are.
"""

from __future__ import annotations

import contextvars
import json
import logging
import math
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from test_rerank_order import UPDATE

from ctxbudget.core.items import ContextItem
from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.errors import ConfigurationTypeError
from ctxbudget.memory.context import ContextMemory
from ctxbudget.memory.policy.config import MemoryConfig
from ctxbudget.memory.policy.scoring import Scoring
from ctxbudget.memory.reading.candidates import Candidates
from ctxbudget.memory.reading.coroutines import awaited
from ctxbudget.memory.reading.rerank import RerankWarnings, blended, rerank
from ctxbudget.store.chroma_store import ChromaStore

QUESTION = "Where do I live?"
MOVES = [  # Lisbon, then Porto (the session of test_rerank_order), then Berlin
    *UPDATE,
    {
        "id": "m9",
        "role": "user",
        "text": "We moved to Berlin, the new flat is even better.",
        "timestamp": "2024-09-01T10:00:00Z",
    },
    {"role": "assistant", "text": "Wow, big change!", "timestamp": "2024-09-01T10:01:00Z"},
    {"role": "user", "text": "Any tips for bread?", "timestamp": "2024-09-02T10:00:00Z"},
    {"role": "assistant", "text": "Use a hot oven.", "timestamp": "2024-09-02T10:01:00Z"},
]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, embedder: OnnxEmbedder) -> ChromaStore:
    folder: Path = tmp_path_factory.mktemp("rerank-probe")
    return ChromaStore(folder / "db", embedder=embedder)


def memory(store: ChromaStore, reranker: object, **config: object) -> ContextMemory:
    settings = MemoryConfig(recent_messages=2, reranker=reranker, **config)  # type: ignore[arg-type]
    return ContextMemory(store=store, config=settings, write_behind=False, inclusion_log=False)


def pool(scores: Sequence[float], newer: dict[int, str] | None = None) -> Candidates:
    """Retrieved candidates ``t<n>`` with these scores (best first)."""
    links = newer or {}
    items = [
        ContextItem(
            id=f"t{n}",
            text=f"turn {n}",
            score=s,
            timestamp=1.7e9 + n,
            newer=(links[n],) if n in links else (),
        )
        for n, s in enumerate(scores)
    ]
    ordered = sorted(items, key=lambda it: (-it.score, it.id))
    return Candidates(pinned=(), history=(), summaries=(), retrieved=tuple(ordered), user_id=None)


# -- a chain of updates: the newest statement stays at least as high as each it updates ------


def prefers_the_oldest(query: str, texts: Sequence[str]) -> list[float]:
    return [
        9.0 if "Lisbon" in t else 5.0 if "Porto" in t else -5.0 if "Berlin" in t else 0.0
        for t in texts
    ]


def test_the_newest_of_a_chain_of_updates_stays_as_high_as_what_it_updates(
    store: ChromaStore,
) -> None:
    mem = memory(store, prefers_the_oldest)
    session = f"s-{uuid.uuid4().hex[:12]}"
    mem.add_messages(session, MOVES, progress=False)
    found = {it.id: it for it in mem.candidates(session, QUESTION, budget=100).retrieved}
    assert found["m1"].newer == ("m5",)
    assert found["m5"].newer == ("m9",)  # a chain: Lisbon -> Porto -> Berlin
    assert found["m9"].score >= found["m5"].score >= found["m1"].score
    for budget in (40, 60, 80, 100, 150):
        report = mem.assemble(session, QUESTION, budget=budget)
        sent = set(report.included_ids)
        assert "m5" not in sent or "m9" in sent
        assert "m1" not in sent or "m9" in sent
        assert report.tokens_used <= budget


def test_a_chain_listed_in_any_order_passes_its_floor_to_the_end() -> None:
    # t0 names t1, t1 names t2; the reranker scores t0 best and t2 worst.
    found = pool([0.9, 0.5, 0.3], newer={0: "t1", 1: "t2"})

    def oldest_first(query: str, texts: Sequence[str]) -> list[float]:
        return [{"turn 0": 3.0, "turn 1": 2.0, "turn 2": 1.0}[t] for t in texts]

    config = MemoryConfig(reranker=oldest_first, reranker_top=3)
    scores = {it.id: it.score for it in rerank(found, "q", config, RerankWarnings()).retrieved}
    assert scores["t2"] >= scores["t1"] >= scores["t0"]


# -- scores above 1 (a salience) with a small relevance_weight: ranked, not a failed call -----


@pytest.mark.parametrize("weight", [0.001, 1e-310])
def test_scores_above_one_with_a_small_relevance_weight_still_rank(weight: float) -> None:
    found = pool([5.0, 3.0, 1.0])

    def reversed_order(query: str, texts: Sequence[str]) -> list[float]:
        return [float(t.split()[1]) for t in texts]

    config = MemoryConfig(
        reranker=reversed_order, reranker_top=3, scoring=Scoring(relevance_weight=weight)
    )
    out = rerank(found, "q", config, RerankWarnings()).retrieved
    assert sorted(it.id for it in out) == ["t0", "t1", "t2"]
    assert all(math.isfinite(it.score) and 1.0 <= it.score <= 5.0 for it in out)


def test_a_salient_session_with_a_small_relevance_weight_assembles(store: ChromaStore) -> None:
    mem = memory(
        store,
        prefers_the_oldest,
        scoring=Scoring(relevance_weight=0.005),
    )
    session = f"s-{uuid.uuid4().hex[:12]}"
    for n, turn in enumerate(MOVES):
        mem.add_message(
            session,
            str(turn["role"]),
            str(turn["text"]),
            timestamp=str(turn["timestamp"]),
            metadata={"salience": 50.0 if n % 3 == 0 else 1.0},
        )
    report = mem.assemble(session, QUESTION, budget=120)
    assert report.tokens_used <= 120
    assert not set(report.included_ids) & {p.item.id for p in report.pruned}


def test_blending_an_infinite_score_is_a_clear_error_not_a_recursion() -> None:
    with pytest.raises(ValueError, match="finite"):
        blended([math.inf, 0.0], [0.0, 1.0], 0.5)


# -- calls at once whose reranker went late: every late thread is kept, not only the last -----


def test_every_late_thread_holds_the_reranker_off_not_only_the_last() -> None:
    found = pool([0.9, 0.8, 0.7, 0.6])
    release = threading.Event()
    first_started = threading.Event()
    calls: list[str] = []
    ran_on: dict[str, threading.Thread] = {}

    def sometimes_hung(query: str, texts: Sequence[str]) -> list[float]:
        calls.append(query)
        ran_on[query] = threading.current_thread()
        if query == "hangs":
            first_started.set()
            release.wait(60)
        else:
            time.sleep(0.9)  # late too, but it ends
        return [0.0, 1.0, 2.0, 3.0][: len(texts)]

    config = MemoryConfig(reranker=sometimes_hung, reranker_top=4, reranker_timeout=0.5)
    warnings = RerankWarnings()
    try:
        hung = threading.Thread(target=rerank, args=(found, "hangs", config, warnings))
        hung.start()
        assert first_started.wait(10)
        quick = threading.Thread(target=rerank, args=(found, "slow", config, warnings))
        quick.start()  # before the first went late: both reranker calls run
        hung.join(10)
        quick.join(10)  # both went late; the slow one was the last to
        ran_on["slow"].join(10)  # and now it has ended, while the hung one still runs
        assert ran_on["hangs"].is_alive()
        assert rerank(found, "again", config, warnings) == found  # skipped: ``timeout``
        assert calls == ["hangs", "slow"]
    finally:
        release.set()


# -- the warning names the reranker and says what its error says -----------------------------


def test_the_warning_names_the_reranker_and_keeps_the_point_of_its_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    found = pool([0.9, 0.8, 0.7])

    def my_cohere_rerank(query: str, texts: Sequence[str]) -> list[float]:
        msg = (
            "POST https://api.example.com/v2/rerank failed after 3 retries with status 429 "
            "(Too Many Requests) for model rerank-english-v3.0 and 3 documents: "
            "raise your rate limit or lower reranker_top"
        )
        raise RuntimeError(msg)

    config = MemoryConfig(reranker=my_cohere_rerank, reranker_top=3)
    with caplog.at_level(logging.WARNING, logger="ctxbudget.memory.reading.rerank"):
        assert rerank(found, "q", config, RerankWarnings()) == found
    assert "the reranker my_cohere_rerank raised RuntimeError" in caplog.text  # not "function"
    assert "raise your rate limit or lower reranker_top" in caplog.text  # not cut at 80


# -- a class given for its instance is refused at config time, by name ------------------------


class PairScorer:
    """Shaped like a sentence-transformers CrossEncoder."""

    def predict(self, pairs: list[tuple[str, str]]) -> list[float]:
        return [float(len(text)) for _, text in pairs]


class CallableRanker:
    """A reranker object: called with (query, texts)."""

    def __call__(self, query: str, texts: Sequence[str]) -> list[float]:
        return [0.0] * len(texts)


@pytest.mark.parametrize("given", [PairScorer, CallableRanker], ids=lambda c: c.__name__)
def test_a_class_given_for_its_instance_is_refused_by_name(given: type) -> None:
    # Taken before, every call failed (predict without self) or returned an instance, and
    # the stage only logged it once: the reranker was silently never used.
    with pytest.raises(ConfigurationTypeError, match=rf"the class {given.__name__}, not a "):
        MemoryConfig(reranker=given)
    assert MemoryConfig(reranker=given()).reranker is not None  # its instance is taken


# -- an async reranker keeping an HTTP client: every call reranks, not every other one --------


class _Scores(BaseHTTPRequestHandler):
    """A reranking API on loopback: each text's score is the sum of its characters' codes."""

    protocol_version = "HTTP/1.1"  # keep-alive: the client pools its connection

    def do_POST(self) -> None:
        asked = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        body = json.dumps([float(sum(map(ord, t))) for t in asked["texts"]]).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        return None


@pytest.fixture
def scores_api() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Scores)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/rerank"
    finally:
        server.shutdown()
        server.server_close()


SEEN: contextvars.ContextVar[str] = contextvars.ContextVar("seen", default="")


def test_an_async_reranker_with_one_http_client_reranks_every_call(scores_api: str) -> None:
    # An httpx.AsyncClient (what Cohere's, OpenAI's and most async API clients are) pools
    # connections bound to the loop they were opened on: with a new loop per call, every
    # other call failed with "Event loop is closed" and was not reranked.
    client = httpx.AsyncClient()
    contexts: list[str] = []

    async def remote(query: str, texts: Sequence[str]) -> list[float]:
        contexts.append(SEEN.get())
        answer = await client.post(scores_api, json={"query": query, "texts": list(texts)})
        scores: list[float] = answer.json()
        return scores

    found = pool([0.9, 0.8, 0.7, 0.6])
    config = MemoryConfig(reranker=remote, reranker_top=4, reranker_timeout=10)
    warnings = RerankWarnings()
    try:
        for n in range(4):
            SEEN.set(f"call {n}")
            assert rerank(found, "q", config, warnings) != found  # reranked: status ok
        assert contexts == [f"call {n}" for n in range(4)]  # in the caller's context
    finally:
        awaited(client.aclose())  # on the loop its connections are bound to


async def test_an_async_reranker_reranks_every_call_of_an_async_app(
    store: ChromaStore, scores_api: str
) -> None:
    client = httpx.AsyncClient()
    calls: list[int] = []

    async def remote(query: str, texts: Sequence[str]) -> list[float]:
        answer = await client.post(scores_api, json={"query": query, "texts": list(texts)})
        calls.append(answer.status_code)
        scores: list[float] = answer.json()
        return scores

    mem = memory(store, remote, reranker_timeout=10)
    session = f"s-{uuid.uuid4().hex[:12]}"
    mem.add_messages(session, MOVES, progress=False)
    try:
        for _ in range(3):
            await mem.aassemble(session, QUESTION, budget=100)
        await mem.acandidates(session, QUESTION, budget=100)
        assert calls == [200, 200, 200, 200]
    finally:
        # The app's calls awaited the reranker on the app's loop (reading.coroutines): the
        # client's connections are bound to it, and closed there.
        await client.aclose()
