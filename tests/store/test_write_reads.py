"""What one write reads (issue 40: no reads the caller can't need).

A write reads the session's entry and the ids it stores (once before the store's lock, to embed
only what is new, and again under it), then the session's last seq, then writes. Two reads are
gone: `Sessions.open` read the entry a third time under the same lock (it takes the one just
read), and `Sessions.note_members` read the session's (session, user) pair after the write (it
is read with the entry, `Sessions.entries_and_members`). A session two memories start at once
still gets one home (`Sessions.open` adds with Chroma's ``add``, which keeps the first write),
and a user's message in another user's session is still noted where the user's reads find it.

Real parts: an embedded Chroma, the default embedder.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from ctxbudget import ContextMemory
from tests.store_calls import StoreCalls


def test_a_write_to_a_started_session_reads_five_times(tmp_path: Path, embedder: Any) -> None:
    memory = ContextMemory(path=tmp_path / "db", embedder=embedder, write_behind=False)
    try:
        memory.add_message("s1", "user", "The train to Porto leaves at nine.", user_id="u1")
        probe = StoreCalls(memory)
        memory.add_message("s1", "assistant", "Noted: nine o'clock.", user_id="u1")
        # entry + ids, entry and pair + ids under the lock, the last seq: five reads, one write
        assert probe.calls == ["read"] * 5 + ["write records"]  # 7 reads before, 5 of 8 first
        texts = [r.text for r in memory.history("s1")]
        assert texts == ["The train to Porto leaves at nine.", "Noted: nine o'clock."]
    finally:
        memory.close()


def test_two_memories_starting_one_session_at_once_agree_on_its_home(
    tmp_path: Path, embedder: Any
) -> None:
    memories = [
        ContextMemory(path=tmp_path / "db", embedder=embedder, write_behind=False) for _ in range(2)
    ]
    try:
        for round_ in range(4):
            session = f"s{round_}"
            start = threading.Barrier(2)
            errors: list[BaseException] = []

            def write(
                n: int,
                session: str = session,
                start: threading.Barrier = start,
                errors: list[BaseException] = errors,
            ) -> None:
                try:
                    start.wait()
                    memories[n].add_messages(
                        session,
                        [{"role": "user", "text": f"writer {n} line {k}"} for k in range(3)],
                        user_id=f"u{n}",
                    )
                except BaseException as exc:  # noqa: BLE001 - reported below
                    errors.append(exc)

            threads = [threading.Thread(target=write, args=(n,)) for n in range(2)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            assert errors == []
            for memory in memories:
                texts = sorted(r.text for r in memory.history(session))
                assert texts == sorted(f"writer {n} line {k}" for n in range(2) for k in range(3))
    finally:
        for memory in memories:
            memory.close()


def test_a_users_message_in_another_users_session_is_still_noted(
    tmp_path: Path, embedder: Any
) -> None:
    memory = ContextMemory(path=tmp_path / "db", embedder=embedder, write_behind=False)
    try:
        memory.add_message("theirs", "user", "Welcome to the shared flat chat.", user_id="u2")
        memory.add_message("mine", "user", "My own notes.", user_id="u1")
        memory.add_message("theirs", "user", "The spare key is under the mat.", user_id="u1")
        memory.add_message("theirs", "user", "And the bike is in the shed.", user_id="u1")
        store = memory.store
        assert store._sessions.elsewhere(memory.namespace, "u1")  # noqa: SLF001
        listed = store.list_sessions(namespace=memory.namespace, user_id="u1")
        assert sorted(listed) == ["mine", "theirs"]
        memory.delete_user("u1")
        assert [r.text for r in memory.history("theirs")] == ["Welcome to the shared flat chat."]
        assert memory.history("mine") == []
        assert store.list_sessions(namespace=memory.namespace, user_id="u1") == []
    finally:
        memory.close()
