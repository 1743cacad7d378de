"""`PackState.add` of 2026-12-02 (each header and date line recorded with the tier that paid)
against the code before it, in one process, the two taking turns call by call.

A pool of 660 retrieved items (dated over two months), 40 history messages and a question,
assembled under 7,000 tokens in the compact and messages formats, 300 times each way; the
packing's outcome is printed once per side (the same items and tokens). The code before is
`ctxbudget/core/accounting.py` of ``--base`` (a worktree path), loaded as a module of its own
and swapped into `ctxbudget.core.tiers` around each call.

Run: git worktree add /tmp/wt_base 9277d62
     .venv/bin/python benchmarks/bench_pack_accounts.py --base /tmp/wt_base
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import random
import statistics
import sys
import time

import ctxbudget.core.tiers as tiers
from ctxbudget import ContextAssembler, ContextItem, Tier

WORDS = (
    "the a to and of in we you it is for on that this with plan trip Lisbon Porto train budget "
    "booking dinner"
).split()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", required=True, help="a worktree of the code before")
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    path = f"{args.base}/packages/ctxbudget/src/ctxbudget/core/accounting.py"
    spec = importlib.util.spec_from_file_location("accounting_before", path)
    assert spec is not None and spec.loader is not None
    before = importlib.util.module_from_spec(spec)
    sys.modules["accounting_before"] = before
    spec.loader.exec_module(before)
    now = tiers.PackState
    rng = random.Random(1)
    items = [
        ContextItem(
            f"r{i}",
            " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 40))),
            tier=Tier.RETRIEVED,
            score=rng.random(),
            role=rng.choice(["user", "assistant"]),
            timestamp=1.7e9 + rng.randint(0, 60) * 86400,
        )
        for i in range(660)
    ]
    items += [
        ContextItem(
            f"h{i}",
            " ".join(rng.choice(WORDS) for _ in range(20)),
            tier=Tier.RECENT,
            role="user" if i % 2 == 0 else "assistant",
        )
        for i in range(40)
    ]
    items.append(ContextItem("q", "where do we go?", tier=Tier.QUERY, role="user"))
    assembler = ContextAssembler(model="gpt-4o", min_exchanges=1)
    sides = (("before", before.PackState), ("now", now))
    for fmt in ("compact", "messages"):
        took: dict[str, list[float]] = {"before": [], "now": []}
        for call in range(args.calls):
            for name, cls in sides if call % 2 else sides[::-1]:
                tiers.PackState = cls
                start = time.perf_counter()
                context = assembler.assemble(items, budget=7000, format=fmt)
                took[name].append((time.perf_counter() - start) * 1000)
                if call == 0:
                    print(f"{fmt} {name}: {len(context.included_ids)} items, {context.tokens_used}")
        tiers.PackState = now
        old, new = statistics.median(took["before"]), statistics.median(took["now"])
        print(
            f"{fmt}: before p50 {old:.3f} ms, now p50 {new:.3f} ms, now/before {new / old:.3f}; "
            f"load {os.getloadavg()[0]:.1f}"
        )


if __name__ == "__main__":
    main()
