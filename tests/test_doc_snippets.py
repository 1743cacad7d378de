"""Every code block of README.md and docs/ runs as written (Python, and shell with ``bash``).

The blocks of one page run in order in one namespace (a page builds on its earlier blocks), in
a fresh working folder, offline. Where a block would call a language model, the page's text
names it ``llm`` (LangChain) or sets ``Settings.llm`` (LlamaIndex); the test provides the
frameworks' own fakes under those names and nothing else. A block preceded by an HTML comment
``<!-- not run: <why> -->`` is skipped (it needs a provider package or a network service);
the reason is printed in the test id, so each skip stays visible.

What a page shows a block printing is compared with what the block prints: a fenced block with
no language (or ``text``) right after a Python block, or after it with one line of prose between
that starts with "prints", is its expected output. A line ``...`` in it stands for any lines.
Where the output depends on the run, an HTML comment right before the output block names what
varies, and only that is normalised: ``<!-- output varies: ids, timing -->`` (``ids``: LangChain
and LangGraph message ids, UUIDs; ``timing``: ``0.45 ms``).
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import sys
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_BLOCK = re.compile(
    r"(<!-- not run: (?P<why>[^>]*) -->\s*)?```(?P<lang>python|bash)\n(?P<code>.*?)```", re.S
)
# What a Python block prints: the fence right after it, or after one "prints ..." paragraph.
_OUTPUT = re.compile(
    r"\s*(?:prints[^\n]*\n\s*)?(?:<!-- output varies: (?P<varies>[^>]*) -->\s*)?"
    r"```(?:text)?\n(?P<out>.*?)```",
    re.S,
)
_VARYING = {
    "ids": (
        re.compile(
            r"lc_run--[0-9a-f-]+|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
            r"(?:-\d+)?"
        ),
        "<id>",
    ),
    "timing": (re.compile(r"\d[\d,]*(?:\.\d+)? ms\b"), "<ms>"),
}
BIN = Path(sys.executable).parent  # the ctxbudget command of the environment under test


@dataclass(frozen=True)
class Block:
    line: int
    code: str
    skip: str | None
    shell: bool = False
    output: str | None = None  # what the page shows it printing
    varies: frozenset[str] = frozenset()


def blocks(page: Path) -> list[Block]:
    text = page.read_text("utf-8")
    found: list[Block] = []
    for m in _BLOCK.finditer(text):
        shown = _OUTPUT.match(text, m.end()) if m.group("lang") == "python" else None
        varies = shown.group("varies") if shown else None
        found.append(
            Block(
                text.count("\n", 0, m.start("code")) + 1,
                m.group("code"),
                m.group("why"),
                m.group("lang") == "bash",
                shown.group("out") if shown else None,
                frozenset(v.strip() for v in (varies or "").split(",") if v.strip()),
            )
        )
    return found


def normalised(text: str, varies: frozenset[str]) -> str:
    """``text`` with what varies from run to run replaced, line ends stripped."""
    unknown = varies - set(_VARYING)
    assert not unknown, (
        f"unknown 'output varies' kinds {sorted(unknown)}; known: {sorted(_VARYING)}"
    )
    for kind in sorted(varies):
        pattern, mark = _VARYING[kind]
        text = pattern.sub(mark, text)
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())


def output_matches(shown: str, printed: str) -> bool:
    """Whether ``printed`` is ``shown``, a ``...`` line of ``shown`` standing for any lines."""
    pattern = "".join(
        r"(?:[^\n]*\n)*?" if line.strip() == "..." else re.escape(line) + r"\n"
        for line in shown.splitlines()
    )
    return re.fullmatch(pattern, printed + "\n") is not None


def run_shell(block: Block, where: str) -> None:
    """A shell block, with ``bash -e`` in the page's folder (the ``ctxbudget`` command)."""
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run(
        ["bash", "-e", "-c", block.code],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if done.returncode:
        pytest.fail(f"{where} line {block.line}: exit {done.returncode}: {done.stderr[-2000:]}")


def fakes() -> dict[str, Any]:
    """What a page may use without defining it: the frameworks' fake models as ``llm``."""
    names: dict[str, Any] = {}
    with contextlib.suppress(ImportError):
        from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
        from langchain_core.messages import AIMessage

        class FakeChatModel(GenericFakeChatModel):
            """LangChain's fake, answering "ok", naming its model and taking tools."""

            model_name: str = "gpt-4o"

            def bind_tools(self, tools: Any, **kwargs: Any) -> FakeChatModel:
                return self

        names["llm"] = FakeChatModel(messages=iter([AIMessage("ok")] * 1000))
    return names


@contextlib.contextmanager
def llamaindex_fakes() -> Iterator[None]:
    try:
        from llama_index.core import Settings
        from llama_index.core.embeddings import MockEmbedding
        from llama_index.core.llms import MockLLM
    except ImportError:
        yield
        return
    Settings.llm = MockLLM()
    Settings.embed_model = MockEmbedding(embed_dim=8)
    yield


PAGED = [(page, blocks(page)) for page in PAGES if blocks(page)]


@pytest.mark.parametrize(
    ("page", "found"), PAGED, ids=[p.relative_to(ROOT).as_posix() for p, _ in PAGED]
)
def test_every_python_block_of_the_page_runs(
    page: Path, found: list[Block], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for key, value in {
        "ANONYMIZED_TELEMETRY": "False",
        "ORT_DISABLE_TELEMETRY": "1",
        "HF_HUB_OFFLINE": "1",
    }.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("CTXBUDGET_CHROMA_URL", raising=False)
    namespace: dict[str, Any] = {"__name__": f"doc:{page.name}", **fakes()}
    skipped = [b for b in found if b.skip]
    with llamaindex_fakes():
        for block in found:
            if block.skip:
                continue
            if block.shell:
                close_memories(namespace)  # the reader's Python session has ended
                run_shell(block, str(page.relative_to(ROOT)))
                continue
            code = compile(block.code, f"{page.relative_to(ROOT)}:{block.line}", "exec")
            printed = io.StringIO()
            try:
                with warnings.catch_warnings(), contextlib.redirect_stdout(printed):
                    # The page shows the deprecated class on purpose (a migration guide).
                    warnings.filterwarnings(
                        "ignore", message="RunnableWithMessageHistory is deprecated"
                    )
                    exec(code, namespace)  # noqa: S102 - the documentation's own code
            except Exception as exc:  # noqa: BLE001 - any failure names the block
                pytest.fail(f"{page.relative_to(ROOT)} line {block.line}: {exc!r}")
            if block.output is not None:
                shown = normalised(block.output, block.varies)
                got = normalised(printed.getvalue(), block.varies)
                assert output_matches(shown, got), (
                    f"{page.relative_to(ROOT)} line {block.line}: the page shows\n{shown}\n"
                    f"but the block prints\n{got}"
                )
    for block in skipped:
        print(f"{page.name}:{block.line} not run: {block.skip}")
    close_memories(namespace)


def close_memories(namespace: dict[str, Any]) -> None:
    memories = [v for v in namespace.values() if "Memory" in type(v).__name__]
    for memory in (m for m in memories if hasattr(m, "close")):
        with contextlib.suppress(Exception):
            memory.close()


def test_skipped_blocks_are_few_and_say_why() -> None:
    skipped = [(p.name, b.line, b.skip) for p, found in PAGED for b in found if b.skip]
    assert all(why and why.strip() for _, _, why in skipped)
    assert len(skipped) <= 6, skipped


def test_the_pages_show_what_their_blocks_print() -> None:
    # The output blocks this test compares (a page that stops showing one must say why here).
    shown = sorted(
        (p.relative_to(ROOT).as_posix(), b.line) for p, found in PAGED for b in found if b.output
    )
    assert [page for page, _ in shown] == [
        "docs/entities.md",
        "docs/files.md",
        "docs/inspect.md",
        "docs/langchain.md",
        "docs/langchain.md",
        "docs/langchain.md",
        "docs/llamaindex.md",
        "docs/memory.md",  # "Editing and deleting messages"
        "docs/memory.md",
        "docs/memory.md",
        "docs/observability.md",
    ], shown
    assert output_matches("a\n...\nd", "a\nb\nc\nd") and not output_matches("a\nd", "a\nb\nd")
    assert normalised("x 0.45 ms", frozenset({"timing"})) == "x <ms>"
