"""Hostile answers and calls of a user's reranker (`ctxbudget.memory.reading.rerank`).

Promise: a reranker that raises, is late or answers something other than one finite number
per text leaves the candidates as they were, and the call goes on, waited for at most
``reranker_timeout``. Bugs found by probing it:

* the answer was read on the caller's thread, outside the reranker's guard: an answer whose
  reading raises (a ``Sequence`` whose items raise, a ``.shape`` that raises, a torch tensor
  on the ``meta`` device, a number whose ``__float__`` raises) failed the whole ``assemble``;
* and an answer whose reading is slow (a lazy array, a tensor waiting on its device) held
  the call past ``reranker_timeout``;
* a ``Sequence`` whose ``len`` says ``n`` but which yields fewer scores passed the count
  check, and the blend then failed the call (``zip`` of unequal lengths);
* an async call cancelled while its ``async`` reranker was awaited waited out the whole
  ``reranker_timeout``, left the reranker's coroutine running on the app's loop, logged it
  as late, and the caller's next call skipped the reranker (it counted as still running).
"""

from __future__ import annotations

import asyncio
import logging
import numbers
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import torch

from ctxbudget.core.items import ContextItem
from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.memory.context import ContextMemory
from ctxbudget.memory.policy.config import MemoryConfig
from ctxbudget.memory.reading.candidates import Candidates
from ctxbudget.memory.reading.rerank import RerankWarnings, rerank
from ctxbudget.store.chroma_store import ChromaStore

LOGGER = "ctxbudget.memory.reading.rerank"
QUERY = "what did she do on the weekend with friends"
TOPICS = "soup trains bikes rain guitars tea hills cakes rivers cats Porto Lisbon".split()


class RaisingItems(Sequence[float]):
    """``size`` scores by its length; reading any of them raises."""

    def __init__(self, size: int = 4) -> None:
        self.size = size

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: Any) -> float:
        msg = "the lazy score could not be fetched"
        raise ValueError(msg)


class ShortSequence(Sequence[float]):
    """Says it holds four scores, yields three."""

    def __len__(self) -> int:
        return 4

    def __getitem__(self, index: Any) -> float:
        if index >= 3:
            raise IndexError(index)
        return [0.1, 0.9, 0.5][index]


class RaisingShape:
    """An array-like whose ``shape`` is computed, and fails."""

    @property
    def shape(self) -> tuple[int, ...]:
        msg = "shape of a lazy array is unknown"
        raise RuntimeError(msg)

    def tolist(self) -> list[float]:
        return [0.1, 0.2, 0.3, 0.9]


class Unfloatable(numbers.Real):
    """A number whose ``float`` raises (a lazy or remote value)."""

    def __float__(self) -> float:
        msg = "no value yet"
        raise ZeroDivisionError(msg)

    # The rest of Real's abstract methods: never called.
    __abs__ = __add__ = __ceil__ = __eq__ = __floor__ = __floordiv__ = __le__ = __lt__ = None  # type: ignore[assignment]
    __mod__ = __mul__ = __neg__ = __pos__ = __pow__ = __radd__ = __rfloordiv__ = None  # type: ignore[assignment]
    __rmod__ = __rmul__ = __round__ = __rpow__ = __rtruediv__ = __truediv__ = None  # type: ignore[assignment]
    __trunc__ = __hash__ = None  # type: ignore[assignment]


UNREADABLE: dict[str, Callable[[], object]] = {
    "items that raise": RaisingItems,
    "a shape that raises": RaisingShape,
    "a meta tensor": lambda: torch.empty(4, device="meta"),
    "a number whose float raises": lambda: [Unfloatable(), 0.2, 0.3, 0.9],
    "a length that lies": ShortSequence,
}


def pool() -> Candidates:
    items = [
        ContextItem(id=f"t{n}", text=f"turn {n}", score=s, timestamp=1.7e9 + n)
        for n, s in enumerate([0.9, 0.8, 0.7, 0.6])
    ]
    return Candidates(pinned=(), history=(), summaries=(), retrieved=tuple(items), user_id=None)


@pytest.mark.parametrize("kind", sorted(UNREADABLE))
def test_an_answer_that_cannot_be_read_leaves_the_ranking_as_it_was(
    kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    def scorer(query: str, texts: Sequence[str]) -> object:
        return UNREADABLE[kind]()

    config = MemoryConfig(reranker=scorer, reranker_top=4, reranker_weight=1.0)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        found = rerank(pool(), "q", config, RerankWarnings())
    assert [it.id for it in found.retrieved] == ["t0", "t1", "t2", "t3"]
    (warned,) = caplog.records
    said = warned.getMessage()
    assert "the reranker scorer" in said
    assert "keep their own ranking" in said


def test_a_length_that_lies_is_named_as_the_wrong_count() -> None:
    from ctxbudget.errors import ConfigurationError
    from ctxbudget.memory.policy.ranking import reranker_scores

    with pytest.raises(ConfigurationError, match="3 scores for 4 texts"):
        reranker_scores(ShortSequence(), 4, reranker="mine")


# -- through a real memory ---------------------------------------------------------------


@pytest.fixture
def store(tmp_path: Path, embedder: OnnxEmbedder) -> Iterator[ChromaStore]:
    opened = ChromaStore(tmp_path / "db", embedder=embedder)
    yield opened
    opened.close()


def memory(store: ChromaStore, reranker: object, **config: Any) -> ContextMemory:
    settings = MemoryConfig(recent_messages=2, reranker=reranker, **config)
    return ContextMemory(store=store, config=settings, write_behind=False, inclusion_log=False)


def session_of(mem: ContextMemory) -> str:
    session = f"s-{uuid.uuid4().hex[:12]}"
    texts = [f"We talked about {t} and the weekend plans with friends again" for t in TOPICS]
    mem.add_messages(
        session,
        [
            {"role": "user" if n % 2 == 0 else "assistant", "content": t}
            for n, t in enumerate(texts)
        ],
        progress=False,
    )
    return session


def test_an_unreadable_answer_never_fails_assemble(store: ChromaStore) -> None:
    plain = memory(store, None)
    session = session_of(plain)
    expected = plain.assemble(session, QUERY, budget=200)
    broken = memory(store, lambda q, t: RaisingItems(len(t)))
    got = broken.assemble(session, QUERY, budget=200)  # raised ValueError
    assert got.render() == expected.render()
    assert got.included_ids == expected.included_ids
    assert got.tokens_used <= 200
    assert len(broken.history(session)) == len(TOPICS)  # nothing stored is lost
    broken.close()
    plain.close()


class SlowToRead:
    """An answer returned at once whose reading waits (a tensor still computing)."""

    def __init__(self, release: threading.Event) -> None:
        self.shape = (len(TOPICS),)
        self.release = release

    def tolist(self) -> list[float]:
        self.release.wait(60)
        return [0.0] * self.shape[0]


def test_an_answer_slow_to_read_is_waited_for_at_most_the_timeout(store: ChromaStore) -> None:
    release = threading.Event()

    def scorer(query: str, texts: Sequence[str]) -> object:
        answer = SlowToRead(release)
        answer.shape = (len(texts),)
        return answer

    mem = memory(store, scorer, reranker_timeout=0.3)
    session = session_of(mem)
    try:
        started = time.monotonic()
        ctx = mem.assemble(session, QUERY, budget=200)
        took = time.monotonic() - started
    finally:
        release.set()
    assert ctx.tokens_used <= 200
    assert took < 20.0  # it took the answer's 60 seconds (a bound far from both, not a speed)
    mem.close()


async def test_a_cancelled_async_call_cancels_its_reranker_and_the_next_call_reranks(
    store: ChromaStore, caplog: pytest.LogCaptureFixture
) -> None:
    seen = {"calls": 0, "cancelled": 0}

    async def scorer(query: str, texts: Sequence[str]) -> list[float]:
        seen["calls"] += 1
        if seen["calls"] == 1:  # the first call hangs until cancelled
            try:
                await asyncio.sleep(120)
            except asyncio.CancelledError:
                seen["cancelled"] += 1
                raise
        return [float(n) for n in range(len(texts))]

    mem = memory(store, scorer, reranker_timeout=60.0)
    session = session_of(mem)
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(mem.aassemble(session, QUERY, budget=200), 0.3)
        took = time.monotonic() - started
        assert took < 20.0  # it waited out the whole reranker_timeout (60 s)
        assert seen["cancelled"] == 1  # the reranker's coroutine was left running
        await mem.acandidates(session, QUERY, budget=200)
    assert seen["calls"] == 2  # the next call was not skipped as "still running"
    assert not [r for r in caplog.records if r.name == LOGGER]  # a cancel is no failure
    await mem.aclose()
