"""A process killed (SIGKILL) right after `ContextMemory` acknowledged messages loses none.

`add_message` returns once the message is in the write journal; Chroma gets it in the background.
A worker process acknowledges messages one by one and prints each id; it is killed at a random
moment, most of the time with messages acknowledged and not yet in Chroma. The next
`ContextMemory` on the folder stores them when it opens: every acknowledged message is there,
once, in acknowledgement order, and can be found by a vector search.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ctxbudget import ContextMemory
from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.store.journal import read_batches

pytestmark = pytest.mark.slow

WORKER = r"""
import json, sys
from ctxbudget import ContextMemory
folder, count = sys.argv[1], int(sys.argv[2])
memory = ContextMemory(folder)
print(json.dumps({"event": "open"}), flush=True)
for i in range(count):
    message_id = memory.add_message("s1", "user" if i % 2 == 0 else "assistant",
                                    f"note {i}: the parcel for flat {i} goes to the blue door",
                                    id=f"m{i:03d}")
    print(json.dumps({"event": "ack", "id": message_id}), flush=True)
memory.close()
print(json.dumps({"event": "done"}), flush=True)
"""


def run_and_kill(folder: Path, script: Path, *, acks: int, delay: float) -> list[str]:
    process = subprocess.Popen(
        [sys.executable, str(script), str(folder), "400"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    acked: list[str] = []
    while len(acked) < acks:
        line = process.stdout.readline()
        if not line:
            break
        event = json.loads(line)
        if event["event"] == "ack":
            acked.append(event["id"])
    time.sleep(delay)
    process.send_signal(signal.SIGKILL)
    rest, errors = process.communicate(timeout=60)
    assert process.returncode == -signal.SIGKILL, errors[-3000:]
    # A line cut by the kill has no newline: it was never read as an acknowledgement.
    for line in rest.split("\n")[:-1]:
        if line.strip() and json.loads(line)["event"] == "ack":
            acked.append(json.loads(line)["id"])
    return acked


def unstored(folder: Path) -> int:
    journals = (folder / "ctxbudget-journal").rglob("*.jsonl")
    return sum(len(b.records) for path in journals for b in read_batches(path))


def test_messages_acknowledged_before_a_sigkill_are_stored_when_the_memory_reopens(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    replayed = 0
    for seed in range(8):
        replayed += bool(one_trial(tmp_path / f"memory-{seed}", script, embedder, seed))
    # Most kills land with acknowledged messages still only in the journal.
    assert replayed >= 2, f"only {replayed} of 8 kills left messages to replay"


def one_trial(folder: Path, script: Path, embedder: OnnxEmbedder, seed: int) -> int:
    rng = random.Random(seed)
    acked = run_and_kill(folder, script, acks=rng.randint(1, 40), delay=rng.uniform(0, 0.02))
    assert acked
    waiting = unstored(folder)
    print(f"seed {seed}: {len(acked)} acknowledged, {waiting} only in the journal at the kill")
    with ContextMemory(folder, embedder=embedder) as memory:
        stored = memory.history("s1")
        by_id = {r.id: r for r in stored}
        assert len(by_id) == len(stored), "a message stored twice"
        missing = [i for i in acked if i not in by_id]
        assert not missing, f"{len(missing)} of {len(acked)} acknowledged messages lost"
        seqs = [by_id[i].seq for i in acked]
        assert seqs == sorted(seqs), "acknowledged messages out of order"
        probe = acked[-1]
        hits = memory.search(by_id[probe].text, k=1, kinds=["message"], session_id="s1")
        assert hits and hits[0].hit.record.id == probe
    assert unstored(folder) == 0  # replayed and removed
    return waiting
