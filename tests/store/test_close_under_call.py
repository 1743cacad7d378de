"""A store closed by one thread while another thread's call runs: that call ends cleanly.

On a server the HTTP client, closed under a request, fails with its own ``RuntimeError``
("Cannot send a request, as the client has been closed"), retried first as if the server had
failed. The caller must get `MemoryClosedError` (what the inspect page answers with 503), at
once, not a raw error after retries; an embedded store holds its lock for the whole call.
"""

from __future__ import annotations

import threading

import pytest

from ctxbudget.errors import MemoryClosedError
from ctxbudget.store.chroma_store import ChromaStore
from ctxbudget.store.records import Record
from tests.conftest import StoreFactory


def test_calls_racing_a_close_end_with_the_closed_error(
    open_store: StoreFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("WARNING")
    for attempt in range(8):
        store: ChromaStore = open_store()
        store.add(
            [
                Record(id=f"m{n}", kind="message", text=f"turn {n}", session_id="s1", role="user")
                for n in range(20)
            ]
        )
        errors: list[BaseException] = []
        started = threading.Event()

        def read(
            store: ChromaStore = store,
            errors: list[BaseException] = errors,
            started: threading.Event = started,
        ) -> None:
            started.set()
            try:
                while True:
                    store.session_messages(namespace="default", session_id="s1")
            except BaseException as exc:  # noqa: BLE001 - what the caller gets
                errors.append(exc)

        reader = threading.Thread(target=read)
        reader.start()
        assert started.wait(5)
        threading.Event().wait(0.005 * attempt)
        store.close()
        reader.join(30)
        assert not reader.is_alive()
        assert len(errors) == 1
        assert isinstance(errors[0], MemoryClosedError), repr(errors[0])
    assert not [r for r in caplog.records if "retrying" in r.getMessage()]
