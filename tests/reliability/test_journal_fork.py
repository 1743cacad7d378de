"""A process that acknowledged messages, forked and died: nothing lost, nothing out of order.

A worker process acknowledges messages with `ContextMemory` (they stay in its write journal: the
background writer is told to wait), forks (``multiprocessing`` with "fork", ``os.fork``) and is
killed with SIGKILL. The forked child lives on. Its copy of the journal's descriptor shared the
parent's lock, so the next `ContextMemory` on the folder took the journal for a live writer's
and skipped it: the acknowledged messages were missing, and stored after later ones once the
child ended. Now the child closes its copies as it starts, and the next opener stores the
journal before anything it writes. A child that exits normally (``atexit``) leaves the parent's
journal alone (its exit handlers do not remove the file the parent goes on writing), and cannot
acknowledge through the parent's memory.

The last test pins the rule for a journal found dead only after the next process started writing
(held by a process this code does not control): its batches are stored before the next write,
after those stored while it looked alive.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ctxbudget import ContextMemory
from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.store.journal import JOURNAL_FOLDER

pytestmark = pytest.mark.slow

WORKER = r"""
import atexit, json, multiprocessing, os, signal, sys, time
from ctxbudget import ContextMemory
from ctxbudget.errors import StoreError
from ctxbudget.store.records import Record

folder, mode = sys.argv[1], sys.argv[2]
memory = ContextMemory(folder)

def emit(**event):
    print(json.dumps(event), flush=True)

def acknowledge(numbers):
    for i in numbers:
        memory.add_message("s1", "user" if i % 2 == 0 else "assistant",
                           f"acknowledged {i}: the parcel for flat {i}", id=f"a{i}")

if mode.startswith("atexit"):
    acknowledge(range(3))
    memory.flush()  # stored: the journal is empty, and the parent's writer goes on using it
    pid = os.fork()
    if pid == 0:
        if mode == "atexit-submit":
            try:  # the child's copy acknowledges nothing
                record = Record(id="c", kind="message", text="c", session_id="s1")
                memory._behind.submit([record])
                emit(copy="accepted")
            except StoreError as exc:
                emit(copy="refused", error=str(exc))
        # What a normal exit runs first: atexit closes the child's copy of the memory. (The
        # rest of a normal exit can hang in a forked child in chromadb's native code.)
        atexit._run_exitfuncs()
        os._exit(0)
    os.waitpid(pid, 0)
    memory._behind._linger = 3600.0  # from here on, acknowledged only: in the journal
    acknowledge(range(3, 6))
    emit(acked=[f"a{i}" for i in range(6)], child=pid)
else:
    memory._behind._linger = 3600.0  # acknowledged only: in the journal, not in Chroma
    acknowledge(range(4))
    if mode == "multiprocessing":
        child = multiprocessing.get_context("fork").Process(target=time.sleep, args=(600,))
        child.start()
        pid = child.pid
    elif mode == "fork":
        pid = os.fork()
        if pid == 0:
            time.sleep(600)
            os._exit(0)
    else:
        pid = None
    emit(acked=[f"a{i}" for i in range(4)], child=pid)
os.kill(os.getpid(), signal.SIGKILL)
"""

HOLDER = r"""
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.flock(fd, fcntl.LOCK_EX)
print("locked", flush=True)
sys.stdin.read()  # until the test closes our stdin
"""


@pytest.fixture
def groups() -> Iterator[list[int]]:
    """Process groups of the workers (each worker and its forked children), killed after."""
    started: list[int] = []
    yield started
    for group in started:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGKILL)


def run_worker(tmp_path: Path, folder: Path, mode: str, groups: list[int]) -> dict[str, Any]:
    """Run the worker until it kills itself; its events, merged."""
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    with (tmp_path / f"{mode}.err").open("w") as errors:
        worker = subprocess.Popen(
            [sys.executable, str(script), str(folder), mode],
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
            start_new_session=True,  # its own group: the test can end it and its children
        )
        groups.append(worker.pid)
        # A hang fails the test instead of blocking it: the group is killed, the pipe closes.
        watchdog = threading.Timer(180, os.killpg, (worker.pid, signal.SIGKILL))
        watchdog.start()
        assert worker.stdout is not None
        events: dict[str, Any] = {}
        try:
            with worker.stdout:  # a forked child keeps the pipe open: read events, not to EOF
                while "acked" not in events:
                    line = worker.stdout.readline()
                    if not line:
                        break
                    events.update(json.loads(line))
                worker.wait(timeout=180)
        finally:
            watchdog.cancel()
    assert worker.returncode == -signal.SIGKILL, (tmp_path / f"{mode}.err").read_text()[-3000:]
    assert "acked" in events, (tmp_path / f"{mode}.err").read_text()[-3000:]
    return events


def journals(folder: Path) -> list[Path]:
    return sorted((folder / JOURNAL_FOLDER).rglob("*.jsonl"))


def ids_and_seqs(memory: ContextMemory) -> tuple[list[str], list[int]]:
    history = memory.history("s1")
    return [r.id for r in history], [r.seq for r in history if r.seq is not None]


@pytest.mark.parametrize("mode", ["multiprocessing", "fork"])
def test_a_forked_child_outliving_the_writer_does_not_hide_its_acknowledged_messages(
    tmp_path: Path, embedder: OnnxEmbedder, groups: list[int], mode: str
) -> None:
    folder = tmp_path / "memory"
    events = run_worker(tmp_path, folder, mode, groups)
    os.kill(events["child"], 0)  # the child lives on
    assert len(journals(folder)) == 1
    with ContextMemory(folder, embedder=embedder) as memory:
        # Stored as the memory opened, before anything it writes.
        memory.add_message("s1", "user", "a question after the crash", id="later")
        ids, seqs = ids_and_seqs(memory)
        assert ids == [*events["acked"], "later"]
        assert seqs == sorted(set(seqs)) and len(seqs) == len(ids)
    assert journals(folder) == []
    os.kill(events["child"], 0)  # still alive: its lock copy was closed, not the child


@pytest.mark.parametrize("submit", [False, True])
def test_a_forked_child_exiting_normally_leaves_the_parents_journal_and_acknowledges_nothing(
    tmp_path: Path, embedder: OnnxEmbedder, groups: list[int], submit: bool
) -> None:
    folder = tmp_path / "memory"
    events = run_worker(tmp_path, folder, "atexit-submit" if submit else "atexit", groups)
    with ContextMemory(folder, embedder=embedder) as memory:
        ids, _ = ids_and_seqs(memory)
        # a3..a5 were in the journal the child's exit did not remove, and nothing of the child.
        assert ids == events["acked"]
    if submit:
        assert events["copy"] == "refused"
        assert "forked from it" in events["error"]


def test_a_journal_found_dead_later_is_stored_before_the_next_write(
    tmp_path: Path, embedder: OnnxEmbedder, groups: list[int]
) -> None:
    folder = tmp_path / "memory"
    events = run_worker(tmp_path, folder, "plain", groups)
    (journal,) = journals(folder)
    # A process that holds the dead writer's lock (a child forked by code that bypasses
    # Python's fork hooks would): the journal looks alive when the next memory opens.
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(journal)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdin is not None
    try:
        assert holder.stdout.readline().strip() == "locked"
        with ContextMemory(folder, embedder=embedder) as memory:
            memory.add_message("s1", "user", "written while the journal looked alive", id="b0")
            memory.flush()
            assert ids_and_seqs(memory)[0] == ["b0"]
            holder.stdin.close()  # the holder ends: the journal is a dead writer's now
            assert holder.wait(timeout=60) == 0
            memory.add_message("s1", "user", "written after it died", id="b1")
            memory.flush()
            ids, seqs = ids_and_seqs(memory)
            # Stored before the first write after its death, after what was stored before it.
            assert ids == ["b0", *events["acked"], "b1"]
            assert seqs == sorted(set(seqs)) and len(seqs) == len(ids)
        assert journals(folder) == []
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(timeout=60)
        holder.stdout.close()
