"""`CtxBudgetMiddleware` per model call: without memory, and with memory (write-behind or not).

A real ``create_agent`` agent whose chat model is LangChain's fake (it answers at once), so
what is timed is the agent's own work plus the middleware's. The session already holds
``--history`` messages in memory (and the agent's state carries the last ``--state`` of them);
each timed turn adds one user message and runs the agent (one model call, no tools). The
middleware's overhead is the turn time minus the same turn without the middleware.

Side by side in one run, with the load average: no middleware (baseline), the middleware
without memory, with memory and write-behind (the default), with memory written synchronously.

With ``--mechanisms all`` (or a comma list of session-copy, incremental, write-behind,
query-vectors, access, register, recall; and pool, product, room, before: the changes of
2026-11-27 against the code before them; check-new, that of 2026-11-30, and store-late, its
trial not kept; documents and item-loop, those of 2026-12-01; and the bounds id-check and
stamps), memories with
one speed mechanism off (`mechanisms.py`) run beside the default one and no middleware, turn
by turn (each turn every variant in turn, in a new order each round, each after a pause that
follows the last turn's writes), so the machine's load weighs on
all alike; then tables of each mechanism on and off (wall clock, the process's CPU time in
the turn, and until the turn's writes are stored), and for ``register`` a micro-measure of
user pins written. Every variant's memory is a copy of one folder holding the history and
``--log-prefill`` logged assemblies (access counts read the session's log: 200 is the
retention limit).

Both print one query embedding by the default embedder (a new text each time), timed in the
same run (in ``--mechanisms``, once per round of turns), and each variant's middleware overhead
as a multiple of it (issue 40: at most 8 times).

Run: nice -n 5 .venv/bin/python benchmarks/bench_middleware.py [--history 2000] [--turns 40]
     [--mechanisms all]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from _common import machine, pct
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.tools import tool
from mechanisms import (
    EveryQuestionRecalled,
    FreshIndexes,
    NoQueryVectors,
    Pair,
    WholeWindow,
    blas_product,
    constructor_items,
    documents_looked_up,
    entry_read_again,
    every_message_checked,
    id_check_unread,
    ids_read_first,
    items_one_by_one,
    old_register,
    on_off_table,
    read_access_fresh,
    scores_one_by_one,
    search_pool,
    slice3_before,
    stamps_unread,
    stored_after_packing,
    whole_budget,
)

from ctxbudget import ContextMemory, MemoryConfig
from ctxbudget.embed.base import default_embedder
from langchain_ctxbudget import CtxBudgetMiddleware
from langchain_ctxbudget.recall import Recalled

WORDS = (
    "the a to and of in we you it is for on that this with plan trip Lisbon Porto train budget "
    "booking dinner vegetarian museum weekend river coffee tickets hotel ferry beach market"
).split()


def sentence(rng: random.Random, low: int, high: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(low, high))).capitalize() + "."


def conversation(count: int, rng: random.Random) -> list[BaseMessage]:
    out: list[BaseMessage] = []
    for i in range(count):
        text = sentence(rng, 6, 40)
        out.append(HumanMessage(text, id=f"h{i}") if i % 2 == 0 else AIMessage(text, id=f"a{i}"))
    return out


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"{one:.1f} (5 min {five:.1f})"


def one_embedding(rng: random.Random) -> float:
    """ms of one query embedding by the default embedder (a new text: no cache helps)."""
    model = default_embedder()
    text = f"{sentence(rng, 6, 30)} {rng.random()}"
    start = time.perf_counter()
    model.embed_query(text)
    return (time.perf_counter() - start) * 1000.0


def run(mode: str, history: list[BaseMessage], args: argparse.Namespace) -> list[float]:
    rng = random.Random(7)
    answers = iter([AIMessage(sentence(rng, 10, 30)) for _ in range(args.turns + 5)])
    model = GenericFakeChatModel(messages=answers)
    memory = None
    folder = tempfile.TemporaryDirectory()
    middleware: list[Any] = []
    if mode != "no middleware":
        if mode.startswith("memory"):
            memory = ContextMemory(
                Path(folder.name) / "mem", write_behind=mode == "memory, write-behind (default)"
            )
            memory.add_messages(
                "s1",
                [
                    {
                        "role": m.type.replace("human", "user").replace("ai", "assistant"),
                        "content": m.text,
                        "id": m.id,
                    }
                    for m in history
                ],
                progress=False,
            )
            memory.flush()
        middleware = [CtxBudgetMiddleware(model="gpt-4o", budget=8192, reserve=1024, memory=memory)]
    agent = create_agent(model, tools=[], middleware=middleware)
    config = {"configurable": {"thread_id": "s1"}}
    state = list(history[-args.state :])
    times: list[float] = []
    for turn in range(args.turns + 2):
        messages = [*state, HumanMessage(sentence(rng, 6, 30), id=f"q{turn}")]
        start = time.perf_counter()
        result = agent.invoke({"messages": messages}, config)
        took = (time.perf_counter() - start) * 1000.0
        state = list(result["messages"])[-args.state :]
        if turn >= 2:  # the first turns load the model and warm the caches
            times.append(took)
        time.sleep(args.pause)
    if memory is not None:
        memory.close()
    folder.cleanup()
    return times


# -- --mechanisms: each speed mechanism on and off, interleaved -----------------------------------
DEFAULT = "memory, all on (default)"
ACCESS_FRESH = "access salience 0.3, counts read fresh"
ACCESS_COPY = "access salience 0.3, counts copied (default)"
POOL_BEFORE = "4 times the budget offered (before)"
BLAS_BEFORE = "session search as a BLAS product (before)"
ROOM_BEFORE = "search sized to the whole budget (before)"
BOTH_BEFORE = "all three as before 2026-11-27"
RECALL_OFF = "candidates gathered on every model call"
ID_CHECK_BOUND = "id check with no read (bound, unsafe)"
STAMPS_BOUND = "stamps read answered from the last (bound, unsafe)"
ALL_RECALLED = "candidates kept for every question (before)"
POOL_TWO = "2 times the budget offered (trial)"
SLICE3_BEFORE = "reads and items as before 2026-11-29 (third slice)"
IDS_BEFORE = "ids read before each store (before)"
ENTRY_BEFORE = "the view reads the entry again (before)"
ITEMS_BEFORE = "retrieved items by the constructor (before)"
SCORES_BEFORE = "the session's matches scored one by one (before)"
STORE_LATE = "the state stored once the call is packed (trial)"
CHECK_ALL = "every state message checked and digested twice (before)"
DOCS_LOOKED_UP = "documents searched where there are none (before)"
ITEMS_EACH = "retrieved items one stored_item call each (before)"


class NoRecalled(Recalled):
    """`Recalled` that keeps nothing: every model call of a question gathers again."""

    def get(self, key: tuple[str, str, str]) -> Any:
        return None


class ToolFake(GenericFakeChatModel):
    """LangChain's fake chat model, bound to tools (it answers with the calls it is given)."""

    def bind_tools(self, tools: Any, *, tool_choice: Any = None, **kwargs: Any) -> Any:
        return self.bind(**kwargs)


@tool
def lookup(topic: str) -> str:
    """Look a topic up in the notes."""
    return f"Notes on {topic}: nothing new."


@contextlib.contextmanager
def before_all() -> Iterator[None]:
    with search_pool(4), blas_product(), whole_budget():
        yield


def recall_all(middleware: Any) -> None:
    middleware._recalled = EveryQuestionRecalled()  # noqa: SLF001 - the variant's own


VARIANTS: dict[str, dict[str, Any]] = {  # name -> ContextMemory options, setup, around a turn
    "no middleware": {"memory": False},
    DEFAULT: {},
    "session copy off": {"setup": lambda m: setattr(m, "_indexes", FreshIndexes())},
    "incremental reads off": {"setup": lambda m: setattr(m, "_indexes", WholeWindow())},
    "write-behind off": {"write_behind": False},
    "query vectors off": {"setup": lambda m: setattr(m, "_vectors", NoQueryVectors())},
    ACCESS_FRESH: {"config": MemoryConfig(access_salience=0.3), "setup": read_access_fresh},
    ACCESS_COPY: {"config": MemoryConfig(access_salience=0.3)},
    POOL_BEFORE: {"around": lambda: search_pool(4)},
    BLAS_BEFORE: {"around": blas_product},
    ROOM_BEFORE: {"around": whole_budget},
    BOTH_BEFORE: {"around": before_all},
    RECALL_OFF: {"middleware": lambda m: setattr(m, "_recalled", NoRecalled())},
    ID_CHECK_BOUND: {"around": id_check_unread},
    STAMPS_BOUND: {"setup": stamps_unread},
    ALL_RECALLED: {"middleware": recall_all},
    POOL_TWO: {"around": lambda: search_pool(2)},
    SLICE3_BEFORE: {"setup": slice3_before, "around": constructor_items},
    IDS_BEFORE: {"setup": ids_read_first},
    ENTRY_BEFORE: {"setup": entry_read_again},
    ITEMS_BEFORE: {"around": constructor_items},
    SCORES_BEFORE: {"around": scores_one_by_one},
    STORE_LATE: {"around": stored_after_packing},
    CHECK_ALL: {"around": every_message_checked},
    DOCS_LOOKED_UP: {"around": documents_looked_up},
    ITEMS_EACH: {"around": items_one_by_one},
}
PAIRS = {  # --mechanisms name -> table rows
    "session-copy": [Pair("session copy (SessionIndexes)", DEFAULT, "session copy off")],
    "incremental": [Pair("incremental reads (held=)", DEFAULT, "incremental reads off")],
    "write-behind": [Pair("write-behind", DEFAULT, "write-behind off")],
    "query-vectors": [Pair("query vectors (QueryVectors)", DEFAULT, "query vectors off")],
    "access": [Pair("access counts copy (salience 0.3)", ACCESS_COPY, ACCESS_FRESH)],
    "pool": [Pair("3 times the budget offered (was 4)", DEFAULT, POOL_BEFORE)],
    "product": [Pair("numpy product (was BLAS)", DEFAULT, BLAS_BEFORE)],
    "room": [Pair("search sized to the room left (was the budget)", DEFAULT, ROOM_BEFORE)],
    "before": [Pair("the three changes of 2026-11-27", DEFAULT, BOTH_BEFORE)],
    "recall": [Pair("candidates of a question (Recalled)", DEFAULT, RECALL_OFF)],
    "id-check": [Pair("bound: the id check's reads", ID_CHECK_BOUND, DEFAULT)],
    "stamps": [Pair("bound: the stamps read", STAMPS_BOUND, DEFAULT)],
    "run-recalled": [Pair("candidates kept only while their run lasts", DEFAULT, ALL_RECALLED)],
    "pool2": [Pair("2 times the budget offered (trial; 3 is the default)", POOL_TWO, DEFAULT)],
    "slice3": [Pair("the third slice (all three below)", DEFAULT, SLICE3_BEFORE)],
    "ids": [Pair("no id read before a store (first_write_wins)", DEFAULT, IDS_BEFORE)],
    "entry": [Pair("the view takes the entry from the stamps", DEFAULT, ENTRY_BEFORE)],
    "items": [Pair("retrieved items by stored_item", DEFAULT, ITEMS_BEFORE)],
    "scores": [Pair("the session's matches scored at once", DEFAULT, SCORES_BEFORE)],
    "store-late": [Pair("the state stored once the call is packed (trial)", STORE_LATE, DEFAULT)],
    "check-new": [Pair("only unstored messages checked, digests once", DEFAULT, CHECK_ALL)],
    "documents": [Pair("no documents search where there are none", DEFAULT, DOCS_LOOKED_UP)],
    "item-loop": [Pair("retrieved items in one loop (stored_items)", DEFAULT, ITEMS_EACH)],
}
MECHANISMS = [*PAIRS, "register"]


class Variant:
    """One agent with the middleware (and a memory on its own copy of the template folder)."""

    def __init__(
        self, name: str, template: Path, history: list[BaseMessage], args: argparse.Namespace
    ) -> None:
        spec = VARIANTS[name]
        self.name = name
        self.rng = random.Random(7)  # the same questions and answers in every variant
        answers = iter(
            [
                reply
                for turn in range(args.turns + 5)
                for reply in [
                    *(
                        AIMessage(
                            "",
                            tool_calls=[
                                {"name": "lookup", "args": {"topic": "x"}, "id": f"c{turn}-{n}"}
                            ],
                        )
                        for n in range(args.tool_calls)
                    ),
                    AIMessage(sentence(self.rng, 10, 30)),
                ]
            ]
        )
        self.folder = tempfile.TemporaryDirectory()
        self.memory: ContextMemory | None = None
        middleware: list[Any] = []
        if spec.get("memory", True):
            shutil.copytree(template, Path(self.folder.name) / "mem")
            self.memory = ContextMemory(
                Path(self.folder.name) / "mem",
                write_behind=spec.get("write_behind", True),
                config=spec.get("config"),
            )
            if "setup" in spec:
                spec["setup"](self.memory)
            middleware = [
                CtxBudgetMiddleware(model="gpt-4o", budget=8192, reserve=1024, memory=self.memory)
            ]
            if "middleware" in spec:
                spec["middleware"](middleware[0])
        self.around = spec.get("around", contextlib.nullcontext)
        self.agent = create_agent(
            ToolFake(messages=answers),
            tools=[lookup] if args.tool_calls else [],
            middleware=middleware,
        )
        self.keep = args.state
        self.state = list(history[-args.state :])
        self.times: list[float] = []
        self.cpu: list[float] = []  # this process's CPU time (all its threads) in the turn
        self.cpu_all: list[float] = []  # and until the turn's writes are stored (`settle`)
        self.started: float | None = None

    def turn(self, number: int) -> None:
        messages = [*self.state, HumanMessage(sentence(self.rng, 6, 30), id=f"q{number}")]
        with self.around():
            start, cpu = time.perf_counter(), time.process_time()
            self.started = cpu
            result = self.agent.invoke(
                {"messages": messages}, {"configurable": {"thread_id": "s1"}}
            )
            took = (time.perf_counter() - start) * 1000.0
            cpu = (time.process_time() - cpu) * 1000.0
        self.state = list(result["messages"])[-self.keep :]
        if number >= 2:  # the first turns load the model and warm the caches
            self.times.append(took)
            self.cpu.append(cpu)

    def settle(self) -> None:
        """Wait for the background writes of the turn (untimed), so they weigh on no other."""
        if self.memory is not None:
            self.memory.flush()
        if self.started is not None and len(self.cpu) > len(self.cpu_all):
            self.cpu_all.append((time.process_time() - self.started) * 1000.0)
        self.started = None

    def close(self) -> None:
        if self.memory is not None:
            self.memory.close()
        self.folder.cleanup()


def template_folder(root: Path, history: list[BaseMessage], prefill: int) -> Path:
    """A memory folder with the history stored and ``prefill`` logged assemblies of s1."""
    folder = root / "template"
    memory = ContextMemory(folder, write_behind=False)
    memory.add_messages(
        "s1",
        [
            {
                "role": m.type.replace("human", "user").replace("ai", "assistant"),
                "content": m.text,
                "id": m.id,
            }
            for m in history
        ],
        progress=False,
    )
    rng = random.Random(13)
    for _ in range(prefill):
        memory.assemble("s1", sentence(rng, 6, 30), budget=8192)
        if _ % 50 == 49:
            memory.flush()
    memory.flush()
    memory.close()
    return folder


def measure_register(template: Path, pins: int) -> dict[str, dict[str, list[float]]]:
    """User pins written, interleaved: Collections.register now, and as before issue 26.

    By variant: the pin's wall time, its CPU time, and the time spent in ``register``.
    """
    now, before = "pin, entries read by id (now)", "pin, set of registered (before)"
    samples: dict[str, dict[str, list[float]]] = {
        name: {"wall": [], "cpu": [], "register": []} for name in (now, before)
    }
    spent = {now: 0.0, before: 0.0}

    def timing(name: str, register: Any) -> Any:
        def timed(partitions: Any) -> None:
            start = time.perf_counter()
            try:
                register(partitions)
            finally:
                spent[name] += (time.perf_counter() - start) * 1000.0

        return timed

    with tempfile.TemporaryDirectory() as root:
        memories = {}
        for name in samples:
            shutil.copytree(template, Path(root) / name)
            memories[name] = ContextMemory(Path(root) / name, write_behind=False)
        old_register(memories[before].store)
        for name, memory in memories.items():
            cols = memory.store._collections
            cols.register = timing(name, cols.register)
        rng = random.Random(17)
        for i in range(pins + 2):
            text = f"Fact {i}: {sentence(rng, 6, 20)}"
            for name in list(samples) if i % 2 else list(samples)[::-1]:
                spent[name] = 0.0
                start, cpu = time.perf_counter(), time.process_time()
                memories[name].pin(user_id="u1", text=text)
                took = (time.perf_counter() - start) * 1000.0
                if i >= 2:
                    samples[name]["wall"].append(took)
                    samples[name]["cpu"].append((time.process_time() - cpu) * 1000.0)
                    samples[name]["register"].append(spent[name])
        for memory in memories.values():
            memory.close()
    return samples


def measure_access_read(template: Path, repeat: int = 10) -> list[float]:
    """ms of one fresh read of the session's access counts (its whole stored log), alone."""
    with tempfile.TemporaryDirectory() as root:
        shutil.copytree(template, Path(root) / "mem")
        memory = ContextMemory(Path(root) / "mem", write_behind=False)
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            counts = memory.access_counts("s1")
            times.append((time.perf_counter() - start) * 1000.0)
        records = len(memory.contexts("s1"))
        memory.close()
    print(f"access counts read fresh: {records} logged assemblies, {len(counts)} ids counted")
    return times


def run_mechanisms(history: list[BaseMessage], args: argparse.Namespace) -> None:
    chosen = MECHANISMS if args.mechanisms == "all" else args.mechanisms.split(",")
    unknown = set(chosen) - set(MECHANISMS)
    if unknown:
        raise SystemExit(f"--mechanisms: unknown {sorted(unknown)}; known: {MECHANISMS}")
    pairs = [pair for name in chosen for pair in PAIRS.get(name, [])]
    names = ["no middleware", DEFAULT]
    names += [v for p in pairs for v in (p.on, p.off) if v not in names]
    with tempfile.TemporaryDirectory() as root:
        start = time.perf_counter()
        template = template_folder(Path(root), history, args.log_prefill)
        print(
            f"template: {args.history:,} messages, {args.log_prefill} logged assemblies, "
            f"{time.perf_counter() - start:.0f} s; load {load()}",
            flush=True,
        )
        variants = [Variant(name, template, history, args) for name in names]
        began = load()
        embeddings: list[float] = []
        erng = random.Random(19)
        # Each turn after the pause that follows the last one's writes (as in a plain run), in
        # a new order each round. With the pause before the writes, in a fixed cycle, a turn
        # came right after its predecessor's embeddings, warmer for the next one than for the
        # one after "no middleware": the default, first of the memories, ran 10-15% slower
        # than an identical copy of itself (A/A, 2026-12-01; benchmarks/bench_embed_gap.py).
        order = random.Random(11)
        for number in range(args.turns + 2):
            for variant in order.sample(variants, len(variants)):
                variant.turn(number)
                variant.settle()
                time.sleep(args.pause)
            took = one_embedding(erng)
            if number >= 2:
                embeddings.append(took)
        ended = load()
        for variant in variants:
            variant.close()
        register = measure_register(template, args.pins) if "register" in chosen else {}
        after_pins = load()
        reads = measure_access_read(template) if "access" in chosen else []
    samples = {v.name: v.times for v in variants}
    cpu = {v.name: v.cpu for v in variants}
    cpu_all = {v.name: v.cpu_all for v in variants}
    base = statistics.median(samples["no middleware"])
    print()
    print(
        f"## Speed mechanisms on and off: one agent turn, session of {args.history:,} messages, "
        f"{args.state} in the agent's state, {args.turns} turns per variant, interleaved, "
        f"{args.tool_calls} tool calls per question ({args.tool_calls + 1} model calls)"
    )
    print(f"load at start {began}, at end {ended}")
    one = statistics.median(embeddings)
    print(f"one query embedding (default embedder, once per round): p50 {one:.2f} ms")
    print()
    print(
        "| variant | turn p50 ms | p95 ms | middleware overhead p50 ms | overhead / one "
        "embedding | turn p95 / bare turn p50 | CPU p50 ms | CPU with its writes p50 ms |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, times in samples.items():
        p50 = statistics.median(times)
        print(
            f"| {name} | {p50:.1f} | {pct(times, 0.95):.1f} | {p50 - base:.1f} "
            f"| {(p50 - base) / one:.1f} | {pct(times, 0.95) / base:.1f} "
            f"| {statistics.median(cpu[name]):.1f} "
            f"| {statistics.median(cpu_all[name] or [0.0]):.1f} |"
        )
    print()
    print("benefit = 1 - on p50 / off p50 (the share of the call without it that it saves)")
    print()
    print("wall clock:")
    print()
    print(on_off_table(pairs, samples, ended))
    print()
    print("this process's CPU time in the turn (less disturbed by other processes):")
    print()
    print(on_off_table(pairs, cpu, ended))
    print()
    print("this process's CPU time in the turn and until its writes are stored (all threads):")
    print()
    print(on_off_table(pairs, cpu_all, ended))
    if reads:
        print()
        print(
            f"access counts of s1 read alone (whole log, {len(reads)} reads): "
            f"p50 {statistics.median(reads):.1f} ms, min {min(reads):.1f} ms, load {load()}"
        )
    if register:
        print()
        print(f"## Collections.register: {args.pins} user pins written, interleaved")
        print()
        print("| variant | pin p50 ms | p95 ms | CPU p50 ms | in register p50 ms |")
        print("|---|---:|---:|---:|---:|")
        for name, got in register.items():
            print(
                f"| {name} | {statistics.median(got['wall']):.2f} | {pct(got['wall'], 0.95):.2f} "
                f"| {statistics.median(got['cpu']):.2f} "
                f"| {statistics.median(got['register']):.3f} |"
            )
        print()
        now, before = register
        pair = Pair("register: set of partitions seen (before)", on=before, off=now)
        for clock in ("wall", "cpu"):
            print(f"{clock}:")
            print()
            print(on_off_table([pair], {n: got[clock] for n, got in register.items()}, after_pins))
            print()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--history", type=int, default=2000, help="messages already in memory")
    parser.add_argument("--state", type=int, default=40, help="messages the agent's state holds")
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--pause", type=float, default=0.2, help="s between turns (the user)")
    parser.add_argument(
        "--mechanisms",
        help=f"'all' or a comma list of {','.join(MECHANISMS)}: each on and off, interleaved",
    )
    parser.add_argument(
        "--log-prefill", type=int, default=200, help="logged assemblies stored before (mechanisms)"
    )
    parser.add_argument("--pins", type=int, default=40, help="user pins timed (register)")
    parser.add_argument(
        "--tool-calls", type=int, default=0, help="tool calls before each answer (mechanisms)"
    )
    args = parser.parse_args()
    print(machine())
    print()
    history = conversation(args.history, random.Random(3))
    if args.mechanisms:
        run_mechanisms(history, args)
        return
    modes = [
        "no middleware",
        "middleware, no memory",
        "memory, write-behind (default)",
        "memory, synchronous writes",
    ]
    results = {mode: run(mode, history, args) for mode in modes}
    erng = random.Random(19)
    embeddings = [one_embedding(erng) for _ in range(args.turns + 2)][2:]
    one = statistics.median(embeddings)
    base = statistics.median(results["no middleware"])
    print(
        f"## One agent turn (one model call), session of {args.history:,} messages in memory, "
        f"{args.state} in the agent's state, {args.turns} turns"
    )
    print(f"one query embedding (default embedder, after the turns): p50 {one:.2f} ms")
    print()
    print(
        "| mode | turn p50 ms | p95 ms | middleware overhead p50 ms | overhead / one embedding | load |"
    )
    print("|---|---:|---:|---:|---:|---|")
    for mode, times in results.items():
        p50 = statistics.median(times)
        print(
            f"| {mode} | {p50:.1f} | {pct(times, 0.95):.1f} | {p50 - base:.1f} "
            f"| {(p50 - base) / one:.1f} | {load()} |"
        )


if __name__ == "__main__":
    main()
