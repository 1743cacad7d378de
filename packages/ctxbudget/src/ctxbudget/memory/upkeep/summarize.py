"""Folding old stretches of a session into stored summaries (`ContextMemory.summarize`).

A summary is a record of kind ``summary`` with the ids of the messages it covers
(``summary_of``) and their first and last seqs (``metadata["_first_seq"]``, ``["_last_seq"]``);
candidates offer it in tier SUMMARY, and the core uses it in place of what it covers when those
messages do not fit. It carries the user of what it covers, when they have one user (`_author`).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from ctxbudget.core.ids import internal_id
from ctxbudget.core.summaries import Summarizer
from ctxbudget.memory.reading.session_state import session_summaries
from ctxbudget.store.records import Record
from ctxbudget.tokens.counter import TokenCounter

if TYPE_CHECKING:
    from ctxbudget.store.chroma_store import ChromaStore

__all__ = ["summarize_session"]


def summarize_session(
    store: ChromaStore,
    namespace: str,
    session_id: str,
    summarizer: Summarizer,
    counter: TokenCounter,
    *,
    keep: int,
    stretch: int,
    max_tokens: int,
) -> list[str]:
    """Summarize each whole, not yet summarized ``stretch`` of messages before the newest ``keep``.

    Returns the new summary ids; stored summaries' token counts are ``counter``'s.
    """
    messages = store.session_messages(namespace=namespace, session_id=session_id)
    older = messages[: max(0, len(messages) - keep)]
    done = session_summaries(store, namespace, session_id)
    covered = max((int(r.metadata.get("_last_seq", -1)) for r in done), default=-1)
    todo = [m for m in older if (m.seq if m.seq is not None else -1) > covered]
    records: list[Record] = []
    for start in range(0, len(todo) - stretch + 1, stretch):
        part = todo[start : start + stretch]
        lines = [f"{m.metadata.get('_name') or m.role}: {m.text}" for m in part]
        text = summarizer.summarize(lines, max_tokens).strip()
        if not text:
            continue
        first, last = part[0].seq or 0, part[-1].seq or 0
        records.append(
            Record(
                id=internal_id("summary", f"{first}-{last}"),
                kind="summary",
                text=text,
                namespace=namespace,
                session_id=session_id,
                user_id=_author(part),
                timestamp=part[-1].timestamp,
                summary_of=tuple(m.id for m in part),
                metadata={"_first_seq": first, "_last_seq": last, **_authors(part)},
                tokens={counter.name: counter.count(text)},
            )
        )
    if records:
        store.add(records)
    return [r.id for r in records]


def _author(part: list[Record]) -> str | None:
    """The user of a stretch whose messages have one (None: no user, or several).

    A summary of several users' words carries none: it is offered in its session only, never
    to one of them elsewhere (their other sessions, a search by user); `delete_user` deletes a
    summary quoting any message it deletes (`ctxbudget.store.deletes`).
    """
    users = {m.user_id for m in part if m.user_id is not None}
    return users.pop() if len(users) == 1 else None


def _authors(part: list[Record]) -> dict[str, str]:
    """``{"_authors": "[...]"}``: the users whose words a summary holds (`delete_user` reads it)."""
    return {"_authors": json.dumps(sorted({m.user_id for m in part if m.user_id is not None}))}
