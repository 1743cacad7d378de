"""The spans ctxbudget makes and what each records (docs/observability.md has the full table).

| span | made by | ``gen_ai.operation.name`` |
|---|---|---|
| ``ctxbudget.assemble`` | `ContextAssembler.assemble`; `ContextMemory.assemble` (one span) | none |
| ``ctxbudget.candidates`` | `ContextMemory.candidates` (a child of the memory's assembly) | none |
| ``retrieval`` | `ContextMemory.search` | ``retrieval`` |
| ``ctxbudget.write`` | every write of messages, pins or document chunks | none |

The GenAI semantic conventions' names are used where they exist (a search is their
``retrieval``: ``gen_ai.data_source.id``, ``gen_ai.retrieval.query.text`` and
``gen_ai.retrieval.documents``; a raw session id is ``gen_ai.conversation.id``); everything
else is ``ctxbudget.*``. An assembly is not a model call: it carries no ``gen_ai.request.model``
or ``gen_ai.usage.*``, which backends take for a model call and count as spent tokens.

Never recorded by default: texts (messages, queries, the rendered context, retrieved records)
and item or record ids (a generated message id starts with its session id). Session and user
ids are hashed (`ctxbudget.telemetry.settings`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from numbers import Integral
from typing import TYPE_CHECKING, Any, NoReturn

from ctxbudget.telemetry.settings import TelemetrySettings, hashed_id
from ctxbudget.telemetry.spans import Attributes, active, assembly_in_progress, exportable, traced

if TYPE_CHECKING:
    from ctxbudget.core.report import AssembledContext

__all__ = [
    "assembly_span",
    "candidates_span",
    "identity",
    "memory_assembly_span",
    "note_on_span",
    "refused_write",
    "report_attributes",
    "search_span",
    "write_span",
]


def identity(session_id: object, user_id: object, settings: TelemetrySettings) -> Attributes:
    """Session and user ids: hashed (`hashed_id`) unless ``settings.hash_ids`` is off."""
    out: Attributes = {}
    for key, value in (("ctxbudget.session.id", session_id), ("ctxbudget.user.id", user_id)):
        if not isinstance(value, str) or not value:
            continue
        if settings.hash_ids:
            out[key] = hashed_id(value, settings.id_salt)
        else:
            out[key] = value
            if key == "ctxbudget.session.id":
                out["gen_ai.conversation.id"] = value
    return out


def _tier_key(name: str) -> str:
    return name.lower().replace(" ", "_")  # "RECENT" -> "recent", "tier 45" -> "tier_45"


def report_attributes(ctx: AssembledContext, settings: TelemetrySettings) -> Attributes:
    """What an assembly span says: budget, tokens, items per tier, prune reasons, prefix."""
    summary = ctx.summary()
    included, pruned = summary["included"], summary["pruned"]
    reasons: dict[str, int] = summary["pruned_by_reason"]
    out: Attributes = {
        "ctxbudget.operation": "assemble",
        "ctxbudget.format": ctx.format,
        "ctxbudget.counter.name": ctx.counter_name,
        "ctxbudget.budget.window": ctx.budget.window,
        "ctxbudget.budget.reserve": ctx.budget.reserve,
        "ctxbudget.budget.available": ctx.tokens_available,
        "ctxbudget.tokens.used": ctx.tokens_used,
        "ctxbudget.items.offered": included + pruned,
        "ctxbudget.items.included": included,
        "ctxbudget.items.pruned": pruned,
        "ctxbudget.prune.reasons": sorted(reasons),
        "ctxbudget.pack.duration_ms": round(ctx.timing_ms, 3),
    }
    for reason, count in reasons.items():
        out[f"ctxbudget.prune.{reason}"] = count
    for usage in ctx.tiers.values():
        key = f"ctxbudget.tier.{_tier_key(usage.name)}"
        out[f"{key}.offered"] = usage.offered
        out[f"{key}.included"] = usage.kept
        out[f"{key}.pruned"] = usage.pruned
        out[f"{key}.tokens"] = usage.tokens
    if summary["solver"] is not None:
        out["ctxbudget.solver"] = summary["solver"]
    if ctx.truncated:
        out["ctxbudget.items.truncated"] = len(ctx.truncated)
    if ctx.approximate:
        out["ctxbudget.counter.approximate"] = True
    if ctx.prefix_tokens is not None:
        out["ctxbudget.prefix.tokens_shared"] = ctx.prefix_tokens
    if settings.capture_content:
        out["ctxbudget.content.context"] = ctx.render()
        out["ctxbudget.content.included_ids"] = ctx.included_ids
        out["ctxbudget.content.pruned_ids"] = [entry.item.id for entry in ctx.pruned]
    return out


def note_on_span(attributes: Attributes) -> None:
    """Add ``attributes`` to the span in progress (``ctxbudget.candidates`` for the reranker).

    Nothing happens without tracing, or when that span does not record.
    """
    tracing = active()
    if tracing is None or not tracing.live():
        return
    span = tracing.current_span()
    if span.is_recording():
        span.set_attributes(exportable(attributes))


def _report(_: Mapping[str, Any], ctx: Any, settings: TelemetrySettings) -> Attributes:
    return report_attributes(ctx, settings)


def _memory_call(args: Mapping[str, Any], settings: TelemetrySettings) -> Attributes:
    """A `ContextMemory` call's scope: its namespace, session and user."""
    out = identity(args.get("session_id"), args.get("user_id"), settings)
    out["ctxbudget.namespace"] = str(args["self"].namespace)
    return out


def _assembling(args: Mapping[str, Any], settings: TelemetrySettings) -> Attributes:
    return {"ctxbudget.operation": "assemble", **_memory_call(args, settings)}


def _gathering(args: Mapping[str, Any], settings: TelemetrySettings) -> Attributes:
    out: Attributes = {"ctxbudget.operation": "candidates", **_memory_call(args, settings)}
    if settings.capture_content and isinstance(args.get("query"), str):
        out["ctxbudget.content.query"] = args["query"]
    return out


def _gathered(args: Mapping[str, Any], found: Any, settings: TelemetrySettings) -> Attributes:
    out: Attributes = {
        f"ctxbudget.candidates.{part}": len(getattr(found, part))
        for part in ("pinned", "history", "summaries", "retrieved", "entities")
    }
    if args.get("user_id") is None and found.user_id:
        # The user stored with the session: the assembly this gathering is part of has it too.
        user = identity(None, found.user_id, settings)
        out.update(user)
        outer = assembly_in_progress()
        if outer is not None and outer.is_recording():
            outer.set_attributes(exportable(user))
    return out


def _searching(args: Mapping[str, Any], settings: TelemetrySettings) -> Attributes:
    namespace = str(args["self"].namespace)
    out: Attributes = {
        "gen_ai.operation.name": "retrieval",
        "gen_ai.data_source.id": namespace,
        "ctxbudget.operation": "search",
        **_memory_call(args, settings),
    }
    if isinstance(args["k"], Integral):  # numpy ints too; a bad k is the search's to refuse
        out["ctxbudget.search.k"] = int(args["k"])
    kinds = args.get("kinds")
    if isinstance(kinds, list | tuple):  # anything else is the search's to refuse, unread
        out["ctxbudget.search.kinds"] = [str(kind) for kind in kinds]
    if settings.capture_content and isinstance(args.get("query"), str):
        out["gen_ai.retrieval.query.text"] = args["query"]
    return out


def _searched(_: Mapping[str, Any], hits: Sequence[Any], settings: TelemetrySettings) -> Attributes:
    out: Attributes = {"ctxbudget.search.hits": len(hits)}
    if hits:
        out["ctxbudget.search.top_score"] = float(max(h.score for h in hits))
    if settings.capture_content:
        documents = [
            {"id": h.hit.record.id, "score": float(h.score), "content": h.hit.record.text}
            for h in hits
        ]
        out["gen_ai.retrieval.documents"] = json.dumps(documents, ensure_ascii=False)
    return out


def _writing(args: Mapping[str, Any], settings: TelemetrySettings) -> Attributes:
    writer, records = args["self"], args["records"]
    sessions = {r.session_id for r in records}
    users = {r.user_id for r in records}
    out: Attributes = {
        "ctxbudget.operation": "write",
        "ctxbudget.namespace": str(writer.namespace),
        "ctxbudget.write.kinds": sorted({str(r.kind) for r in records}),
        "ctxbudget.write.records": len(records),
        "ctxbudget.write.behind": writer.behind is not None and args["noun"] == "message",
        **identity(
            next(iter(sessions)) if len(sessions) == 1 else None,
            next(iter(users)) if len(users) == 1 else None,
            settings,
        ),
    }
    if settings.capture_content:
        out["ctxbudget.content.record_ids"] = [str(r.id) for r in records]
    return out


assembly_span = traced("ctxbudget.assemble", after=_report, in_assembly=True)
"""`ContextAssembler.assemble`: a span of its own, or its report on the memory's assembly."""

memory_assembly_span = traced(
    "ctxbudget.assemble", before=_assembling, after=_report, opens_assembly=True
)
"""`ContextMemory.assemble`: one span for the whole call, with its session and user."""

candidates_span = traced("ctxbudget.candidates", before=_gathering, after=_gathered)
"""`ContextMemory.candidates`: how many candidates each source gave."""

search_span = traced("retrieval", before=_searching, after=_searched)
"""`ContextMemory.search`: a GenAI ``retrieval`` span."""

write_span = traced("ctxbudget.write", before=_writing)
"""`Writer.write` (`ctxbudget.memory.writing.writer`): every write of messages, pins or chunks."""


def _refusing(args: Mapping[str, Any], settings: TelemetrySettings) -> Attributes:
    writer, kind = args["writer"], args["kind"]
    return {
        "ctxbudget.operation": "write",
        "ctxbudget.namespace": str(writer.namespace),
        "ctxbudget.write.kinds": [kind],
        "ctxbudget.write.records": args["count"],
        "ctxbudget.write.behind": writer.behind is not None and kind == "message",
        **identity(args["session_id"], args["user_id"], settings),
    }


@traced("ctxbudget.write", before=_refusing)
def refused_write(
    writer: Any,
    kind: str,
    count: int,
    session_id: object,
    user_id: object,
    error: BaseException,
) -> NoReturn:
    """The ``ctxbudget.write`` span of a write refused before its records were made; raises.

    ``count`` records of ``kind`` were given (a bad role, an empty text, a pin with no scope:
    `Writer` refuses them as it makes the records). Until 2026-12-01 such a refusal had no
    span, while one the store's checks made had: every refused write now has one.
    """
    raise error
