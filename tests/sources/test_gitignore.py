"""gitignore semantics: a table of the cases gitignore(5) names, then git itself as the oracle.

The property test builds random folders with random ``.gitignore`` files (hostile names and
patterns: ``*``, ``**``, ``?``, brackets, ``!``, ``#``, escapes, trailing spaces) and compares
the files the walk keeps with ``git ls-files --others --exclude-standard`` in the same folder.
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

from ctxbudget.sources.gitignore import GitIgnore, parse_pattern
from ctxbudget.sources.walk import Folder

CASES = [
    # (files by folder, path, is_dir, ignored)
    ({"": "*.log"}, "a.log", False, True),
    ({"": "*.log"}, "d/e/a.log", False, True),
    ({"": "*.log"}, "a.log.txt", False, False),
    ({"": "/todo.txt"}, "todo.txt", False, True),
    ({"": "/todo.txt"}, "d/todo.txt", False, False),
    ({"": "build/"}, "build", True, True),
    ({"": "build/"}, "build", False, False),
    ({"": "build/"}, "a/build", True, True),
    ({"": "build/"}, "build/x.c", False, True),
    ({"": "doc/frotz/"}, "doc/frotz", True, True),
    ({"": "doc/frotz/"}, "a/doc/frotz", True, False),
    ({"": "frotz/"}, "a/frotz", True, True),
    ({"": "foo/*"}, "foo/test.json", False, True),
    ({"": "foo/*"}, "foo/bar", True, True),
    ({"": "foo/*"}, "foo/bar/hello.c", False, True),  # its folder is ignored
    ({"": "foo/*"}, "x/foo/test.json", False, False),
    ({"": "**/foo"}, "foo", False, True),
    ({"": "**/foo"}, "a/b/foo", True, True),
    ({"": "**/foo/bar"}, "x/y/foo/bar", False, True),
    ({"": "abc/**"}, "abc/x", False, True),
    ({"": "abc/**"}, "abc/x/y", False, True),
    ({"": "abc/**"}, "abc", True, False),
    ({"": "a/**/b"}, "a/b", False, True),
    ({"": "a/**/b"}, "a/x/y/b", False, True),
    ({"": "a/**/b"}, "xa/b", False, False),
    ({"": "a/**/**/b"}, "a/b", False, True),
    ({"": "**"}, "any/thing", False, True),
    ({"": "*.log\n!important.log"}, "important.log", False, False),
    ({"": "*.log\n!important.log"}, "x.log", False, True),
    ({"": "!important.log\n*.log"}, "important.log", False, True),  # the last match wins
    ({"": "dir/\n!dir/keep.txt"}, "dir/keep.txt", False, True),  # never inside an ignored dir
    ({"": "/*\n!/foo\n/foo/*\n!/foo/bar"}, "foo/bar", True, False),
    ({"": "/*\n!/foo\n/foo/*\n!/foo/bar"}, "foo/baz", False, True),
    ({"": "/*\n!/foo\n/foo/*\n!/foo/bar"}, "foo", True, False),
    ({"": "/*\n!/foo\n/foo/*\n!/foo/bar"}, "other", False, True),
    ({"": "#comment"}, "#comment", False, False),
    ({"": "\\#hash"}, "#hash", False, True),
    ({"": "\\!bang"}, "!bang", False, True),
    ({"": "foo  "}, "foo", False, True),  # trailing spaces dropped
    ({"": "foo\\ "}, "foo ", False, True),  # ... unless escaped
    ({"": "foo\\ "}, "foo", False, False),
    ({"": "foo\r"}, "foo", False, True),  # a CRLF file
    ({"": "a?c"}, "abc", False, True),
    ({"": "a?c"}, "a/c", False, False),
    ({"": "[a-c]x"}, "bx", False, True),
    ({"": "[a-c]x"}, "dx", False, False),
    ({"": "[!a-c]x"}, "dx", False, True),
    ({"": "[!a-c]x"}, "ax", False, False),
    ({"": "[^a]x"}, "bx", False, True),
    ({"": "[]]x"}, "]x", False, True),
    ({"": "[[:digit:]]*"}, "1abc", False, True),
    ({"": "[[:digit:]]*"}, "abc", False, False),
    ({"": "[z-a]"}, "m", False, False),  # a reversed range is empty
    ({"": "a["}, "a[", False, False),  # never closed: matches nothing, as in git
    ({"": "x\\"}, "x", False, False),  # a trailing backslash: nothing
    ({"": "\\*"}, "*", False, True),
    ({"": "\\*"}, "x", False, False),
    ({"": "a**b"}, "axxb", False, True),  # "**" inside a name is "*"
    ({"": "a**b"}, "ax/yb", False, False),
    ({"": "*"}, "anything/at/all", False, True),
    ({"": "*.txt", "sub": "!keep.txt"}, "sub/keep.txt", False, False),
    ({"": "*.txt", "sub": "!keep.txt"}, "sub/other.txt", False, True),
    ({"": "*.txt", "sub": "!keep.txt"}, "keep.txt", False, True),
    ({"": "!x.log", "sub": "x.log"}, "sub/x.log", False, True),  # deeper wins
    ({"sub": "/gen"}, "sub/gen", True, True),
    ({"sub": "/gen"}, "sub/a/gen", True, False),
    ({"sub": "/gen"}, "gen", True, False),
    ({"sub": "tmp/"}, "sub/a/tmp", True, True),
    ({"sub": "tmp/"}, "tmp", True, False),
]


@pytest.mark.parametrize(("files", "path", "is_dir", "ignored"), CASES)
def test_gitignore_cases(files: dict[str, str], path: str, is_dir: bool, ignored: bool) -> None:
    assert GitIgnore(files).ignored(path, is_dir=is_dir) is ignored


def test_precedence_extra_over_files_over_info_exclude() -> None:
    assert GitIgnore({}, exclude="x").ignored("x", is_dir=False)
    assert not GitIgnore({"": "!x"}, exclude="x").ignored("x", is_dir=False)
    assert GitIgnore({"": "!x"}, extra=["x"]).ignored("x", is_dir=False)


def test_blank_lines_and_comments_are_no_patterns() -> None:
    assert parse_pattern("") is None
    assert parse_pattern("   ") is None
    assert parse_pattern("# a comment") is None
    assert parse_pattern("!") is None
    assert parse_pattern("/") is None


def test_patterns_of_the_folders_above_apply(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / ".gitignore").write_text("*.tmp\n/top-only\n")
    (tmp_path / ".git" / "info").mkdir()
    (tmp_path / ".git" / "info" / "exclude").write_text("secret\n")
    inner = tmp_path / "pkg"
    (inner / "top-only").mkdir(parents=True)
    for name in ("a.tmp", "a.py", "secret"):
        (inner / name).write_text("x")
    listed = [e.path for e in Folder(inner).scan()]
    # *.tmp and secret come from above; /top-only is anchored to the repository's top.
    assert listed == ["top-only", "a.py"]


# -- git itself as the oracle -----------------------------------------------------------------
GIT = shutil.which("git")
NAMES = st.sampled_from(
    ["a", "b", "ab", "x.log", "a.txt", "#h", "!n", "sp ", "*", "q?", "[c]", "-", "]", "a\\b"]
)
PIECES = st.sampled_from(
    [
        "a",
        "b",
        "x",
        "*",
        "**",
        "?",
        "/",
        "!",
        ".log",
        ".txt",
        "[a-b]",
        "[!a]",
        "\\*",
        "#",
        " ",
        "\\ ",
        "\\!",
        "[",
        "]",
        "sp",
        "c]",
        "h",
        "q",
        "n",
        "[a/b]",
        "[[:alpha:]]",
        "[[:bogus:]]",
        "\\",
        "-",
        "[z-a]",
        "[]a]",
        "[^b]",
    ]
)
PATTERNS = st.lists(PIECES, min_size=1, max_size=5).map("".join)
GITIGNORE = st.lists(PATTERNS, max_size=6).map("\n".join)


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


@pytest.mark.skipif(GIT is None, reason="git is not installed")
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    files=st.lists(st.lists(NAMES, min_size=1, max_size=3).map("/".join), min_size=1, max_size=12),
    ignores=st.dictionaries(st.sampled_from(["", "a", "b", "a/b", "ab"]), GITIGNORE, max_size=3),
    info=GITIGNORE,
)
def test_the_walk_keeps_exactly_what_git_keeps(
    files: list[str], ignores: dict[str, str], info: str
) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch) / "repo"
        root.mkdir()
        _git(root, "init", "-q")
        (root / ".git" / "info").mkdir(exist_ok=True)
        (root / ".git" / "info" / "exclude").write_text(info)
        for path in files:
            target = root / path
            if any(p.is_file() for p in [*target.parents, target]) or target.is_dir():
                continue  # a name already used as a file (or a folder)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text("x")
        for folder, text in ignores.items():
            where = root / folder
            if where.is_dir():
                (where / ".gitignore").write_text(text + "\n")
        expected = sorted(
            p for p in _git(root, "ls-files", "-o", "--exclude-standard", "-z").split("\0") if p
        )
        walked = sorted(entry.path for entry in Folder(root).files())
        assert walked == expected, (ignores, info)
