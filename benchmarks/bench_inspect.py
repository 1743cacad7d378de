"""How fast the inspector's pages open for a long session: 2,000 messages, 1,000 logged calls.

One embedded store (built once into ``--cache``) holds one session of ``--messages`` chat
messages (`_common.sentence`; `_common.HashEmbedder`, since what is measured is the page, not
retrieval) and ``--calls`` logged assemblies of it (``InclusionLogConfig(retain=...)`` keeps
them all), at budgets between 500 and 4,000 tokens. The store is then opened as
``ctxbudget inspect`` opens it (`ctxbudget.inspect.open_reader`), served on 127.0.0.1, and each
page fetched over HTTP ``--repeat`` times: the sessions page, the session's timeline (HTML and
JSON), its newest assembly, a message's page and a search. Reports each page's first (cold)
fetch and the p50/p95 of the rest, its size, and the machine's load. Target: under a second.

Run: nice -n 5 .venv/bin/python benchmarks/bench_inspect.py [--messages 2000] [--calls 1000]
     [--repeat 5] [--cache /tmp/inspect-bench]
"""

from __future__ import annotations

import os

os.environ["ANONYMIZED_TELEMETRY"] = "False"
os.environ["ORT_DISABLE_TELEMETRY"] = "1"
os.environ["HF_HUB_OFFLINE"] = "1"

import argparse
import random
import time
import urllib.request
from pathlib import Path

from _common import HashEmbedder, machine, sentence, summary

from ctxbudget.inspect import open_reader, serve
from ctxbudget.memory.context import ContextMemory
from ctxbudget.memory.log.api import InclusionLogConfig

SESSION = "long-chat"


def build(folder: Path, messages: int, calls: int) -> None:
    """The session and its logged calls, unless ``folder`` holds them already."""
    done = folder / "built"
    if done.exists() and done.read_text() == f"{messages} {calls}":
        return
    rng = random.Random(5)
    log = InclusionLogConfig(retain=calls)
    with ContextMemory(folder, embedder=HashEmbedder(), inclusion_log=log) as memory:
        turns = [
            {
                "id": f"m{n:05d}",
                "role": "user" if n % 2 == 0 else "assistant",
                "text": sentence(rng),
            }
            for n in range(messages)
        ]
        memory.add_messages(SESSION, turns, user_id="bench", progress=False)
        started = time.perf_counter()
        for n in range(calls):
            memory.assemble(SESSION, sentence(rng), budget=rng.choice((500, 1000, 2000, 4000)))
            if n % 200 == 199:
                print(f"  {n + 1} calls logged ({time.perf_counter() - started:.0f} s)")
        memory.flush()
    done.write_text(f"{messages} {calls}")


def fetch(url: str) -> tuple[float, int]:
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=120) as answer:
        size = len(answer.read())
    return (time.perf_counter() - started) * 1000, size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--cache", default="/tmp/ctxbudget-inspect-bench")
    args = parser.parse_args()
    folder = Path(args.cache)
    folder.mkdir(parents=True, exist_ok=True)
    print(f"machine: {machine()}; load {os.getloadavg()[0]:.2f}")
    build(folder, args.messages, args.calls)
    reader = open_reader(folder)
    try:
        with serve(reader, port=0) as page:
            base = page.url.rstrip("/")
            timeline = base + f"/session/{SESSION}"
            newest = reader.contexts(SESSION, limit=1)[0].id
            held = len(reader.contexts(SESSION))
            print(f"session {SESSION}: {len(reader.history(SESSION)):,} messages, {held:,} logged")
            pages = {
                "sessions": page.url,
                "timeline": timeline,
                "timeline json": timeline + "?format=json",
                "assembly": f"{timeline}/assembly/{newest}",
                "message": f"{timeline}/message/m01000",
                "search": page.url + "?q=lisbon+train",
            }
            for name, url in pages.items():
                cold, size = fetch(url)
                warm = [fetch(url)[0] for _ in range(args.repeat)]
                print(f"{name:14s} {size / 1024:8.0f} KB  first {cold:7.1f} ms  {summary(warm)}")
    finally:
        reader.close()
    print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
