"""Files and folder trees as items: what is read, what is left out and why, and the limits.

Reading never follows a symlink out of its folder, never opens what is not a regular file, never
reads more than ``max_bytes``; binary and unreadable files are reported with their reason. The
tree respects ``max_depth``, ``max_entries`` and every ``.gitignore``: a path the matcher ignores
is never listed (a property over random trees and patterns).
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxbudget import (
    ConfigurationError,
    Shrink,
    Tier,
    file_item,
    file_items,
    folder_items,
    folder_tree_item,
)
from ctxbudget.sources import GitIgnore, SkipReason


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "app.py").write_text("import os\n\nprint(os.name)\n")
    (root / "src" / "pkg" / "util.py").write_text("def f():\n    return 1\n")
    (root / "README.md").write_text("# Demo\n")
    (root / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR")
    (root / ".gitignore").write_text("*.log\nbuild/\n")
    (root / "debug.log").write_text("noise\n")
    (root / "build").mkdir()
    (root / "build" / "out.js").write_text("x\n")
    (root / ".git").mkdir()
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    return root


def test_a_file_is_an_item_under_its_path(project: Path) -> None:
    item = file_item("src/app.py", root=project)
    assert item.id == "file:src/app.py" and item.name == "src/app.py"
    assert item.tier == Tier.FILES and item.shrink is Shrink.LINES_HEAD_TAIL
    assert item.text == "import os\n\nprint(os.name)\n"
    assert item.metadata == {
        "path": "src/app.py",
        "bytes": 26,
        "bytes_read": 26,
        "lines": 3,
        "partial": False,
    }
    # Without a root the path is shown as given.
    assert file_item(project / "README.md").name == (project / "README.md").as_posix()


def test_a_bom_is_dropped_and_bad_bytes_replaced(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_bytes(b"\xef\xbb\xbfcaf\xe9\r\nok\r\n")
    item = file_item(tmp_path / "a.txt")
    assert item.text == "caf\ufffd\r\nok\r\n"
    assert file_item(tmp_path / "a.txt", encoding="latin-1").text.startswith("ï»¿café")


@pytest.mark.parametrize(
    ("make", "reason", "words"),
    [
        (lambda root: "missing.py", SkipReason.MISSING, "check the path"),
        (lambda root: "logo.png", SkipReason.BINARY, "NUL byte"),
        (lambda root: "src", SkipReason.NOT_A_FILE, "a directory"),
        (lambda root: "../outside.txt", SkipReason.OUTSIDE, "not inside"),
    ],
)
def test_what_cannot_be_used_says_why(
    project: Path, make: object, reason: SkipReason, words: str
) -> None:
    (project.parent / "outside.txt").write_text("secret\n")
    path = make(project)  # type: ignore[operator]
    with pytest.raises(ConfigurationError, match=words) as raised:
        file_item(path, root=project)
    assert reason.value in str(raised.value) and path in str(raised.value)
    found = file_items([path], root=project)
    assert found.items == () and [s.reason for s in found.skipped] == [reason]


def test_symlinks_never_lead_out_of_the_folder(project: Path) -> None:
    (project.parent / "secret.txt").write_text("password\n")
    os.symlink(project.parent / "secret.txt", project / "leak.txt")
    os.symlink(project / "README.md", project / "readme-link.md")
    os.symlink(project / "loop", project / "loop")
    os.symlink(project.parent, project / "up")
    found = file_items(["leak.txt", "readme-link.md", "loop", "up/secret.txt"], root=project)
    assert [it.name for it in found.items] == ["readme-link.md"]
    assert [(s.path, s.reason) for s in found.skipped] == [
        ("leak.txt", SkipReason.OUTSIDE),
        ("loop", SkipReason.UNREADABLE),  # a symlink loop
        ("up/secret.txt", SkipReason.OUTSIDE),
    ]
    listed = folder_items(project)
    assert "password\n" not in [it.text for it in listed.items]
    tree = folder_tree_item(project, max_depth=5)
    assert "── up -> " + str(project.parent) in tree.text  # shown, never entered
    assert not any(p.startswith("up/") for p in tree.metadata["listed"])


def test_a_fifo_is_never_opened(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    found = file_items(["pipe"], root=tmp_path)  # would block forever if it were opened
    assert [(s.reason, s.detail) for s in found.skipped] == [(SkipReason.NOT_A_FILE, "a FIFO")]


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their permissions")
def test_an_unreadable_file_is_reported(tmp_path: Path) -> None:
    (tmp_path / "locked.txt").write_text("x\n")
    (tmp_path / "locked.txt").chmod(0)
    try:
        found = file_items(["locked.txt"], root=tmp_path)
        assert [s.reason for s in found.skipped] == [SkipReason.UNREADABLE]
        assert "Permission denied" in found.skipped[0].message
    finally:
        (tmp_path / "locked.txt").chmod(0o644)


def test_reading_is_bounded_at_whole_lines(tmp_path: Path) -> None:
    (tmp_path / "big.txt").write_text("".join(f"line {i:04d}\n" for i in range(1000)))
    item = file_item(tmp_path / "big.txt", max_bytes=105)
    lines = item.text.split("\n")
    assert lines[:-1] == [f"line {i:04d}" for i in range(10)]  # 100 bytes: 10 whole lines
    assert lines[-1] == "… [file continues: only its first 100 of 10,000 bytes were read] …"
    assert item.metadata["partial"] is True and item.metadata["bytes"] == 10_000
    with pytest.raises(ConfigurationError, match="max_bytes"):
        file_item(tmp_path / "big.txt", max_bytes=0)
    with pytest.raises(ConfigurationError, match="encoding"):
        file_item(tmp_path / "big.txt", encoding="no-such-codec")


def test_folder_items_respect_gitignore_include_and_limits(project: Path) -> None:
    found = folder_items(project)
    assert [it.name for it in found.items] == [
        ".gitignore",
        "README.md",
        "src/app.py",
        "src/pkg/util.py",
    ]
    assert [(s.path, s.reason) for s in found.skipped] == [("logo.png", SkipReason.BINARY)]
    assert found.complete
    python = folder_items(project, include=["*.py", "!util.py"])
    assert [it.name for it in python.items] == ["src/app.py"]
    assert [it.name for it in folder_items(project, max_depth=1).items] == [
        ".gitignore",
        "README.md",
    ]
    first = folder_items(project, max_files=2)
    assert len(first.items) == 2 and not first.complete
    everything = folder_items(project, gitignore=False, ignore=[])
    assert {"debug.log", "build/out.js", ".git/HEAD"} <= {it.name for it in everything.items}
    with pytest.raises(ConfigurationError, match="not a folder"):
        folder_items(project / "README.md")
    with pytest.raises(ConfigurationError, match="one string"):
        folder_items(project, include="*.py")  # type: ignore[arg-type]


def test_the_tree_is_drawn_like_tree(project: Path) -> None:
    item = folder_tree_item(project)
    assert item.id == "tree:project/" and item.name == "project/" and item.tier == Tier.FILES
    assert item.text == "\n".join(
        [
            "├── src/",
            "│   ├── pkg/",
            "│   │   └── util.py",
            "│   └── app.py",
            "├── .gitignore",
            "├── logo.png",
            "└── README.md",
        ]
    )
    assert item.metadata["complete"] is True
    shallow = folder_tree_item(project, max_depth=1, max_entries=2)
    assert shallow.text == "├── src/\n├── .gitignore\n└── … 2 more"
    assert shallow.metadata["complete"] is False
    empty = project / "empty"
    empty.mkdir()
    assert folder_tree_item(empty).text == "(empty)"


def test_odd_names_stay_on_one_line(tmp_path: Path) -> None:
    (tmp_path / "two\nlines").write_text("")
    (tmp_path / os.fsdecode(b"caf\xe9")).write_text("")
    text = folder_tree_item(tmp_path).text
    assert text.splitlines() == ['├── "caf\\\\xe9"', '└── "two\\nlines"']


# -- properties over random trees ----------------------------------------------------------------
NAMES = st.sampled_from(["a", "b", "c.py", "d.log", "e", "tmp", "x y", "[z]"])
PATTERNS = st.sampled_from(
    ["*.log", "tmp/", "/a", "b", "!b", "**/e", "a/**", "*.py", "!c.py", "[a-c]", "x*", "e/"]
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    paths=st.lists(st.lists(NAMES, min_size=1, max_size=4).map("/".join), max_size=25),
    ignores=st.dictionaries(
        st.sampled_from(["", "a", "b", "a/b", "tmp"]), st.lists(PATTERNS, max_size=4), max_size=3
    ),
    max_depth=st.integers(1, 4),
    max_entries=st.integers(1, 30),
)
def test_the_tree_lists_nothing_ignored_and_keeps_its_limits(
    paths: list[str], ignores: dict[str, list[str]], max_depth: int, max_entries: int
) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        for path in paths:
            target = root / path
            if any(p.is_file() for p in [*target.parents, target]) or target.is_dir():
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text("")
        for folder, patterns in ignores.items():
            if (root / folder).is_dir():
                (root / folder / ".gitignore").write_text("\n".join(patterns) + "\n")
        item = folder_tree_item(root, max_depth=max_depth, max_entries=max_entries)
        matcher = GitIgnore.for_folder(root)
        listed = item.metadata["listed"]
        # Every path not ignored, level by level, with its depth.
        visible = sorted(
            (p.relative_to(root).as_posix() for p in root.rglob("*")),
            key=lambda p: (p.count("/"), p),
        )
        visible = [p for p in visible if not matcher.ignored(p, is_dir=(root / p).is_dir())]
        assert len(listed) == len(set(listed)) <= max_entries
        for path in listed:
            assert not matcher.ignored(path, is_dir=(root / path).is_dir()), path
            assert path.count("/") < max_depth
        within = [p for p in visible if p.count("/") < max_depth]
        assert set(listed) <= set(within)
        # Levels fill in order: nothing deeper is listed while a shallower one is left out.
        left_out = [p for p in within if p not in listed]
        if left_out:
            shallowest = min(p.count("/") for p in left_out)
            assert all(p.count("/") <= shallowest for p in listed)
            assert item.metadata["complete"] is False
        else:
            assert item.metadata["complete"] is (len(within) == len(visible))
        # The drawing has one line per listed entry, plus "… N more" lines.
        rows = [r for r in item.text.splitlines() if r != "(empty)"]
        entries = [r for r in rows if not re.search(r"── … \d+ more$", r)]
        assert len(entries) == len(listed)
        files = folder_items(root, max_files=1000)
        for it in files.items:
            assert it.name is not None
            assert not matcher.ignored(it.name, is_dir=False)
        assert {it.name for it in files.items} == {p for p in visible if (root / p).is_file()}
