"""The commands of the ctxbudget command line: demo, ingest, assemble, explain, stats, eval."""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import shutil
import tempfile
import time
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

from ctxbudget.errors import ConfigurationError, CtxBudgetError, MissingDependencyError

__all__ = [
    "UsageError",
    "assemble",
    "budget_of",
    "demo",
    "eval_locomo",
    "explain",
    "ingest",
    "int_list",
    "open_memory",
    "run_assembly",
    "stats",
]


class UsageError(ConfigurationError):
    """A mistake in the command line or an input file; the message says what to fix."""


def open_memory(args: argparse.Namespace, path: str | None = None) -> Any:
    """The `ContextMemory` of ``--path``/``--url`` (closed when the command ends)."""
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


def budget_of(args: argparse.Namespace) -> Any:
    """The `Budget` of ``--window``/``--reserve``/``--model``; a bad one is a `UsageError`."""
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
def demo(args: argparse.Namespace) -> int:
    """``ctxbudget demo``: a built-in conversation assembled at several budgets."""
    budgets = int_list(args.budgets, "--budgets")
    data = resources.files("ctxbudget.demo_data")
    questions = json.loads(data.joinpath("questions.json").read_text("utf-8"))
    if not 0 <= args.question < len(questions):  # checked before any work
        msg = f"--question must be between 0 and {len(questions) - 1}, got {args.question}"
        raise UsageError(msg)
    folder = args.path if args.keep and args.path else tempfile.mkdtemp(prefix="ctxbudget-demo-")
    try:
        started = time.perf_counter()
        memory = open_memory(args, path=folder)
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
def ingest(args: argparse.Namespace) -> int:
    """``ctxbudget ingest FILE``: store the messages of a JSON or JSON Lines file."""
    path = Path(args.file)
    if not path.is_file():
        msg = f"{path}: no such file"
        raise UsageError(msg)
    suffix = path.suffix.lower()
    memory = open_memory(args)
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
                record = memory.writes.message_record(session, index, message, args.user)
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
        memory.writes.write(records, "message", None)
        memory.flush()  # stored, not only acknowledged, before it says so
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
def run_assembly(args: argparse.Namespace) -> Any:
    """Assemble the context of ``--session`` for ``--query`` (shared by assemble and explain)."""
    memory = open_memory(args)
    return memory.assemble(
        args.session,
        args.query,
        budget=budget_of(args),
        system=args.system,
        user_id=args.user,
        format=args.format,
    )


def assemble(args: argparse.Namespace) -> int:
    """``ctxbudget assemble``: print what would be sent."""
    ctx = run_assembly(args)
    if args.json:
        print(json.dumps(ctx.to_messages(), ensure_ascii=False, indent=2))
    else:
        print(ctx.render())
    return 0


def explain(args: argparse.Namespace) -> int:
    """``ctxbudget explain``: print what was included and pruned, and why."""
    ctx = run_assembly(args)
    print(ctx.to_json() if args.json else ctx.explain())
    return 0


def stats(args: argparse.Namespace) -> int:
    """``ctxbudget stats``: what the store holds."""
    memory = open_memory(args)
    print(json.dumps(memory.stats(), indent=2, sort_keys=True))
    return 0


# -- eval -------------------------------------------------------------------------------------
def eval_locomo(args: argparse.Namespace) -> int:
    """``ctxbudget eval locomo``: the LoCoMo evidence-recall evaluation."""
    from ctxbudget.eval import load_locomo, plot_recall, run_locomo, to_json, to_markdown
    from ctxbudget.tokens.counter import TokenCounter

    budgets = int_list(args.budgets, "--budgets")
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


def int_list(text: str, flag: str) -> list[int]:
    """Comma-separated positive ints of `flag`; anything else is a `UsageError`."""
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError as exc:
        msg = f"{flag} takes comma-separated whole numbers, e.g. 1024,2048; got {text!r}"
        raise UsageError(msg) from exc
    if not values or any(v <= 0 for v in values):
        msg = f"{flag} needs positive token counts, got {text!r}"
        raise UsageError(msg)
    return values
