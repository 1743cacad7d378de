"""What "the model receives exactly what was chosen" means, as checks any test can run.

`check_sent` compares an `AssembledContext`'s output with its ``included`` list: for the text
formats `readback.parse_rendered(ctx.render())` must give one row per included item, in order,
with its section, role, name, text, tool calls and the call it answers; for ``messages``,
`to_messages()` must hold each history item and query as its own message (role, content, name,
tool calls, tool call id) and the system messages must parse back to the other items. It also
checks the conversation is one every provider accepts and the report is a partition.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from ctxbudget import AssembledContext, ContextItem, PruneReason, Tier
from ctxbudget.core.readback import ParsedRow, parse_rendered
from ctxbudget.core.render import Layout
from ctxbudget.core.rows import RowCall
from ctxbudget.core.toolcalls import canonical_arguments

LINE_BREAKS = re.compile(r"\r\n|[\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


def shown_text(item: ContextItem) -> str:
    """An item's text as a row shows it: trimmed, with a mark per image."""
    text = item.text.strip()
    if item.images:
        text = (text + " " if text else "") + " ".join(["[image]"] * item.images)
    return text


def expected_calls(item: ContextItem) -> tuple[RowCall, ...]:
    payloads = item.metadata.get("tool_calls")
    by_id: dict[str, Mapping[str, Any]] = {}
    for call in payloads if isinstance(payloads, list) else []:
        if isinstance(call, Mapping) and isinstance(call.get("id"), str):
            by_id.setdefault(call["id"], call)
    calls = []
    for call_id in item.tool_calls:
        call = by_id.get(call_id)
        function = call.get("function", call) if call is not None else None
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
            calls.append(RowCall(call_id, None, None))
            continue
        raw = function.get("arguments", function.get("args", ""))
        calls.append(RowCall(call_id, function["name"], canonical_arguments(raw)))
    return tuple(calls)


def expected_rows(ctx: AssembledContext, fmt: str) -> list[ParsedRow]:
    """The rows `parse_rendered` must give: one per included item, in render order."""
    rows: list[ParsedRow] = []
    system = [shown_text(it) for it in ctx.included if Layout.section_of(it) == "system"]
    if any(system):
        rows.append(ParsedRow("system", "\n".join(t for t in system if t)))
    last: dict[str, str | None] = {}
    layout = ctx._layout  # noqa: SLF001 - the dates are the layout's rule
    for item in ctx.included:
        section = Layout.section_of(item)
        if section == "system":
            continue
        if section == "query":
            rows.append(ParsedRow("query", shown_text(item)))
            continue
        labelled = section == "history" or (section in ("knowledge", "summaries") and item.role)
        text = shown_text(item)
        if fmt != "compact":
            text = LINE_BREAKS.sub("\n", text)
        date = None
        if section in ("history", "knowledge", "summaries"):
            if item.timestamp is not None and layout.date_of(item, section):
                last[section] = layout.date_of(item, section)
            date = last.get(section)
        rows.append(
            ParsedRow(
                section,
                text,
                item.role if labelled else None,
                (item.name or None) if labelled or section == "files" else None,
                date,
                expected_calls(item),
                item.tool_call_id,
            )
        )
    return rows


def message_of(item: ContextItem) -> dict[str, Any]:
    """The provider message an included history item or query must be sent as."""
    role = "user" if item.tier == Tier.QUERY else (item.role or "user")
    message: dict[str, Any] = {
        "role": role,
        "content": list(item.parts) if item.parts is not None else item.text,
    }
    if item.name:
        message["name"] = item.name
    if item.tool_call_id is not None:
        message["tool_call_id"] = item.tool_call_id
    if item.tool_calls and item.metadata.get("tool_calls") is not None:
        message["tool_calls"] = item.metadata["tool_calls"]
    return message


def check_fidelity(ctx: AssembledContext) -> None:
    """What is rendered is exactly ``ctx.included``, in order (every format)."""
    if ctx.format != "messages":
        rows = parse_rendered(ctx.render(), ctx.format)  # type: ignore[arg-type]
        assert rows == expected_rows(ctx, ctx.format)
        return
    messages = ctx.to_messages()
    turns = [it for it in ctx.included if Layout.section_of(it) in ("history", "query")]
    systems = messages[: len(messages) - len(turns)]
    assert all(m["role"] == "system" for m in systems)
    assert messages[len(systems) :] == [message_of(it) for it in turns]
    parsed = [row for m in systems for row in parse_rendered(m["content"], "text")]
    wanted = [r for r in expected_rows(ctx, "text") if r.section not in ("history", "query")]
    assert parsed == wanted


def check_conversation(ctx: AssembledContext) -> None:
    """The history sent is one every provider accepts."""
    history = [it for it in ctx.included if Layout.section_of(it) == "history"]
    assert not history or (history[0].role or "user") in ("user", "system"), history[0]
    started = False
    index = 0
    while index < len(history):
        item = history[index]
        index += 1
        role = item.role or "user"
        started = started or role == "user"
        assert started or role == "system", f"{item.id} ({role}) before the first user turn"
        assert role != "tool", f"tool result {item.id} not right after its call"
        if role == "assistant" and item.tool_calls:
            answered: list[str] = []
            while index < len(history) and history[index].role == "tool":
                answered.append(str(history[index].tool_call_id))
                index += 1
            assert sorted(answered) == sorted(set(item.tool_calls)), (item.id, answered)


def check_partition(ctx: AssembledContext, offered: Sequence[ContextItem]) -> None:
    """Every offered item is included or pruned, never both, each pruned once with a reason."""
    included = Counter(ctx.included_ids)
    pruned = Counter(p.item.id for p in ctx.pruned)
    made = Counter(i for i in ctx.included_ids if i.startswith("ctxbudget:summary:"))
    assert included + pruned == Counter(it.id for it in offered) + made
    for entry in ctx.pruned:
        assert isinstance(entry.reason, PruneReason)
        if entry.item.id in included:
            assert entry.reason is PruneReason.DUPLICATE, entry
    assert max(included.values(), default=1) == 1


def check_sent(ctx: AssembledContext, offered: Sequence[ContextItem]) -> None:
    """Every promise of what is sent: fidelity, a valid conversation, a true report."""
    check_fidelity(ctx)
    check_conversation(ctx)
    check_partition(ctx, offered)
