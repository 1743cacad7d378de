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

import dataclasses
import json
from collections.abc import Sequence

from ctxbudget.memory.reading.record_items import stored_calls
from ctxbudget.store.records import Record

__all__ = ["answered_steps", "tool_steps_together"]


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


def answered_steps(records: Sequence[Record]) -> list[Record]:
    """``records`` (steps together: `tool_steps_together`) as a conversation providers accept.

    A tool call no result answers, once a message that is not its step's follows it (a run
    cancelled while its tool ran), is left out of its assistant message, and the message too
    when it holds nothing else; a tool result whose call is not among ``records`` is left
    out. The newest step's calls stay while only their results follow them: those may still
    come. Nothing is removed from the store: this is what a chat history hands a model.

    >>> calls = '[{"id": "c1", "name": "f", "args": {}}]'
    >>> call = Record(id="a", kind="message", text="", role="assistant", tool_calls=("c1",),
    ...               metadata={"_tool_calls": calls})
    >>> later = Record(id="u", kind="message", text="hi", role="user")
    >>> [r.id for r in answered_steps([call, later])], [r.id for r in answered_steps([call])]
    (['u'], ['a'])
    """
    out: list[Record] = []
    n = 0
    while n < len(records):
        record = records[n]
        if record.role == "tool":  # not in a step: its call is not right before it
            n += 1
            continue
        if record.role != "assistant" or not record.tool_calls:
            out.append(record)
            n += 1
            continue
        end = n + 1
        while end < len(records) and records[end].role == "tool":
            end += 1
        results = records[n + 1 : end]
        given = {r.tool_call_id for r in results}
        pending = end == len(records)  # the newest step: its results may still come
        kept = record.tool_calls if pending else tuple(c for c in record.tool_calls if c in given)
        if kept != record.tool_calls and (kept or record.text.strip()):
            record = _with_calls(record, kept)
        if kept or record.text.strip():
            out.append(record)
            answering = set(kept)
            for result in results:  # one result per call, each of a call kept
                if result.tool_call_id in answering:
                    answering.discard(result.tool_call_id)
                    out.append(result)
        n = end
    return out


def _with_calls(record: Record, kept: tuple[str, ...]) -> Record:
    """``record`` calling only ``kept`` (its stored calls' details kept for those)."""
    metadata = dict(record.metadata)
    calls = stored_calls(record)
    if calls is not None:
        chosen = [c for c in calls if str(c["id"]) in kept]
        if chosen:
            metadata["_tool_calls"] = json.dumps(chosen, ensure_ascii=False)
        else:
            metadata.pop("_tool_calls", None)
    return dataclasses.replace(record, tool_calls=kept, metadata=metadata)
