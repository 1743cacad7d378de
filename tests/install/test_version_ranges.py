"""The framework ranges the packages declare, the pinned set and the README agree.

Every framework (langchain-core, langchain, langgraph, llama-index-core, chromadb) has a
declared range with a lower and an upper bound; constraints.txt pins each to its lower bound
(so `make test` tests the bottom of the range, `make test-latest` the newest releases); the
README's "Tested versions" table states both; and the versions installed in the environment
running the tests (either one) lie in the declared ranges.
"""

from __future__ import annotations

import importlib.metadata as metadata
import re

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from tests.install.versions import FRAMEWORKS, ROOT, declared


def pins() -> dict[str, str]:
    found: dict[str, str] = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        match = re.fullmatch(r"([A-Za-z0-9_.-]+)==(\S+)", line.split("#")[0].strip())
        if match:
            found[match[1].lower()] = match[2]
    return found


def bounds(spec: str) -> tuple[str | None, str | None]:
    specifiers = SpecifierSet(spec)
    lower = [s.version for s in specifiers if s.operator == ">="]
    upper = [s.version for s in specifiers if s.operator == "<"]
    return (lower[0] if lower else None, upper[0] if upper else None)


def readme_rows() -> dict[str, list[str]]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Tested versions", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, list[str]] = {}
    for line in section.splitlines():
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if len(cells) >= 4 and cells[0].split("`")[0].strip() in FRAMEWORKS:
            rows[cells[0].split("`")[0].strip()] = cells[1:]
    return rows


@pytest.mark.parametrize("name", FRAMEWORKS)
def test_each_framework_has_a_bounded_range_pinned_at_its_floor(name: str) -> None:
    spec = declared().get(name)
    assert spec, f"no package declares a range for {name}"
    lower, upper = bounds(spec)
    assert lower and upper, f"{name}{spec}: both a lower (>=) and an upper (<) bound"
    assert pins().get(name) == lower, f"constraints.txt must pin {name}=={lower} (its floor)"


@pytest.mark.parametrize("name", FRAMEWORKS)
def test_the_readme_states_the_range_and_the_pinned_version(name: str) -> None:
    row = readme_rows().get(name)
    assert row, f"README 'Tested versions' has no row for {name}"
    spec = declared()[name]
    assert SpecifierSet(row[0]) == SpecifierSet(spec), (row[0], spec)
    assert row[1] == pins()[name]


@pytest.mark.parametrize("name", FRAMEWORKS)
def test_the_installed_version_is_in_the_declared_range(name: str) -> None:
    try:
        installed = metadata.version(name)
    except metadata.PackageNotFoundError:
        pytest.skip(f"{name} is not installed here")
    assert Version(installed) in SpecifierSet(declared()[name]), installed
