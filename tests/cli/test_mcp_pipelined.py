"""``ctxbudget mcp``: calls a client sends without waiting for each reply apply in the order sent.

JSON-RPC lets a client pipeline requests (the SDK's ``ClientSession`` does, for calls issued
side by side); the SDK runs each tool on a worker thread, where a call sent later could run
first. Until 2026-12-01 a conversation's ``remember`` calls sent back to back were stored in the
threads' order (2-12 of 30 places wrong), and ``context`` handed the model a reordered
conversation. Now a write runs after every call sent before it, a read after the writes sent
before it (`ctxbudget.memory.ordering.CallOrder`). A real server process over stdio (real
tiktoken, embedded Chroma, the default embedder), raw JSON-RPC lines.
"""

from __future__ import annotations

import json
from pathlib import Path

from test_mcp_raw import RawServer

from ctxbudget.memory.context import ContextMemory


def test_pipelined_writes_are_stored_in_the_order_sent_and_read_after(tmp_path: Path) -> None:
    raw = RawServer(tmp_path / "store")
    try:
        sent = [f"turn {k:02d} of the trip plan" for k in range(30)]
        for k, text in enumerate(sent):  # one conversation, no reply awaited
            role = "user" if k % 2 == 0 else "assistant"
            arguments = {"session_id": "chat", "role": role, "text": text, "id": f"m{k:02d}"}
            raw.send_line(
                json.dumps(
                    {
                        "jsonrpc": "2.0",
                        "id": 100 + k,
                        "method": "tools/call",
                        "params": {"name": "remember", "arguments": arguments},
                    }
                )
            )
        question = {"session_id": "chat", "question": "what was the plan?", "budget": 4000}
        raw.send_line(
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 200,
                    "method": "tools/call",
                    "params": {"name": "context", "arguments": question},
                }
            )
        )
        replies = {reply["id"]: reply for reply in (raw.reply() for _ in range(31))}
        assert not [r for r in replies.values() if r["result"].get("isError")]
        messages = replies[200]["result"]["structuredContent"]["messages"]
        # The read sent after the writes sees them all, in the order sent.
        assert [m["content"] for m in messages[:-1]] == sent
        raw.process.stdin.close()  # type: ignore[union-attr]
        assert raw.process.wait(60) == 0  # stdin closed: the server stores and ends
    finally:
        if raw.process.poll() is None:
            raw.process.kill()
        raw.process.wait(60)
        for pipe in (raw.process.stdout, raw.process.stderr):
            if pipe is not None:
                pipe.close()
    memory = ContextMemory(path=tmp_path / "store")
    try:
        assert [r.text for r in memory.history("chat")] == sent
    finally:
        memory.close()
