"""The ``ctxbudget`` command: demo, ingest, assemble, explain, stats, eval.

User mistakes (a bad file, an unknown model, a budget too small) end with one clear line on
stderr and exit status 2, never a traceback. The parser is `ctxbudget.cli.parser`.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Sequence

from ctxbudget.cli.options import UsageError
from ctxbudget.cli.output import one_line
from ctxbudget.cli.parser import build_parser
from ctxbudget.errors import CtxBudgetError

__all__ = ["main"]

_TELEMETRY = {"ANONYMIZED_TELEMETRY": "False", "ORT_DISABLE_TELEMETRY": "1", "HF_HUB_OFFLINE": "1"}

_parser = build_parser  # the name tests/reliability/test_fuzz_cli.py parses with


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    for key, value in _TELEMETRY.items():
        os.environ.setdefault(key, value)
    parser = build_parser()
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
        print(f"ctxbudget: error: {one_line(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("ctxbudget: interrupted", file=sys.stderr)
        return 130
    return result


if __name__ == "__main__":
    raise SystemExit(main())
