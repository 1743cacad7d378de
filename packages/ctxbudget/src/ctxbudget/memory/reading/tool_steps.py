"""A session's messages as conversation steps: each tool result right after the call it answers.

A session written by two workers at once (a user's two tabs, a double submit) is stored in the
order its messages arrived, so another turn's message can land between an assistant message that
calls tools and their results: ``call A, user B, result A``. Sent in that order, the call has no
result right after it and the result no call before it; providers refuse both, so the core drops
them (``orphan_tool_call``), and the step would never be sent again although it is stored and
fits. `tool_steps_together` moves each result up to its call instead, and what came between
after them: one writer's messages keep their order, and a session of one writer is unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence

from ctxbudget.memory.reading.record_items import stored_calls
from ctxbudget.store.records import Record

__all__ = ["tool_steps_together"]


def tool_steps_together(records: Sequence[Record]) -> list[Record]:
    """``records`` (oldest first) with each tool result moved up to right after its call.

    A result goes after the newest earlier assistant message that made its call and has not had
    a result for that call yet; a result whose call is not among ``records`` stays where it is.

    >>> calls = '[{"id": "c1", "name": "f", "args": {}}]'
    >>> call = Record(id="a", kind="message", text="", role="assistant",
    ...               metadata={"_tool_calls": calls})
    >>> other = Record(id="u", kind="message", text="hi", role="user")
    >>> result = Record(id="t", kind="message", text="42", role="tool", tool_call_id="c1")
    >>> [r.id for r in tool_steps_together([call, other, result])]
    ['a', 't', 'u']
    """
    steps: list[list[Record]] = []
    waiting: dict[str, list[Record]] = {}  # a call id still unanswered -> the step that made it
    for record in records:
        call_id = record.tool_call_id if record.role == "tool" else None
        step = waiting.pop(call_id, None) if call_id is not None else None
        if step is not None:
            step.append(record)
            continue
        steps.append([record])
        if record.role == "assistant":
            for call in stored_calls(record) or ():
                waiting[str(call["id"])] = steps[-1]
    return [record for step in steps for record in step]
