"""The ``ctxbudget`` argument parser: global options, commands, and their help.

Global options (``--path``, ``--chroma-url``, ``--namespace``, ``--model``, ``--progress``) are
accepted before or after the command, with the same meaning; one given after the command wins
over one given before. On every command's parser they default to ``argparse.SUPPRESS``, so an
option not given there leaves the value parsed before the command as it is.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from ctxbudget.cli import commands as run
from ctxbudget.cli import epilogs, serving
from ctxbudget.cli.ingest import index_entities, ingest
from ctxbudget.cli.options import count_flag, given_text
from ctxbudget.cli.output import one_line, versions
from ctxbudget.cli.status import OK, USAGE
from ctxbudget.errors import InvalidBudgetError

__all__ = ["GLOBAL_OPTIONS", "CliParser", "build_parser"]


class CliParser(argparse.ArgumentParser):
    """argparse, but a command-line mistake is one ``ctxbudget: error:`` line like any other."""

    def error(self, message: str) -> NoReturn:
        """Exit 2 with one line: the command, the mistake, and where to read more."""
        command = self.prog.removeprefix("ctxbudget").strip()
        where = f"{command}: " if command else ""
        line = one_line(f"{where}{message} (see: {self.prog} --help)")
        self.exit(USAGE, f"ctxbudget: error: {line}\n")


class _Version(argparse.Action):
    """``--version``: the versions on stdout, exit 0 (argparse's own rewraps the lines)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        kwargs.pop("default", None)
        super().__init__(option_strings, argparse.SUPPRESS, nargs=0, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> NoReturn:
        sys.stdout.write(versions())
        parser.exit(OK)


#: Each global option: its flags, its default before the command, and the rest of its spec.
GLOBAL_OPTIONS: tuple[tuple[tuple[str, ...], object, dict[str, Any]], ...] = (
    (
        ("--path",),
        None,
        {
            "help": "folder of the embedded store (default ./.ctxbudget)",
            "type": given_text("a folder"),
        },
    ),
    (
        ("--chroma-url",),
        None,
        {
            "help": "use a Chroma server (or set CTXBUDGET_CHROMA_URL)",
            "type": given_text("a URL"),
        },
    ),
    (("--namespace",), "default", {"help": "tenant (default: default)"}),
    (("--model",), "gpt-4o", {"help": "model whose tokenizer counts (default gpt-4o)"}),
    (
        ("--progress",),
        None,
        {
            "action": argparse.BooleanOptionalAction,
            "help": "say on stderr while the embedding model loads (default: only when stderr "
            "is a terminal) and show a bar on long imports (default: over 200 records); "
            "the negative form shows neither",
        },
    ),
)


def add_global_options(
    parser: argparse.ArgumentParser, *, top: bool, skip: tuple[str, ...] = ()
) -> None:
    """The global options on ``parser``: with their defaults on the top-level parser only.

    ``skip``: options the command defines itself (with the same destination and meaning).
    """
    group = parser.add_argument_group(
        "global options" if top else "global options (also accepted before the command)"
    )
    for flags, default, spec in GLOBAL_OPTIONS:
        if not set(skip) & set(flags):
            group.add_argument(*flags, default=default if top else argparse.SUPPRESS, **spec)
    group.add_argument("--version", action=_Version, help="print the versions and exit")


def build_parser() -> argparse.ArgumentParser:
    """The whole command line."""
    parser = CliParser(
        prog="ctxbudget",
        description="Token-budgeted context assembly: store a conversation, assemble what fits.",
        epilog=epilogs.MAIN,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_global_options(parser, top=True)
    commands = parser.add_subparsers(title="commands", dest="command")

    made: list[argparse.ArgumentParser] = []

    def command(name: str, helptext: str, **kwargs: Any) -> argparse.ArgumentParser:
        made.append(commands.add_parser(name, help=helptext, **kwargs))
        return made[-1]

    demo = command(
        "demo", "build a store from the bundled conversation and assemble under 3 budgets"
    )
    demo.add_argument("--budgets", default="400,1200,4000", help="comma-separated token budgets")
    demo.add_argument("--keep", action="store_true", help="keep the demo store (with --path)")
    demo.add_argument(
        "--question",
        type=count_flag("--question", "1"),
        default=1,
        help="which bundled question to ask (0-5, default 1)",
    )
    demo.set_defaults(run=run.demo)

    stored = command(
        "ingest",
        "store chat logs (JSON/JSONL) or documents",
        description="Store the messages of a chat log, or a text document, in the store.",
        epilog=epilogs.INGEST,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    stored.add_argument("file", help=".jsonl/.json chat log, or .txt/.md document")
    stored.add_argument("--session", help="session id for messages that carry none")
    stored.add_argument("--user", help="user id for the messages")
    stored.add_argument("--collection", default="kb", help="document collection (default kb)")
    stored.set_defaults(run=ingest)

    indexed = command(
        "index-entities",
        "index the entities of stored documents, for entity memory",
        description="Index the entities of document chunks already stored (documents stored "
        "while entity memory was off, or through 'ctxbudget ingest'), with the built-in "
        "extractor. Chunks indexed already are not counted twice; nothing stored is changed.",
    )
    indexed.add_argument(
        "--collection",
        action="append",
        help="a document collection to index (repeatable; default: every collection)",
    )
    indexed.add_argument(
        "--rebuild",
        action="store_true",
        help="first forget what was indexed for these chunks (after changing the extractor)",
    )
    indexed.add_argument("--json", action="store_true", help="print one JSON document")
    indexed.set_defaults(run=index_entities)

    for name, helptext in (
        ("assemble", "print the assembled context for a query"),
        ("explain", "show what was kept and cut for a query, and why"),
    ):
        sub = command(
            name,
            helptext,
            epilog=epilogs.ASSEMBLE_JSON if name == "assemble" else epilogs.CONTEXT_JSON,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        sub.add_argument("query", help="the user's current message")
        sub.add_argument("--session", required=True, help="the session to assemble for")
        sub.add_argument(
            "--budget",
            type=count_flag("--budget", "4096", error=InvalidBudgetError),
            default=None,
            help="tokens the context may use (default 4096)",
        )
        sub.add_argument(
            "--window",
            type=count_flag("--window", "128000", error=InvalidBudgetError),
            default=None,
            help="the model's context window in tokens, instead of --budget: the context may "
            "use it less --reserve (with an unknown --model, either counts approximately)",
        )
        sub.add_argument(
            "--reserve",
            type=count_flag("--reserve", "1024", error=InvalidBudgetError),
            default=0,
            help="tokens kept for the reply",
        )
        sub.add_argument("--format", choices=("messages", "text", "compact"), default="messages")
        sub.add_argument("--system", default=None, help="system prompt")
        sub.add_argument("--user", default=None, help="user id (default: from the session)")
        sub.add_argument("--json", action="store_true", help="print one JSON document")
        sub.add_argument(
            "--log",
            action=argparse.BooleanOptionalAction,
            default=False,
            help="add this assembly to the session's inclusion log, as an application's call "
            "would be (default: not logged, so looking changes nothing; a session that holds "
            "no records is never logged)",
        )
        sub.set_defaults(run=run.assemble if name == "assemble" else run.explain)

    stats = command(
        "stats",
        "what the store holds, or budget analytics of logged assemblies (--contexts)",
        epilog=epilogs.STATS_JSON,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    stats.add_argument("--json", action="store_true", help="print one JSON document")
    logged = stats.add_argument_group(
        "budget analytics", "over the inclusion log of ContextMemory's assemblies"
    )
    logged.add_argument(
        "--contexts",
        action="store_true",
        help="per-tier budget use, caps and floors hit, errors and the most-pruned items",
    )
    logged.add_argument("--session", help="one session's log (implies --contexts)")
    logged.add_argument("--user", help="the assemblies made for one user (implies --contexts)")
    logged.add_argument(
        "--top",
        type=count_flag("--top", "10"),
        help="most-pruned items listed (default 10; implies --contexts)",
    )
    logged.add_argument(
        "--plot",
        metavar="PNG",
        help="also draw the analytics into this PNG (needs the eval extra; implies --contexts)",
    )
    stats.set_defaults(run=run.stats)

    inspect = command(
        "inspect",
        "a read-only local web page of every logged assembly: kept, cut, and why",
        description="Serve a web page on 127.0.0.1 (docs/inspect.md): the sessions of "
        "--namespace by user, each session's logged assemblies (tokens by tier against the "
        "budget, prune reasons), one assembly's items and one message's fate; each page also "
        "as JSON (?format=json). It only reads: nothing is logged or written. Serves until "
        "Ctrl+C or SIGTERM.",
    )
    inspect.add_argument(
        "--port",
        type=count_flag("--port", "8765"),
        default=8765,
        help="the port on 127.0.0.1 (default 8765; 0: any free)",
    )
    inspect.set_defaults(run=serving.inspect)

    _add_mcp(command)
    _add_eval(command)
    for sub in made:  # last, so that each usage line starts with the command's own options
        add_global_options(sub, top=False)
    return parser


def _add_mcp(command: Any) -> None:
    served = command(
        "mcp",
        "serve the store to MCP clients: remember, recall, budgeted context (needs the mcp extra)",
        description="Serve the store as an MCP server (docs/mcp.md): tools to remember a "
        "message or a fact, recall, build a context for a question within a token budget, "
        "list and forget sessions, in --namespace. Over stdio (what desktop clients start), "
        "or streamable HTTP on 127.0.0.1. Serves until the client goes (stdio), Ctrl+C or "
        "SIGTERM; messages it acknowledged are stored before it exits.",
    )
    served.add_argument(
        "--transport",
        choices=("stdio", "http"),
        default="stdio",
        help="stdio (default) or http: streamable HTTP at http://127.0.0.1:PORT/mcp",
    )
    served.add_argument(
        "--port",
        type=count_flag("--port", "8000"),
        default=None,
        help="the HTTP port (default 8000; 0: any free port)",
    )
    served.add_argument(
        "--host",
        default=None,
        help="127.0.0.1, the only address served (the server has no authentication)",
    )
    served.add_argument(
        "--user",
        default=None,
        help="serve this user only: every call is theirs, another user_id is refused "
        "(default: each call names its user)",
    )
    served.set_defaults(run=serving.mcp_server)


def _add_eval(command: Any) -> None:
    evaluate = command("eval", "measure ContextMemory's defaults against baselines on a benchmark")
    benchmarks = evaluate.add_subparsers(title="benchmarks", dest="benchmark", required=True)
    locomo = benchmarks.add_parser(
        "locomo",
        help="LoCoMo: evidence recall, answer containment, tokens and latency per budget",
        description=(
            "Store each LoCoMo conversation in a fresh ContextMemory, assemble every question "
            "with evidence under each budget, and compare with a vector top-k and a recency "
            "window on the same tokens. Writes locomo.md, locomo.json and locomo_recall.png. "
            "With several runs (--speakers all, --entities both) the three files put "
            "ContextMemory's runs side by side (recall per budget and category, the gap to the "
            "first run), then each run's own tables; locomo.json then holds 'comparison' and "
            "one 'variants' entry per run, each shaped as a single run's file."
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
        "--conversations",
        type=count_flag("--conversations", "2"),
        default=None,
        help="only the first N conversations",
    )
    locomo.add_argument(
        "--questions",
        type=count_flag("--questions", "20"),
        default=None,
        help="only the first N questions of each",
    )
    locomo.add_argument(
        "--speakers",
        default="name",
        metavar="{name,prefix,role,all}",
        help=(
            "how each turn's speaker is stored: in the message's name (default), as a "
            "'Name: ' prefix of its text, or not at all (role only); 'all' or a comma-separated "
            "list runs each form on the same turns and reports them side by side"
        ),
    )
    locomo.add_argument(
        "--entities",
        choices=("off", "on", "both"),
        default="off",
        help="MemoryConfig.entities for ContextMemory (default off; both: a run with each)",
    )
    locomo.add_argument(
        "--excerpts",
        choices=("off", "on", "both"),
        default="off",
        help="MemoryConfig.excerpts for ContextMemory (default off; both: a run with each)",
    )
    locomo.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=argparse.SUPPRESS,
        help="a progress bar on stderr (default: on; --no-progress: none)",
    )
    locomo.set_defaults(run=run.eval_locomo)
    add_global_options(locomo, top=False, skip=("--model", "--progress"))
