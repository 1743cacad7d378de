"""What the command line's store, model and budget options mean, checked in its own terms.

`open_memory` opens the store of ``--path``/``--chroma-url`` (a command that only reads refuses
a folder with no store), `check_model` checks ``--model`` (an unknown one counts approximately
when the command is given a window, as ``Budget.for_model(name, window=...)`` does), and
`budget_of` makes the `Budget` of ``--budget`` or ``--window`` and ``--reserve``. Every mistake
is a `UsageError` that names the flags, never a Python call.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ctxbudget.cli.output import warn
from ctxbudget.cli.progress import ProgressEmbedder, progress_wanted
from ctxbudget.core.numbers import count, shown
from ctxbudget.errors import ConfigurationError, CtxBudgetError, UnknownModelError

__all__ = [
    "DEFAULT_BUDGET",
    "DEFAULT_PATH",
    "UsageError",
    "budget_of",
    "check_folder",
    "check_model",
    "count_flag",
    "given_text",
    "given_window",
    "number_text",
    "open_memory",
    "whole_number",
]

#: The tokens ``assemble`` and ``explain`` may use when neither ``--budget`` nor ``--window``.
DEFAULT_BUDGET = 4096

#: The embedded store's folder when ``--path`` is not given.
DEFAULT_PATH = "./.ctxbudget"


class UsageError(ConfigurationError):
    """A mistake in the command line or an input file; the message says what to fix."""


_INTEGER = re.compile(r"[+-]?\d+(?:_\d+)*")  # as int() reads them: 1_000 and other scripts' digits
_CHUNK = 4000  # digits converted at a time: under Python's limit on int(str) (4,300 digits)

#: The most digits a whole number written as text may have (a command line's argument holds at
#: most 131,072 characters); beyond every bound of the core by far, and still cheap to read.
MAX_DIGITS = 200_000


def whole_number(text: str) -> int:
    """The int ``text`` writes in decimal (``[+-]digits``, as `int` reads it), however long.

    Python's ``int(text)`` refuses more than 4,300 digits (a ``ValueError``), which would turn
    a number far too large into "not a number": read in chunks, the core's checks say "too
    large" instead. Over `MAX_DIGITS` digits it is a `UsageError`.

    >>> whole_number("-12")
    -12
    >>> len(str(whole_number("9" * 5000) // 10**4990))
    10
    """
    body = text.strip().lstrip("+-").replace("_", "").lstrip("0") or "0"
    if len(body) > MAX_DIGITS:
        msg = f"a whole number of {len(body):,} digits; numbers may have {MAX_DIGITS:,} at most"
        raise UsageError(msg)
    value = 0
    for start in range(0, len(body), _CHUNK):
        chunk = body[start : start + _CHUNK]
        value = value * 10 ** len(chunk) + int(chunk)
    return -value if text.strip().startswith("-") else value


def number_text(text: str) -> object:
    """A number as a user typed it, for the core's checks to judge: an int, else a float.

    Text that writes neither (``"abc"``) is given back as it is, so the core's check names it.

    >>> number_text("200"), number_text("nan"), number_text("2.5"), number_text("abc")
    (200, nan, 2.5, 'abc')
    """
    if _INTEGER.fullmatch(text.strip()):
        return whole_number(text)
    try:
        return float(text)
    except ValueError:
        return text


def count_flag(
    flag: str, example: str, *, error: type[CtxBudgetError] = ConfigurationError
) -> Callable[[str], int]:
    """An argparse ``type`` for ``flag``: its text read by `number_text`, checked by the core.

    The check is the core's count (`ctxbudget.core.numbers.count`, as `Budget.coerce` makes
    of a budget: any whole number up to 10**100); each command then checks its own bounds
    (a positive budget, a port) with messages that name the flag. A refusal is argparse's
    one ``ctxbudget: error:`` line, exit status 2.
    """

    def parse(text: str) -> int:
        try:
            value = number_text(text)
            hint = f"e.g. {flag} {example}"
            return count(value, flag.removeprefix("--"), least=None, error=error, hint=hint)
        except CtxBudgetError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from exc

    parse.__name__ = "int"  # argparse names the type in its own messages
    return parse


def given_text(what: str) -> Callable[[str], str]:
    """An argparse ``type`` that refuses empty text, saying it needs ``what``.

    ``--path ""`` (an unset shell variable) would otherwise mean the current folder, and the
    store's files would be strewn among the user's own.
    """

    def parse(text: str) -> str:
        if not text.strip():
            msg = f"needs {what}, got {text!r} (an unset shell variable?)"
            raise argparse.ArgumentTypeError(msg)
        return text

    parse.__name__ = "text"
    return parse


def open_memory(
    args: argparse.Namespace, path: str | None = None, *, read_only: bool = False
) -> Any:
    """The `ContextMemory` of ``--path``/``--chroma-url`` (closed when the command ends).

    With progress wanted (``--progress``, or stderr a terminal), the default embedder says on
    stderr when its model loads; otherwise the store picks its embedder as usual. A command
    that reads (``read_only``: stats, assemble, explain) refuses a folder that does not exist
    rather than create an empty store there; every command refuses a file, or a folder of
    other files (`check_folder`). ``--model`` passes `check_model` first.

    Raises:
        UsageError: no store at ``--path`` (or not a store's folder), or an unknown
            ``--model`` without a window.
    """
    from ctxbudget.memory.context import ContextMemory
    from ctxbudget.store.connection import ENV_URL

    folder = path or args.path
    remote = args.chroma_url or os.environ.get(ENV_URL)
    check_model(args)  # the flags first, then the folder
    if not remote:
        check_folder(folder, read_only=read_only)
    embedder = None
    if progress_wanted(args.progress, sys.stderr):
        from ctxbudget.embed.base import default_embedder

        embedder = ProgressEmbedder(default_embedder(), sys.stderr)
    memory = ContextMemory(
        path=path or args.path,
        chroma_url=args.chroma_url,
        namespace=args.namespace,
        model=args.model,
        embedder=embedder,
    )
    resources: contextlib.ExitStack = args.resources
    resources.callback(memory.close)
    return memory


#: The file every embedded store's folder holds (Chroma's database).
STORE_FILE = "chroma.sqlite3"

#: What else a store's folder may hold that is ctxbudget's own: its lock, its write journal
#: (messages acknowledged, not yet in Chroma), Chroma's index folders (named by uuid).
_OWN_FILES = re.compile(
    r"chroma\.sqlite3.*|ctxbudget[.-].*|[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}"
)


def check_folder(folder: str | None, *, read_only: bool) -> None:
    """Refuse a ``--path`` that is not a store's folder, where a store would be read or strewn.

    A file is refused, and so is a folder of other files (``--path ~/Documents``): a command
    that reads would create an empty store among them and answer from it, one that writes
    would strew the store's files among the user's own. A command that reads refuses a
    folder that does not exist; an empty folder is an empty store.
    """
    where = Path(folder or DEFAULT_PATH)
    given = f"--path {folder}" if folder else f"the default --path {DEFAULT_PATH}"
    if where.exists() and not where.is_dir():
        msg = f"{given}: a file, not a store's folder; give the folder of a store (or a new one)"
        raise UsageError(msg)
    if read_only and not where.exists():
        msg = (
            f"{given}: no store there (the folder does not exist); check the path, or store "
            "something first with 'ctxbudget ingest FILE --path FOLDER'"
        )
        raise UsageError(msg)
    try:
        names = [entry.name for entry in where.iterdir()] if where.is_dir() else []
    except OSError:  # unreadable: the store says why when it opens it
        return
    if STORE_FILE in names or "ctxbudget-journal" in names:
        return
    others = [name for name in names if not _OWN_FILES.fullmatch(name)]
    if others:
        todo = f"give a new or empty folder for the store, e.g. --path {where / '.ctxbudget'}"
        if read_only:
            todo = "check the path, or store something first with 'ctxbudget ingest FILE'"
        msg = (
            f"{given}: {'no store there: ' if read_only else ''}a folder of other files "
            f"({others[0]!r}...), not a ctxbudget store (no {STORE_FILE} in it); {todo}"
        )
        raise UsageError(msg)


def check_model(args: argparse.Namespace) -> None:
    """``--model`` checked in the command line's terms.

    An unknown model counts approximately (labelled with its name, a warning on stderr) when
    the command is given its window (``--budget`` or ``--window``), as
    ``Budget.for_model(name, window=...)`` does in Python; otherwise it is a `UsageError`.
    """
    from ctxbudget.tokens.models import ModelInfo, lookup_model, registered
    from ctxbudget.tokens.names import parse_model_name

    model = parse_model_name(args.model, what="--model").given
    try:
        lookup_model(model)
    except UnknownModelError as exc:
        found = str(exc).split("; ", 1)[0]  # "unknown model 'x' (close matches: ...)"
        window = given_window(args)
        if window is None:
            how = (
                "; or give the window with --budget or --window to count approximately"
                if hasattr(args, "budget")
                else ""
            )
            msg = f"--model: {found}; use a model ctxbudget knows (e.g. --model gpt-4o){how}"
            raise UsageError(msg) from exc
        # For this command only: the model counts approximately, by its name.
        resources: contextlib.ExitStack = args.resources
        resources.enter_context(registered(ModelInfo(model, "unknown", context_window=window)))
        warn(
            f"--model {model!r} is not in ctxbudget's registry: counting approximately "
            "(labelled with its name in the report); use a known --model for exact counts"
        )


def given_window(args: argparse.Namespace) -> int | None:
    """The window the command line gives: ``--window``, else ``--budget`` + ``--reserve``."""
    window, budget = getattr(args, "window", None), getattr(args, "budget", None)
    if window is not None and window > 0:
        return int(window)
    if budget is not None and budget > 0:
        return int(budget) + max(0, int(getattr(args, "reserve", 0) or 0))
    return None


def budget_of(args: argparse.Namespace) -> Any:
    """The `Budget` of ``--budget`` or ``--window``, and ``--reserve``; a bad one is a `UsageError`.

    ``--budget`` is what the context may use (the window is ``--budget`` + ``--reserve``);
    ``--window`` is the model's whole window, of which ``--reserve`` is kept for the reply.
    """
    from ctxbudget.core.budget import Budget
    from ctxbudget.errors import InvalidBudgetError

    if args.reserve < 0:
        msg = f"--reserve cannot be negative, got {shown(args.reserve)}; use 0 to keep nothing free"
        raise UsageError(msg)
    if args.window is not None and args.budget is not None:
        msg = (
            "pass --budget (what the context may use) or --window (the model's window, "
            "less --reserve), not both"
        )
        raise UsageError(msg)
    if args.window is not None:
        flag, given, window = "--window", args.window, args.window
    else:
        budget = DEFAULT_BUDGET if args.budget is None else args.budget
        flag, given, window = "--budget", budget, budget + args.reserve
    if given <= 0:
        msg = f"{flag} must be a positive number of tokens, got {shown(given)}"
        raise UsageError(msg)
    try:
        return Budget(window=window, reserve=args.reserve)
    except InvalidBudgetError as exc:
        msg = (
            f"{flag} {given} --reserve {args.reserve} leaves {window - args.reserve} tokens for "
            f"the context; lower --reserve or raise {flag}"
        )
        raise UsageError(msg) from exc
