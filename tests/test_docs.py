"""The documentation site builds with --strict: every page, link and API reference resolves."""

from __future__ import annotations

import importlib
import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_docs_build_strict(tmp_path: Path) -> None:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    for page in ("index.html", "concepts/index.html", "comparison/index.html"):
        assert (tmp_path / page).is_file(), page
    api = (tmp_path / "api" / "ctxbudget" / "index.html").read_text("utf-8")
    assert "ContextAssembler" in api and "assemble" in api


def test_docs_pages_are_in_the_nav() -> None:
    config = (ROOT / "mkdocs.yml").read_text("utf-8")
    pages = sorted(p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md"))
    missing = [page for page in pages if page not in config]
    assert not missing, f"pages not in mkdocs.yml nav: {missing}"


# docs/reliability.md's "The conformance suite": a door's row, from what its driver can do.
CONFORMANCE = ROOT / "tests" / "conformance"


def _cells(can: frozenset[str], takes: frozenset[str] | None = None) -> list[str]:
    """The row the table must show for a driver's ``can`` (the suite's `needs` per column)."""

    def yes(*needed: str, extra: str = "") -> str:
        return f"y{extra}" if set(needed) <= can else "-"

    counts = ", ".join(c for c in ("report", "span") if c in can) or "-"
    removed = yes("removal", "add", "send")
    if removed == "y" and "signals" in can:  # a server process holds an embedded folder alone
        removed = "server only"
    fits = yes("send") if takes is None or "budget" in takes else "-"  # no budget, no fits
    return [
        fits,
        counts,
        yes("send", "chosen" if "chosen" in can else "report"),
        yes("send", "report"),  # explained: the door's report read as one explanation
        removed,
        yes("bad", extra=", class" if "kinds" in can else ""),
        yes("close", extra=", every call" if "close_each" in can else ""),
        yes("cancel", "add"),
        yes("signals"),
    ]


def _door_rows() -> dict[str, list[str]]:
    text = (ROOT / "docs" / "reliability.md").read_text("utf-8")
    section = text.split("## The conformance suite", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, list[str]] = {}
    table = section.split("| door (driver) |", 1)[1].split("\n\n", 1)[0]
    for line in table.splitlines()[2:]:
        door, *cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        drivers = re.findall(r"`(\w+)`", door.rsplit("(", 1)[-1])
        for name in drivers:
            rows[name] = cells
    return rows


def test_the_conformance_table_shows_what_each_driver_can(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.syspath_prepend(str(CONFORMANCE))
    from drivers import DRIVERS

    rows = _door_rows()
    assert set(rows) == set(DRIVERS), "each driver has one row of the table, and only drivers"
    for name, module_name in DRIVERS.items():
        module = importlib.import_module(f"drivers.{module_name}")
        door = getattr(module, str(inspect.signature(module.make).return_annotation))
        want = _cells(door.can, getattr(door, "takes", None))
        # A cell may qualify its "y" in words (how bad values are given to the door).
        got = [
            cell if cell in ("-", want[n]) else cell.split(" (", 1)[0]
            for n, cell in enumerate(rows[name])
        ]
        assert got == want, f"docs/reliability.md's row of {name}: {rows[name]}; can: {want}"
