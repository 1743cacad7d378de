"""The ``ctxbudget`` command: demo, ingest, assemble, explain, stats, eval.

User mistakes (a bad file, an unknown model, a budget too small) end with one clear line on
stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from importlib import resources
from pathlib import Path
from typing import Any, NoReturn

from ctxbudget.errors import CtxBudgetError, MissingDependencyError

__all__ = ["main"]

_TELEMETRY = {"ANONYMIZED_TELEMETRY": "False", "ORT_DISABLE_TELEMETRY": "1", "HF_HUB_OFFLINE": "1"}


class UsageError(Exception):
    """A mistake in the command line or an input file; the message says what to fix."""


class _Parser(argparse.ArgumentParser):
    """argparse, but a command-line mistake is one ``ctxbudget: error:`` line like any other."""

    def error(self, message: str) -> NoReturn:
        command = self.prog.removeprefix("ctxbudget").strip()
        where = f"{command}: " if command else ""
        line = _one_line(f"{where}{message} (see: {self.prog} --help)")
        self.exit(2, f"ctxbudget: error: {line}\n")


# Every character str.splitlines breaks at: an error stays one line whatever a path or a
# message quotes.
_BREAKS = re.compile("[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


def _one_line(text: str) -> str:
    return _BREAKS.sub(lambda m: repr(m.group())[1:-1], text)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    for key, value in _TELEMETRY.items():
        os.environ.setdefault(key, value)
    parser = _parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return 2
    try:
        # Every store a command opens is closed when it ends, error or not (an embedded folder
        # stays locked to this process while a store has it open).
        with contextlib.ExitStack() as resources:
            args.resources = resources
            result: int = args.run(args)
    except (CtxBudgetError, UsageError) as exc:
        print(f"ctxbudget: error: {_one_line(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("ctxbudget: interrupted", file=sys.stderr)
        return 130
    return result


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="ctxbudget",
        description="Token-budgeted context assembly: store a conversation, assemble what fits.",
    )
    parser.add_argument(
        "--path", help="folder of the embedded store (default ./.ctxbudget)", default=None
    )
    parser.add_argument(
        "--chroma-url", help="use a Chroma server (or set CTXBUDGET_CHROMA_URL)", default=None
    )
    parser.add_argument("--namespace", default="default", help="tenant (default: default)")
    parser.add_argument("--model", default="gpt-4o", help="model whose tokenizer counts")
    commands = parser.add_subparsers(title="commands", dest="command")

    demo = commands.add_parser(
        "demo", help="build a store from the bundled conversation and assemble under 3 budgets"
    )
    demo.add_argument("--budgets", default="400,1200,4000", help="comma-separated token budgets")
    demo.add_argument("--keep", action="store_true", help="keep the demo store (with --path)")
    demo.add_argument(
        "--question", type=int, default=1, help="which bundled question to ask (0-5, default 1)"
    )
    demo.set_defaults(run=_demo)

    ingest = commands.add_parser("ingest", help="store chat logs (JSON/JSONL) or documents")
    ingest.add_argument("file", help=".jsonl/.json chat log, or .txt/.md document")
    ingest.add_argument("--session", help="session id for messages that carry none")
    ingest.add_argument("--user", help="user id for the messages")
    ingest.add_argument("--collection", default="kb", help="document collection (default kb)")
    ingest.set_defaults(run=_ingest)

    for name, helptext in (
        ("assemble", "print the assembled context for a query"),
        ("explain", "show what was kept and cut for a query, and why"),
    ):
        sub = commands.add_parser(name, help=helptext)
        sub.add_argument("query", help="the user's current message")
        sub.add_argument("--session", required=True, help="the session to assemble for")
        sub.add_argument("--budget", type=int, default=4096, help="tokens (default 4096)")
        sub.add_argument("--reserve", type=int, default=0, help="tokens kept for the reply")
        sub.add_argument("--format", choices=("messages", "text", "compact"), default="messages")
        sub.add_argument("--system", default=None, help="system prompt")
        sub.add_argument("--user", default=None, help="user id (default: from the session)")
        sub.add_argument("--json", action="store_true", help="print JSON")
        sub.set_defaults(run=_assemble if name == "assemble" else _explain)

    stats = commands.add_parser("stats", help="what the store holds")
    stats.set_defaults(run=_stats)

    evaluate = commands.add_parser(
        "eval", help="measure ContextMemory's defaults against baselines on a benchmark"
    )
    benchmarks = evaluate.add_subparsers(title="benchmarks", dest="benchmark", required=True)
    locomo = benchmarks.add_parser(
        "locomo",
        help="LoCoMo: evidence recall, answer containment, tokens and latency per budget",
        description=(
            "Store each LoCoMo conversation in a fresh ContextMemory, assemble every question "
            "with evidence under each budget, and compare with a vector top-k and a recency "
            "window on the same tokens. Writes locomo.md, locomo.json and locomo_recall.png."
        ),
    )
    locomo.add_argument(
        "data", help="LoCoMo JSON (locomo10.json or a subset), kept outside any repository"
    )
    locomo.add_argument(
        "--budgets", default="1024,2048,4096,8192", help="comma-separated token budgets"
    )
    locomo.add_argument(
        "--model",
        default=argparse.SUPPRESS,
        help="model whose tokenizer counts (default: the global --model, gpt-4o)",
    )
    locomo.add_argument(
        "--out", default="locomo-eval", help="folder for the results (default ./locomo-eval)"
    )
    locomo.add_argument(
        "--format",
        choices=("messages", "text", "compact"),
        default="compact",
        help="the rendering every method uses (default compact)",
    )
    locomo.add_argument(
        "--conversations", type=int, default=None, help="only the first N conversations"
    )
    locomo.add_argument(
        "--questions", type=int, default=None, help="only the first N questions of each"
    )
    locomo.add_argument("--no-progress", action="store_true", help="no progress bar")
    locomo.set_defaults(run=_eval_locomo)
    return parser


def _memory(args: argparse.Namespace, path: str | None = None) -> Any:
    from ctxbudget.memory.context import ContextMemory

    memory = ContextMemory(
        path=path or args.path,
        chroma_url=args.chroma_url,
        namespace=args.namespace,
        model=args.model,
    )
    resources: contextlib.ExitStack = args.resources
    resources.callback(memory.close)
    return memory


def _budget(args: argparse.Namespace) -> Any:
    from ctxbudget.core.budget import Budget
    from ctxbudget.errors import InvalidBudgetError

    if args.reserve < 0:
        msg = f"--reserve cannot be negative, got {args.reserve}; use 0 to keep nothing free"
        raise UsageError(msg)
    try:
        return Budget(window=args.budget + args.reserve, reserve=args.reserve)
    except InvalidBudgetError as exc:
        msg = f"--budget {args.budget} --reserve {args.reserve}: {exc}"
        raise UsageError(msg) from exc


# -- demo --------------------------------------------------------------------------------------
def _demo(args: argparse.Namespace) -> int:
    budgets = _int_list(args.budgets, "--budgets")
    data = resources.files("ctxbudget.demo_data")
    questions = json.loads(data.joinpath("questions.json").read_text("utf-8"))
    if not 0 <= args.question < len(questions):  # checked before any work
        msg = f"--question must be between 0 and {len(questions) - 1}, got {args.question}"
        raise UsageError(msg)
    folder = args.path if args.keep and args.path else tempfile.mkdtemp(prefix="ctxbudget-demo-")
    try:
        started = time.perf_counter()
        memory = _memory(args, path=folder)
        sessions: dict[str, list[dict[str, Any]]] = {}
        for line in data.joinpath("conversation.jsonl").read_text("utf-8").splitlines():
            if line.strip():
                message = json.loads(line)
                sessions.setdefault(message.pop("session"), []).append(message)
        for session, messages in sessions.items():
            memory.add_messages(session, messages, user_id="maya", progress=False)
        memory.pin(user_id="maya", text="Maya is vegetarian and allergic to peanuts.")
        memory.pin(user_id="maya", text="Maya's partner is Tomás; their dog is Pixel.")
        memory.add_documents(
            [{"id": "notes", "text": data.joinpath("notes.md").read_text("utf-8")}],
            namespace="notes",
        )
        latest = list(sessions)[-1]
        for session in sessions:
            if session != latest:  # earlier sessions get summaries, found by search later
                memory.summarize(session, keep_recent=0, stretch=12)
        total = sum(len(m) for m in sessions.values())
        print(
            f"Stored {total} messages in {len(sessions)} sessions, 2 pinned facts and the notes "
            f"in {time.perf_counter() - started:.1f} s (embedded Chroma in {folder}).\n"
        )
        question = questions[args.question]
        system = "You are Maya's assistant. Use the context; say when you do not know."
        for budget in budgets:
            ctx = memory.assemble(latest, question["question"], budget=budget, system=system)
            found = [i for i in question["expect"] if i in ctx.included_ids]
            print("=" * 78)
            print(f"Budget {budget:,} tokens  |  question: {question['question']}")
            print("=" * 78)
            print(ctx.explain(show_pruned=8))
            print(
                f"evidence turns kept: {len(found)} of {len(question['expect'])} "
                f"({', '.join(question['expect'])})\n"
            )
        memory.close()
    finally:
        if not (args.keep and args.path):
            shutil.rmtree(folder, ignore_errors=True)
    return 0


# -- ingest ------------------------------------------------------------------------------------
def _ingest(args: argparse.Namespace) -> int:
    path = Path(args.file)
    if not path.is_file():
        msg = f"{path}: no such file"
        raise UsageError(msg)
    suffix = path.suffix.lower()
    memory = _memory(args)
    stem, name = _valid(path.stem), _valid(path.name)
    if suffix in (".txt", ".md", ".markdown", ".rst"):
        text = _read_text(path)
        if not text.strip():
            msg = f"{path}: the file holds no text; nothing was stored"
            raise UsageError(msg)
        try:
            ids = memory.add_documents(
                [{"id": stem, "text": text, "source": name}], namespace=args.collection
            )
        except CtxBudgetError as exc:
            msg = f"{path}: {exc}"
            raise UsageError(msg) from exc
        print(f"stored {name} as {len(ids)} chunks in collection {args.collection!r}")
        return 0
    if suffix not in (".json", ".jsonl"):
        msg = f"{path}: unknown file type {suffix or '(none)'}; use .jsonl, .json, .txt or .md"
        raise UsageError(msg)
    sessions: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for where, message in _messages(path):
        session = message.pop("session", None) or message.pop("session_id", None) or args.session
        if not session:
            msg = f"{where}: the message has no 'session' and no --session was given"
            raise UsageError(msg)
        if "role" not in message or not isinstance(message.get("role"), str):
            msg = f"{where}: expected an object with 'role' and 'text' (or 'content')"
            raise UsageError(msg)
        sessions.setdefault(str(session), []).append((where, message))
    # Every message of every session is checked before the first is written: a bad file
    # stores nothing (not the sessions before the bad one).
    records = []
    for session, entries in sessions.items():
        for index, (where, message) in enumerate(entries):
            try:
                record = memory._message_record(session, index, message, args.user)
                memory.store.check([record])
            except CtxBudgetError as exc:
                problem = str(exc).replace("record 0 ", f"message {index} ", 1)
                msg = (
                    f"{where}: session {session!r}: {problem.removesuffix('; nothing was written')}"
                    " (nothing of this session, nor of any other in the file, was stored)"
                )
                raise UsageError(msg) from exc
            records.append(record)
    try:
        memory._write(records, "message", None)
    except CtxBudgetError as exc:
        msg = f"{path}: {exc} (nothing of the file was stored)"
        raise UsageError(msg) from exc
    print(f"stored {len(records)} messages in {len(sessions)} sessions from {name}")
    return 0


def _valid(text: str) -> str:
    """A file name as valid text: bytes that were not UTF-8 (surrogate escapes) become U+FFFD."""
    try:
        raw = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a surrogate no file name decodes to
        raw = text.encode("utf-8", "surrogatepass")
    return raw.decode("utf-8", "replace")


def _read_text(path: Path) -> str:
    try:
        return path.read_text("utf-8")
    except UnicodeDecodeError as exc:
        msg = f"{path}: not UTF-8 text (byte {exc.start}); convert it to UTF-8 first"
        raise UsageError(msg) from exc
    except OSError as exc:
        msg = f"{path}: cannot be read ({exc.strerror or exc})"
        raise UsageError(msg) from exc


def _json(text: str, where: str, *, lines: bool) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        line = f":{exc.lineno}" if lines else ""
        msg = f"{where}{line}: not valid JSON ({exc.msg} at column {exc.colno})"
        raise UsageError(msg) from exc
    except RecursionError as exc:
        msg = f"{where}: JSON nested too deeply for Python to read; flatten it"
        raise UsageError(msg) from exc


def _messages(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    text = _read_text(path)
    if path.suffix.lower() == ".jsonl":
        # Lines end at "\n" only: str.splitlines would also cut at U+2028 and other breaks
        # that JSON strings may hold as they are.
        for number, line in enumerate(text.split("\n"), start=1):
            if not line.strip():
                continue
            value = _json(line, f"{path}:{number}", lines=False)
            if not isinstance(value, dict):
                msg = (
                    f"{path}:{number}: expected a JSON object per line, got {type(value).__name__}"
                )
                raise UsageError(msg)
            yield f"{path}:{number}", value
        return
    value = _json(text, str(path), lines=True)
    if isinstance(value, dict) and isinstance(value.get("messages"), list):
        value = value["messages"]
    if isinstance(value, dict) and isinstance(value.get("sessions"), dict):
        for session, messages in value["sessions"].items():
            if not isinstance(messages, list):
                msg = f"{path}: sessions.{session}: expected a list of messages"
                raise UsageError(msg)
            for index, message in enumerate(messages):
                if isinstance(message, dict):
                    yield f"{path}: sessions.{session}[{index}]", {"session": session, **message}
                else:
                    msg = f"{path}: sessions.{session}[{index}]: expected an object"
                    raise UsageError(msg)
        return
    if not isinstance(value, list):
        msg = (
            f"{path}: expected a list of messages, {{'messages': [...]}} or "
            "{'sessions': {id: [...]}}"
        )
        raise UsageError(msg)
    for index, message in enumerate(value):
        if not isinstance(message, dict):
            msg = f"{path}: item {index}: expected an object, got {type(message).__name__}"
            raise UsageError(msg)
        yield f"{path}: item {index}", message


# -- assemble / explain / stats ----------------------------------------------------------------
def _run_assembly(args: argparse.Namespace) -> Any:
    memory = _memory(args)
    return memory.assemble(
        args.session,
        args.query,
        budget=_budget(args),
        system=args.system,
        user_id=args.user,
        format=args.format,
    )


def _assemble(args: argparse.Namespace) -> int:
    ctx = _run_assembly(args)
    if args.json:
        print(json.dumps(ctx.to_messages(), ensure_ascii=False, indent=2))
    else:
        print(ctx.render())
    return 0


def _explain(args: argparse.Namespace) -> int:
    ctx = _run_assembly(args)
    print(ctx.to_json() if args.json else ctx.explain())
    return 0


def _stats(args: argparse.Namespace) -> int:
    memory = _memory(args)
    print(json.dumps(memory.stats(), indent=2, sort_keys=True))
    return 0


# -- eval -------------------------------------------------------------------------------------
def _eval_locomo(args: argparse.Namespace) -> int:
    from ctxbudget.eval import load_locomo, plot_recall, run_locomo, to_json, to_markdown
    from ctxbudget.tokens.counter import TokenCounter

    budgets = _int_list(args.budgets, "--budgets")
    for flag, value in (("--conversations", args.conversations), ("--questions", args.questions)):
        if value is not None and value <= 0:
            msg = f"{flag} must be a positive number, got {value}"
            raise UsageError(msg)
    TokenCounter.for_model(args.model)  # an unknown model is reported before any work
    if importlib.util.find_spec("matplotlib") is None:
        msg = "the recall plot needs matplotlib: pip install matplotlib"
        raise MissingDependencyError(msg)
    out = Path(args.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        msg = f"--out {out}: cannot create the folder ({exc.strerror or exc})"
        raise UsageError(msg) from exc
    data = load_locomo(args.data)
    run = run_locomo(
        data,
        budgets=budgets,
        model=args.model,
        format=args.format,
        max_conversations=args.conversations,
        max_questions=args.questions,
        progress=not args.no_progress,
    )
    table = to_markdown(run)
    files = {
        "locomo.md": table,
        "locomo.json": to_json(run),
    }
    for name, text in files.items():
        (out / name).write_text(text, encoding="utf-8")
    plot = plot_recall(run, out / "locomo_recall.png")
    print(table)
    print(f"wrote {out / 'locomo.md'}, {out / 'locomo.json'} and {plot}")
    return 0


def _int_list(text: str, flag: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError as exc:
        msg = f"{flag} takes comma-separated whole numbers, e.g. 1024,2048; got {text!r}"
        raise UsageError(msg) from exc
    if not values or any(v <= 0 for v in values):
        msg = f"{flag} needs positive token counts, got {text!r}"
        raise UsageError(msg)
    return values


if __name__ == "__main__":
    raise SystemExit(main())
