"""``ctxbudget stats --contexts``: budget analytics of the assemblies ContextMemory logged."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from ctxbudget.cli.main import main

CHAT = [
    {"session": "s1", "id": f"m{i}", "role": "user" if i % 2 == 0 else "assistant", "text": text}
    for i, text in enumerate(
        [
            "My cat is named Miso.",
            "Miso is a lovely name.",
            "I play the cello on Sundays.",
            "The cello suits a quiet Sunday.",
            "My sister Ana lives in Porto.",
            "Porto is lovely in spring.",
        ]
    )
]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """A store with session s1 (user u1), assembled twice by the command line."""
    path = str(tmp_path / "store")
    chat = tmp_path / "chat.jsonl"
    chat.write_text("".join(json.dumps(m) + "\n" for m in CHAT), encoding="utf-8")
    assert run(capsys, "--path", path, "ingest", str(chat), "--user", "u1")[0] == 0
    for budget in ("60", "400"):
        code, _, _ = run(
            capsys, "--path", path, "explain", "What is my cat called?", "--session", "s1",
            "--budget", budget, "--log",
        )  # fmt: skip
        assert code == 0
    return path


def document(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    code, out, _ = run(capsys, *argv, "--json")
    assert code == 0
    result: dict[str, Any] = json.loads(out)
    return result


def test_stats_contexts_json_sums_up_the_logged_assemblies(
    capsys: pytest.CaptureFixture[str], store: str
) -> None:
    doc = document(capsys, "--path", store, "stats", "--contexts", "--session", "s1")
    assert (doc["namespace"], doc["session"], doc["user"], doc["plot"]) == (
        "default",
        "s1",
        None,
        None,
    )
    assert doc["assemblies"] == 2 and doc["errors"] == 0
    assert {"QUERY", "RECENT"} <= set(doc["tiers"])
    for tier in doc["tiers"].values():
        assert tier["tokens"]["p50"] <= tier["tokens"]["p90"] <= tier["tokens"]["max"]
        assert tier["kept"] + tier["pruned"] == tier["offered"]
    assert doc["tokens_used"]["max"] <= 400
    assert sum(doc["pruned_by_reason"].values()) >= 1  # a 60-token budget cuts something
    assert all(p["count"] <= 2 for p in doc["most_pruned"])
    # The same figures for the user, and for the whole namespace.
    assert document(capsys, "--path", store, "stats", "--user", "u1")["assemblies"] == 2
    assert document(capsys, "--path", store, "stats", "--contexts")["assemblies"] == 2
    assert document(capsys, "--path", store, "stats", "--user", "u2")["assemblies"] == 0


def test_stats_contexts_text_and_plot(
    capsys: pytest.CaptureFixture[str], store: str, tmp_path: Path
) -> None:
    pytest.importorskip("matplotlib")
    png = tmp_path / "budget.png"
    code, out, err = run(
        capsys, "--path", store, "stats", "--session", "s1", "--top", "3", "--plot", str(png)
    )
    assert code == 0, err
    assert "namespace 'default', session 's1': 2 logged assemblies, 0 over-budget errors" in out
    assert "most pruned (top 3):" in out
    assert f"wrote {png}" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_session_without_a_log_warns(capsys: pytest.CaptureFixture[str], store: str) -> None:
    code, out, err = run(capsys, "--path", store, "stats", "--session", "nope")
    assert code == 0
    assert "0 logged assemblies" in out
    assert "ctxbudget: warning: no logged assemblies" in err


def test_stats_without_contexts_is_unchanged(
    capsys: pytest.CaptureFixture[str], store: str
) -> None:
    doc = document(capsys, "--path", store, "stats")
    assert set(doc) == {"records", "by_kind", "sessions", "namespaces", "embedder", "location"}
    assert doc["records"] == len(CHAT)  # logged assemblies are not records


def test_mistakes_are_one_error_line(
    capsys: pytest.CaptureFixture[str],
    store: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    code, out, err = run(capsys, "--path", store, "stats", "--top", "-1")
    assert (code, out) == (2, "") and "ctxbudget: error: --top must be 0 or more" in err
    missing = tmp_path / "no" / "such" / "x.png"
    code, out, err = run(capsys, "--path", store, "stats", "--plot", str(missing))
    assert (code, out) == (2, "") and "does not exist" in err
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "matplotlib" else find_spec(name, *a),
    )
    code, out, err = run(capsys, "--path", store, "stats", "--plot", str(tmp_path / "x.png"))
    assert (code, out) == (2, "")
    assert "pip install 'ctxbudget[eval]'" in err and "Traceback" not in err
