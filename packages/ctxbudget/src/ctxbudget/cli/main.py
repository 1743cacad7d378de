"""The ``ctxbudget`` command: demo, ingest, assemble, explain, stats, eval.

User mistakes (a bad file, an unknown model, a budget too small) end with one clear line on
stderr and exit status 2, never a traceback. The parser is `ctxbudget.cli.parser`.

Stopped early, a command closes its stores first (storing what they acknowledged), then exits
as a shell expects: 130 after Ctrl+C (SIGINT), 143 after SIGTERM, each with one line on stderr,
and 141, silently, when its reader went away (``ctxbudget stats | head -1``: a closed stdout).
Every status is numbered in `ctxbudget.cli.status` (documented in docs/quickstart.md).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from types import FrameType

from ctxbudget.cli.options import UsageError
from ctxbudget.cli.output import one_line
from ctxbudget.cli.parser import build_parser
from ctxbudget.cli.status import BROKEN_PIPE, INTERRUPTED, TERMINATED, USAGE
from ctxbudget.errors import CtxBudgetError

__all__ = ["BROKEN_PIPE", "INTERRUPTED", "TERMINATED", "USAGE", "Terminated", "main"]

_TELEMETRY = {"ANONYMIZED_TELEMETRY": "False", "ORT_DISABLE_TELEMETRY": "1", "HF_HUB_OFFLINE": "1"}

_parser = build_parser  # the name tests/reliability/test_fuzz_cli.py parses with


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread as Ctrl+C is, so that every store is closed."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    for key, value in _TELEMETRY.items():
        os.environ.setdefault(key, value)
    _replace_unwritable(sys.stdout)
    stopped: list[int] = []
    try:
        with _terminated_raises(stopped):
            status = _run(argv)
            sys.stdout.flush()  # here, not at exit: a closed stdout is said as one
            if stopped:
                # The handler's Terminated was raised inside a finalizer (a __del__), where
                # Python prints it as "Exception ignored" and goes on: still a stop.
                raise Terminated
    except BrokenPipeError:
        _quiet_stdout()
        return BROKEN_PIPE
    except Terminated:
        print("ctxbudget: terminated", file=sys.stderr)
        return TERMINATED
    except KeyboardInterrupt:
        print("ctxbudget: interrupted", file=sys.stderr)
        return INTERRUPTED
    return status


def _run(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return USAGE
    try:
        # Every store a command opens is closed when it ends, error or not (an embedded folder
        # stays locked to this process while a store has it open).
        with contextlib.ExitStack() as resources:
            args.resources = resources
            result: int = args.run(args)
    except (CtxBudgetError, UsageError) as exc:
        print(f"ctxbudget: error: {one_line(str(exc))}", file=sys.stderr)
        return USAGE
    return result


@contextlib.contextmanager
def _terminated_raises(stopped: list[int]) -> Iterator[None]:
    """SIGTERM raises `Terminated` while the command runs; the previous handler is back after.

    Each SIGTERM is also noted in ``stopped``. ``inspect`` and ``mcp`` serve until SIGTERM,
    with handlers of their own.
    """
    if threading.current_thread() is not threading.main_thread():
        yield  # signals are delivered to the main thread only
        return

    def stop(signum: int, frame: FrameType | None) -> None:
        stopped.append(signum)
        raise Terminated

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _replace_unwritable(stream: object) -> None:
    """Text ``stream`` cannot encode shown escaped, not a UnicodeEncodeError after the work.

    Japanese on a Windows code page, say; a UTF-8 stream is left as it is.
    """
    encoding = str(getattr(stream, "encoding", None) or "utf-8").lower().replace("_", "-")
    reconfigure = getattr(stream, "reconfigure", None)
    if encoding not in ("utf-8", "utf8") and reconfigure is not None:
        with contextlib.suppress(ValueError, OSError):
            reconfigure(errors="backslashreplace")


def _quiet_stdout() -> None:
    """Send what is still buffered for the closed stdout nowhere (no error at exit)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # no file descriptor (a test's captured stdout)
        pass


if __name__ == "__main__":
    raise SystemExit(main())
