"""Print the versions a test run uses: the frameworks, with the ranges the packages declare.

Run by `make test` (the pinned set, constraints.txt) and `make test-latest` (the newest releases
that install) before their tests, so a run's log says what it tested. Not a test module.
"""

from __future__ import annotations

import importlib.metadata as metadata
import platform
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FRAMEWORKS = ["langchain-core", "langchain", "langgraph", "llama-index-core", "chromadb"]
OTHERS = [
    "langchain-tests",
    "pydantic",
    "numpy",
    "onnxruntime",
    "tokenizers",
    "tiktoken",
    "sentence-transformers",
    "transformers",
    "torch",
    "pytest",
    "hypothesis",
]


def declared() -> dict[str, str]:
    """Each framework's range as the packages declare it (name -> specifier)."""
    ranges: dict[str, str] = {}
    for pyproject in sorted((ROOT / "packages").glob("*/pyproject.toml")):
        project = tomllib.loads(pyproject.read_text())["project"]
        requirements = list(project.get("dependencies", []))
        for extra in project.get("optional-dependencies", {}).values():
            requirements += extra
        for requirement in requirements:
            match = re.fullmatch(r"([A-Za-z0-9_.-]+)\s*([^;\[]*)", requirement.strip())
            if match and match[1].lower() in FRAMEWORKS and match[2]:
                ranges[match[1].lower()] = match[2].strip()
    return ranges


def version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def main() -> None:
    ranges = declared()
    print(f"python {platform.python_version()}")
    for name in FRAMEWORKS:
        print(f"  {name:<22} {version(name):<16} declared {ranges.get(name, '(none)')}")
    print("  " + ", ".join(f"{name} {version(name)}" for name in OTHERS))


if __name__ == "__main__":
    main()
