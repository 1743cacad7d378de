"""The commands of the ctxbudget command line: demo, assemble, explain, stats, inspect, eval, mcp.

``ingest`` is in `ctxbudget.cli.ingest`; what the commands print, in `ctxbudget.cli.output`;
what the store, model and budget options mean (and `UsageError`), in `ctxbudget.cli.options`.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import tempfile
import time
from importlib import resources
from pathlib import Path
from typing import Any

from ctxbudget.cli.options import (
    UsageError,
    budget_of,
    number_text,
    open_memory,
)
from ctxbudget.cli.output import (
    budget_document,
    budget_stats_text,
    json_text,
    stats_text,
    warn,
)
from ctxbudget.core.explain import context_document
from ctxbudget.core.numbers import count, shown
from ctxbudget.errors import ConfigurationError, MissingDependencyError
from ctxbudget.extras import missing_extra

__all__ = [
    "UsageError",
    "assemble",
    "budget_of",
    "context_stats",
    "demo",
    "eval_locomo",
    "explain",
    "int_list",
    "open_memory",
    "run_assembly",
    "session_warnings",
    "stats",
]

#: At most this many of a namespace's sessions are named when ``--session`` holds no records.
SESSIONS_SHOWN = 5


# -- demo --------------------------------------------------------------------------------------
def demo(args: argparse.Namespace) -> int:
    """``ctxbudget demo``: a built-in conversation assembled at several budgets."""
    budgets = int_list(args.budgets, "--budgets")
    data = resources.files("ctxbudget.demo_data")
    questions = json.loads(data.joinpath("questions.json").read_text("utf-8"))
    if not 0 <= args.question < len(questions):  # checked before any work
        msg = f"--question must be between 0 and {len(questions) - 1}, got {shown(args.question)}"
        raise UsageError(msg)
    folder = args.path if args.keep and args.path else tempfile.mkdtemp(prefix="ctxbudget-demo-")
    memory = None
    try:
        started = time.perf_counter()
        memory = open_memory(args, path=folder)
        sessions: dict[str, list[dict[str, Any]]] = {}
        for line in data.joinpath("conversation.jsonl").read_text("utf-8").splitlines():
            if line.strip():
                message = json.loads(line)
                sessions.setdefault(message.pop("session"), []).append(message)
        session_of = {m["id"]: s for s, messages in sessions.items() for m in messages}
        for session, messages in sessions.items():
            memory.add_messages(session, messages, user_id="maya", progress=False)
        memory.pin(user_id="maya", text="Maya is vegetarian and allergic to peanuts.")
        memory.pin(user_id="maya", text="Maya's partner is Tomás; their dog is Pixel.")
        memory.add_documents(
            [{"id": "notes", "text": data.joinpath("notes.md").read_text("utf-8")}],
            collection="notes",
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
            # Each budget answers the same turn afresh: no prefix is shared with the last one.
            memory.previous_contexts.forget(latest)
            ctx = memory.assemble(latest, question["question"], budget=budget, system=system)
            # An evidence turn is kept when that message itself is sent (its session's record).
            found = [i for i in question["expect"] if ctx.includes(i, ("session", session_of[i]))]
            print("=" * 78)
            print(f"Budget {budget:,} tokens  |  question: {question['question']}")
            print("=" * 78)
            print(ctx.explain(show_pruned=8))
            print(
                f"evidence turns kept: {len(found)} of {len(question['expect'])} "
                f"({', '.join(question['expect'])})\n"
            )
    finally:
        # Closed first, error or not: its log writer must not write into a deleted folder.
        if memory is not None:
            memory.close()
        if not (args.keep and args.path):
            shutil.rmtree(folder, ignore_errors=True)
    return 0


# -- assemble / explain / stats ----------------------------------------------------------------
def run_assembly(args: argparse.Namespace) -> tuple[Any, Any]:
    """The memory, and the context of ``--session`` for ``--query`` (assemble and explain)."""
    budget = budget_of(args)  # before the store is opened
    memory = open_memory(args, read_only=True)
    # Logged only when asked (--log), and never for a session that holds nothing (a typo).
    logged = getattr(args, "log", False) and bool(memory.history(args.session, limit=1))
    memory.inclusion_log.enabled = logged
    ctx = memory.assemble(
        args.session,
        args.query,
        budget=budget,
        system=args.system,
        user_id=args.user,
        format=args.format,
    )
    return memory, ctx


def session_warnings(memory: Any, session: str) -> list[str]:
    """A warning when ``session`` holds no records in the memory's namespace (a typo?).

    The check is one read of the session's newest message; only when there is none are the
    namespace's sessions listed (`ChromaStore.list_sessions`), to name a few in the warning.
    """
    if memory.history(session, limit=1):
        return []
    sessions = memory.store.list_sessions(namespace=memory.namespace)
    if session in sessions:  # pins or summaries, but no messages yet
        return []
    where = f"namespace {memory.namespace!r} of {memory.store.location}"
    if not sessions:
        there = f"{where} holds no sessions; check --namespace and --path (or --chroma-url)"
    else:
        named = ", ".join(repr(s) for s in sessions[:SESSIONS_SHOWN])
        more = len(sessions) - SESSIONS_SHOWN
        named += f" and {more:,} more" if more > 0 else ""
        there = f"sessions in {where}: {named}; check --session"
    return [f"session {session!r} holds no records, so the context has no history of it; {there}"]


def _assembled(args: argparse.Namespace, *, output: bool) -> tuple[Any, dict[str, Any] | None]:
    memory, ctx = run_assembly(args)
    warnings = session_warnings(memory, args.session)
    for warning in warnings:  # after the assembly: a failed command prints only its error
        warn(warning)
    if not args.json:
        return ctx, None
    document = context_document(
        ctx,
        memory.counter,
        session=args.session,
        namespace=memory.namespace,
        warnings=warnings,
        output=output,
    )
    return ctx, document


def assemble(args: argparse.Namespace) -> int:
    """``ctxbudget assemble``: print what would be sent (``--json``: with the report)."""
    ctx, document = _assembled(args, output=True)
    if document is not None:
        print(json_text(document, indent=2))
    else:
        print(ctx.render())
    return 0


def explain(args: argparse.Namespace) -> int:
    """``ctxbudget explain``: print what was included and pruned, and why."""
    ctx, document = _assembled(args, output=False)
    if document is not None:
        print(json_text(document, indent=2))
    else:
        print(ctx.explain())
    return 0


def stats(args: argparse.Namespace) -> int:
    """``ctxbudget stats``: what the store holds (``--json``: one JSON object).

    With ``--contexts`` (implied by ``--session``, ``--user``, ``--top`` and ``--plot``): the
    budget analytics of the inclusion log instead (`ContextMemory.budget_stats`).
    """
    if args.contexts or args.session or args.user or args.top is not None or args.plot:
        return context_stats(args)
    memory = open_memory(args, read_only=True)
    figures = memory.stats()
    print(json.dumps(figures, indent=2, sort_keys=True) if args.json else stats_text(figures))
    return 0


def context_stats(args: argparse.Namespace) -> int:
    """``ctxbudget stats --contexts``: budget analytics of the logged assemblies."""
    from ctxbudget.memory.log.analytics import plot_budget_stats

    top = 10 if args.top is None else args.top
    if top < 0:
        msg = f"--top must be 0 or more, got {shown(top)}"
        raise UsageError(msg)
    plot = Path(args.plot) if args.plot else None
    if plot is not None:
        if importlib.util.find_spec("matplotlib") is None:  # said before any work
            error = missing_extra("eval", "the budget plot (ctxbudget stats --plot)")
            raise error
        if not plot.parent.is_dir():
            msg = f"--plot {plot}: the folder {plot.parent} does not exist"
            raise UsageError(msg)
        if plot.is_dir():
            msg = f"--plot {plot}: a folder; give the PNG file to write, e.g. {plot / 'budget.png'}"
            raise UsageError(msg)
    memory = open_memory(args, read_only=True)
    figures = memory.budget_stats(args.session, user_id=args.user, top=top)
    scope = f"namespace {memory.namespace!r}"
    scope += f", session {args.session!r}" if args.session else ""
    scope += f", user {args.user!r}" if args.user else ""
    if not figures.assemblies:
        warn(
            f"no logged assemblies in {scope} of {memory.store.location}; ContextMemory logs "
            "each assemble (ctxbudget assemble and explain with --log); check --session, "
            "--user, --namespace and --path"
        )
    if plot is not None:
        title = f"{scope}: {figures.assemblies:,} assemblies"
        try:
            plot = plot_budget_stats(figures, plot, title=title)
        except OSError as exc:  # a read-only folder, a full disk
            msg = f"--plot {plot}: cannot write the PNG ({exc.strerror or exc})"
            raise UsageError(msg) from exc
    if args.json:
        document = budget_document(
            figures,
            namespace=memory.namespace,
            session=args.session,
            user=args.user,
            plot=None if plot is None else str(plot),
        )
        print(json_text(document, indent=2))
    else:
        print(budget_stats_text(figures, scope=scope, top=top))
        if plot is not None:
            print(f"wrote {plot}")
    return 0


# -- eval -------------------------------------------------------------------------------------
def eval_locomo(args: argparse.Namespace) -> int:
    """``ctxbudget eval locomo``: the LoCoMo evidence-recall evaluation."""
    from ctxbudget.eval import load_locomo, run_locomo
    from ctxbudget.eval.compare import write_results
    from ctxbudget.eval.forms import entity_settings, excerpt_settings, speaker_forms
    from ctxbudget.memory.policy.config import MemoryConfig
    from ctxbudget.tokens.counter import TokenCounter

    budgets = int_list(args.budgets, "--budgets")
    for flag, value in (("--conversations", args.conversations), ("--questions", args.questions)):
        if value is not None and value <= 0:
            msg = f"{flag} must be a positive number, got {shown(value)}"
            raise UsageError(msg)
    try:
        forms, entities = speaker_forms(args.speakers), entity_settings(args.entities)
        excerpts = excerpt_settings(args.excerpts)
    except ConfigurationError as exc:
        msg = f"--{exc}"
        raise UsageError(msg) from exc
    TokenCounter.for_model(args.model)  # an unknown model is reported before any work
    if importlib.util.find_spec("matplotlib") is None:
        msg = "the recall plot needs matplotlib: pip install matplotlib"
        raise MissingDependencyError(msg)
    data = _locomo_data(args, load_locomo)  # before --out is made: a bad file leaves nothing
    out = Path(args.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        msg = f"--out {out}: cannot create the folder ({exc.strerror or exc})"
        raise UsageError(msg) from exc
    runs = [
        run_locomo(
            data,
            budgets=budgets,
            model=args.model,
            format=args.format,
            config=MemoryConfig(entities=on, excerpts=cut),
            max_conversations=args.conversations,
            max_questions=args.questions,
            progress=args.progress is not False,
            speakers=form,
        )
        for form in forms
        for on in entities
        for cut in excerpts
    ]
    table, written = write_results(runs, out)
    print(table)
    print(f"wrote {', '.join(str(p) for p in written[:-1])} and {written[-1]}")
    return 0


def _locomo_data(args: argparse.Namespace, load: Any) -> Any:
    """The LoCoMo file of ``args.data``, refused when it is unreadable or gives nothing to score.

    A file whose questions were all skipped (no evidence, a wrong type: the loader's notes)
    would be measured on nothing, a table of dashes after minutes of storing turns.
    """
    try:
        data = load(args.data)
    except RecursionError as exc:  # json.loads of thousands of nested brackets
        msg = f"{args.data}: JSON nested too deeply for Python to read; flatten it"
        raise UsageError(msg) from exc
    chosen = data.conversations[: args.conversations]
    if not any(not q.adversarial for c in chosen for q in c.questions):
        skipped = [str(n) for n in data.notes if "question" in n.detail][:3]
        why = f"; the loader's notes: {'; '.join(skipped)}" if skipped else ""
        which = f"the first {len(chosen)} of its" if args.conversations else "its"
        msg = (
            f"{args.data}: no question with evidence to score in {which} conversations "
            f"(adversarial questions excluded){why}; check its 'qa' lists"
        )
        raise UsageError(msg)
    return data


def int_list(text: str, flag: str) -> list[int]:
    """Comma-separated positive ints of `flag`, each checked by the core; else a `UsageError`."""
    hint = "comma-separated token counts, e.g. 1024,2048"
    what = flag.removeprefix("--")
    try:
        values = [
            count(number_text(part), what, hint=hint) for part in text.split(",") if part.strip()
        ]
    except ConfigurationError as exc:
        msg = f"{flag}: {exc}"
        raise UsageError(msg) from exc
    if not values:
        msg = f"{flag} needs positive token counts, got {text!r}"
        raise UsageError(msg)
    return values
