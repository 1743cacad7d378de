"""How the command ends when it is stopped, or cannot write what it prints.

A reader that goes away (``ctxbudget ... | head -1``) ends it with status 141 and no traceback;
SIGTERM during an ingest closes the store (what was stored is kept) and exits 143 with one line,
as Ctrl+C exits 130; running the ingest again stores the rest, nothing twice. A stdout that
cannot encode the text (a Windows code page) gets it escaped, and ``--json`` stays valid JSON.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from ctxbudget.cli.main import main
from ctxbudget.memory.context import ContextMemory
from ctxbudget.memory.writing.writer import Writer

CHAT = [
    {"session": "s1", "role": "user" if i % 2 == 0 else "assistant", "text": f"turn {i} 日本語 🐱"}
    for i in range(6)
]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def chat(tmp_path: Path) -> Path:
    path = tmp_path / "chat.jsonl"
    path.write_text("".join(json.dumps(m) + "\n" for m in CHAT), encoding="utf-8")
    return path


@pytest.fixture
def store(tmp_path: Path, chat: Path, capsys: pytest.CaptureFixture[str]) -> str:
    folder = str(tmp_path / "store")
    assert run(capsys, "ingest", str(chat), "--path", folder)[0] == 0
    return folder


def stored(folder: str) -> list[str]:
    with ContextMemory(path=folder) as memory:
        return [r.text for r in memory.history("s1")]


# -- a closed stdout --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "status"),
    # 141: 128 + SIGPIPE, as the shell reports `seq 1 9999 | head -1`; argparse's --help
    # drops a write error itself (and exits 0).
    [(["--version"], 141), (["--help"], 0), (["stats"], 141), (["stats", "--json"], 141)],
)
def test_a_reader_gone_away_is_no_traceback(store: str, command: list[str], status: int) -> None:
    read, write = os.pipe()
    os.close(read)  # every write to the pipe now fails: EPIPE, a BrokenPipeError in Python
    try:
        done = subprocess.run(
            [sys.executable, "-m", "ctxbudget.cli", *command, "--path", store],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        os.close(write)
    assert "Traceback" not in done.stderr
    assert "BrokenPipeError" not in done.stderr
    assert done.stderr == ""
    assert done.returncode == status


# -- stopped during an ingest -----------------------------------------------------------------


def stop_half_way(monkeypatch: pytest.MonkeyPatch, sig: int) -> None:
    """Writer.write stores the first half, then the process gets ``sig`` (as from kill)."""
    write = Writer.write

    def half(self: Writer, records: list[Any], noun: str, *args: Any, **kwargs: Any) -> Any:
        done = write(self, records[: len(records) // 2], noun, *args, **kwargs)
        os.kill(os.getpid(), sig)
        time.sleep(10)  # the handler raises here, at once
        return done  # not reached: the handler raised at the kill

    monkeypatch.setattr(Writer, "write", half)


@pytest.mark.parametrize(
    ("sig", "status", "said"),
    [
        (signal.SIGTERM, 143, "ctxbudget: terminated"),
        (signal.SIGINT, 130, "ctxbudget: interrupted"),
    ],
    ids=["SIGTERM", "SIGINT"],
)
def test_a_stopped_ingest_keeps_what_it_stored_and_a_rerun_stores_the_rest(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    chat: Path,
    sig: int,
    status: int,
    said: str,
) -> None:
    folder = str(tmp_path / "stopped")
    before = signal.getsignal(signal.SIGTERM)
    with monkeypatch.context() as patch:
        stop_half_way(patch, sig)
        code, out, err = run(capsys, "ingest", str(chat), "--path", folder)
    assert signal.getsignal(signal.SIGTERM) == before  # the command's handler is gone again
    assert (code, out) == (status, "")
    assert "Traceback" not in err
    lines = err.splitlines()
    assert lines[-1] == said
    assert "stored so far are kept; run the same command again" in lines[-2]
    assert stored(folder) == [m["text"] for m in CHAT[:3]]  # closed: nothing acknowledged lost
    code, out, err = run(capsys, "ingest", str(chat), "--path", folder)
    assert code == 0, err
    assert stored(folder) == [m["text"] for m in CHAT]  # the rest, and nothing twice


# -- a stdout that cannot encode the text -----------------------------------------------------


def ascii_stdout(monkeypatch: pytest.MonkeyPatch) -> io.BytesIO:
    raw = io.BytesIO()
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(raw, encoding="ascii", newline="\n"))
    return raw


def test_json_on_an_ascii_stdout_is_valid_escaped_json(
    monkeypatch: pytest.MonkeyPatch, store: str
) -> None:
    raw = ascii_stdout(monkeypatch)
    code = main(["assemble", "cat?", "--session", "s1", "--json", "--path", store])
    sys.stdout.flush()
    assert code == 0
    document = json.loads(raw.getvalue().decode("ascii"))
    assert [m["content"] for m in document["messages"][:6]] == [m["text"] for m in CHAT]


def test_text_on_an_ascii_stdout_is_escaped_not_a_crash(
    monkeypatch: pytest.MonkeyPatch, store: str
) -> None:
    raw = ascii_stdout(monkeypatch)
    code = main(["assemble", "cat?", "--session", "s1", "--path", store])
    sys.stdout.flush()
    assert code == 0
    text = raw.getvalue().decode("ascii")
    assert "turn 0 \\u65e5\\u672c\\u8a9e \\U0001f431" in text
