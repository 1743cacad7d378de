"""A log record keeps nothing of a message deleted from its session.

A record names items by id and, with ``keep_context``, holds the context as sent. Deleting a
user kept the records of a session another user started (theirs) with the deleted user's
message in them: its id in ``included`` and its text in ``context``. Deleting a session's
messages (``clear``) kept them too. Now the session's records that name a deleted message go,
and the others stay. Real parts: an embedded Chroma, the default embedder, tiktoken.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from ctxbudget import ContextMemory
from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.memory import InclusionLogConfig

SECRET = "swordfish is the vault password"


def memory(folder: Path, embedder: OnnxEmbedder) -> ContextMemory:
    return ContextMemory(
        folder, embedder=embedder, inclusion_log=InclusionLogConfig(keep_context=True)
    )


def texts(mem: ContextMemory, session: str) -> str:
    return json.dumps(
        [[r.included_ids, r.context, r.query] for r in mem.contexts(session)], default=str
    )


def test_deleting_a_user_leaves_their_words_in_no_record_of_anothers_session(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    group = f"group-{uuid.uuid4().hex[:8]}"
    with memory(tmp_path / "db", embedder) as mem:
        mem.add_message(group, "user", "Planning the trip to Porto", user_id="v", id="v1")
        mem.assemble(group, "where are we going?", budget=400, user_id="v")  # names v1 only
        mem.add_message(group, "user", SECRET, user_id="u", id="u1")
        mem.assemble(group, "what is the password?", budget=400, user_id="v")  # names u1
        mem.flush()
        assert SECRET in texts(mem, group)
        assert len(mem.contexts(group)) == 2
        mem.delete_user("u")
        mem.flush()
        kept = mem.contexts(group)
        assert SECRET not in texts(mem, group) and '"u1"' not in texts(mem, group)
        assert [r.included_ids for r in kept] and all("u1" not in r.included_ids for r in kept)
        assert len(kept) == 1  # the record from before u wrote stays: a log, v's
    with memory(tmp_path / "db", embedder) as again:  # and after reopening
        assert SECRET not in texts(again, group)


def test_clearing_a_sessions_messages_drops_the_records_naming_them(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    with memory(tmp_path / "db", embedder) as mem:
        mem.add_message("s", "user", SECRET, id="m1")
        mem.assemble("s", "what is the password?", budget=400)
        mem.flush()
        assert SECRET in texts(mem, "s")
        mem.clear("s")
        mem.flush()
        assert SECRET not in texts(mem, "s")
