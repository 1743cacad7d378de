"""The ``ctxbudget`` command: demo, ingest, assemble, explain, stats, eval.

User mistakes (a bad file, an unknown model, a budget too small) end with one clear line on
stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
from collections.abc import Sequence
from typing import NoReturn

from ctxbudget.cli import commands as run
from ctxbudget.cli.commands import UsageError
from ctxbudget.errors import CtxBudgetError

__all__ = ["main"]

_TELEMETRY = {"ANONYMIZED_TELEMETRY": "False", "ORT_DISABLE_TELEMETRY": "1", "HF_HUB_OFFLINE": "1"}


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
    demo.set_defaults(run=run.demo)

    ingest = commands.add_parser("ingest", help="store chat logs (JSON/JSONL) or documents")
    ingest.add_argument("file", help=".jsonl/.json chat log, or .txt/.md document")
    ingest.add_argument("--session", help="session id for messages that carry none")
    ingest.add_argument("--user", help="user id for the messages")
    ingest.add_argument("--collection", default="kb", help="document collection (default kb)")
    ingest.set_defaults(run=run.ingest)

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
        sub.set_defaults(run=run.assemble if name == "assemble" else run.explain)

    stats = commands.add_parser("stats", help="what the store holds")
    stats.set_defaults(run=run.stats)

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
    locomo.set_defaults(run=run.eval_locomo)
    return parser


if __name__ == "__main__":
    raise SystemExit(main())
