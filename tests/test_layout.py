"""The layout keeps its promises: small modules, no borrowed private names, one error tree, layers.

Read from the source (ast), so a violation is reported with its file and line.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = [
    ROOT / "packages" / "ctxbudget" / "src" / "ctxbudget",
    ROOT / "packages" / "langchain-ctxbudget" / "src" / "langchain_ctxbudget",
    ROOT / "packages" / "llamaindex-ctxbudget" / "src" / "llama_index" / "ctxbudget",
]
OURS = ("ctxbudget", "langchain_ctxbudget", "llama_index.ctxbudget")
MAX_LINES = 420  # "under about 400"
BUILTIN_ERRORS = {"ValueError", "TypeError", "RuntimeError", "KeyError", "Exception"}


def modules() -> Iterator[Path]:
    for source in SOURCES:
        yield from sorted(source.rglob("*.py"))


def where(path: Path, node: ast.AST | None = None) -> str:
    line = f":{getattr(node, 'lineno', 0)}" if node is not None else ""
    return f"{path.relative_to(ROOT)}{line}"


def test_modules_are_small() -> None:
    sizes = {where(path): len(path.read_text("utf-8").splitlines()) for path in modules()}
    long = {path: n for path, n in sizes.items() if n > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines: cut them by concept: {long}"


def test_no_module_imports_another_modules_private_names() -> None:
    found = []
    for path in modules():
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(OURS):
                found += [
                    f"{where(path, node)} {node.module}.{alias.name}"
                    for alias in node.names
                    if alias.name.startswith("_") and not alias.name.startswith("__")
                ]
    assert not found, "private names imported across modules:\n" + "\n".join(found)


def test_every_error_raised_is_from_the_error_tree() -> None:
    found = []
    for path in modules():
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.Raise) and node.exc is not None:
                exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
                if isinstance(exc, ast.Name) and exc.id in BUILTIN_ERRORS:
                    found.append(f"{where(path, node)} raise {exc.id}")
    assert not found, "bare builtin errors (use ctxbudget.errors):\n" + "\n".join(found)


def test_every_module_declares_its_public_names() -> None:
    missing = [
        where(path)
        for path in modules()
        if path.name not in ("__main__.py",)
        and "__all__" not in path.read_text("utf-8")
        and path.stat().st_size > 0
    ]
    assert not missing, f"modules without __all__: {missing}"


@pytest.mark.parametrize(
    ("modules_imported", "forbidden"),
    [
        (
            ["ctxbudget", "ctxbudget.core", "ctxbudget.tokens", "ctxbudget.errors"],
            [
                "chromadb",
                "onnxruntime",
                "torch",
                "sentence_transformers",
                "langchain_core",
                "opentelemetry",  # imported on the first traced call (ctxbudget.telemetry)
            ],
        ),
    ],
)
def test_the_core_imports_nothing_heavy(modules_imported: list[str], forbidden: list[str]) -> None:
    code = (
        "import sys\n"
        + "".join(f"import {m}\n" for m in modules_imported)
        + f"print(sorted(m for m in {forbidden!r} if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    ).stdout.strip()
    assert out == "[]", f"importing the core loaded {out}"


# -- memory/: sub-packages that follow the data path ----------------------------------------------
MEMORY = SOURCES[0] / "memory"
MEMORY_MAX_LINES = 400
#: Each sub-package and the memory sub-packages it must never import (policy is data and
#: formulas; reading never reaches into writing, the log or upkeep; the log only reads).
NEVER_IMPORTS = {
    "policy": {"reading", "writing", "log", "upkeep"},
    "reading": {"writing", "log", "upkeep"},
    "writing": {"log", "upkeep"},
    "log": {"writing", "upkeep"},
    "entities": {"writing", "log", "upkeep"},
}
SUBPACKAGES = {"policy", "reading", "writing", "log", "upkeep", "entities"}


def memory_imports(path: Path) -> Iterator[tuple[ast.AST, str]]:
    """(node, memory sub-package) of every import of ``ctxbudget.memory.<sub>`` in ``path``."""
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for name in names:
            parts = name.split(".")
            if parts[:2] == ["ctxbudget", "memory"] and len(parts) > 2:
                yield node, parts[2]
                break


def test_memory_is_cut_along_the_data_path() -> None:
    top = sorted(p.name for p in MEMORY.iterdir() if p.suffix == ".py" or p.name in SUBPACKAGES)
    # ordering.py: the call order the doors keep (MCP, LangGraph store) before a memory call.
    joins = ["__init__.py", "awaitable.py", "closing.py", "context.py", "inputs.py", "ordering.py"]
    assert top == sorted([*joins, *SUBPACKAGES])
    for sub in SUBPACKAGES:
        assert (MEMORY / sub / "__init__.py").is_file(), sub


@pytest.mark.parametrize("sub", sorted(NEVER_IMPORTS))
def test_memory_sub_packages_import_in_one_direction(sub: str) -> None:
    found = [
        f"{where(path, node)} imports ctxbudget.memory.{other}"
        for path in sorted((MEMORY / sub).rglob("*.py"))
        for node, other in memory_imports(path)
        if other in NEVER_IMPORTS[sub]
    ]
    assert not found, f"memory/{sub} must not import {sorted(NEVER_IMPORTS[sub])}:\n" + "\n".join(
        found
    )


def test_memory_modules_are_under_400_lines() -> None:
    sizes = {where(p): len(p.read_text("utf-8").splitlines()) for p in MEMORY.rglob("*.py")}
    long = {path: n for path, n in sizes.items() if n > MEMORY_MAX_LINES}
    assert not long, f"memory modules over {MEMORY_MAX_LINES} lines: {long}"


def test_no_two_memory_modules_differ_only_by_a_suffix_or_a_plural() -> None:
    stems = sorted({p.stem for p in MEMORY.rglob("*.py") if p.stem not in ("__init__", "api")})
    clashes = [
        (a, b)
        for a in stems
        for b in stems
        if a < b and (b.startswith(a) or a.rstrip("s") == b.rstrip("s"))
    ]
    assert not clashes, f"module names that differ by a suffix: {clashes}"
