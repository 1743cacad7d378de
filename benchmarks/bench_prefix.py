"""How much of each call a provider's prompt cache can reuse: history trimmed by message, in steps,
and by LangChain's ``trim_messages``, on a long conversation assembled turn by turn.

A conversation (a LoCoMo one, speaker A as the user, or the repo's demo conversation) is replayed
call by call: each user message is the query, every message before it the history, a system
prompt first, at an 8k window (gpt-4o's tokenizer, 1,024 tokens kept for the reply). For each
way of trimming it prints, side by side:

* the mean share of each call's tokens that is a byte-identical prefix of the previous call's
  (whole identical leading messages, `ctxbudget.core.prefix`), over all calls and over the calls
  where history had to be trimmed;
* the mean history tokens kept (and, for step trimming, as a share of what message trimming
  keeps);
* the most tokens sent vs the budget (never over);
* the median ms per call, and ``os.getloadavg()``.

``trim_messages`` runs as LangChain documents it (strategy="last", include_system=True,
start_on="human", a tiktoken counter with OpenAI's per-message rule; max_tokens is the budget
+ 3, as it counts the reply priming once more, see docs/langchain.md).

Run: .venv/bin/python benchmarks/bench_prefix.py [--locomo PATH] [--conversation 2,3]
     [--turns 500] [--demo] [--steps 0.1,0.15,0.2]
The LoCoMo data is read where it is (default ../shared/data/locomo/locomo_dev.json); without it
the demo conversation in packages/ctxbudget/src/ctxbudget/demo_data is used.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tiktoken
from _common import add_locomo_argument, machine
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.messages import trim_messages as lc_trim_messages
from langchain_core.messages.utils import convert_to_openai_messages

from ctxbudget import (
    AssembledContext,
    Budget,
    ContextAssembler,
    ContextItem,
    PruneReason,
    Tier,
    TokenCounter,
)
from ctxbudget.core.prefix import shared_message_tokens

SYSTEM = (
    "You are a friendly assistant that remembers what the user told you in earlier sessions. "
    "Answer in a few sentences, and say so when you do not know."
)
WINDOW, RESERVE = 8192, 1024
DEMO = (
    Path(__file__).resolve().parents[1]
    / "packages/ctxbudget/src/ctxbudget/demo_data/conversation.jsonl"
)


def locomo_messages(path: Path, index: int, turns: int) -> tuple[str, list[tuple[str, str]]]:
    """``(name, [(role, text)])``: the first ``turns`` turns of conversation ``index``."""
    sample = json.loads(path.read_text(encoding="utf-8"))[index]
    conversation = sample["conversation"]
    keys = sorted(
        (k for k in conversation if re.fullmatch(r"session_\d+", k)), key=lambda k: int(k[8:])
    )
    out: list[tuple[str, str]] = []
    for key in keys:
        for turn in conversation[key]:
            text = turn["text"]
            if turn.get("blip_caption"):
                text += f" [shares a photo: {turn['blip_caption']}]"
            role = "user" if turn["speaker"] == conversation["speaker_a"] else "assistant"
            out.append((role, text))
    return f"LoCoMo {sample['sample_id']}", out[:turns]


def demo_messages(turns: int) -> tuple[str, list[tuple[str, str]]]:
    rows = [json.loads(line) for line in DEMO.read_text(encoding="utf-8").splitlines() if line]
    return "demo conversation", [(r["role"], r["text"]) for r in rows][:turns]


@dataclass
class Run:
    """One way of trimming, over every call of a conversation."""

    name: str
    shares: list[float] = field(default_factory=list)
    trimmed_shares: list[float] = field(default_factory=list)
    history: list[int] = field(default_factory=list)
    sent: list[int] = field(default_factory=list)
    ms: list[float] = field(default_factory=list)
    previous: list[dict[str, Any]] | None = None

    def record(
        self, messages: list[dict[str, Any]], trimmed: bool, ms: float, counter: TokenCounter
    ) -> None:
        tokens = counter.count_messages(messages)
        if self.previous is not None:
            share = shared_message_tokens(messages, self.previous, counter) / tokens
            self.shares.append(share)
            if trimmed:
                self.trimmed_shares.append(share)
        # History: every message but the leading system one(s) and the query (the last one).
        start = next(i for i, m in enumerate(messages) if m["role"] != "system")
        self.history.append(
            sum(counter.count_messages([m]) - counter.reply_priming for m in messages[start:-1])
        )
        self.sent.append(tokens)
        self.ms.append(ms)
        self.previous = messages


def replay(
    name: str, conversation: list[tuple[str, str]], steps: Sequence[float], counter: TokenCounter
) -> list[Run]:
    budget = Budget(window=WINDOW, reserve=RESERVE)
    encoding = tiktoken.get_encoding(counter.name)

    def tiktoken_counter(batch: Sequence[BaseMessage]) -> int:
        total = 3
        for m in convert_to_openai_messages(list(batch)):
            total += 3 + len(encoding.encode(m["role"])) + len(encoding.encode(m["content"]))
        return total

    system = ContextItem("system", SYSTEM, tier=Tier.SYSTEM)
    items = [
        ContextItem(f"m{i}", text, tier=Tier.RECENT, role=role)
        for i, (role, text) in enumerate(conversation)
    ]
    lc: list[BaseMessage] = [
        HumanMessage(text, id=f"m{i}") if role == "user" else AIMessage(text, id=f"m{i}")
        for i, (role, text) in enumerate(conversation)
    ]
    modes: list[tuple[str, ContextAssembler]] = [
        ("ctxbudget, by message", ContextAssembler(counter, history_trim="message"))
    ]
    modes += [
        (
            f"ctxbudget, in steps of {s:.0%}",
            ContextAssembler(counter, history_trim="step", trim_step=s),
        )
        for s in steps
    ]
    runs = [Run(label) for label, _ in modes] + [Run("LangChain trim_messages")]
    contexts: list[AssembledContext | None] = [None] * len(modes)
    calls = [i for i, (role, _) in enumerate(conversation) if role == "user" and i > 0]
    for index in calls:
        query = ContextItem(f"q{index}", conversation[index][1], tier=Tier.QUERY, role="user")
        offered = [system, *items[:index], query]
        trimmed = False
        for position, (_, assembler) in enumerate(modes):
            start = time.perf_counter()
            ctx = assembler.assemble(offered, budget=budget, previous=contexts[position])
            ms = (time.perf_counter() - start) * 1000
            if position == 0:
                trimmed = any(
                    p.item.tier == Tier.RECENT and p.reason is PruneReason.OVER_BUDGET
                    for p in ctx.pruned
                )
            messages = ctx.to_messages()
            if contexts[position] is not None:  # the report's figure is the one measured here
                assert ctx.prefix_tokens == shared_message_tokens(
                    messages, runs[position].previous or [], counter
                )
            contexts[position] = ctx
            runs[position].record(messages, trimmed, ms, counter)
        start = time.perf_counter()
        kept = lc_trim_messages(
            [SystemMessage(SYSTEM), *lc[:index], HumanMessage(conversation[index][1])],
            max_tokens=budget.available + 3,
            token_counter=tiktoken_counter,
            strategy="last",
            include_system=True,
            start_on="human",
        )
        ms = (time.perf_counter() - start) * 1000
        runs[-1].record(convert_to_openai_messages(kept), trimmed, ms, counter)
    print(f"\n{name}: {len(conversation)} turns, {len(calls)} calls, budget {budget.available:,}")
    return runs


def table(runs: list[Run], available: int) -> None:
    plain = statistics.mean(runs[0].history)
    print(
        "| trimming | shared prefix, all calls | shared prefix, trimmed calls | history kept "
        "(mean tokens) | vs by message | max tokens / budget | median ms |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for run in runs:
        kept = statistics.mean(run.history)
        trimmed = statistics.mean(run.trimmed_shares) if run.trimmed_shares else float("nan")
        print(
            f"| {run.name} | {statistics.mean(run.shares):.1%} | {trimmed:.1%} | {kept:,.0f} | "
            f"{kept / plain:.1%} | {max(run.sent):,} / {available:,} | "
            f"{statistics.median(run.ms):.2f} |"
        )
        if max(run.sent) > available:
            print(f"  OVER BUDGET: {run.name}")


def main() -> None:
    parser = argparse.ArgumentParser()
    add_locomo_argument(parser)
    parser.add_argument("--conversation", default="2,3", help="LoCoMo conversation indexes")
    parser.add_argument("--turns", type=int, default=500)
    parser.add_argument("--demo", action="store_true", help="also the demo conversation")
    parser.add_argument("--steps", default="0.15", help="trim_step values, comma separated")
    args = parser.parse_args()
    steps = [float(s) for s in args.steps.split(",")]
    counter = TokenCounter.for_model("gpt-4o")
    available = Budget(window=WINDOW, reserve=RESERVE).available
    sources = []
    if args.locomo.is_file():
        for index in (int(i) for i in args.conversation.split(",")):
            sources.append(locomo_messages(args.locomo, index, args.turns))
    else:
        print(f"LoCoMo data not found at {args.locomo}: the demo conversation only")
    if args.demo or not sources:
        sources.append(demo_messages(args.turns))
    for name, conversation in sources:
        table(replay(name, conversation, steps, counter), available)
    print(f"\n{machine()}; load average {os.getloadavg()}")


if __name__ == "__main__":
    main()
