"""Assemble a 10,000-message conversation plus 1,000 retrieved candidates under a 16k budget,
side by side with `langchain_core.messages.trim_messages` (tiktoken counter) on the same history.

Run: .venv/bin/python benchmarks/bench_assemble.py [--repeat 50]
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable

import tiktoken
from _common import conversation, machine, retrieved, summary, timed
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    trim_messages,
)

from ctxbudget import Budget, ContextAssembler, ContextItem, Tier, TokenCounter


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--candidates", type=int, default=1_000)
    args = parser.parse_args()

    counter = TokenCounter.for_model("gpt-4o")
    history = conversation(args.messages)
    candidates = retrieved(args.candidates)
    system = ContextItem("sys", "You are a helpful assistant. Answer briefly.", tier=Tier.SYSTEM)
    pinned = [
        ContextItem("p1", "The user is vegetarian and allergic to peanuts.", tier=Tier.PINNED),
        ContextItem("p2", "The user lives in Lisbon since May.", tier=Tier.PINNED),
    ]
    query = ContextItem("q", "Where should we eat tonight?", tier=Tier.QUERY)
    items = [system, *pinned, *history, *candidates, query]
    # 16k window; history may use up to 60%, retrieved knowledge takes what is left.
    budget = Budget(window=16_384, caps={Tier.RECENT: 0.6})
    assembler = ContextAssembler(counter)

    cold = timed(
        lambda: ContextAssembler(TokenCounter.for_model("gpt-4o")).assemble(items, budget=budget), 1
    )
    ctx = assembler.assemble(items, budget=budget)  # warm the count cache
    warm = timed(lambda: assembler.assemble(items, budget=budget), args.repeat)
    warm_cpu = timed(lambda: assembler.assemble(items, budget=budget), args.repeat, cpu=True)
    compact = timed(lambda: assembler.assemble(items, budget=budget, format="compact"), args.repeat)

    # trim_messages on the same history and budget. Its counter is the one LangChain's
    # trim_messages how-to shows: tiktoken on every message at every call, with the OpenAI
    # per-message rule. (A second run gives it our cached counter, for transparency.)
    encoding = tiktoken.get_encoding(counter.name)

    def tiktoken_counter(messages: list[BaseMessage]) -> int:
        total = 3
        for m in messages:
            total += 3 + len(encoding.encode(m.type)) + len(encoding.encode(str(m.content)))
        return total

    def cached_counter(messages: list[BaseMessage]) -> int:
        total = counter.reply_priming
        for m in messages:
            total += counter.per_message + counter.count(m.type) + counter.count(str(m.content))
        return total

    lc_messages: list[BaseMessage] = [SystemMessage(system.text)]
    for item in history:
        cls = HumanMessage if item.role == "user" else AIMessage
        lc_messages.append(cls(item.text, id=item.id))
    lc_messages.append(HumanMessage(query.text))

    def trim(token_counter: Callable[[list[BaseMessage]], int]) -> list[BaseMessage]:
        return trim_messages(
            lc_messages,
            max_tokens=budget.available,
            token_counter=token_counter,
            strategy="last",
            include_system=True,
            start_on="human",
        )

    trimmed = timed(lambda: trim(tiktoken_counter), max(3, args.repeat // 10))
    trimmed_cpu = timed(lambda: trim(tiktoken_counter), 3, cpu=True)
    trim(cached_counter)  # warm
    trimmed_cached = timed(lambda: trim(cached_counter), max(5, args.repeat // 5))
    kept = trim(tiktoken_counter)

    p50 = statistics.median(warm)
    lc50 = statistics.median(trimmed)
    lc50_cached = statistics.median(trimmed_cached)
    print(f"machine: {machine()}")
    print(
        f"input: {len(history):,} messages + {len(candidates):,} retrieved + system, 2 pinned, query"
    )
    print(f"budget: window {budget.window:,}, history cap 60%, counter {counter.name}")
    print(f"ctxbudget assemble, cold count cache: {cold[0]:.1f} ms")
    print(f"ctxbudget assemble (messages), warm:  {summary(warm)}")
    print(f"  same, process CPU time:             {summary(warm_cpu)}")
    print(f"ctxbudget assemble (compact), warm:   {summary(compact)}")
    print(f"trim_messages (tiktoken counter):     {summary(trimmed)}")
    print(f"  same, process CPU time:             {summary(trimmed_cpu)}")
    print(f"trim_messages (our cached counter):   {summary(trimmed_cached)}")
    print(
        f"speed-up at p50: {lc50 / p50:.0f}x (vs trim_messages with our cache: {lc50_cached / p50:.1f}x)"
    )
    print(
        f"ctxbudget kept {len(ctx.included)} items ({ctx.tiers[Tier.RECENT].kept} messages, "
        f"{ctx.tiers[Tier.RETRIEVED].kept} retrieved), {ctx.tokens_used:,} tokens; "
        f"trim_messages kept {len(kept)} messages, {tiktoken_counter(kept):,} tokens"
    )
    print(
        f"retrieved tier solver: {ctx.solvers[Tier.RETRIEVED].solver}, within {ctx.solvers[Tier.RETRIEVED].gap:.2%} of optimum"
    )


if __name__ == "__main__":
    main()
