"""Input the command line once took at its word, each a regression test of a bug found by probing.

- A message whose ``"id"`` is ``""`` got a random id (the core's "no id"), so ingesting the same
  file again stored it twice; it now gets the file's own id, as a message without one does.
- A key given twice in one JSON object (``"text"``, or a session under ``"sessions"``) kept the
  last value only, and the rest of what the file said was lost without a word: now refused.
- ``stats``, ``assemble``, ``explain`` and ``index-entities`` on a folder of other files (not a
  store) created an empty Chroma store among them (and answered from it); ``ingest`` strewed
  a store's files there. Both are refused now, and the folder is left as it was (an empty
  folder is still an empty store, as tests/cli/test_cli.py has it).
- A ``.json`` file with both ``"messages"`` and ``"sessions"`` stored the first and left the
  second out without a word: refused now.
- ``demo`` that failed (a budget too small) deleted its folder with the store still open: its
  log writer then wrote into the deleted folder, and said so on stderr after the error line.
- A SIGTERM whose ``Terminated`` was raised inside a finalizer (a ``__del__``, where Python
  prints it as "Exception ignored" and goes on) let the command end with status 0.
- A JSON error read "Unterminated string starting at at column 16".

Run in-process, on the real embedded Chroma and the default embedder.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import error_line, jsonl, run

from ctxbudget.memory.context import ContextMemory

CHAT = [
    {"session": "s1", "role": "user", "text": "My cat is named Miso.", "id": ""},
    {"session": "s1", "role": "assistant", "text": "Miso is a lovely name.", "id": ""},
]


def records(folder: Path) -> list[str]:
    with ContextMemory(path=folder) as memory:
        return [r.text for r in memory.history("s1", limit=100)]


def listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def test_an_empty_id_is_the_files_own_so_a_second_ingest_stores_nothing_twice(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    chat = tmp_path / "chat.jsonl"
    chat.write_text(jsonl(CHAT), encoding="utf-8")
    store = tmp_path / "store"
    for _ in range(2):
        code, _, err = run(capsys, "ingest", str(chat), "--path", str(store), "--no-progress")
        assert code == 0, err
    # Before: 4 records, each message twice under two random ids.
    assert records(store) == [m["text"] for m in CHAT]


@pytest.mark.parametrize(
    ("name", "text", "where", "key"),
    [
        (
            "chat.jsonl",
            '{"session": "s1", "role": "user", "text": "a", "text": "b"}\n',
            "chat.jsonl:1",
            "text",
        ),
        (
            "chat.json",
            json.dumps({"sessions": {"s1": [{"role": "user", "text": "a"}]}})[:-2]
            + ', "s1": [{"role": "user", "text": "b"}]}}',
            "chat.json",
            "s1",
        ),
    ],
    ids=["a-field", "a-session"],
)
def test_a_key_given_twice_is_refused_and_nothing_is_stored(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    name: str,
    text: str,
    where: str,
    key: str,
) -> None:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    store = tmp_path / "store"
    code, out, err = run(capsys, "ingest", str(path), "--path", str(store), "--no-progress")
    line = error_line(err)
    assert (code, out) == (2, "")
    assert f"{where}: the key {key!r} is given twice in one object" in line, line
    assert not store.exists()


def test_a_json_error_names_its_column_once(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "chat.jsonl"
    path.write_text('{"session": "s1", "role": "user", "te\n', encoding="utf-8")
    code, _, err = run(capsys, "ingest", str(path), "--path", str(tmp_path / "store"))
    line = error_line(err)
    assert code == 2
    assert "Unterminated string starting at column 35" in line, line
    assert " at at " not in line


@pytest.mark.parametrize(
    "argv",
    [
        ["stats"],
        ["stats", "--contexts"],
        ["assemble", "hi", "--session", "s1"],
        ["explain", "hi", "--session", "s1"],
        ["index-entities"],
        ["inspect", "--port", "0"],  # before 2026-12-01 it served an empty store made there
    ],
)
def test_reading_commands_refuse_a_folder_of_other_files_and_leave_it_as_it_was(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: list[str]
) -> None:
    folder = tmp_path / "documents"
    folder.mkdir()
    (folder / "letter.txt").write_text("Dear Ana,", encoding="utf-8")
    before = listing(folder)
    code, out, err = run(capsys, *argv, "--path", str(folder))
    line = error_line(err)
    assert (code, out) == (2, "")
    assert f"--path {folder}: no store there: a folder of other files ('letter.txt'...)" in line
    assert listing(folder) == before  # before: chroma.sqlite3, a journal and a lock among them


def test_ingest_refuses_a_folder_of_other_files_or_a_file_as_the_store(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    chat = tmp_path / "chat.jsonl"
    chat.write_text(jsonl(CHAT), encoding="utf-8")
    folder = tmp_path / "documents"
    folder.mkdir()
    (folder / "letter.txt").write_text("Dear Ana,", encoding="utf-8")
    before = listing(folder)
    code, out, err = run(capsys, "ingest", str(chat), "--path", str(folder))
    line = error_line(err)
    assert (code, out) == (2, "")
    assert "a folder of other files ('letter.txt'...), not a ctxbudget store" in line, line
    assert listing(folder) == before
    code, _, err = run(capsys, "ingest", str(chat), "--path", str(folder / "letter.txt"))
    assert code == 2
    assert "a file, not a store's folder" in error_line(err)
    # An empty folder is a new store; a store is a store (ingest and read again).
    empty = tmp_path / "empty"
    empty.mkdir()
    for _ in range(2):
        code, _, err = run(capsys, "ingest", str(chat), "--path", str(empty), "--no-progress")
        assert code == 0, err
    assert run(capsys, "stats", "--path", str(empty))[0] == 0


def test_a_file_with_both_messages_and_sessions_is_refused_not_half_read(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "chat.json"
    document = {
        "messages": [{"session": "s1", "role": "user", "text": "a"}],
        "sessions": {"s2": [{"role": "user", "text": "b"}]},
    }
    path.write_text(json.dumps(document), encoding="utf-8")
    store = tmp_path / "store"
    code, out, err = run(capsys, "ingest", str(path), "--path", str(store))
    # Before: "stored 1 message in 1 session", and session s2 was left out without a word.
    assert (code, out) == (2, "")
    assert "both 'messages' and 'sessions' are given" in error_line(err)
    assert not store.exists()


def test_a_failed_demo_says_one_line_and_writes_nothing_into_its_deleted_folder() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ctxbudget.cli", "demo", "--budgets", "5", "--no-progress"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "ANONYMIZED_TELEMETRY": "False", "ORT_DISABLE_TELEMETRY": "1"},
    )
    assert done.returncode == 2
    # Before: the folder was deleted with the store still open, and its log writer said
    # "attempt to write a readonly database ... 1 context log entries dropped" after the error.
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("ctxbudget: error: the items that are never pruned need")


STOPPED_IN_A_FINALIZER = """
import os, signal, sys, time
from ctxbudget.cli.main import main
from ctxbudget.memory.writing.writer import Writer

write = Writer.write


class Finalized:
    def __del__(self):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)  # the handler runs here, inside __del__: Python ignores what it raises


def stopped_write(self, *args, **kwargs):
    Finalized()  # collected at once
    return write(self, *args, **kwargs)


Writer.write = stopped_write
sys.exit(main(sys.argv[1:]))
"""


def test_sigterm_swallowed_by_a_finalizer_still_ends_with_143(tmp_path: Path) -> None:
    chat = tmp_path / "chat.jsonl"
    chat.write_text(jsonl(CHAT), encoding="utf-8")
    store = tmp_path / "store"
    done = subprocess.run(
        [sys.executable, "-c", STOPPED_IN_A_FINALIZER, "ingest", str(chat), "--path", str(store)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "ANONYMIZED_TELEMETRY": "False", "ORT_DISABLE_TELEMETRY": "1"},
    )
    # Before: status 0, as if no SIGTERM had come (Python printed "Exception ignored in").
    assert done.returncode == 143, done.stderr
    assert done.stderr.splitlines()[-1] == "ctxbudget: terminated"
    assert records(store) == [m["text"] for m in CHAT]  # what it said it stored is there
