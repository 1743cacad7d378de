"""Faults: a killed writer, a server that goes away, a read-only folder, a full disk.

What each test injects, and what must hold afterwards:

- SIGKILL of a writer process in the middle of an ingest (embedded folder and server): the store
  opens, every acknowledged message is there with its exact text, seqs are unique and dense,
  the vector index finds them, and the next message gets the next seq.
- A Chroma server stopped (SIGTERM) or killed (SIGKILL) and restarted while a writer runs: calls
  are retried with backoff (`store.retry`); a call that still fails raises a StoreError that
  says what was written; nothing acknowledged is lost and nothing is stored twice.
- A proxy in front of the server answering 503: retried; a bare ``Exception`` never escapes.
- A read-only folder (at open, or from some point on) and a disk that fills during a write:
  a StoreError saying ``cannot write to FOLDER: ...``, and what was stored stays readable.

How the file-system faults are made, since the tests run as root (which ignores ``chmod``):
read-only by ``chmod`` in a worker process that runs without CAP_DAC_OVERRIDE
(``setpriv --bounding-set -dac_override,...``; plain ``chmod`` when not root); a real read-only
file system and a real full disk by a small tmpfs (``mount -t tmpfs -o size=1m``, then
``remount,ro`` or filled up) when the process may mount, skipped otherwise; and a portable
"disk full" by ``RLIMIT_FSIZE`` with SIGXFSZ ignored (writes then fail with EFBIG).

Worker processes embed nothing: they look up vectors the real all-MiniLM-L6-v2 computed once in
this process (``Vectors`` in the worker), so a trial costs a Chroma start, not a torch start.
Timings are printed (run with ``-s``), never asserted.
"""

from __future__ import annotations

import http.client
import json
import logging
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import chromadb.errors
import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxbudget.embed.local import LocalEmbedder
from ctxbudget.errors import StoreError, StoreInputError
from ctxbudget.memory.context import ContextMemory
from ctxbudget.store.chroma_store import ChromaStore, Record
from ctxbudget.store.client import index_not_ready
from ctxbudget.store.retry import RetryPolicy, is_transient, never_sent, retry_call
from ctxbudget.testing import ChromaServer

NS = "default"
SESSION = "s1"
POOL = 160  # distinct messages the workers write
WORDS = (
    "harbor lantern maple quartz violet ember canyon meadow falcon copper glacier orchard "
    "saffron thunder willow basalt cobalt dune fjord garnet hazel indigo juniper kelp lagoon "
    "marble nectar obsidian pebble quill raven sierra tundra umber velvet walnut yarrow zephyr "
    "anchor bramble cedar delta estuary fennel grotto heron iris jasper kestrel lichen"
).split()

# Patient enough to outlast a `chroma run` restart (about 1-2 s here), for the tests that
# restart a server in the middle of a call.
PATIENT = RetryPolicy(attempts=12, backoff=0.2, max_delay=1.0)

WORKER = r'''
import json, os, resource, signal, sys

from ctxbudget.errors import StoreError
from ctxbudget.memory.context import ContextMemory
from ctxbudget.store.retry import RetryPolicy
from ctxbudget.store.chroma_store import ChromaStore


class Vectors:
    """The real model's vectors, computed by the test process, looked up by text."""

    def __init__(self, file):
        with open(file) as handle:
            data = json.load(handle)
        self.name = data["name"]
        self.table = data["vectors"]

    def embed_documents(self, texts):
        return [self.table[t] for t in texts]

    def embed_query(self, text):
        return self.table[text]


def say(**event):
    print(json.dumps(event), flush=True)


def open_store(spec):
    vectors = Vectors(spec["vectors"])
    if spec["target"].startswith("http"):
        return ChromaStore(url=spec["target"], collection=spec["collection"], embedder=vectors,
                           retry=RetryPolicy(attempts=1))
    return ChromaStore(spec["target"], collection=spec["collection"], embedder=vectors)


def messages(spec, start, count):
    rows = spec["messages"][start:start + count]
    return [{"role": "user" if i % 2 == 0 else "assistant", "id": mid, "text": text}
            for i, (mid, text) in enumerate(rows)]


def add(memory, spec, start, count):
    ids = memory.add_messages(spec["session"], messages(spec, start, count), progress=False)
    say(event="ack", ids=ids)


def set_read_only(folder, read_only):
    for root, dirs, files in os.walk(folder):
        for name in files:
            os.chmod(os.path.join(root, name), 0o444 if read_only else 0o644)
        for name in dirs:
            os.chmod(os.path.join(root, name), 0o555 if read_only else 0o755)
    os.chmod(folder, 0o555 if read_only else 0o755)


def ingest(spec):
    memory = ContextMemory(store=open_store(spec), write_behind=spec.get("write_behind", True))
    say(event="open")
    for start in range(spec["skip"], len(spec["messages"]), spec["batch"]):
        add(memory, spec, start, spec["batch"])
    say(event="done")


def fill(spec):
    """Add batches until a write fails (full disk or a file size limit); then read back."""
    memory = ContextMemory(store=open_store(spec), write_behind=False)
    store = memory.store
    add(memory, spec, 0, spec["batch"])
    if spec.get("fsize"):
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        sizes = [os.path.getsize(os.path.join(r, f))
                 for r, _, fs in os.walk(spec["target"]) for f in fs]
        limit = max(sizes) + spec["fsize"]
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
        say(event="limit", bytes=limit)
    start = spec["batch"]
    try:
        while start < len(spec["messages"]):
            add(memory, spec, start, spec["batch"])
            start += spec["batch"]
        say(event="never-failed")
        return
    except StoreError as exc:
        say(event="error", type=type(exc).__name__, message=str(exc), at=start)
    report_reads(store, spec)


def report_reads(store, spec):
    rows = store.session_messages(namespace="default", session_id=spec["session"])
    say(event="rows", rows=[[r.id, r.seq, r.text] for r in rows])
    probe = spec["messages"][1][1]
    hits = store.search(probe, namespace="default", k=2, session_id=spec["session"])
    say(event="search", ids=[h.record.id for h in hits])


def read_only_open(spec):
    """Open a read-only folder (fails), make it writable, open it again in this process."""
    try:
        vectors = Vectors(spec["vectors"])
        ChromaStore(spec["target"], collection=spec["collection"], embedder=vectors)
        say(event="opened")
    except StoreError as exc:
        say(event="error", type=type(exc).__name__, message=str(exc))
    set_read_only(spec["target"], False)
    memory = ContextMemory(store=open_store(spec))
    add(memory, spec, 0, spec["batch"])
    memory.store.close()


def read_only_later(spec):
    """Write, make the folder read-only under the open store, write again, read."""
    memory = ContextMemory(store=open_store(spec), write_behind=False)
    add(memory, spec, 0, spec["batch"])
    set_read_only(spec["target"], True)
    try:
        add(memory, spec, spec["batch"], spec["batch"])
    except StoreError as exc:
        say(event="error", type=type(exc).__name__, message=str(exc))
    report_reads(memory.store, spec)
    memory.store.close()
    set_read_only(spec["target"], False)


def read_only_later_behind(spec):
    """As read_only_later with write-behind: the second batch is acknowledged (journaled);
    storing it fails and is reported; once writable, the next opener stores it."""
    memory = ContextMemory(store=open_store(spec))
    add(memory, spec, 0, spec["batch"])
    memory.flush()
    set_read_only(spec["target"], True)
    add(memory, spec, spec["batch"], spec["batch"])
    try:
        memory.flush()
        say(event="stored")
    except StoreError as exc:
        say(event="error", type=type(exc).__name__, message=str(exc))
    memory.close()
    set_read_only(spec["target"], False)
    report_reads(open_store(spec), spec)


def check(spec):
    """Reopen and report every row (or the error)."""
    try:
        store = open_store(spec)
        report_reads(store, spec)
    except StoreError as exc:
        say(event="error", type=type(exc).__name__, message=str(exc))


with open(sys.argv[1]) as handle:
    SPEC = json.load(handle)
globals()[SPEC["mode"]](SPEC)
'''


# -- shared helpers ----------------------------------------------------------------------------


def pool_texts() -> list[tuple[str, str]]:
    rng = random.Random(20240611)
    rows = []
    for i in range(POOL):
        words = " ".join(rng.choice(WORDS) for _ in range(30))
        rows.append((f"m{i:03d}", f"note {i}: {words}."))
    return rows


@dataclass
class Pool:
    """The worker's messages and the file of their vectors (from the real model)."""

    messages: list[tuple[str, str]]
    vectors: Path
    root: Path

    def text(self, message_id: str) -> str:
        return dict(self.messages)[message_id]


@pytest.fixture(scope="module")
def pool(embedder: LocalEmbedder, tmp_path_factory: pytest.TempPathFactory) -> Pool:
    messages = pool_texts()
    texts = [text for _, text in messages]
    started = time.perf_counter()
    vectors = embedder.embed_documents(texts)
    print(f"\nembedded {len(texts)} pool texts in {time.perf_counter() - started:.1f} s")
    root = tmp_path_factory.mktemp("faults")
    file = root / "vectors.json"
    table = dict(zip(texts, vectors, strict=True))
    file.write_text(json.dumps({"name": embedder.name, "vectors": table}))
    (root / "worker.py").write_text(WORKER)
    return Pool(messages, file, root)


@dataclass
class Run:
    """What a worker printed: its events, the ids it acknowledged, and how it ended."""

    events: list[dict[str, Any]] = field(default_factory=list)
    returncode: int | None = None
    stderr: str = ""

    @property
    def acked(self) -> list[str]:
        return [i for e in self.events if e["event"] == "ack" for i in e["ids"]]

    def one(self, name: str) -> dict[str, Any]:
        found = [e for e in self.events if e["event"] == name]
        assert len(found) == 1, (name, self.events, self.stderr[-3000:])
        return found[0]


def parse(out: str) -> list[dict[str, Any]]:
    # A line cut by SIGKILL has no newline: it was never acknowledged.
    lines = out.split("\n")[:-1]
    return [json.loads(line) for line in lines if line.strip()]


def write_spec(pool: Pool, tmp_path: Path, **spec: Any) -> Path:
    spec.setdefault("vectors", str(pool.vectors))
    spec.setdefault("messages", pool.messages)
    spec.setdefault("session", SESSION)
    spec.setdefault("collection", "ctxbudget")
    spec.setdefault("batch", 4)
    spec.setdefault("skip", 0)
    file = tmp_path / f"spec-{spec['mode']}-{time.monotonic_ns()}.json"
    file.write_text(json.dumps(spec))
    return file


def run_worker(
    pool: Pool, spec: Path, *, prefix: tuple[str, ...] = (), timeout: float = 120
) -> Run:
    command = [*prefix, sys.executable, str(pool.root / "worker.py"), str(spec)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    return Run(parse(done.stdout), done.returncode, done.stderr)


def kill_mid_ingest(pool: Pool, spec: Path, *, acks: int, delay: float) -> Run:
    """Start an ingest, wait for ``acks`` acknowledged batches and ``delay`` s more, SIGKILL."""
    log = spec.with_suffix(".stderr")
    with log.open("w") as err:
        process = subprocess.Popen(
            [sys.executable, str(pool.root / "worker.py"), str(spec)],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        )
    assert process.stdout is not None
    out = []
    seen = 0
    with process.stdout:
        while seen < acks:
            line = process.stdout.readline()
            if not line:
                break
            out.append(line)
            seen += '"ack"' in line
        time.sleep(delay)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
        out.append(process.stdout.read())
    return Run(parse("".join(out)), process.returncode, log.read_text())


def check_acknowledged(store: ChromaStore, pool: Pool, acked: list[str], *, probes: int = 3) -> int:
    """Every acknowledged message is stored, exactly, once, in order, and can be searched."""
    rows = store.session_messages(namespace=NS, session_id=SESSION)
    by_id = {r.id: r for r in rows}
    assert len(by_id) == len(rows)
    missing = [i for i in acked if i not in by_id]
    assert not missing, f"{len(missing)} acknowledged messages lost: {missing[:5]}"
    assert all(by_id[i].text == pool.text(i) for i in acked)
    seqs = [r.seq for r in rows]
    assert None not in seqs and len(set(seqs)) == len(seqs), "seqs must be unique"
    # Acknowledged messages were written in order: their seqs increase.
    acked_seqs = [by_id[i].seq or 0 for i in acked]
    assert acked_seqs == sorted(acked_seqs)
    # The vector index has them too, not only the metadata.
    for message_id in random.Random(len(acked)).sample(acked, min(probes, len(acked))):
        hits = store.search(pool.text(message_id), namespace=NS, k=3, session_id=SESSION)
        assert hits and hits[0].record.id == message_id, (message_id, hits[:1])
        assert hits[0].similarity > 0.99
    return len(rows) - len(acked)


def add_one_more(store: ChromaStore) -> None:
    before = store.session_messages(namespace=NS, session_id=SESSION)
    last = max((r.seq or 0 for r in before), default=-1)
    new = store.add(
        [Record(id="after", kind="message", text="after the fault", session_id=SESSION)]
    )
    assert new[0].seq is not None and new[0].seq > last


def unprivileged() -> tuple[str, ...]:
    """A command prefix under which chmod binds this user: none needed unless root."""
    if os.geteuid() != 0:
        return ()
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: chmod cannot make a folder read-only")
    prefix = (setpriv, "--bounding-set", "-dac_override,-dac_read_search,-fowner", "--")
    probe = subprocess.run([*prefix, "true"], capture_output=True, check=False)
    if probe.returncode != 0:
        pytest.skip(f"cannot drop CAP_DAC_OVERRIDE here: {probe.stderr.decode()[-200:]}")
    return prefix


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs (root and a working mount only); always unmounted."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root")
    point = tmp_path / "tmpfs"
    point.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(point)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield point
    finally:
        if subprocess.run(["umount", str(point)], check=False).returncode != 0:
            subprocess.run(["umount", "-l", str(point)], check=False)


def remount(point: Path, options: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{options}", str(point)], check=True)


# -- the retry policy --------------------------------------------------------------------------


@settings(deadline=None, max_examples=200)
@given(
    attempts=st.integers(1, 2000),
    backoff=st.floats(0, 2),
    multiplier=st.floats(1, 1e6),
    max_delay=st.floats(0, 5),
    jitter=st.floats(0, 1),
    seed=st.integers(0, 2**32),
)
def test_waits_grow_stay_capped_and_sum_to_at_most_max_wait(
    attempts: int, backoff: float, multiplier: float, max_delay: float, jitter: float, seed: int
) -> None:
    policy = RetryPolicy(attempts, backoff, multiplier, max_delay, jitter)
    rng = random.Random(seed)
    waits = [policy.delay(n, rng) for n in range(attempts - 1)]
    for n, wait in enumerate(waits):
        longest = policy.longest(n)
        assert longest <= max_delay
        assert n == 0 or longest >= policy.longest(n - 1)  # never shrinks
        assert longest * (1 - jitter) - 1e-9 <= wait <= longest + 1e-9
    assert sum(waits) <= policy.max_wait * (1 + 1e-9) + 1e-9
    assert policy.max_wait <= max_delay * (attempts - 1) * (1 + 1e-9) + 1e-9


def test_default_policy_gives_up_within_about_two_seconds() -> None:
    policy = RetryPolicy()
    assert policy.attempts == 3
    assert policy.max_wait == pytest.approx(1.5)


@pytest.mark.parametrize(
    "options",
    [{"attempts": 0}, {"attempts": True}, {"backoff": -1}, {"multiplier": 0.5}, {"jitter": 2}],
)
def test_bad_policy_is_an_input_error(options: dict[str, Any]) -> None:
    with pytest.raises(StoreInputError):
        RetryPolicy(**options)
    with pytest.raises(StoreInputError, match="RetryPolicy"):
        ChromaStore(url="http://127.0.0.1:1", retry=3)  # type: ignore[arg-type]


def _request() -> httpx.Request:
    return httpx.Request("POST", "http://127.0.0.1:1/api/v2/x")


def _wrapped_connect_error() -> ValueError:
    try:
        try:
            raise httpx.ConnectError("refused", request=_request())
        except httpx.ConnectError as exc:
            msg = "Could not connect to a Chroma server. Are you sure it is running?"
            raise ValueError(msg) from exc
    except ValueError as wrapped:
        return wrapped


@pytest.mark.parametrize(
    ("error", "transient", "unsent"),
    [
        (httpx.ConnectError("refused", request=_request()), True, True),
        (httpx.ConnectTimeout("slow", request=_request()), True, True),
        (httpx.ReadTimeout("slow", request=_request()), True, False),
        (httpx.ReadError("reset", request=_request()), True, False),
        (httpx.RemoteProtocolError("cut", request=_request()), True, False),
        (ConnectionResetError(), True, False),
        (
            httpx.HTTPStatusError("", request=_request(), response=httpx.Response(503)),
            True,
            False,
        ),
        (
            httpx.HTTPStatusError("", request=_request(), response=httpx.Response(404)),
            False,
            False,
        ),
        (chromadb.errors.RateLimitError("slow down"), True, False),
        (chromadb.errors.InternalError("bug"), False, False),
        (chromadb.errors.InvalidArgumentError("bad"), False, False),
        (ValueError("bad filter"), False, False),
        (StoreInputError("bad input"), False, False),
        (_wrapped_connect_error(), True, True),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, BaseException) else str(v),
)
def test_which_failures_are_transient(error: BaseException, transient: bool, unsent: bool) -> None:
    assert is_transient(error) is transient
    assert never_sent(error) is unsent


def test_only_a_search_meeting_an_index_still_being_written_counts_as_not_ready() -> None:
    # Searches retry these on a server (writes never do: is_transient says no to them).
    half_made = "Error executing plan: Internal error: Error creating hnsw segment reader: "
    not_ready = chromadb.errors.InternalError(half_made + "Nothing found on disk")
    assert index_not_ready(not_ready) and not is_transient(not_ready)
    assert index_not_ready(chromadb.errors.InternalError("Error executing plan: Error finding id"))
    wrapped = StoreError("failed to search")
    wrapped.__cause__ = not_ready
    assert index_not_ready(wrapped)
    broken = chromadb.errors.InternalError(half_made + "Error loading hnsw index")
    assert not index_not_ready(broken)
    assert not index_not_ready(chromadb.errors.InternalError("bug"))


def test_retry_call_retries_transient_errors_only_and_reports_the_tries() -> None:
    waits: list[float] = []
    outcomes: list[BaseException | str] = [ConnectionResetError(), ConnectionResetError(), "ok"]

    def flaky() -> str:
        outcome = outcomes.pop(0)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def fail(exc: BaseException, tries: int, spent: float) -> StoreError:
        return StoreError(f"{tries} tries: {exc!r}")

    policy = RetryPolicy(attempts=3, backoff=0.1, jitter=0)
    assert retry_call(flaky, policy=policy, catch=(OSError,), fail=fail, sleep=waits.append) == "ok"
    assert waits == [0.1, 0.2]

    waits.clear()
    outcomes[:] = [ConnectionResetError()] * 3
    with pytest.raises(StoreError, match="3 tries") as info:
        retry_call(flaky, policy=policy, catch=(OSError,), fail=fail, sleep=waits.append)
    assert isinstance(info.value.__cause__, ConnectionResetError)
    assert len(waits) == 2

    waits.clear()
    outcomes[:] = [PermissionError("no")]
    with pytest.raises(StoreError, match="1 tries"):
        retry_call(flaky, policy=policy, catch=(OSError,), fail=fail, sleep=waits.append)
    assert waits == []  # not transient: no retry

    outcomes[:] = [StoreInputError("bad")]
    with pytest.raises(StoreInputError):  # not caught at all
        retry_call(flaky, policy=policy, catch=(OSError,), fail=fail, sleep=waits.append)
    assert waits == []


# -- a writer killed mid-ingest ----------------------------------------------------------------


def _kill_trials(
    pool: Pool,
    tmp_path: Path,
    embedder: LocalEmbedder,
    seeds: list[int],
    *,
    server: str | None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """SIGKILL ingests at random points; at least one must land mid-ingest.

    Mid-ingest: before the worker acknowledged every batch, or after, while acknowledged
    batches were still only in its journal (the reopen stores them: on a quiet machine the
    write-behind acknowledges all 160 messages in well under a second).
    """
    killed_mid_ingest = 0
    for seed in seeds:
        caplog.clear()
        rng = random.Random(seed)
        acks, delay = rng.randint(1, 12), rng.uniform(0.0, 0.25)
        collection = f"kill-{seed}-{time.monotonic_ns()}"
        target = server or str(tmp_path / f"trial-{seed}")
        spec = write_spec(pool, tmp_path, mode="ingest", target=target, collection=collection)
        started = time.perf_counter()
        run = kill_mid_ingest(pool, spec, acks=acks, delay=delay)
        assert run.returncode == -signal.SIGKILL, run.stderr[-3000:]
        killed_mid_ingest += not any(e["event"] == "done" for e in run.events)
        opened = time.perf_counter()
        if server is None:
            store = ChromaStore(target, embedder=embedder, collection=collection)
        else:
            store = ChromaStore(url=server, embedder=embedder, collection=collection)
        with caplog.at_level(logging.WARNING, logger="ctxbudget.store.journal"), store:
            extra = check_acknowledged(store, pool, run.acked)
            add_one_more(store)
        replayed = "left by a process that died" in caplog.text
        killed_mid_ingest += replayed and any(e["event"] == "done" for e in run.events)
        print(
            f"SIGKILL trial seed={seed} ({'server' if server else 'embedded'}): waited for "
            f"{acks} acks + {delay:.2f} s; {len(run.acked)} acknowledged, 0 lost, {extra} "
            f"unacknowledged stored; run {opened - started:.1f} s, reopen+check "
            f"{time.perf_counter() - opened:.1f} s"
        )
    assert killed_mid_ingest >= 1, "every worker finished before its SIGKILL"


def test_writer_killed_mid_ingest_keeps_every_acknowledged_message(
    pool: Pool, tmp_path: Path, embedder: LocalEmbedder, caplog: pytest.LogCaptureFixture
) -> None:
    _kill_trials(pool, tmp_path, embedder, [1, 2], server=None, caplog=caplog)


@pytest.mark.slow
def test_writer_killed_mid_ingest_many_times(
    pool: Pool, tmp_path: Path, embedder: LocalEmbedder, caplog: pytest.LogCaptureFixture
) -> None:
    _kill_trials(pool, tmp_path, embedder, list(range(10, 18)), server=None, caplog=caplog)


@pytest.mark.slow
@pytest.mark.integration
def test_writer_killed_mid_ingest_on_a_server(
    pool: Pool,
    tmp_path: Path,
    embedder: LocalEmbedder,
    chroma_server: ChromaServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    _kill_trials(
        pool, tmp_path, embedder, list(range(20, 24)), server=chroma_server.url, caplog=caplog
    )


# -- a server that goes away -------------------------------------------------------------------


def _message(i: int, pool: Pool) -> Record:
    message_id, text = pool.messages[i]
    return Record(id=message_id, kind="message", text=text, session_id=SESSION)


def _restart_later(server: ChromaServer, after: float) -> threading.Thread:
    def restart() -> None:
        time.sleep(after)
        server.start()

    thread = threading.Thread(target=restart, daemon=True)
    thread.start()
    return thread


@pytest.mark.integration
def test_call_during_a_server_restart_succeeds_by_retrying(
    start_server: Callable[[], ChromaServer],
    embedder: LocalEmbedder,
    pool: Pool,
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = start_server()
    with ChromaStore(url=server.url, embedder=embedder, retry=PATIENT) as store:
        first = store.add([_message(0, pool), _message(1, pool)])
        for call in ("add", "search"):
            server.stop()
            thread = _restart_later(server, 0.5)
            started = time.perf_counter()
            with caplog.at_level(logging.WARNING, logger="ctxbudget.store.chroma_store"):
                caplog.clear()
                if call == "add":
                    added = store.add([_message(2, pool)])
                    assert added[0].seq == 2
                else:
                    hits = store.search(pool.messages[1][1], namespace=NS, k=1)
                    assert hits[0].record.id == pool.messages[1][0]
            thread.join()
            retries = [r for r in caplog.records if "retrying" in r.getMessage()]
            assert retries, "the call must have gone through retries"
            assert server.url in retries[0].getMessage()
            print(
                f"{call} across a server restart: {len(retries)} retries, "
                f"{time.perf_counter() - started:.1f} s"
            )
        rows = store.session_messages(namespace=NS, session_id=SESSION)
        assert [(r.id, r.seq) for r in rows] == [(r.id, r.seq) for r in first] + [
            (pool.messages[2][0], 2)
        ]


@pytest.mark.integration
def test_server_that_stays_down_is_a_clear_error_and_loses_nothing(
    start_server: Callable[[], ChromaServer], embedder: LocalEmbedder, pool: Pool
) -> None:
    server = start_server()
    with ChromaStore(url=server.url, embedder=embedder) as store:
        acked = store.add([_message(i, pool) for i in range(4)])
        server.stop()
        started = time.perf_counter()
        with pytest.raises(StoreError) as info:
            store.add([_message(4, pool)])
        spent = time.perf_counter() - started
        text = str(info.value)
        assert not isinstance(info.value, StoreInputError)
        assert server.url in text and "after 3 attempts" in text
        assert f"chroma run --host 127.0.0.1 --port {server.port}" in text
        assert "nothing was written" in text
        with pytest.raises(StoreError, match=r"failed to (search|read) after 3 attempts"):
            store.search(pool.messages[0][1], namespace=NS, k=1)
        print(f"server down: StoreError after {spent:.1f} s (3 tries, default policy): {text}")

        server.start()
        again = store.add([_message(4, pool)])  # the failed call, repeated
        assert again[0].seq == 4
        rows = store.session_messages(namespace=NS, session_id=SESSION)
        assert [(r.id, r.seq, r.text) for r in rows] == [
            (r.id, r.seq, r.text) for r in [*acked, *again]
        ]


@pytest.mark.integration
def test_input_errors_on_a_server_are_not_retried(
    chroma_server: ChromaServer, embedder: LocalEmbedder, caplog: pytest.LogCaptureFixture
) -> None:
    collection = f"noretry-{time.monotonic_ns()}"
    with ChromaStore(url=chroma_server.url, embedder=embedder, collection=collection) as store:
        store.add([Record(id="p", kind="pinned", text="a fact")])
        with caplog.at_level(logging.WARNING, logger="ctxbudget.store.chroma_store"):
            with pytest.raises(StoreInputError):
                store.search("fact", namespace=NS, k=1, where={"$bogus": 1})
            with pytest.raises(StoreInputError, match="different content"):
                store.add([Record(id="p", kind="pinned", text="another fact")])
        assert not [r for r in caplog.records if "retrying" in r.getMessage()]


def _writer_across_restart(
    server: ChromaServer, embedder: LocalEmbedder, pool: Pool, *, kill: bool
) -> None:
    acked: list[str] = []
    failures: list[str] = []
    problems: list[BaseException] = []
    total, batch = 80, 4

    def write() -> None:
        try:
            with ChromaStore(url=server.url, embedder=embedder) as store:
                start = 0
                while start < total:
                    chunk = [_message(i, pool) for i in range(start, start + batch)]
                    try:
                        stored = store.add(chunk)
                    except StoreError as exc:  # raised, never silent: write the batch again
                        failures.append(str(exc))
                        if len(failures) > 40:
                            raise
                        time.sleep(0.2)
                        continue
                    acked.extend(r.id for r in stored)
                    start += batch
        except BaseException as exc:  # reported to the test thread below
            problems.append(exc)

    started = time.perf_counter()
    writer = threading.Thread(target=write)
    writer.start()
    while len(acked) < 12 and writer.is_alive():
        time.sleep(0.02)
    server.stop(kill=kill)
    stopped = len(acked)
    time.sleep(0.3)
    server.start()
    writer.join(timeout=300)
    assert not writer.is_alive()
    assert not problems, problems
    assert len(acked) == total
    with ChromaStore(url=server.url, embedder=embedder) as store:
        rows = store.session_messages(namespace=NS, session_id=SESSION)
        assert sorted(r.id for r in rows) == sorted(acked), "lost or duplicated messages"
        assert len({r.seq for r in rows}) == len(rows), "seqs must be unique"
        check_acknowledged(store, pool, acked)
    said = ("nothing was written", "add() them", "the records were written")
    for text in failures:
        assert server.url in text and any(s in text for s in said), text
    print(
        f"writer across a server {'SIGKILL' if kill else 'SIGTERM'}+restart: stopped after "
        f"{stopped} acks; {len(failures)} add() calls raised and were repeated; {total} "
        f"acknowledged, 0 lost, 0 duplicated; {time.perf_counter() - started:.1f} s"
    )


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.parametrize("kill", [False, True], ids=["sigterm", "sigkill"])
def test_writer_across_a_server_stop_and_restart_loses_and_duplicates_nothing(
    start_server: Callable[[], ChromaServer], embedder: LocalEmbedder, pool: Pool, kill: bool
) -> None:
    _writer_across_restart(start_server(), embedder, pool, kill=kill)


# -- a proxy that answers 503 ------------------------------------------------------------------


class FaultyProxy:
    """A real HTTP proxy to a Chroma server that answers some requests itself with an error."""

    def __init__(self, upstream: ChromaServer) -> None:
        self.upstream = upstream
        self.fail: Callable[[str, str], int | None] = lambda method, path: None
        self.seen: list[tuple[str, str, int]] = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def _forward(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                status = proxy.fail(self.command, self.path)
                if status is not None:
                    data, kind = b"upstream unavailable", "text/plain"
                else:
                    connection = http.client.HTTPConnection("127.0.0.1", upstream.port, timeout=60)
                    try:
                        skip = {"host", "connection", "content-length"}
                        headers = {k: v for k, v in self.headers.items() if k.lower() not in skip}
                        connection.request(self.command, self.path, body, headers)
                        reply = connection.getresponse()
                        status, data = reply.status, reply.read()
                        kind = reply.getheader("Content-Type") or "application/json"
                    finally:
                        connection.close()
                proxy.seen.append((self.command, self.path, status))
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _forward

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


@pytest.fixture
def proxy(chroma_server: ChromaServer) -> Iterator[FaultyProxy]:
    faulty = FaultyProxy(chroma_server)
    try:
        yield faulty
    finally:
        faulty.close()


def _record_upserts(store: ChromaStore) -> Callable[[str, str], bool]:
    """Whether a request writes records (on a server, new ones go by add: the first is kept)."""
    meta_id = str(store._collections.meta.id)
    return lambda method, path: path.endswith(("/upsert", "/add")) and meta_id not in path


@pytest.mark.integration
def test_503_from_a_proxy_is_retried(
    proxy: FaultyProxy, embedder: LocalEmbedder, pool: Pool
) -> None:
    collection = f"proxy-{time.monotonic_ns()}"
    policy = RetryPolicy(attempts=3, backoff=0.05)
    with ChromaStore(
        url=proxy.url, embedder=embedder, collection=collection, retry=policy
    ) as store:
        is_upsert = _record_upserts(store)
        refusals = [503, 502]
        proxy.fail = lambda m, p: refusals.pop(0) if is_upsert(m, p) and refusals else None
        stored = store.add([_message(0, pool)])
        upserts = [status for m, p, status in proxy.seen if is_upsert(m, p)]
        assert upserts == [503, 502, 201]  # add answers 201 Created
        assert store.get([stored[0].id], namespace=NS, session_id=SESSION) == stored


@pytest.mark.integration
def test_503_without_retries_is_a_store_error_naming_what_was_acknowledged(
    proxy: FaultyProxy, embedder: LocalEmbedder, pool: Pool
) -> None:
    collection = f"proxy-{time.monotonic_ns()}"
    once = RetryPolicy(attempts=1)
    with ChromaStore(url=proxy.url, embedder=embedder, collection=collection, retry=once) as store:
        is_upsert = _record_upserts(store)
        calls = [0]

        def second_upsert_on(method: str, path: str) -> int | None:
            if not is_upsert(method, path):
                return None
            calls[0] += 1
            return 503 if calls[0] > 1 else None

        proxy.fail = second_upsert_on
        memory = ContextMemory(store=store)
        messages = [{"role": "user", "id": i, "text": t} for i, t in pool.messages[:8]]
        # Before the fix a proxy's 503 escaped as a bare Exception (chromadb's fallback).
        with pytest.raises(StoreError) as info:
            memory.add_messages(SESSION, messages, batch_size=4, progress=False)
        text = str(info.value)
        assert "503" in text and proxy.url in text
        assert "the 4 before were stored (ids 'm000' to 'm003')" in text
        assert "add messages 4 on again" in text
        proxy.fail = lambda method, path: None
        rows = store.session_messages(namespace=NS, session_id=SESSION)
        assert [r.id for r in rows] == ["m000", "m001", "m002", "m003"]
        memory.add_messages(SESSION, messages[4:], progress=False)  # as the message says
        rows = store.session_messages(namespace=NS, session_id=SESSION)
        assert [r.id for r in rows] == [f"m{i:03d}" for i in range(8)]
        # The failed call had claimed seqs 4-7 on the server: they are not given out again
        # (a gap, never a duplicate).
        assert [r.seq for r in rows] == [0, 1, 2, 3, 8, 9, 10, 11]


# -- read-only folders and full disks (embedded) -----------------------------------------------


def test_read_only_folder_at_open_is_a_clear_error_and_opens_once_writable(
    pool: Pool, tmp_path: Path
) -> None:
    prefix = unprivileged()
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    spec = write_spec(pool, tmp_path, mode="read_only_open", target=str(folder))
    run = run_worker(pool, spec, prefix=prefix)
    assert run.returncode == 0, run.stderr[-3000:]
    error = run.one("error")
    assert error["type"] == "StoreError"
    assert f"cannot write to {folder}" in error["message"]
    assert "read-only" in error["message"]
    # Regression: chromadb kept the failed System cached and the next open in the same process
    # raised AttributeError; now it opens once the folder is writable.
    assert run.acked == [i for i, _ in pool.messages[:4]]
    print(f"read-only folder at open: {error['message']}")


def test_folder_turned_read_only_after_open_refuses_writes_and_keeps_data(
    pool: Pool, tmp_path: Path, embedder: LocalEmbedder
) -> None:
    prefix = unprivileged()
    folder = tmp_path / "later"
    spec = write_spec(pool, tmp_path, mode="read_only_later", target=str(folder))
    run = run_worker(pool, spec, prefix=prefix)
    assert run.returncode == 0, run.stderr[-3000:]
    first = [i for i, _ in pool.messages[:4]]
    assert run.acked == first
    error = run.one("error")
    assert error["type"] == "StoreError"
    assert f"cannot write to {folder}" in error["message"]
    assert "read-only" in error["message"]
    assert "add() them again" in error["message"]  # it cannot know what Chroma logged
    assert [row[0] for row in run.one("rows")["rows"]] == first  # readable afterwards
    assert run.one("search")["ids"][0] == pool.messages[1][0]
    with ChromaStore(folder, embedder=embedder) as store:
        extra = check_acknowledged(store, pool, first)
        add_one_more(store)
    print(f"read-only after open: {extra} unacknowledged stored; {error['message']}")


def test_read_only_file_system_at_open(tmpfs: Path, embedder: LocalEmbedder, pool: Pool) -> None:
    folder = tmpfs / "store"
    folder.mkdir()
    remount(tmpfs, "ro")
    with pytest.raises(StoreError, match=rf"cannot write to {re.escape(str(folder))}: .*read-only"):
        ChromaStore(folder, embedder=embedder)
    remount(tmpfs, "rw")
    with ChromaStore(folder, embedder=embedder) as store:  # same process, same folder
        assert store.add([_message(0, pool)])[0].seq == 0


def _fill(
    pool: Pool, tmp_path: Path, folder: Path, *, fsize: int | None = None
) -> tuple[Run, list[str]]:
    spec = write_spec(pool, tmp_path, mode="fill", target=str(folder), batch=8, fsize=fsize)
    started = time.perf_counter()
    run = run_worker(pool, spec)
    assert run.returncode == 0, run.stderr[-3000:]
    assert not [e for e in run.events if e["event"] == "never-failed"]
    error = run.one("error")
    assert error["type"] == "StoreError"
    acked = run.acked
    rows = run.one("rows")["rows"]
    # Readable afterwards, in the same process: exactly what was acknowledged.
    assert [r[0] for r in rows] == acked
    assert [r[1] for r in rows] == list(range(len(acked)))
    assert all(r[2] == pool.text(r[0]) for r in rows)
    assert run.one("search")["ids"][0] == pool.messages[1][0]
    print(
        f"fill {'RLIMIT_FSIZE' if fsize else 'tmpfs'}: {len(acked)} acknowledged before the "
        f"error at message {error['at']} ({time.perf_counter() - started:.1f} s): "
        f"{error['message']}"
    )
    return run, acked


def _check_after_fill(pool: Pool, tmp_path: Path, folder: Path, acked: list[str]) -> None:
    spec = write_spec(pool, tmp_path, mode="check", target=str(folder))
    run = run_worker(pool, spec)
    assert run.returncode == 0, run.stderr[-3000:]
    rows = run.one("rows")["rows"]
    ids = [r[0] for r in rows]
    assert ids[: len(acked)] == acked, "acknowledged messages lost"
    assert len(set(ids)) == len(ids) and len({r[1] for r in rows}) == len(rows)
    assert all(r[2] == pool.text(r[0]) for r in rows)
    assert run.one("search")["ids"][0] == pool.messages[1][0]
    print(f"after the fault: {len(acked)} acknowledged all there, {len(rows) - len(acked)} more")


def test_folder_turned_read_only_under_write_behind_reports_it_and_loses_nothing(
    pool: Pool, tmp_path: Path
) -> None:
    prefix = unprivileged()
    folder = tmp_path / "later-behind"
    spec = write_spec(pool, tmp_path, mode="read_only_later_behind", target=str(folder))
    run = run_worker(pool, spec, prefix=prefix)
    assert run.returncode == 0, run.stderr[-3000:]
    acked = [i for i, _ in pool.messages[:8]]
    assert run.acked == acked  # the journal (an open file) still takes the second batch
    error = run.one("error")
    assert error["type"] == "StoreError"
    assert "are not stored yet" in error["message"] and "read-only" in error["message"]
    rows = run.one("rows")["rows"]
    assert [r[0] for r in rows] == acked  # stored, in order, when the folder was writable again
    assert [r[1] for r in rows] == list(range(8))
    print(f"read-only under write-behind: {error['message']}")


def test_file_size_limit_during_a_write_is_a_clear_error(pool: Pool, tmp_path: Path) -> None:
    folder = tmp_path / "fsize"
    run, acked = _fill(pool, tmp_path, folder, fsize=100_000)
    message = run.one("error")["message"]
    assert f"cannot write to {folder}" in message and "RLIMIT_FSIZE" in message
    assert "add() them again" in message
    _check_after_fill(pool, tmp_path, folder, acked)


def test_disk_filling_up_during_a_write_is_a_clear_error(
    pool: Pool, tmp_path: Path, tmpfs: Path
) -> None:
    folder = tmpfs / "store"
    run, acked = _fill(pool, tmp_path, folder)
    message = run.one("error")["message"]
    assert f"cannot write to {folder}: no space left" in message
    assert "add() them again" in message
    # Still full: reopening is refused clearly (Chroma applies its log before reading).
    spec = write_spec(pool, tmp_path, mode="check", target=str(folder))
    full = run_worker(pool, spec)
    if any(e["event"] == "error" for e in full.events):
        assert "no space left" in full.one("error")["message"]
    remount(tmpfs, "size=16m")
    _check_after_fill(pool, tmp_path, folder, acked)
