"""`CtxBudgetStore` in two worker processes on one Chroma server answers as `InMemoryStore`.

The side-by-side machine (`lg_store_machine`) with its actors in processes
(`lg_store_worker`): each worker has its own `ContextMemory` over the server and a
`CtxBudgetStore` over it; the machine's steps go to one worker or the other, interleaved, and
every answer is compared with LangGraph's `InMemoryStore` here. Workers share nothing but the
server. Each example works in a fresh namespace of one collection.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis.stateful import run_state_machine_as_test
from lg_store_machine import Actor, SideBySide, machine_settings

from ctxbudget.testing import ChromaServer
from tests.langchain.lg_store_worker import REPLY
from tests.worker_process import Worker


@pytest.fixture(params=[None, 1], ids=["shared", "user_at=1"])
def workers(
    request: pytest.FixtureRequest, chroma_server: ChromaServer, tmp_path: Path
) -> Iterator[tuple[list[Worker], int | None]]:
    collection = f"lgstore-{uuid.uuid4().hex[:8]}"
    user_at = request.param
    at = "-" if user_at is None else str(user_at)
    started = [
        Worker(
            "tests.langchain.lg_store_worker",
            chroma_server.url,
            collection,
            at,
            log=tmp_path / f"worker-{i}.log",
            reply=REPLY,
        )
        for i in (0, 1)
    ]
    yield started, user_at
    for worker in started:
        worker.stop()


def _actors(workers: list[Worker]) -> Callable[[], tuple[list[Actor], Callable[[], None]]]:
    def open_actors() -> tuple[list[Actor], Callable[[], None]]:
        namespace = f"ex-{uuid.uuid4().hex[:12]}"
        for worker in workers:
            worker.ask({"open": namespace})

        def actor(worker: Worker) -> Actor:
            return lambda command, use_async: worker.ask({"run": command, "async": use_async})[
                "answer"
            ]

        def close() -> None:
            for worker in workers:
                worker.ask({"close": True})

        return [actor(w) for w in workers], close

    return open_actors


@pytest.mark.slow  # two processes load the model
@pytest.mark.integration
def test_two_workers_on_one_server_answer_as_in_memory_store(
    workers: tuple[list[Worker], int | None],
) -> None:
    started, user_at = workers

    class OnServer(SideBySide):
        pass

    OnServer.open_actors = staticmethod(_actors(started))  # type: ignore[assignment]
    OnServer.user_at = user_at
    run_state_machine_as_test(OnServer, settings=machine_settings(4, 25))
