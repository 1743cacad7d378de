"""`Stamps`: every removal or replacement changes the stamp of each scope a copy drew it from.

A copy of a session's candidates (the LangChain middleware's `Recalled`) draws from the
session, the user's pins and other sessions, and the namespace's documents. Whatever removes or
replaces one of those records, through whichever call, the stamps read after it returned are
not the stamps read before; additions change none of them (docs/architecture.md, "Caches").
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxbudget import ContextMemory
from ctxbudget.store.chroma_store import ChromaStore, Record
from ctxbudget.store.sessions import Stamps

NS = "default"
SESSIONS, USERS, IDS = ("s1", "s2"), ("u1", "u2"), ("a", "b")
OBSERVERS = [("s1", "u1"), ("s2", "u2"), ("s1", "u2")]  # (session, user) of a copy

operations = st.one_of(
    st.tuples(
        st.just("message"), st.sampled_from(SESSIONS), st.sampled_from(USERS), st.sampled_from(IDS)
    ),
    st.tuples(st.just("pin"), st.sampled_from(USERS), st.sampled_from(IDS)),
    st.tuples(st.just("document"), st.sampled_from(IDS)),
    st.tuples(st.just("delete message"), st.sampled_from(SESSIONS), st.sampled_from(IDS)),
    st.tuples(st.just("replace message"), st.sampled_from(SESSIONS), st.sampled_from(IDS)),
    st.tuples(st.just("unpin"), st.sampled_from(USERS), st.sampled_from(IDS)),
    st.tuples(st.just("delete document"), st.sampled_from(IDS)),
    st.tuples(st.just("clear"), st.sampled_from(SESSIONS)),
    st.tuples(st.just("delete session"), st.sampled_from(SESSIONS)),
    st.tuples(st.just("delete user"), st.sampled_from(USERS)),
)

Key = tuple[str, str, str]  # (scope kind, scope name, id) -> (session, user, is a document)


def _apply(memory: ContextMemory, records: dict[Key, Any], op: tuple[str, ...]) -> list[Any]:
    """Run ``op``; returns the model's records it removed or replaced (what a copy may hold)."""
    store, kind = memory.store, op[0]
    if kind == "message":
        _, sid, uid, rid = op
        if ("session", sid, rid) not in records:
            memory.add_message(sid, "user", f"{rid} from {uid}", id=rid, user_id=uid)
            records[("session", sid, rid)] = (sid, uid, False)
        return []
    if kind == "pin":
        memory.pin(user_id=op[1], text=f"fact {op[2]}", id=op[2])
        records[("user", op[1], op[2])] = (None, op[1], False)
        return []
    if kind == "document":
        memory.add_documents([(op[1], f"document {op[1]}")], collection="kb")
        records[("collection", "kb", f"{op[1]}#0")] = (None, None, True)
        return []
    removed: list[Key] = []
    if kind in ("delete message", "replace message"):
        key = ("session", op[1], op[2])
        if key in records:
            if kind == "delete message":
                store.delete([op[2]], namespace=NS, session_id=op[1])
            else:
                old = store.get([op[2]], namespace=NS, session_id=op[1])[0]
                store.add([Record(**{**_fields(old), "text": old.text + "!"})], replace=True)
            removed = [key]
    elif kind == "unpin":
        memory.unpin(op[2], user_id=op[1])
        removed = [k for k in records if k == ("user", op[1], op[2])]
    elif kind == "delete document":
        store.delete([f"{op[1]}#0"], namespace=NS, collection="kb")
        removed = [k for k in records if k == ("collection", "kb", f"{op[1]}#0")]
    elif kind == "clear":
        memory.clear(op[1])
        removed = [k for k in records if k[:2] == ("session", op[1])]
    elif kind == "delete session":
        memory.delete_session(op[1])
        removed = [k for k in records if k[:2] == ("session", op[1])]
    else:  # delete user: the sessions it wrote in, whole, and every record of the user
        uid = op[1]
        # The sessions it wrote messages in (a user-wide pin or a document is in none).
        wrote_in = {records[k][0] for k in records if records[k][1] == uid} - {None}
        memory.delete_user(uid)
        removed = [k for k in records if records[k][1] == uid or records[k][0] in wrote_in]
    gone = [records[k] for k in removed]
    if kind != "replace message":
        for k in removed:
            del records[k]
    return gone


def _fields(record: Record) -> dict[str, Any]:
    names = ("id", "kind", "text", "namespace", "session_id", "user_id", "role", "timestamp")
    return {name: getattr(record, name) for name in names}


def _stamps(store: ChromaStore) -> dict[tuple[str, str], Stamps]:
    return {(s, u): store.stamps(namespace=NS, session_id=s, user_id=u) for s, u in OBSERVERS}


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=st.lists(operations, min_size=1, max_size=12))
def test_property_every_removal_changes_the_stamps_of_what_it_removed_from(
    embedder: Any, ops: list[tuple[str, ...]]
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        memory = ContextMemory(path=Path(folder), embedder=embedder, write_behind=False)
        records: dict[Key, Any] = {}
        try:
            for op in ops:
                before = _stamps(memory.store)
                gone = _apply(memory, records, op)
                after = _stamps(memory.store)
                documents = any(doc for _, _, doc in records.values())
                for (sid, uid), stamps in after.items():
                    # Never "no documents" while there are some: a turn would not search them.
                    assert stamps.has_documents or not documents, (op, sid, uid)
                    drawn = any(s == sid or u == uid or doc for s, u, doc in gone)
                    if drawn:  # a copy gathered before holds what is gone: never current
                        assert not stamps.same(before[(sid, uid)]), (op, sid, uid)
                    elif op[0] in ("message", "pin", "document"):  # additions keep copies
                        old = before[(sid, uid)]
                        assert (stamps.user, stamps.documents) == (old.user, old.documents)
                        if old.session is not None:
                            assert stamps.same(old), (op, sid, uid)
        finally:
            memory.close()
