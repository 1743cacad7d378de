"""`Awaiting`: the requests the stdin relay passed on, until a reply or a cancellation strikes them.

The relay waits for none to be outstanding before it ends the SDK's input
(`ctxbudget.mcp.stdio`); the end-to-end check under load is
`tests/cli/test_mcp_relay_edges.py::test_every_request_read_before_stopping_is_answered_and_stored`.
"""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from ctxbudget.mcp.awaiting import Awaiting


def _lines(*messages: object) -> bytes:
    return b"".join(json.dumps(m).encode() + b"\n" for m in messages)


def _request(request_id: object, text: str = "x") -> dict[str, object]:
    params = {"name": "remember", "arguments": {"text": text}}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def _reply(request_id: object, size: int = 10) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": request_id, "result": {"content": "y" * size}}


def test_replies_and_cancellations_strike_what_was_asked() -> None:
    waiting = Awaiting()
    waiting.counting = True
    notification = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    waiting.asked(_lines(_request(1), _request("1"), _request(2), notification))
    assert waiting.outstanding == 3  # 1 and "1" are two requests; a notification is none
    waiting.answered(_lines(_reply(1, size=5000)))  # its id within the first bytes
    assert waiting.outstanding == 2
    cancel = {"method": "notifications/cancelled", "params": {"requestId": 2}, "jsonrpc": "2.0"}
    waiting.asked(_lines(cancel))
    assert waiting.outstanding == 1
    late = {"result": {"content": "y" * 5000}, "jsonrpc": "2.0", "id": "1"}  # id far in
    waiting.answered(_lines(late, {"jsonrpc": "2.0", "method": "notifications/message"}))
    assert waiting.outstanding == 0
    waiting.asked(b"not json\n" + _lines([_request(3)]))  # not requests the SDK answers
    assert waiting.outstanding == 0


def test_nothing_is_waited_for_while_replies_are_not_counted() -> None:
    waiting = Awaiting()
    waiting.asked(_lines(_request(1)))
    assert waiting.outstanding == 0
    waiting.counting = True
    assert waiting.outstanding == 1


@given(
    ids=st.lists(st.one_of(st.integers(-(2**40), 2**40), st.text(max_size=5)), max_size=8),
    sizes=st.lists(st.integers(0, 600), min_size=8, max_size=8),
)
def test_every_request_answered_leaves_none_outstanding(
    ids: list[object], sizes: list[int]
) -> None:
    waiting = Awaiting()
    waiting.counting = True
    waiting.asked(_lines(*(_request(i) for i in ids)))
    assert waiting.outstanding == len({(type(i), i) for i in ids})
    waiting.answered(_lines(*(_reply(i, size) for i, size in zip(ids, sizes, strict=False))))
    assert waiting.outstanding == 0
