"""Files through `ContextMemory.assemble(extra=...)`: ranked above pinned facts, cut at lines.

A real embedded Chroma and the real embedding model (tests/conftest.py).
"""

from __future__ import annotations

from pathlib import Path

from ctxbudget import folder_tree_item
from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.memory.context import ContextMemory
from ctxbudget.sources import file_items
from ctxbudget.store.chroma_store import ChromaStore


def test_memory_assembles_files_given_as_extra(tmp_path: Path, embedder: OnnxEmbedder) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "app.py").write_text("".join(f"step_{i} = {i}\n" for i in range(400)))
    (project / "notes.md").write_text("Deploy on Fridays is forbidden.\n")
    memory = ContextMemory(store=ChromaStore(tmp_path / "db", embedder=embedder))
    try:
        memory.add_messages(
            "s1",
            [
                {"role": "user", "content": "I am refactoring app.py"},
                {"role": "assistant", "content": "Sure, show me the file."},
            ],
            progress=False,
        )
        memory.pin("s1", "The user writes Python 3.12.")
        files = file_items(["app.py", "notes.md"], root=project)
        tree = folder_tree_item(project)
        extra = [tree, *files.items]
        ctx = memory.assemble(
            "s1", "What does step_200 hold?", budget=700, system="Be brief.", extra=extra
        )
        assert ctx.tokens_used <= 700
        ids = ctx.included_ids
        assert {"tree:project/", "file:notes.md", "file:app.py"} <= set(ids)
        assert ctx.truncated == ("file:app.py",)
        text = ctx.to_messages()[1]["content"]
        assert text.startswith("## Files\n### project/\n")
        assert "### app.py\n" in text and "lines elided" in text
        assert len(ids) == len(set(ids))
        assert not {p.item.id for p in ctx.pruned} & {"tree:project/", "file:notes.md"}
    finally:
        memory.close()
