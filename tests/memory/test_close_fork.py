"""A process forked while its parent closes a memory: the child's close returns, nothing is lost.

A preloading server (gunicorn ``--preload``) or ``multiprocessing`` with "fork" copies the
whole process, also a `ContextMemory` whose close is running on another thread. The child has
none of the parent's threads: its copy of the close waited for the parent's closing thread, and
a ``close()`` in the child hung for ever. Now a close the parent was running is the parent's:
in the child the memory is closed and ``close()`` returns at once; the parent's close goes on
and stores every acknowledged message. A memory not closing when the process forked closes in
the child as anywhere, and leaves the parent's memory working.

Real parts: a real fork (``os.fork``, ``multiprocessing``), an embedded Chroma folder, the
default embedder held at a gate in the parent's background writer (so the fork comes in the
middle of the parent's close).
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
import warnings
from pathlib import Path

import pytest

from ctxbudget import MemoryClosedError
from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.memory.context import ContextMemory
from tests.memory.test_close_waits import TURNS, Held

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="the platform has no fork")

HUNG = 120.0  # seconds after which a child still closing is taken for hung (not a timing bound)

CLOSED, STILL_OPEN, CLOSE_RAISED = 0, 4, 5  # the child's exit codes


def _close_in_child(memory: ContextMemory) -> int:
    """In the child: close its copy; the exit code says how it ended."""
    try:
        memory.close()
    except Exception:  # noqa: BLE001 - reported by the exit code
        return CLOSE_RAISED
    try:
        memory.counter_for(None)  # checked open
    except MemoryClosedError:
        return CLOSED
    return STILL_OPEN


def _mp_child(memory: ContextMemory) -> None:
    os._exit(_close_in_child(memory))


def _forked(memory: ContextMemory, how: str) -> int:
    """Fork (``how``), close ``memory`` in the child; the child's exit code (it never hangs)."""
    with warnings.catch_warnings():  # Python 3.12+: fork in a process with threads warns
        warnings.simplefilter("ignore", DeprecationWarning)
        if how == "multiprocessing":
            child = multiprocessing.get_context("fork").Process(target=_mp_child, args=(memory,))
            child.start()
            child.join(HUNG)
            if child.exitcode is None:
                child.kill()
                child.join()
                pytest.fail(f"the forked child's close() hung ({HUNG:.0f} s)")
            return child.exitcode
        pid = os.fork()
        if pid == 0:  # the child: never back into pytest
            code = 1
            try:
                code = _close_in_child(memory)
            finally:
                os._exit(code)
    deadline = time.monotonic() + HUNG
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail(f"the forked child's close() hung ({HUNG:.0f} s)")
        time.sleep(0.01)


@pytest.mark.parametrize("how", ["os.fork", "multiprocessing"])
def test_a_child_forked_during_the_parents_close_closes_at_once(
    tmp_path: Path, embedder: OnnxEmbedder, how: str
) -> None:
    held = Held(tmp_path / "chroma", embedder)
    closing = threading.Thread(target=held.memory.close)
    closing.start()  # held storing the acknowledged turns
    held.until_closing()
    try:
        code = _forked(held.memory, how)
    finally:
        held.gated.gate.set()
        closing.join()
    assert code == CLOSED, f"the child's close ended with exit code {code}"
    held.assert_closed()  # the parent's close stored every turn and let go of the folder


@pytest.mark.parametrize("how", ["os.fork", "multiprocessing"])
def test_a_child_closing_its_copy_leaves_the_parents_memory_working(
    tmp_path: Path, embedder: OnnxEmbedder, how: str
) -> None:
    folder = tmp_path / "chroma"
    memory = ContextMemory(folder, embedder=embedder, inclusion_log=False)
    try:
        memory.add_messages("s1", [("user", t) for t in TURNS[:3]])
        code = _forked(memory, how)
        memory.add_messages("s1", [("user", t) for t in TURNS[3:]])  # the parent goes on
    finally:
        memory.close()
    assert code == CLOSED, f"the child's close ended with exit code {code}"
    again = ContextMemory(folder, embedder=embedder, inclusion_log=False)
    try:
        assert [r.text for r in again.history("s1")] == TURNS
    finally:
        again.close()
