"""The async surface, probed again: two event loops on one memory, a close from a third thread,
Ctrl-C in the middle of writes, and ``async with``.

* Two threads, each running its own event loop (``asyncio.run``), share one memory with an
  async reranker, while a third thread closes it: every call ends with its result or
  `MemoryClosedError` (no "different loop" or "Event loop is closed" error, no hang), every
  acknowledged batch is stored whole, and no thread of the memory is left.
* SIGINT in a process writing with ``aadd_messages`` or ``add_messages``: the program's own
  ``finally`` closes the memory, and reopened it holds every acknowledged batch, each whole.
* ``async with ContextMemory(...)`` (found, not fixed here: see the test).

Real parts: an embedded Chroma in ``tmp_path``, the default embedder, real processes and signals.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import pytest

from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.errors import MemoryClosedError
from ctxbudget.memory.context import ContextMemory
from ctxbudget.memory.policy.config import MemoryConfig

ROOT = Path(__file__).resolve().parents[2]


def stored(path: Path, session: str, embedder: OnnxEmbedder) -> list[str]:
    mem = ContextMemory(path, embedder=embedder, write_behind=False)
    try:
        return [m.text for m in mem.history(session)]
    finally:
        mem.close()


@pytest.mark.parametrize("write_behind", [True, False], ids=["write-behind", "direct"])
def test_two_event_loops_share_a_memory_a_third_thread_closes(
    tmp_path: Path, embedder: OnnxEmbedder, write_behind: bool
) -> None:
    async def rerank(query: str, texts: Sequence[str]) -> list[float]:
        await asyncio.sleep(0)  # on the loop of the call that awaits it
        return [float(len(t)) for t in texts]

    before = set(threading.enumerate())  # other tests' memories may keep theirs
    path = tmp_path / "chroma"
    config = MemoryConfig(reranker=rerank)
    mem = ContextMemory(path, embedder=embedder, config=config, write_behind=write_behind)
    mem.add_messages("seed", [("user", f"seed {n} about trains") for n in range(6)])
    acked: dict[str, list[int]] = {"A": [], "B": []}
    ended: Counter[str] = Counter()
    going = threading.Barrier(3)

    def app(name: str) -> None:
        async def main() -> None:
            n = 0
            while True:
                try:
                    turn = [("user", f"{name} {n} asks"), ("assistant", f"{name} {n} answers")]
                    await mem.aadd_messages(f"s-{name}", turn)
                    acked[name].append(n)
                    await mem.aassemble(f"s-{name}", "trains", budget=200)
                except MemoryClosedError:
                    ended["closed"] += 1
                    return
                except Exception as exc:  # noqa: BLE001 - counted: the test says which
                    ended[f"{type(exc).__name__}: {exc}"] += 1
                    return
                n += 1
                if n == 3:
                    going.wait(60)  # both loops are calling when the close comes

        asyncio.run(main())

    apps = [threading.Thread(target=app, args=(name,)) for name in acked]
    for thread in apps:
        thread.start()
    going.wait(60)
    mem.close()
    for thread in apps:
        thread.join(120)
    assert not any(t.is_alive() for t in apps)
    assert ended == Counter(closed=2)
    new = {t.name for t in set(threading.enumerate()) - before}
    assert not {n for n in new if n.startswith("ctxbudget")} - {"ctxbudget-rerank-loop"}
    for name, turns in acked.items():
        assert len(turns) >= 3
        texts = set(stored(path, f"s-{name}", embedder))
        for n in turns:
            assert {f"{name} {n} asks", f"{name} {n} answers"} <= texts, (name, n)


WRITER = """
import asyncio, sys
from ctxbudget.memory.context import ContextMemory
path, how = sys.argv[1], sys.argv[2]
mem = ContextMemory(path, write_behind=how.endswith("behind"))
def batch(n):
    return [("user", f"batch {n} part {k}") for k in range(5)]
if how.startswith("async"):
    async def main():
        try:
            n = 0
            while True:
                await mem.aadd_messages("s", batch(n))
                print("ACK", n, flush=True)
                n += 1
        finally:
            await mem.aclose()
            print("CLOSED", flush=True)
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass
else:
    try:
        n = 0
        while True:
            mem.add_messages("s", batch(n))
            print("ACK", n, flush=True)
            n += 1
    except KeyboardInterrupt:
        pass
    finally:
        mem.close()
        print("CLOSED", flush=True)
"""


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(signal, "SIGINT") or os.name != "posix", reason="POSIX signals")
@pytest.mark.parametrize("how", ["async", "async-behind", "sync", "sync-behind"])
def test_ctrl_c_during_writes_keeps_every_acknowledged_batch_whole(
    tmp_path: Path, embedder: OnnxEmbedder, how: str
) -> None:
    path = tmp_path / "chroma"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "ANONYMIZED_TELEMETRY": "False"}
    env["ORT_DISABLE_TELEMETRY"] = "1"
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path), how],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=env,
    )
    assert writer.stdout is not None
    acked: list[int] = []
    for line in writer.stdout:
        if line.startswith("ACK"):
            acked.append(int(line.split()[1]))
            if len(acked) == 4:
                writer.send_signal(signal.SIGINT)  # mid-write of the next batch, or just before
                break
    out, err = writer.communicate(timeout=120)
    assert writer.returncode == 0, err[-2000:]
    assert "CLOSED" in out, err[-2000:]
    batches = Counter(text.split(" part ")[0] for text in stored(path, "s", embedder))
    assert all(count == 5 for count in batches.values()), batches  # whole or not at all
    assert {f"batch {n}" for n in acked} <= set(batches)


async def test_async_with_closes_the_memory(tmp_path: Path, embedder: OnnxEmbedder) -> None:
    async with ContextMemory(tmp_path / "chroma", embedder=embedder) as mem:
        await mem.aadd_message("s", "user", "hello")
    with pytest.raises(MemoryClosedError):
        await mem.ahistory("s")
    with ContextMemory(tmp_path / "chroma", embedder=embedder) as again:  # stored, and closed
        assert [m.text for m in again.history("s")] == ["hello"]
