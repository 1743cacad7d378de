"""`budget_messages` side by side with `langchain_core.messages.trim_messages` on a 10,000-message
history (system message first, a question last), at several budgets, with the settings of the
equivalence table in docs/langchain.md (include_system=True, start_on="human", strategy="last").

trim_messages gets the tiktoken counter of LangChain's trim_messages guide (OpenAI's rule, every
message tokenized at every call) and, for transparency, a counter over ctxbudget's cache.
Prints a Markdown table, whether both kept the same messages, and the machine line.

Run: .venv/bin/python benchmarks/bench_budget_messages.py [--repeat 20] [--messages 10000]
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable, Sequence

import tiktoken
from _common import conversation, machine, pct, timed
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    trim_messages,
)
from langchain_core.messages.utils import convert_to_openai_messages

from ctxbudget import TokenCounter
from langchain_ctxbudget import budget_messages


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--messages", type=int, default=10_000)
    args = parser.parse_args()

    counter = TokenCounter.for_model("gpt-4o")
    encoding = tiktoken.get_encoding(counter.name)
    history = conversation(args.messages)
    messages: list[BaseMessage] = [SystemMessage("You are a helpful assistant. Answer briefly.")]
    for item in history:
        cls = HumanMessage if item.role == "user" else AIMessage
        messages.append(cls(item.text, id=item.id))
    messages.append(HumanMessage("Where should we eat tonight?"))

    def tiktoken_counter(batch: Sequence[BaseMessage]) -> int:
        total = 3
        for m in convert_to_openai_messages(list(batch)):
            total += 3 + len(encoding.encode(m["role"])) + len(encoding.encode(m["content"]))
        return total

    def cached_counter(batch: Sequence[BaseMessage]) -> int:
        return counter.count_messages(convert_to_openai_messages(list(batch)))

    def trim(
        budget: int, token_counter: Callable[[Sequence[BaseMessage]], int]
    ) -> list[BaseMessage]:
        # +3: trim_messages counts the system message in a call of its own, so the reply
        # priming is counted twice (see docs/langchain.md).
        return trim_messages(
            messages,
            max_tokens=budget + 3,
            token_counter=token_counter,
            strategy="last",
            include_system=True,
            start_on="human",
        )

    rows = []
    for budget in (2_048, 16_384, 128_000):
        # Trimmed one message at a time, as trim_messages does, so the choices can be compared
        # (the default step trimming keeps the cache-stable prefix: benchmarks/bench_prefix.py).
        cold_counter = TokenCounter.for_model("gpt-4o")
        cold_counter.clear_cache()
        cold = timed(
            lambda b=budget, c=cold_counter: budget_messages(
                messages, max_tokens=b, token_counter=c, history_trim="message"
            ),
            1,
        )
        ours = budget_messages(messages, max_tokens=budget, history_trim="message")
        warm = timed(
            lambda b=budget: budget_messages(messages, max_tokens=b, history_trim="message"),
            args.repeat,
        )
        theirs = trim(budget, tiktoken_counter)
        lc = timed(lambda b=budget: trim(b, tiktoken_counter), max(3, args.repeat // 5))
        trim(budget, cached_counter)
        lc_cached = timed(lambda b=budget: trim(b, cached_counter), max(3, args.repeat // 2))
        same = len(ours) == len(theirs) and all(a is b for a, b in zip(ours, theirs, strict=True))
        rows.append(
            (
                budget,
                len(ours) - 1,
                counter.count_messages(convert_to_openai_messages(ours)),
                cold[0],
                statistics.median(warm),
                pct(warm, 0.95),
                statistics.median(lc),
                statistics.median(lc_cached),
                same,
            )
        )

    print(
        f"input: {len(messages):,} messages (system, {len(history):,} turns, question), counter {counter.name}"
    )
    print()
    print(
        "| budget | messages kept | tokens sent | budget_messages cold ms | budget_messages warm p50 ms "
        "| warm p95 ms | trim_messages (tiktoken) p50 ms | trim_messages (cached counter) p50 ms "
        "| speed-up vs tiktoken | same messages |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for budget, kept, sent, cold_ms, p50, p95, lc50, lc_cached50, same in rows:
        print(
            f"| {budget:,} | {kept:,} | {sent:,} | {cold_ms:.1f} | {p50:.1f} | {p95:.1f} | {lc50:.1f} "
            f"| {lc_cached50:.1f} | {lc50 / p50:.1f}x | {'yes' if same else 'NO'} |"
        )
    print()
    print(f"machine: {machine()}")


if __name__ == "__main__":
    main()
