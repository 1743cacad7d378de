"""The command line's values pass the same boundaries, and its errors speak in flags.

``--window``; an unknown ``--model`` with a window counts approximately (labelled) as
``Budget.for_model(name, window=...)`` does; read-only commands refuse a ``--path`` with no
store instead of creating one. Run in-process on a real store in tmp_path.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxbudget import UnknownModelError, lookup_model
from ctxbudget.cli.main import main

CHAT = [
    {"session": "s1", "role": "user", "text": "I moved to Lisbon last spring."},
    {"session": "s1", "role": "assistant", "text": "Lisbon is lovely in spring."},
]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith("ctxbudget: error: ")]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


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
