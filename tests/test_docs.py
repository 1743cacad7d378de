"""The documentation site builds with --strict: every page, link and API reference resolves."""

from __future__ import annotations

import os
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
