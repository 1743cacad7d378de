"""Files from a folder pass one boundary: git's listing, no symlink out, bounded ignore files.

Generated folders with ``.gitignore`` files that are regular files or symlinks (to a file in
the folder or outside it), symlinked files pointing in and out, and FIFOs, checked against
``git ls-files --others --exclude-standard`` in the same folder; and `folder_items` lists every
path it leaves out with why.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxbudget import folder_items
from ctxbudget.sources import SkipReason
from ctxbudget.sources.gitignore import MAX_IGNORE_BYTES
from ctxbudget.sources.walk import Folder

GIT = shutil.which("git")
FIFO = hasattr(os, "mkfifo")


def _git(folder: Path, *args: str) -> str:
    home = folder.parent
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
    }
    done = subprocess.run(
        [GIT or "git", *args], cwd=folder, env=env, capture_output=True, check=True, timeout=60
    )
    return done.stdout.decode("utf-8", "surrogateescape")


def _listed_by_git(root: Path) -> list[str]:
    out = _git(root, "ls-files", "-o", "--exclude-standard", "-z")
    return sorted(p for p in out.split("\0") if p)


# -- regressions --------------------------------------------------------------------------------
def test_a_gitignore_symlinked_outside_the_folder_is_not_read(tmp_path: Path) -> None:
    # Before: its patterns were applied, though git does not follow it (the two disagreed).
    outside = tmp_path / "elsewhere.txt"
    outside.write_text("*.log\n")
    root = tmp_path / "project"
    root.mkdir()
    (root / ".gitignore").symlink_to(outside)
    (root / "app.log").write_text("a log line\n")
    found = folder_items(root)
    assert "file:app.log" in [item.id for item in found.items]
    unread = [s for s in found.skipped if s.reason is SkipReason.IGNORE_FILE]
    assert [s.path for s in unread] == [".gitignore"]
    assert "symlink" in unread[0].detail and "not applied" in unread[0].message
    outside_link = [s for s in found.skipped if s.path == ".gitignore" and s is not unread[0]]
    assert [s.reason for s in outside_link] == [SkipReason.OUTSIDE]  # nor read as a file


def test_a_huge_gitignore_is_not_read_whole_and_is_listed(tmp_path: Path) -> None:
    # Before: a 200 MB .gitignore was read and compiled whole (30 s and counting).
    big = b"*.log\n" + b"# padding\n" * (MAX_IGNORE_BYTES // 10 + 1)
    (tmp_path / ".gitignore").write_bytes(big)
    (tmp_path / "app.log").write_text("x\n")
    found = folder_items(tmp_path, max_bytes=1024)
    unread = [s for s in found.skipped if s.reason is SkipReason.IGNORE_FILE]
    assert [s.path for s in unread] == [".gitignore"]
    assert f"{MAX_IGNORE_BYTES:,} bytes" in unread[0].detail
    assert "file:app.log" in [item.id for item in found.items]  # its patterns not applied


def test_a_gitignore_at_the_limit_is_applied(tmp_path: Path) -> None:
    text = b"*.log\n"
    (tmp_path / ".gitignore").write_bytes(text + b"#" * (MAX_IGNORE_BYTES - len(text)))
    (tmp_path / "app.log").write_text("x\n")
    found = folder_items(tmp_path)
    assert "file:app.log" not in [item.id for item in found.items]
    assert not [s for s in found.skipped if s.reason is SkipReason.IGNORE_FILE]


@pytest.mark.skipif(not FIFO, reason="no FIFOs here")
def test_a_fifo_in_a_folder_is_listed_as_skipped_never_opened(tmp_path: Path) -> None:
    # Before: FIFOs were left out without being listed.
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "a.txt").write_text("alpha\n")
    found = folder_items(tmp_path)
    assert [item.id for item in found.items] == ["file:a.txt"]
    assert [(s.path, s.reason) for s in found.skipped] == [("pipe", SkipReason.NOT_A_FILE)]


@pytest.mark.skipif(not FIFO, reason="no FIFOs here")
def test_a_gitignore_that_is_a_fifo_never_blocks(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / ".gitignore")
    (tmp_path / "a.txt").write_text("alpha\n")
    found = folder_items(tmp_path)
    assert [item.id for item in found.items] == ["file:a.txt"]


# -- the property -------------------------------------------------------------------------------
NAMES = st.sampled_from(["a", "b", "ab", "x.log", "y.txt", "z.md"])
FOLDERS = st.sampled_from(["", "a", "b", "a/b"])
IGNORE_TEXT = st.lists(
    st.sampled_from(["*.log", "!x.log", "*.txt", "b/", "/a", "ab", "z.*", "**/y.txt"]), max_size=3
).map("\n".join)
IGNORE_KIND = st.sampled_from(["file", "link_in", "link_out"])
LINKS = st.lists(
    st.tuples(FOLDERS, st.sampled_from(["ln1", "ln2"]), st.sampled_from(["in", "out", "gone"])),
    max_size=3,
)


@pytest.mark.skipif(GIT is None, reason="git is not installed")
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    files=st.lists(st.tuples(FOLDERS, NAMES), min_size=1, max_size=8),
    ignores=st.dictionaries(FOLDERS, st.tuples(IGNORE_KIND, IGNORE_TEXT), max_size=3),
    links=LINKS,
    fifos=st.lists(FOLDERS, max_size=2),
)
def test_the_walk_matches_git_with_symlinks_ignore_files_and_fifos(
    files: list[tuple[str, str]],
    ignores: dict[str, tuple[str, str]],
    links: list[tuple[str, str, str]],
    fifos: list[str],
) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch) / "repo"
        root.mkdir()
        outside = Path(scratch) / "outside.txt"
        outside.write_text("*.log\n*.txt\n")
        _git(root, "init", "-q")
        for folder, name in files:
            target = root / folder / name
            if any(p.exists() and not p.is_dir() for p in target.parents) or target.exists():
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text("x\n")
        symlinked_ignores = []
        for folder, (kind, text) in ignores.items():
            where = root / folder
            if not where.is_dir():
                continue
            if kind == "file":
                (where / ".gitignore").write_text(text + "\n")
                continue
            if kind == "link_in":
                (where / "rules").write_text(text + "\n")
                (where / ".gitignore").symlink_to("rules")
            else:
                (where / ".gitignore").symlink_to(outside)
            symlinked_ignores.append(f"{folder}/.gitignore" if folder else ".gitignore")
        for folder, name, points in links:
            where = root / folder
            if not where.is_dir() or (where / name).exists() or (where / name).is_symlink():
                continue
            target = {"in": root / "inside.txt", "out": outside, "gone": root / "nothing"}[points]
            if points == "in":
                target.write_text("inside\n")
            (where / name).symlink_to(target)
        made_fifos = []
        for folder in fifos if FIFO else []:
            where = root / folder
            if where.is_dir() and not (where / "pipe").exists():
                os.mkfifo(where / "pipe")
                made_fifos.append(f"{folder}/pipe" if folder else "pipe")

        expected = _listed_by_git(root)  # git lists neither FIFOs nor what it ignores
        walked = list(Folder(root).files())
        assert sorted(e.path for e in walked if e.kind != "other") == expected
        assert sorted(e.path for e in walked if e.kind == "other") == sorted(
            p for p in made_fifos if _kept(root, p)
        )

        found = folder_items(root, max_files=1000)
        shown = {item.name for item in found.items}
        skipped = {(s.path, s.reason) for s in found.skipped}
        # Every path the walk found is an item or listed as skipped with why.
        for entry in walked:
            assert entry.path in shown or any(p == entry.path for p, _ in skipped), entry
        for path in made_fifos:
            if _kept(root, path):
                assert (path, SkipReason.NOT_A_FILE) in skipped
        # No item was read through a symlink that leaves the folder.
        for item in found.items:
            real = (root / str(item.name)).resolve()
            assert real.is_relative_to(root.resolve()), item.name
        # Every symlinked .gitignore the walk reached is listed as not applied.
        unread = {p for p, r in skipped if r is SkipReason.IGNORE_FILE}
        for path in symlinked_ignores:
            if path in {e.path for e in walked}:  # its folder was walked
                assert path in unread, (path, unread)


def _kept(root: Path, path: str) -> bool:
    """Whether git would look at ``path`` (it is not ignored, nor any folder above it)."""
    done = subprocess.run(
        [GIT or "git", "check-ignore", "-q", "--no-index", path],
        cwd=root,
        capture_output=True,
        timeout=60,
        check=False,
    )
    return done.returncode == 1
