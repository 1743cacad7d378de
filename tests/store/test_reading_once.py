"""`reading_once`: a call reads an entry once, and never serves what this process changed since.

Within a scope (the LangChain middleware's model call), the stamps, the session's view and the
id check of the messages stored read ``<collection>.meta`` by id once. The invariant: whatever
any memory object of this process writes (on the same folder, from any thread, write-behind
included), the next read in the scope returns what a read outside any scope returns then; a
change by another process is seen at the latest by the first read after the scope ends.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxbudget import ContextMemory
from ctxbudget.store import sessions as sessions_module
from ctxbudget.store.chroma_store import ChromaStore
from ctxbudget.store.snapshot import reading_once
from ctxbudget.testing import ChromaServer

SESSIONS, USERS = ("s1", "s2"), ("u1", "u2")


def _fresh(read: Any) -> Any:
    """``read()`` on another thread: outside any scope (a scope is the thread's own)."""
    out: list[Any] = []
    worker = threading.Thread(target=lambda: out.append(read()))
    worker.start()
    worker.join()
    return out[0]


def _reads(memory: ContextMemory) -> tuple[Any, ...]:
    store = memory.store
    return tuple(
        value
        for sid in SESSIONS
        for value in (
            store.session_stamp(namespace=memory.namespace, session_id=sid),
            *(store.stamps(namespace=memory.namespace, session_id=sid, user_id=u) for u in USERS),
        )
    )


def test_a_call_reads_the_session_entry_once(tmp_path: Path, embedder: Any) -> None:
    memory = ContextMemory(path=tmp_path / "m", embedder=embedder, write_behind=False)
    memory.add_message("s1", "user", "I live in Lisbon", user_id="u1")
    read = sessions_module.meta_rows
    calls: list[str] = []  # reads of a session's entry

    def counted(*args: Any, **kwargs: Any) -> Any:
        def reader(keys: list[str]) -> Any:
            calls.extend(k for k in keys if k.startswith('["session"'))
            return args[3](keys)

        return read(args[0], args[1], args[2], reader)

    sessions_module.meta_rows = counted  # type: ignore[assignment]
    try:
        with reading_once():
            first = memory.store.stamps(namespace="default", session_id="s1", user_id="u1")
            memory.candidates("s1", "where do I live?", budget=500, user_id="u1")
            assert memory.store.session_stamp(namespace="default", session_id="s1") == first.session
            reads_in_scope = len(calls)
        memory.store.session_stamp(namespace="default", session_id="s1")
    finally:
        sessions_module.meta_rows = read  # type: ignore[assignment]
    assert reads_in_scope == 1  # the stamps' read served the view and the stamp after it
    assert len(calls) == 2  # outside the scope: read again
    memory.close()


def test_a_write_through_the_store_makes_the_next_read_in_the_call_read_again(
    tmp_path: Path, embedder: Any
) -> None:
    app = ContextMemory(path=tmp_path / "m", embedder=embedder, write_behind=False)
    admin = ContextMemory(path=tmp_path / "m", embedder=embedder, write_behind=False)
    app.add_message("s1", "user", "my PIN is 4321", id="m1", user_id="u1")
    with reading_once():
        before = app.store.session_stamp(namespace="default", session_id="s1")
        admin.delete_session("s1")  # another object on the folder: the shared write epoch moves
        assert app.store.session_stamp(namespace="default", session_id="s1") is None
        admin.add_message("s1", "user", "hello", id="m0", user_id="u2")
        again = app.store.session_stamp(namespace="default", session_id="s1")
        assert again is not None and again.generation != before.generation
        found = app.candidates("s1", "what is my PIN?", budget=500, user_id="u2")
        assert "4321" not in " ".join(item.text for item in found.items)
    app.close()
    admin.close()


operations = st.lists(
    st.one_of(
        st.tuples(
            st.just("message"), st.sampled_from(SESSIONS), st.sampled_from(USERS), st.integers(0, 3)
        ),
        st.tuples(st.just("pin"), st.sampled_from(USERS), st.integers(0, 3)),
        st.tuples(st.just("unpin"), st.sampled_from(USERS), st.integers(0, 3)),
        st.tuples(st.just("clear"), st.sampled_from(SESSIONS)),
        st.tuples(st.just("delete session"), st.sampled_from(SESSIONS)),
        st.tuples(st.just("delete user"), st.sampled_from(USERS)),
    ),
    min_size=1,
    max_size=8,
)


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ops=operations, writer=st.lists(st.booleans(), min_size=8, max_size=8))
def test_in_a_call_every_read_after_this_process_wrote_is_a_fresh_read(
    tmp_path_factory: pytest.TempPathFactory,
    embedder: Any,
    ops: list[tuple[Any, ...]],
    writer: list[bool],
) -> None:
    folder = tmp_path_factory.mktemp("once") / "m"
    a = ContextMemory(path=folder, embedder=embedder)  # write-behind: writes on its thread
    b = ContextMemory(path=folder, embedder=embedder, write_behind=False)
    try:
        with reading_once():
            assert _reads(a) == _fresh(lambda: _reads(a))
            for op, by_a in zip(ops, writer, strict=False):
                memory = a if by_a else b
                kind = op[0]
                if kind == "message":
                    memory.add_message(
                        op[1], "user", f"m{op[3]} of {op[2]}", id=f"m{op[3]}-{op[2]}", user_id=op[2]
                    )
                elif kind == "pin":
                    memory.pin(user_id=op[1], text=f"fact {op[2]}", id=f"p{op[2]}")
                elif kind == "unpin":
                    memory.unpin(f"p{op[2]}", user_id=op[1])
                elif kind == "clear":
                    memory.clear(op[1])
                elif kind == "delete session":
                    memory.delete_session(op[1])
                else:
                    memory.delete_user(op[1])
                a.flush()
                assert _reads(a) == _fresh(lambda: _reads(a)), op
    finally:
        a.close()
        b.close()


_OTHER_PROCESS = """
import sys
from ctxbudget import ContextMemory
from ctxbudget.store.chroma_store import ChromaStore
def embed(texts):
    return [[1.0] * 384 for _ in texts]
store = ChromaStore(url=sys.argv[1], collection=sys.argv[2], embedder=embed)
memory = ContextMemory(store=store, write_behind=False)
memory.delete_session("s1")
memory.close()
"""


@pytest.mark.integration
def test_another_process_change_is_seen_once_the_call_ends(
    chroma_server: ChromaServer, embedder: Any, tmp_path: Path
) -> None:
    collection = "once-" + tmp_path.name[-8:].replace("_", "x")
    store = ChromaStore(url=chroma_server.url, collection=collection, embedder=embedder)
    memory = ContextMemory(store=store, write_behind=False)
    memory.add_message("s1", "user", "my PIN is 4321", user_id="u1")
    with reading_once():
        assert memory.store.session_stamp(namespace="default", session_id="s1") is not None
        subprocess.run(
            [sys.executable, "-c", _OTHER_PROCESS, chroma_server.url, collection], check=True
        )
        # In the call, the first read stands (as a read just before the delete would).
    assert memory.store.session_stamp(namespace="default", session_id="s1") is None
    memory.close()


def test_a_scope_is_reset_when_its_call_fails(tmp_path: Path, embedder: Any) -> None:
    memory = ContextMemory(path=tmp_path / "m", embedder=embedder, write_behind=False)
    memory.add_message("s1", "user", "hello", user_id="u1")
    with pytest.raises(RuntimeError), reading_once():
        memory.store.session_stamp(namespace="default", session_id="s1")
        raise RuntimeError
    from ctxbudget.store import snapshot

    assert snapshot._SCOPE.get() is None  # noqa: SLF001 - nothing outlives the call
    memory.close()
