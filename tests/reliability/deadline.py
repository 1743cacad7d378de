"""Running test threads under a deadline: a hang fails the test with every thread's stack."""

from __future__ import annotations

import faulthandler
import tempfile
import threading
import time
from collections.abc import Callable, Sequence

import pytest

DEADLINE = 300.0  # seconds; far above a normal run, so only a deadlock reaches it


def run_threads(jobs: Sequence[Callable[[], None]], *, deadline: float = DEADLINE) -> None:
    """Run jobs in daemon threads released together; fail with every stack if one hangs."""
    barrier = threading.Barrier(len(jobs))
    errors: list[BaseException] = []

    def target(job: Callable[[], None]) -> None:
        try:
            barrier.wait()
            job()
        except BaseException as exc:  # noqa: BLE001 - handed back to the test thread
            errors.append(exc)

    threads = [threading.Thread(target=target, args=(job,), daemon=True) for job in jobs]
    for thread in threads:
        thread.start()
    end = time.monotonic() + deadline
    for thread in threads:
        thread.join(timeout=max(0.0, end - time.monotonic()))
    if any(thread.is_alive() for thread in threads):
        with tempfile.TemporaryFile("w+") as dump:
            faulthandler.dump_traceback(dump, all_threads=True)
            dump.seek(0)
            stacks = dump.read()
        pytest.fail(f"threads still running after {deadline:.0f} s (deadlock?):\n{stacks}")
    if errors:
        raise errors[0]
