"""The exit statuses docs/quickstart.md lists are the ones the command's code exits with.

`ctxbudget.cli.status` numbers them; the page's table, ``ctxbudget --help`` and every status
the ``ctxbudget.cli`` modules return or exit with (a literal or a name) must agree with it.
"""

from __future__ import annotations

import ast
import importlib
import re
import signal
from pathlib import Path

import pytest

from ctxbudget.cli import status
from ctxbudget.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
main_module = importlib.import_module("ctxbudget.cli.main")  # ctxbudget.cli.main: the function
CLI = Path(status.__file__).parent


def documented() -> dict[int, str]:
    """The rows of docs/quickstart.md's "Exit statuses" table: {status: when}."""
    text = (ROOT / "docs" / "quickstart.md").read_text("utf-8")
    section = text.split("### Exit statuses", 1)[1].split("\n#", 1)[0]
    rows = re.findall(r"^\| (\d+) \| (.+) \|$", section, re.M)
    assert rows, "no table under 'Exit statuses'"
    return {int(code): when for code, when in rows}


def used_in_code() -> dict[int, list[str]]:
    """Every whole number the cli modules return, or exit with, and where."""
    names = {n: getattr(status, n) for n in status.__all__ if n != "EXIT_STATUSES"}
    found: dict[int, list[str]] = {}
    for module in sorted(CLI.glob("*.py")):
        tree = ast.parse(module.read_text("utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Return) and node.value is not None:
                values = [node.value]
            elif isinstance(node, ast.Call) and (
                (isinstance(node.func, ast.Attribute) and node.func.attr == "exit")
                or (isinstance(node.func, ast.Name) and node.func.id in ("exit", "SystemExit"))
            ):
                values = node.args[:1]
            else:
                continue
            for value in values:
                if isinstance(value, ast.Constant) and type(value.value) is int:
                    code = value.value
                elif isinstance(value, ast.Name) and value.id in names:
                    code = names[value.id]
                else:
                    continue
                found.setdefault(code, []).append(f"{module.name}:{node.lineno}")
    return found


def test_the_page_lists_every_status_the_code_numbers() -> None:
    assert sorted(documented()) == sorted(status.EXIT_STATUSES)


def test_the_code_exits_with_documented_statuses_only() -> None:
    used = used_in_code()
    stray = {code: where for code, where in used.items() if code not in status.EXIT_STATUSES}
    assert not stray, f"exit statuses the docs do not list: {stray}"
    # The ones the command returns itself (1 is Python's, for an uncaught exception).
    assert set(used) >= set(status.EXIT_STATUSES) - {status.FAILED}


def test_the_statuses_are_the_shells() -> None:
    assert (status.OK, status.FAILED, status.USAGE) == (0, 1, 2)
    # 128 + the signal's number, as a shell reports a process a signal stopped.
    assert status.INTERRUPTED == 128 + signal.SIGINT
    assert status.BROKEN_PIPE == 128 + getattr(signal, "SIGPIPE", 13)  # 13 where it is not named
    assert status.TERMINATED == 128 + signal.SIGTERM
    assert (main_module.INTERRUPTED, main_module.BROKEN_PIPE, main_module.TERMINATED) == (
        status.INTERRUPTED,
        status.BROKEN_PIPE,
        status.TERMINATED,
    )


def test_help_lists_every_status(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["--help"])
    assert stop.value.code == status.OK
    out = capsys.readouterr().out
    listed = out.split("exit status:", 1)[1]
    for code, when in status.EXIT_STATUSES.items():
        assert f"  {code:<5}{when}" in listed


def test_a_mistake_exits_with_usage(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == status.USAGE  # no command: the help, status 2
    with pytest.raises(SystemExit) as stop:
        main(["ingest"])  # no file
    assert stop.value.code == status.USAGE
    assert main(["ingest", "/no/such/file.jsonl", "--path", "x"]) == status.USAGE
    capsys.readouterr()
