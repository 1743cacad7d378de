"""What the command-line tests share: a run of `main` with its output, its one error line, JSONL."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ctxbudget.cli.main import main

__all__ = ["error_line", "jsonl", "run"]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``ctxbudget *argv`` in this process: its exit status, stdout and stderr."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def error_line(err: str) -> str:
    """The one ``ctxbudget: error: ...`` line of ``err`` (no traceback beside it)."""
    lines = [line for line in err.splitlines() if line.startswith("ctxbudget: error: ")]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


def jsonl(messages: list[dict[str, Any]]) -> str:
    """``messages`` as a JSONL chat log."""
    return "".join(json.dumps(m) + "\n" for m in messages)
