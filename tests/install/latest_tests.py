"""Print the test paths `make test-latest` runs: what the newest releases could change.

`make test-latest` runs the adapter and memory tests again on the newest releases that install
(``.venv-latest``), after `make test` ran everything on the pinned set (``.venv``). A test that
imports no framework, run on the very versions it already passed on, proves nothing new: so
when every distribution the two environments share differs only in the frameworks (LangChain,
LangGraph, LlamaIndex and theirs), the memory tests that never reach a framework are left out
(listed on stderr). When anything else differs (numpy, chromadb, onnxruntime...), or the pinned
environment cannot be read, every memory test runs. Not a test module.

Run with the newest environment's Python: ``.venv-latest/bin/python tests/install/latest_tests.py``.
"""

from __future__ import annotations

import importlib.metadata as metadata
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ALWAYS = [
    "tests/langchain",
    "tests/llamaindex",
    "tests/telemetry",
    "tests/install/test_version_ranges.py",
]
#: Distributions whose newer releases only the framework-facing tests can see.
FRAMEWORK = re.compile(r"^(langchain|langgraph|langsmith|llama-index|langmem|trustcall)")
#: A test module (or a local module it imports) that reaches a framework.
REACHES = re.compile(r"\b(langchain|langgraph|llama_index|langmem)")
LOCAL = re.compile(r"^\s*(?:from|import)\s+(?:tests\.(?:memory\.)?)?(\w+)", re.MULTILINE)
_READ = (
    "import importlib.metadata as m, json;"
    "print(json.dumps({d.metadata['Name']: d.version for d in m.distributions()}))"
)


def _versions(python: str) -> dict[str, str] | None:
    """Every installed distribution of the environment of ``python``: name -> version."""
    try:
        out = subprocess.run(
            [python, "-c", _READ], capture_output=True, text=True, check=True, timeout=120
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return {_name(k): v for k, v in json.loads(out).items()}


def _name(distribution: str) -> str:
    return re.sub(r"[-_.]+", "-", distribution).lower()


def differing() -> list[str] | None:
    """The distributions both environments hold at different versions (None: unknown)."""
    pinned = _versions(str(ROOT / ".venv" / "bin" / "python"))
    if pinned is None:
        return None
    latest = {_name(d.metadata["Name"]): d.version for d in metadata.distributions()}
    return sorted(n for n in latest.keys() & pinned.keys() if latest[n] != pinned[n])


def reaches_framework(path: Path, seen: set[Path] | None = None) -> bool:
    """Whether a test module, or a local module it imports, names a framework."""
    seen = set() if seen is None else seen
    seen.add(path)
    text = path.read_text("utf-8")
    if REACHES.search(text):
        return True
    for name in LOCAL.findall(text):
        for local in (path.parent / f"{name}.py", ROOT / "tests" / f"{name}.py"):
            if local.is_file() and local not in seen and reaches_framework(local, seen):
                return True
    return False


def main() -> None:
    changed = differing()
    memory = sorted((ROOT / "tests" / "memory").glob("test_*.py"))
    if changed is None or any(not FRAMEWORK.match(n) for n in changed):
        why = "the pinned environment cannot be read" if changed is None else "beyond frameworks"
        print(f"latest: every memory test ({why}: {changed})", file=sys.stderr)
        print(" ".join([*ALWAYS, "tests/memory"]))
        return
    kept = [p for p in memory if reaches_framework(p)]
    left = [p.name for p in memory if p not in kept]
    print(
        f"latest: only frameworks differ ({', '.join(changed) or 'nothing'}): the {len(kept)} "
        f"memory test modules that reach one run; {len(left)} left out, run on these very "
        f"versions by make test: {', '.join(left)}",
        file=sys.stderr,
    )
    print(" ".join([*ALWAYS, *(str(p.relative_to(ROOT)) for p in kept)]))


if __name__ == "__main__":
    main()
