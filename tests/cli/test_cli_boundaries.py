"""The command line's values pass the same boundaries, and its errors speak in flags.

``--window``; an unknown ``--model`` with a window counts approximately (labelled) as
``Budget.for_model(name, window=...)`` does; read-only commands refuse a ``--path`` with no
store instead of creating one. Run in-process on a real store in tmp_path.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import error_line, run

from ctxbudget import UnknownModelError, lookup_model
from ctxbudget.cli.main import main

CHAT = [
    {"session": "s1", "role": "user", "text": "I moved to Lisbon last spring."},
    {"session": "s1", "role": "assistant", "text": "Lisbon is lovely in spring."},
]


@pytest.fixture
def store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    folder = str(tmp_path / "store")
    chat = tmp_path / "chat.jsonl"
    chat.write_text("".join(json.dumps(m) + "\n" for m in CHAT), encoding="utf-8")
    assert run(capsys, "--path", folder, "ingest", str(chat))[0] == 0
    return folder


ASK = ["assemble", "Where do I live?", "--session", "s1", "--json"]


def test_an_unknown_model_with_a_budget_counts_approximately_and_says_so(
    capsys: pytest.CaptureFixture[str], store: str
) -> None:
    # Before: `ctxbudget assemble --model my-local-llama --budget 2000` failed.
    code, out, err = run(
        capsys, "--path", store, "--model", "my-local-llama", *ASK, "--budget", "2000"
    )
    assert code == 0, err
    document = json.loads(out)
    assert document["approximate"] is True and document["tokens_available"] == 2000
    assert "--model 'my-local-llama' is not in ctxbudget's registry" in err
    assert "counting approximately" in err
    with pytest.raises(UnknownModelError):  # known for that command only
        lookup_model("my-local-llama")


def test_window_is_the_models_window_less_the_reserve(
    capsys: pytest.CaptureFixture[str], store: str
) -> None:
    code, out, _ = run(capsys, "--path", store, *ASK, "--window", "8192", "--reserve", "1024")
    assert code == 0
    document = json.loads(out)
    assert (document["window"], document["reserve"], document["tokens_available"]) == (
        8192,
        1024,
        7168,
    )
    code, out, err = run(capsys, "--path", store, "--model", "acme-7b", *ASK, "--window", "4096")
    assert code == 0 and json.loads(out)["approximate"] is True


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (
            ["--budget", "100", "--window", "200"],
            "pass --budget (what the context may use) or --window",
        ),
        (["--window", "0"], "--window must be a positive number of tokens, got 0"),
        (["--window", "100", "--reserve", "100"], "--window 100 --reserve 100 leaves 0 tokens"),
        (["--budget", "-5"], "--budget must be a positive number of tokens, got -5"),
    ],
)
def test_budget_mistakes_are_said_in_flags(
    capsys: pytest.CaptureFixture[str], store: str, argv: list[str], needle: str
) -> None:
    code, out, err = run(capsys, "--path", store, *ASK, *argv)
    line = error_line(err)
    assert code == 2 and out == "" and needle in line
    assert "Budget(" not in line and "Budget.window" not in line


def test_an_unknown_model_without_a_window_is_an_error_in_flags(
    capsys: pytest.CaptureFixture[str], store: str
) -> None:
    # Before: the error suggested Budget.for_model(...) and register_model(...) to a shell user.
    code, _, err = run(capsys, "--path", store, "--model", "gpt4o", *ASK)
    line = error_line(err)
    assert code == 2
    assert "--model: unknown model 'gpt4o'" in line and "close matches: 'gpt-4o'" in line
    assert "--budget or --window" in line
    assert "register_model" not in line and "Budget.for_model" not in line


@pytest.mark.parametrize(
    "argv",
    [
        ["stats"],
        ["stats", "--contexts"],
        ["assemble", "hi", "--session", "s1"],
        ["explain", "hi", "--session", "s1"],
        ["index-entities"],
    ],
)
def test_read_only_commands_refuse_a_path_with_no_store(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: list[str]
) -> None:
    # Before: `ctxbudget stats --path <typo>` created an empty store and exited 0.
    typo = tmp_path / "stroe"
    code, out, err = run(capsys, *argv, "--path", str(typo))
    line = error_line(err)
    assert code == 2 and out == ""
    assert f"--path {typo}: no store there" in line
    assert not typo.exists()


def parse_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """The one error line of a command line argparse refuses (exit status 2)."""
    with pytest.raises(SystemExit) as exited:
        main(list(argv))
    out, err = capsys.readouterr()
    assert exited.value.code == 2 and out == ""
    return error_line(err)


# Every numeric flag of every command, with an example of the command around it.
NUMERIC_FLAGS = [
    (["demo"], "--question"),
    (["assemble", "hi", "--session", "s1"], "--budget"),
    (["assemble", "hi", "--session", "s1"], "--window"),
    (["assemble", "hi", "--session", "s1"], "--reserve"),
    (["explain", "hi", "--session", "s1"], "--budget"),
    (["explain", "hi", "--session", "s1"], "--window"),
    (["explain", "hi", "--session", "s1"], "--reserve"),
    (["stats"], "--top"),
    (["inspect"], "--port"),
    (["mcp"], "--port"),
    (["eval", "locomo", "data.json"], "--conversations"),
    (["eval", "locomo", "data.json"], "--questions"),
]
NOT_WHOLE = {
    "nan": "must be an int (any integral type, numpy's too), got nan (float)",
    "inf": "must be an int (any integral type, numpy's too), got inf (float)",
    "-inf": "must be an int (any integral type, numpy's too), got -inf (float)",
    "2.5": "must be an int (any integral type, numpy's too), got 2.5 (float)",
    "9" * 5000: "must be at most 10**100, got a huge int",
    "-" + "9" * 5000: "must be at most 10**100, got a huge int",
}


@pytest.mark.parametrize(("command", "flag"), NUMERIC_FLAGS)
@pytest.mark.parametrize(
    "text", list(NOT_WHOLE), ids=["nan", "inf", "-inf", "2.5", "huge", "-huge"]
)
def test_every_numeric_flag_is_checked_by_the_core(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, command: list[str], flag: str, text: str
) -> None:
    # Before: argparse's own type=int said "invalid int value: 'nan'" (and for 5,000 digits
    # printed them all back); now the core's count check, in argparse's one line.
    if text.startswith("-" + "9"):
        pytest.skip("the core has no lower bound for these counts: the command's own check")
    line = parse_error(capsys, "--path", str(tmp_path), *command, f"{flag}={text}")
    name = flag.removeprefix("--")
    assert f"argument {flag}: {name} {NOT_WHOLE[text]}" in line, line
    assert len(line) < 400  # the value is never printed back whole


def test_a_huge_negative_flag_is_the_commands_own_refusal(
    capsys: pytest.CaptureFixture[str], store: str
) -> None:
    code, out, err = run(capsys, "--path", store, *ASK, f"--budget=-{'9' * 5000}")
    line = error_line(err)
    assert code == 2 and out == "" and "--budget must be a positive number of tokens" in line
    assert len(line) < 400


def test_whole_numbers_are_still_read_as_int_reads_them(
    capsys: pytest.CaptureFixture[str], store: str
) -> None:
    for budget in ("2_000", "+2000", " 2000", "02000"):
        code, out, _ = run(capsys, "--path", store, *ASK, f"--budget={budget}")
        assert code == 0 and json.loads(out)["tokens_available"] == 2000, budget


@pytest.mark.parametrize("suffix", [".jsonl", ".json"])
def test_an_ingested_5000_digit_timestamp_is_refused_as_the_core_refuses_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, suffix: str
) -> None:
    # Before: Python's json refused the 5,000-digit int (its int() digit limit) with a
    # ValueError that escaped main() as a traceback.
    huge = "1" * 5000
    entry = '{"session": "s1", "role": "user", "text": "hi", "timestamp": ' + huge + "}"
    chat = tmp_path / f"chat{suffix}"
    chat.write_text(entry + "\n" if suffix == ".jsonl" else f"[{entry}]", encoding="utf-8")
    folder = tmp_path / "store"
    code, out, err = run(capsys, "--path", str(folder), "ingest", str(chat))
    line = error_line(err)
    assert code == 2 and out == ""
    assert line.startswith(f"ctxbudget: error: {chat}")  # the file, and where in it
    assert "timestamp a huge int is not a date" in line and "was stored" in line
    assert len(line) < 400
    assert not folder.exists()  # nothing stored: checked before a store is opened


@pytest.mark.parametrize("port", ["-1", "65536", "-" + "9" * 5000])
def test_mcp_refuses_a_port_no_socket_has(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, port: str
) -> None:
    # Before: a port out of range reached the HTTP server (a 5,000-digit one: a traceback).
    argv = ["--path", str(tmp_path / "store"), "mcp", "--transport", "http", f"--port={port}"]
    code, out, err = run(capsys, *argv)
    line = error_line(err)
    assert code == 2 and out == "" and "--port must be between 0 and 65535, got " in line
