"""Tokens of the same long conversation in each output format, on the LoCoMo conversations.

Each LoCoMo conversation becomes a history of `ContextItem`s (speaker A as ``user``, speaker B as
``assistant``, the speaker as ``name``, the session date as timestamp, an image caption appended
as `` [image: caption]``). The whole history is counted (a) as the JSON chat messages an app
would send (``counter.count_messages``), then assembled with a budget that keeps everything in
ctxbudget's (b) ``messages``, (c) ``text`` and (d) ``compact`` formats; and it is assembled
under 1k/2k/4k/8k-token budgets to count how many turns each format fits.

The data is LoCoMo (Maharana et al., ACL 2024), licensed CC BY-NC 4.0: it is read from outside
the repository and must never be copied into it.

Run: .venv/bin/python benchmarks/bench_compact.py [--locomo ../shared/data/locomo/locomo_dev.json]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import statistics
import time
from datetime import UTC, datetime
from typing import Any

from _common import add_locomo_argument, machine, require_locomo

from ctxbudget import AssembledContext, ContextAssembler, ContextItem, Tier, TokenCounter

FORMATS = ("messages", "text", "compact")
BUDGETS = (1024, 2048, 4096, 8192)
EVERYTHING = 10**7
SESSION = re.compile(r"session_(\d+)")


def session_time(text: str) -> float:
    """``"1:56 pm on 8 May, 2023"`` as seconds since the epoch (read as UTC)."""
    parsed = datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y")
    return parsed.replace(tzinfo=UTC).timestamp()


def history(sample: dict[str, Any]) -> list[ContextItem]:
    conv = sample["conversation"]
    roles = {conv["speaker_a"]: "user", conv["speaker_b"]: "assistant"}
    sessions = sorted(
        (int(m.group(1)), key) for key in conv if (m := SESSION.fullmatch(key))
    )  # session_10 comes after session_9; date keys without a session are ignored
    items = []
    for _, key in sessions:
        when = session_time(conv[f"{key}_date_time"])
        for turn in conv[key]:
            text = turn["text"]
            if turn.get("blip_caption"):
                text += f" [image: {turn['blip_caption']}]"
            items.append(
                ContextItem(
                    f"{sample['sample_id']}:{turn['dia_id']}",
                    text,
                    tier=Tier.RECENT,
                    role=roles[turn["speaker"]],
                    name=turn["speaker"],
                    timestamp=when,
                )
            )
    return items


def check_full(ctx: AssembledContext, items: list[ContextItem], counter: TokenCounter) -> list[str]:
    problems = []
    if ctx.pruned or len(ctx.included) != len(items):
        problems.append(
            f"{ctx.format}: {len(ctx.pruned)} pruned, {len(ctx.included)}/{len(items)} included"
        )
    sent = counter.count_messages(ctx.to_messages())
    if sent != ctx.tokens_used:
        problems.append(
            f"{ctx.format}: tokens_used {ctx.tokens_used} but to_messages() counts {sent}"
        )
    if ctx.format != "messages" and counter.count(ctx.render()) > ctx.tokens_used:
        problems.append(f"{ctx.format}: render() counts more than tokens_used")
    return problems


def main() -> None:
    parser = argparse.ArgumentParser()
    add_locomo_argument(parser)
    args = parser.parse_args()
    path = require_locomo(args.locomo)
    samples = json.loads(path.read_text(encoding="utf-8"))

    counter = TokenCounter.for_model("gpt-4o")
    assembler = ContextAssembler(counter, min_exchanges=0)
    started = time.perf_counter()
    rows: list[dict[str, Any]] = []
    problems: list[str] = []
    for sample in samples:
        items = history(sample)
        row: dict[str, Any] = {"name": sample["sample_id"], "turns": len(items)}
        row["json"] = counter.count_messages(
            [{"role": it.role, "name": it.name, "content": it.text} for it in items]
        )
        for fmt in FORMATS:
            ctx = assembler.assemble(items, budget=EVERYTHING, format=fmt)
            problems.extend(f"{sample['sample_id']} {p}" for p in check_full(ctx, items, counter))
            row[fmt] = ctx.tokens_used
            for budget in BUDGETS:
                fitted = assembler.assemble(items, budget=budget, format=fmt)
                sent = counter.count_messages(fitted.to_messages())
                if not sent == fitted.tokens_used <= budget:
                    problems.append(
                        f"{sample['sample_id']} {fmt} @ {budget}: tokens_used "
                        f"{fitted.tokens_used}, to_messages() counts {sent}"
                    )
                row[(fmt, budget)] = len(fitted.included)
        untimed = [dataclasses.replace(it, timestamp=None) for it in items]
        ctx = assembler.assemble(untimed, budget=EVERYTHING, format="compact")
        problems.extend(
            f"{sample['sample_id']} untimed {p}" for p in check_full(ctx, items, counter)
        )
        row["untimed"] = ctx.tokens_used
        rows.append(row)
    elapsed = time.perf_counter() - started

    total: dict[str, Any] = {"name": "**total**", "turns": sum(r["turns"] for r in rows)}
    for key in ("json", *FORMATS, "untimed"):
        total[key] = sum(r[key] for r in rows)
    for fmt in FORMATS:
        for budget in BUDGETS:
            total[(fmt, budget)] = statistics.fmean(r[(fmt, budget)] for r in rows)

    print(f"machine: {machine()}")
    print(f"data: {path.name}, {len(rows)} conversations; counter {counter.name} (gpt-4o)")
    print()
    print(
        "| conversation | turns | JSON messages | `messages` | `text` | `compact` "
        "| `compact`, no timestamps | text vs JSON | compact vs JSON | compact, no timestamps, vs JSON |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for row in [*rows, total]:
        print(
            f"| {row['name']} | {row['turns']:,} | {row['json']:,} | {row['messages']:,} "
            f"| {row['text']:,} | {row['compact']:,} | {row['untimed']:,} "
            f"| {1 - row['text'] / row['json']:.1%} | {1 - row['compact'] / row['json']:.1%} "
            f"| {1 - row['untimed'] / row['json']:.1%} |"
        )
    print()
    print(
        "tokens of the whole history as sent (reply priming included); X vs JSON: tokens saved "
        "against the JSON chat messages (negative: more tokens). `compact`, no timestamps: the "
        "same items with timestamp=None (the compact format writes the time on every line)."
    )
    print()
    print(
        "| conversation | turns |"
        + "".join(f" turns in {b // 1024}k (m / t / c) |" for b in BUDGETS)
    )
    print("|---|---:|" + "---:|" * len(BUDGETS))
    for row in [*rows, total]:
        fits = "".join(
            " " + " / ".join(f"{row[(fmt, b)]:.0f}" for fmt in FORMATS) + " |" for b in BUDGETS
        )
        print(f"| {row['name']} | {row['turns']:,} |{fits}")
    print()
    print(
        "turns in Nk: turns kept under an N*1024-token budget (whole budget available) in the "
        "messages / text / compact format; total row: mean per conversation"
    )
    print(
        f"checks (nothing pruned at 10M; tokens_used == count of to_messages() <= budget, every run): {len(problems)} failures"
    )
    for problem in problems[:20]:
        print(f"  {problem}")
    print(f"{len(rows) * (1 + len(FORMATS) * (1 + len(BUDGETS)))} assemblies in {elapsed:.1f} s")


if __name__ == "__main__":
    main()
