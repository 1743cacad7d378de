"""The ``ctxbudget`` command, run in-process on a store in tmp_path (and the demo in a subprocess).

User mistakes end with exit status 2 and a ``ctxbudget: error: ...`` line on stderr, never a
traceback.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ctxbudget.cli.main import main
from ctxbudget.tokens.counter import TokenCounter

QUERY = "What is my cat called?"
CHAT = [
    {"session": "s1", "id": "m1", "role": "user", "text": "My cat is named Miso."},
    {"session": "s1", "id": "m2", "role": "assistant", "text": "Miso is a lovely name."},
    {"session": "s2", "id": "m3", "role": "user", "text": "I play the cello on Sundays."},
    {
        "session": "s2",
        "id": "m4",
        "role": "assistant",
        "content": "The cello suits a quiet Sunday.",
        "timestamp": "2026-03-02T09:14:00Z",
    },
]
SESSIONS = {
    "sessions": {
        "s3": [
            {"id": "m5", "role": "user", "content": "I am learning Portuguese."},
            {"id": "m6", "role": "assistant", "content": "Boa sorte!"},
        ]
    }
}
NOTES = "# Notes\n\nThe spare key is with the neighbour at number 12.\n\nBins go out on Tuesday.\n"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def jsonl(records: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


def assert_usage_error(code: int, out: str, err: str, *needles: str) -> str:
    """Exit 2, nothing on stdout, one error line on stderr and no traceback; returns the line."""
    assert code == 2
    assert out == ""
    assert "Traceback" not in err
    # Only the error line is ours; when the command loaded the embedding model, transformers'
    # "Loading weights" progress bar precedes it on stderr.
    errors = [line for line in err.splitlines() if line.startswith("ctxbudget: ")]
    assert len(errors) == 1, err
    assert errors[0].startswith("ctxbudget: error: ")
    assert err.rstrip("\n").endswith(errors[0])  # the last thing printed
    for needle in needles:
        assert needle in errors[0]
    return errors[0]


@pytest.fixture
def store(tmp_path: Path) -> str:
    return str(tmp_path / "store")


@pytest.fixture
def ingested(tmp_path: Path, store: str, capsys: pytest.CaptureFixture[str]) -> str:
    """A store holding CHAT (sessions s1, s2; user u1), SESSIONS (s3) and NOTES (kb)."""
    files = {"chat.jsonl": jsonl(CHAT), "chat.json": json.dumps(SESSIONS), "notes.md": NOTES}
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
        extra = ["--user", "u1"] if name == "chat.jsonl" else []
        code, _, _ = run(capsys, "--path", store, "ingest", str(tmp_path / name), *extra)
        assert code == 0
    return store


def stats(capsys: pytest.CaptureFixture[str], store: str) -> dict[str, Any]:
    code, out, _ = run(capsys, "--path", store, "stats", "--json")
    assert code == 0
    result: dict[str, Any] = json.loads(out)
    return result


# -- help ------------------------------------------------------------------------------------


def test_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: ctxbudget")
    for command in ("demo", "ingest", "assemble", "explain", "stats"):
        assert command in out


@pytest.mark.parametrize("command", ["demo", "ingest", "assemble", "explain", "stats"])
def test_subcommand_help(capsys: pytest.CaptureFixture[str], command: str) -> None:
    with pytest.raises(SystemExit) as exited:
        main([command, "--help"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: ctxbudget {command}")


def test_no_command_prints_help_and_fails(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys)
    assert code == 2
    assert out.startswith("usage: ctxbudget")


def test_a_missing_required_option_is_an_argparse_error(
    capsys: pytest.CaptureFixture[str], store: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--path", store, "assemble", QUERY])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "the following arguments are required: --session" in err
    assert "Traceback" not in err


# -- ingest and stats ------------------------------------------------------------------------


def test_ingest_every_file_kind_and_stats_counts_them(
    tmp_path: Path, store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "chat.jsonl").write_text(jsonl(CHAT), encoding="utf-8")
    (tmp_path / "chat.json").write_text(json.dumps(SESSIONS), encoding="utf-8")
    (tmp_path / "notes.md").write_text(NOTES, encoding="utf-8")
    listed = [{"role": "user", "text": "A plain list."}, {"role": "assistant", "text": "Yes."}]
    (tmp_path / "list.json").write_text(json.dumps(listed), encoding="utf-8")
    Path(store).mkdir()  # an empty folder: an empty store (a missing one is refused)
    assert stats(capsys, store)["records"] == 0

    code, out, _ = run(capsys, "--path", store, "ingest", str(tmp_path / "chat.jsonl"))
    assert code == 0
    assert out == "stored 4 messages in 2 sessions from chat.jsonl\n"
    code, out, _ = run(capsys, "--path", store, "ingest", str(tmp_path / "chat.json"))
    assert code == 0
    assert out == "stored 2 messages in 1 session from chat.json\n"
    code, out, _ = run(
        capsys, "--path", store, "ingest", str(tmp_path / "list.json"), "--session", "s4"
    )
    assert code == 0
    assert out == "stored 2 messages in 1 session from list.json\n"
    code, out, _ = run(
        capsys, "--path", store, "ingest", str(tmp_path / "notes.md"), "--collection", "notes"
    )
    assert code == 0
    assert out == "stored notes.md as 1 chunk in collection 'notes'\n"

    counts = stats(capsys, store)
    assert counts["records"] == 9
    assert counts["by_kind"] == {"document": 1, "message": 8}
    assert counts["sessions"] == 4
    assert counts["namespaces"] == 1
    assert str(Path(store).resolve()) in counts["location"]


def test_index_entities_indexes_documents_stored_by_ingest(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    store = str(tmp_path / "store")
    doc = tmp_path / "history.md"
    doc.write_text("Acme Robotics was founded by Priya Raman in Porto.\n", encoding="utf-8")
    assert run(capsys, "--path", store, "ingest", str(doc))[0] == 0
    code, out, _ = run(capsys, "--path", store, "index-entities", "--collection", "kb")
    assert code == 0
    assert re.fullmatch(r"indexed 1 chunk of 'kb': 1 of them name \d+ entities\n", out), out
    code, out, _ = run(capsys, "--path", store, "index-entities", "--json", "--rebuild")
    assert code == 0
    assert json.loads(out)["collections"] == ["kb"] and json.loads(out)["chunks"] == 1
    code, out, _ = run(capsys, "--path", store, "index-entities", "--collection", "wiki")
    assert (code, out) == (0, "no document chunks stored in 'wiki' (namespace 'default')\n")
    assert_usage_error(
        *run(capsys, "--path", store, "index-entities", "--collection", ""), "collection"
    )


# -- assemble and explain --------------------------------------------------------------------


def test_assemble_prints_the_context(capsys: pytest.CaptureFixture[str], ingested: str) -> None:
    code, out, _ = run(
        capsys, "--path", ingested, "assemble", QUERY, "--session", "s1", "--system", "Be brief."
    )
    assert code == 0
    assert out.startswith("[system]\nBe brief.")
    assert "[user]\nMy cat is named Miso." in out
    assert "[assistant]\nMiso is a lovely name." in out
    assert out.rstrip("\n").endswith(f"[user]\n{QUERY}")

    code, out, _ = run(
        capsys, "--path", ingested, "assemble", QUERY, "--session", "s1", "--format", "text"
    )
    assert code == 0
    assert "My cat is named Miso." in out
    assert out.rstrip("\n").endswith(QUERY)


def test_assemble_json_holds_the_messages_within_the_budget(
    capsys: pytest.CaptureFixture[str], ingested: str
) -> None:
    code, out, _ = run(
        capsys,
        "--path",
        ingested,
        "assemble",
        QUERY,
        "--session",
        "s1",
        "--budget",
        "120",
        "--system",
        "Be brief.",
        "--json",
    )
    assert code == 0
    document = json.loads(out)
    messages = document["messages"]
    assert document["text"] is None  # the messages format: the messages are the output
    assert messages[0]["role"] == "system"
    assert messages[0]["content"].startswith("Be brief.")
    assert messages[-1] == {"role": "user", "content": QUERY}
    assert {"role": "user", "content": "My cat is named Miso."} in messages
    assert TokenCounter.for_model("gpt-4o").count_messages(messages) == document["tokens_used"]
    assert document["tokens_used"] <= document["tokens_available"] == 120


def test_explain_shows_the_tiers(capsys: pytest.CaptureFixture[str], ingested: str) -> None:
    code, out, _ = run(
        capsys, "--path", ingested, "explain", QUERY, "--session", "s1", "--budget", "300"
    )
    assert code == 0
    first = out.splitlines()[0]
    used = re.match(r"context: (\d+) of 300 tokens \(budget 300\)", first)
    assert used is not None, first
    assert int(used.group(1)) <= 300
    assert re.search(r"^tier\s+offered\s+kept\s+cut\s+tokens\s+solver$", out, re.M)
    assert re.search(r"^QUERY\s+1\s+1\s+0\s+\d+", out, re.M)
    assert re.search(r"^RECENT\s+2\s+2\s+0\s+\d+", out, re.M)
    assert "assembled in" in out


def test_explain_json_reports_the_budget(capsys: pytest.CaptureFixture[str], ingested: str) -> None:
    code, out, _ = run(
        capsys,
        "--path",
        ingested,
        "explain",
        QUERY,
        "--session",
        "s1",
        "--budget",
        "200",
        "--reserve",
        "50",
        "--format",
        "compact",
        "--json",
    )
    assert code == 0
    report = json.loads(out)
    assert report["format"] == "compact"
    assert (report["window"], report["reserve"], report["tokens_available"]) == (250, 50, 200)
    assert report["tokens_used"] <= 200
    included = {entry["id"]: entry for entry in report["included"]}
    assert {"m1", "m2"} <= set(included)
    assert (included["m1"]["tier"], included["m2"]["tier"]) == ("RECENT", "RECENT")
    assert report["included"][-1]["id"] == "ctxbudget:query"
    assert sum(entry["tokens"] for entry in report["included"]) <= report["tokens_used"]
    assert (report["tiers"]["QUERY"]["offered"], report["tiers"]["QUERY"]["kept"]) == (1, 1)


def test_a_budget_too_small_for_the_system_prompt(
    capsys: pytest.CaptureFixture[str], ingested: str
) -> None:
    system = "You are a careful assistant. " * 20
    for command in ("assemble", "explain"):
        code, out, err = run(
            capsys,
            "--path",
            ingested,
            command,
            QUERY,
            "--session",
            "s1",
            "--budget",
            "5",
            "--system",
            system,
        )
        assert_usage_error(
            code, out, err, "the items that are never pruned need", "only 5 are available"
        )


def test_a_zero_budget_is_a_usage_error(capsys: pytest.CaptureFixture[str], store: str) -> None:
    code, out, err = run(
        capsys, "--path", store, "assemble", QUERY, "--session", "s1", "--budget", "0"
    )
    assert_usage_error(code, out, err, "--budget must be a positive number of tokens, got 0")


def test_an_unknown_model_is_a_usage_error(capsys: pytest.CaptureFixture[str], store: str) -> None:
    Path(store).mkdir()
    code, out, err = run(capsys, "--path", store, "--model", "no-such-model", "stats")
    assert_usage_error(code, out, err, "--model: unknown model 'no-such-model'")
    assert "register_model" not in err and "Budget.for_model" not in err  # flags, not Python


# -- bad input files -------------------------------------------------------------------------


def write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


BROKEN_LINE_3 = jsonl(CHAT[:2]) + '{"session": "s1", "role": "user", "text": \n' + jsonl(CHAT[2:])


@pytest.mark.parametrize(
    ("name", "content", "needles"),
    [
        pytest.param("chat.jsonl", BROKEN_LINE_3, [":3: not valid JSON"], id="broken-line-3"),
        pytest.param(
            "chat.jsonl",
            jsonl([CHAT[0], {"session": "s1", "text": "no role"}]),
            [":2: expected an object with 'role'"],
            id="no-role",
        ),
        pytest.param(
            "chat.jsonl",
            jsonl([CHAT[0], {"role": "user", "text": "no session"}]),
            [":2: the message has no 'session' and no --session was given"],
            id="no-session",
        ),
        pytest.param(
            "chat.jsonl", jsonl(CHAT[:1]) + "[1, 2]\n", [":2: expected a JSON object"], id="array"
        ),
        pytest.param(
            "chat.jsonl",
            jsonl([CHAT[0], {"session": "s1", "role": "robot", "text": "beep"}]),
            ["session 's1'", "message 1: role must be one of", "nothing of this session"],
            id="bad-role",
        ),
        pytest.param("chat.json", '[{"role": "user",\n "text": 1,', ["chat.json:2: "], id="json"),
        pytest.param("chat.json", '"a string"', ["expected a list of messages"], id="not-list"),
        pytest.param("chat.csv", "role,text\nuser,hi\n", ["unknown file type .csv"], id="csv"),
        pytest.param("chat", "{}", ["unknown file type (none)"], id="no-extension"),
        pytest.param(
            "chat.jsonl",
            b'{"session": "s1", "role": "user", "text": "\xff"}\n',
            ["not UTF-8"],
            id="not-utf8-jsonl",
        ),
        pytest.param(
            "notes.md", b"caf\xe9 au lait\n", ["not UTF-8 text (byte 3)"], id="not-utf8-md"
        ),
        pytest.param(
            "chat.json",
            json.dumps({"sessions": {"s1": None}}),
            ["sessions.s1"],
            id="sessions-not-a-list",
        ),
        pytest.param(
            "chat.jsonl",
            jsonl([{"session": "s1", "role": "user", "text": "hi", "metadata": "oops"}]),
            ["metadata"],
            id="metadata-not-an-object",
        ),
    ],
)
def test_a_bad_input_file_is_one_error_line_and_stores_nothing(
    tmp_path: Path,
    store: str,
    capsys: pytest.CaptureFixture[str],
    name: str,
    content: str | bytes,
    needles: list[str],
) -> None:
    path = write(tmp_path, name, content)
    code, out, err = run(capsys, "--path", store, "ingest", str(path))
    line = assert_usage_error(code, out, err, str(path), *needles)
    assert line.startswith(f"ctxbudget: error: {path}")
    # A file refused as it is read opens no store, so leaves none behind.
    assert not Path(store).exists() or stats(capsys, store)["records"] == 0


def test_a_missing_file(tmp_path: Path, store: str, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nowhere.jsonl"
    code, out, err = run(capsys, "--path", store, "ingest", str(missing))
    assert_usage_error(code, out, err, f"{missing}: no such file")
    code, out, err = run(capsys, "--path", store, "ingest", str(tmp_path))  # a folder
    assert_usage_error(code, out, err, f"{tmp_path}: a folder, not a file")


@pytest.mark.parametrize("budgets", ["abc", "400,x", "", "0,400", "-5"])
def test_demo_rejects_bad_budgets_before_doing_anything(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    budgets: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "demo", "--budgets", budgets)
    assert_usage_error(code, out, err, "--budgets")
    assert list(tmp_path.iterdir()) == []


# -- the demo, for real ----------------------------------------------------------------------


@pytest.mark.slow
def test_demo_runs_end_to_end_and_leaves_nothing_behind(tmp_path: Path) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "ANONYMIZED_TELEMETRY": "False"}
    done = subprocess.run(
        [sys.executable, "-m", "ctxbudget.cli.main", "demo"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    out = done.stdout
    headings = re.findall(r"^Budget ([\d,]+) tokens  \|  question: ", out, re.M)
    assert headings == ["400", "1,200", "4,000"]
    assert len(re.findall(r"^tier\s+offered\s+kept\s+cut\s+tokens\s+solver$", out, re.M)) == 3
    figures = re.findall(r"^context: ([\d,]+) of ([\d,]+) tokens", out, re.M)
    assert [available for _, available in figures] == ["400", "1,200", "4,000"]
    for used, available in figures:
        assert int(used.replace(",", "")) <= int(available.replace(",", ""))
    # The default question's evidence (s3-0011) is sent from 1,200 tokens on (issue 27: the
    # demo compared a raw id with a qualified one and said 0 at every budget).
    kept = re.findall(r"^evidence turns kept: (\d+) of (\d+)", out, re.M)
    assert kept == [("0", "1"), ("1", "1"), ("1", "1")]
    # Each budget answers the same turn afresh: no "prefix shared with the previous call".
    assert "prefix shared" not in out
    folder = re.search(r"\(embedded Chroma in (.+?)\)\.", out)
    assert folder is not None
    assert not Path(folder.group(1)).exists()  # the demo's temporary store is removed
    assert not (tmp_path / ".ctxbudget").exists()
    assert list(tmp_path.iterdir()) == []


def test_every_command_closes_its_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # An open embedded store holds its folder for this process; a command must let go of it,
    # also when it fails, or the next process (or a test's own store) is refused.
    from ctxbudget.store import lock as _lock

    folder = tmp_path / "store"
    good = tmp_path / "chat.jsonl"
    good.write_text('{"session": "s1", "role": "user", "text": "I live in Porto."}\n')
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"session": "s1", "role": "nobody", "text": "x"}\n')
    for argv in (
        ["--path", str(folder), "ingest", str(good)],
        ["--path", str(folder), "ingest", str(bad)],
        ["--path", str(folder), "stats"],
        ["--path", str(folder), "assemble", "Where?", "--session", "s1", "--budget", "0"],
        ["--path", str(folder), "explain", "Where?", "--session", "s1", "--budget", "500"],
    ):
        main(argv)
        assert str(folder.resolve()) not in _lock._HELD, argv  # noqa: SLF001
    capsys.readouterr()


@pytest.mark.slow
def test_the_demo_counts_the_evidence_turns_that_are_sent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from importlib import resources

    from ctxbudget.memory.context import ContextMemory

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    data = resources.files("ctxbudget.demo_data")
    questions = json.loads(data.joinpath("questions.json").read_text("utf-8"))
    lines = data.joinpath("conversation.jsonl").read_text("utf-8").splitlines()
    texts = {m["id"]: m["text"] for m in map(json.loads, filter(str.strip, lines))}
    made: list[Any] = []
    original = ContextMemory.assemble

    def spy(self: ContextMemory, *args: Any, **kwargs: Any) -> Any:
        made.append(original(self, *args, **kwargs))
        return made[-1]

    monkeypatch.setattr(ContextMemory, "assemble", spy)
    for question in (5,):  # three evidence turns
        made.clear()
        code, out, err = run(capsys, "demo", "--question", str(question), "--budgets", "300,4000")
        assert code == 0, err
        printed = [int(n) for n in re.findall(r"^evidence turns kept: (\d+) of", out, re.M)]
        expect = questions[question]["expect"]
        sent = [
            sum(
                any(texts[i] in str(m.get("content") or "") for m in ctx.to_messages())
                for i in expect
            )
            for ctx in made
        ]
        assert printed == sent  # what the demo says is what the model is sent
        assert sent[0] < sent[-1]  # and more is sent with more room
