"""The exit statuses of the ``ctxbudget`` command, numbered in this one place.

docs/quickstart.md ("Exit statuses") and ``ctxbudget --help`` list them from here;
tests/cli/test_cli_exit_statuses.py checks that the page, the help and the code agree.
"""

from __future__ import annotations

__all__ = [
    "BROKEN_PIPE",
    "EXIT_STATUSES",
    "FAILED",
    "INTERRUPTED",
    "OK",
    "TERMINATED",
    "USAGE",
]

#: The command did what it was asked (``inspect`` and ``mcp``: also stopped by SIGTERM).
OK = 0
#: An unexpected error: a bug, shown with Python's traceback (Python's own status for it).
FAILED = 1
#: A mistake in the command line or an input file, or input the store refused: one line.
USAGE = 2
#: Stopped by Ctrl+C (SIGINT), as a shell reports it (128 + the signal's number).
INTERRUPTED = 130
#: The reader of stdout went away (``ctxbudget stats | head -1``): SIGPIPE's status, silently.
BROKEN_PIPE = 141
#: Stopped by SIGTERM.
TERMINATED = 143

#: Every status the command exits with, and when (``ctxbudget --help`` shows these lines).
EXIT_STATUSES: dict[int, str] = {
    OK: "done (inspect and mcp: also when stopped by SIGTERM)",
    FAILED: "an unexpected error (a bug: Python's traceback on stderr; please report it)",
    USAGE: "a mistake in the command line or an input file: one 'ctxbudget: error:' line",
    INTERRUPTED: "stopped by Ctrl+C (SIGINT); what was acknowledged is stored",
    BROKEN_PIPE: "the reader of stdout went away (ctxbudget stats | head -1)",
    TERMINATED: "stopped by SIGTERM; what was acknowledged is stored",
}
