"""A logged record with numbers no decoder can take is skipped, never a failed read or call.

Another writer of a log (an older version, a tool, a file that lies) may store ``"used":
Infinity``: `decode_record` raised `OverflowError` on it, which no reader caught, so
`contexts`, `budget_stats` and `access_counts` (which scoring reads) failed on that session.
Real parts: embedded Chroma, the default embedder, tiktoken.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from ctxbudget import ContextMemory
from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.memory.log.entries import encode_record
from ctxbudget.store.log_partitions import LogEntry


@pytest.mark.parametrize("damage", [{"used": math.inf}, {"budget": [math.inf, 0, 0, 0]}])
def test_a_record_with_an_infinite_count_is_skipped(
    tmp_path: Path, embedder: OnnxEmbedder, damage: dict[str, object]
) -> None:
    memory = ContextMemory(tmp_path / "chroma", embedder=embedder)
    memory.add_message("s1", "user", "My locker code is 4417.", id="m1", user_id="ana")
    memory.assemble("s1", "what is my locker code?", budget=300)
    good = memory.contexts("s1", limit=1)[0]
    text = json.dumps({**json.loads(encode_record(good)), **damage, "id": "z-damaged"})
    memory.store.logs.append(
        LogEntry(memory.namespace, "s1", "ana", "z-damaged", good.time + 1, lambda: text, 200)
    )
    memory.store.logs.flush()
    assert [r.id for r in memory.contexts("s1")] == [good.id]
    assert memory.budget_stats("s1").assemblies == 1
    assert memory.access_counts("s1") == memory.access_counts("s1")  # it answers
    context = memory.assemble("s1", "what is my locker code?", budget=300)
    assert "4417" in context.render()
    memory.close()
