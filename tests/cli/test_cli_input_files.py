"""Input files that are not what they claim, given to ``ctxbudget ingest`` and ``eval locomo``.

A file with a byte order mark is read; a folder or a pipe is named as what it is; a file that
is refused leaves no new store (nor an ``--out`` folder); ingesting the same file again stores
nothing twice, so a run stopped half way is finished by running it again. Run in-process.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from cli_helpers import error_line, jsonl, run

from ctxbudget.cli.main import main
from ctxbudget.memory.context import ContextMemory

CHAT = [
    {"session": "s1", "role": "user", "text": "My cat is named Miso."},
    {"session": "s1", "role": "assistant", "text": "Miso is a lovely name."},
    {"session": "s2", "role": "user", "text": "I play the cello on Sundays."},
]

BOM = "\ufeff"


def texts(folder: Path) -> list[str]:
    with ContextMemory(path=folder) as memory:
        found = [memory.history(s, limit=100) for s in ("s1", "s2")]
    return sorted(r.text for records in found for r in records)


# -- a byte order mark ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("chat.jsonl", jsonl(CHAT)),
        ("chat.json", json.dumps(CHAT)),
        ("chat.json", json.dumps({"messages": CHAT})),
    ],
)
def test_a_chat_log_with_a_byte_order_mark_is_read(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str, text: str
) -> None:
    # Notepad and PowerShell's Out-File write UTF-8 with a BOM; it is not part of the JSON.
    path = tmp_path / name
    path.write_text(BOM + text, encoding="utf-8")
    code, out, err = run(capsys, "ingest", str(path), "--path", str(tmp_path / "store"))
    assert code == 0, err
    assert out.startswith("stored 3 messages in 2 sessions")
    assert texts(tmp_path / "store") == sorted(m["text"] for m in CHAT)


def test_a_document_with_a_byte_order_mark_does_not_store_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "notes.md"
    path.write_text(BOM + "# Notes\n\nThe spare key is with the neighbour.\n", encoding="utf-8")
    folder = tmp_path / "store"
    code, _, err = run(capsys, "ingest", str(path), "--path", str(folder))
    assert code == 0, err
    with ContextMemory(path=folder) as memory:
        chunks = memory.store.find(namespace="default", kinds=["document"])
    assert chunks
    assert all(BOM not in chunk.text for chunk in chunks)
    assert chunks[0].text.startswith("# Notes")


# -- what is not a file -----------------------------------------------------------------------


def test_a_folder_is_named_a_folder(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "logs.jsonl").mkdir()
    code, out, err = run(capsys, "ingest", str(tmp_path / "logs.jsonl"), "--path", "x")
    line = error_line(err)
    assert (code, out) == (2, "")
    assert "a folder, not a file" in line
    assert "no such file" not in line


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
def test_a_named_pipe_is_refused_without_blocking(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    fifo = tmp_path / "chat.jsonl"
    os.mkfifo(fifo)
    code, _, err = run(capsys, "ingest", str(fifo), "--path", str(tmp_path / "store"))
    assert code == 2
    assert "not a regular file" in error_line(err)


# -- a refused file leaves nothing behind ------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "text", "needle"),
    [
        ("bad.jsonl", jsonl(CHAT[:2]) + "{bad}\n" + jsonl(CHAT[2:]), "bad.jsonl:3: not valid JSON"),
        ("bad.json", '[{"session": "s1", "role": "user", "text": "x"', "not valid JSON"),
        ("bad.txt", "   \n", "holds no text"),
        ("bad.csv", "a,b\n", "unknown file type"),
    ],
)
def test_a_refused_file_creates_no_store(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str, text: str, needle: str
) -> None:
    # A typo'd --path with a bad file used to leave an empty store folder there. (A message
    # the core refuses, a role "robot", too: tests/cli/test_cli_ingest_checks.py.)
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    folder = tmp_path / "new-store"
    code, _, err = run(capsys, "ingest", str(path), "--path", str(folder))
    assert code == 2
    assert needle in error_line(err)
    assert not folder.exists()


def test_a_bad_line_keeps_a_store_as_it_was(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    folder = tmp_path / "store"
    good = tmp_path / "good.jsonl"
    good.write_text(jsonl(CHAT[:1]), encoding="utf-8")
    assert run(capsys, "ingest", str(good), "--path", str(folder))[0] == 0
    bad = tmp_path / "bad.jsonl"
    bad.write_text(jsonl(CHAT[1:]) + "[1, 2]\n", encoding="utf-8")
    code, _, err = run(capsys, "ingest", str(bad), "--path", str(folder))
    assert code == 2
    assert "bad.jsonl:3: expected a JSON object per line" in error_line(err)
    assert texts(folder) == [CHAT[0]["text"]]


# -- ingesting again stores nothing twice ------------------------------------------------------


def test_ingesting_the_same_file_again_stores_nothing_twice(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path, folder = tmp_path / "chat.jsonl", str(tmp_path / "store")
    path.write_text(jsonl(CHAT), encoding="utf-8")
    for _ in range(2):
        code, _, err = run(capsys, "ingest", str(path), "--path", folder)
        assert code == 0, err
    assert texts(tmp_path / "store") == sorted(m["text"] for m in CHAT)


def test_another_file_with_the_same_messages_is_stored_too(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # The ids come from the whole file: day two's "hello" is not day one's.
    folder = str(tmp_path / "store")
    day = [{"role": "user", "text": "hello"}]
    for name, extra in (("day1.jsonl", []), ("day2.jsonl", [{"role": "user", "text": "bye"}])):
        (tmp_path / name).write_text(jsonl(day + extra), encoding="utf-8")
        code, _, err = run(
            capsys, "ingest", str(tmp_path / name), "--session", "s1", "--path", folder
        )
        assert code == 0, err
    assert texts(tmp_path / "store") == ["bye", "hello", "hello"]


# -- eval locomo ------------------------------------------------------------------------------


def test_locomo_nested_too_deeply_is_one_error_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    pytest.importorskip("matplotlib")
    data = tmp_path / "locomo.json"
    data.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    out = tmp_path / "results"
    code, _, err = run(capsys, "eval", "locomo", str(data), "--out", str(out), "--no-progress")
    assert code == 2
    assert "nested too deeply" in error_line(err)
    assert not out.exists()


def test_locomo_with_no_question_to_score_is_refused_before_any_work(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    pytest.importorskip("matplotlib")
    turns = [{"speaker": "Ann", "dia_id": "D1:1", "text": "I moved to Lisbon."}]
    sample = {
        "sample_id": "conv-1",
        "conversation": {"speaker_a": "Ann", "speaker_b": "Bo", "session_1": turns},
        "qa": {"question": "Where does Ann live?", "evidence": ["D1:1"], "category": 1},
    }
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps([sample]), encoding="utf-8")
    out = tmp_path / "results"
    code, stdout, err = run(capsys, "eval", "locomo", str(data), "--out", str(out), "--no-progress")
    line = error_line(err)
    assert (code, stdout) == (2, "")
    assert "no question with evidence to score" in line
    assert "'qa' is not a list" in line  # the loader's note says why
    assert not out.exists()


# -- flags that name no file ------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["ingest", "chat.jsonl", "--path", ""],
        ["--path", " ", "stats"],
        ["stats", "--chroma-url", ""],
    ],
)
def test_an_empty_path_or_url_is_refused_not_the_current_folder(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    argv: list[str],
) -> None:
    # --path "$STORE" with STORE unset used to put the store's files in the current folder.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "chat.jsonl").write_text(jsonl(CHAT), encoding="utf-8")
    with pytest.raises(SystemExit) as stop:  # argparse's own refusal
        main(argv)
    out, err = capsys.readouterr()
    assert (stop.value.code, out) == (2, "")
    assert "needs a " in error_line(err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chat.jsonl"]


def test_a_plot_to_a_folder_is_one_error_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    pytest.importorskip("matplotlib")
    chat, folder = tmp_path / "chat.jsonl", str(tmp_path / "store")
    chat.write_text(jsonl(CHAT), encoding="utf-8")
    assert run(capsys, "ingest", str(chat), "--path", folder)[0] == 0
    code, out, err = run(capsys, "stats", "--plot", str(tmp_path), "--path", folder)
    assert (code, out) == (2, "")
    assert "a folder; give the PNG file to write" in error_line(err)
