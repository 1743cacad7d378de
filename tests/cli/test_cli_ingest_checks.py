"""``ctxbudget ingest`` given input it must refuse, and the same file for another user.

Every message is checked (the core's own checks, and the file's shape) before a store is
opened: a refused file leaves the folder as it was, byte for byte, and an existing store's
records too. The same file ingested again for another ``--user`` is refused by name (the core
never gives one user's messages to another), with what to do instead. Run in-process.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import error_line, jsonl, run

from ctxbudget.memory.context import ContextMemory

CHAT = [
    {"session": "s1", "role": "user", "text": "My cat is named Miso."},
    {"session": "s1", "role": "assistant", "text": "Miso is a lovely name."},
]


def listing(folder: Path) -> list[tuple[str, int, int]]:
    """Every file and folder under ``folder``: its path, size and modification time."""
    return sorted(
        (p.relative_to(folder).as_posix(), p.stat().st_size, p.stat().st_mtime_ns)
        for p in folder.rglob("*")
    )


def records(folder: Path) -> list[tuple[str, str | None, str | None, str]]:
    with ContextMemory(path=folder) as memory:
        found = memory.store.find(namespace="default")
    return sorted((r.id, r.session_id, r.user_id, r.text) for r in found)


# -- the same file for another user -----------------------------------------------------------


def test_the_same_file_for_another_user_is_refused_by_name(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path, folder = tmp_path / "chat.jsonl", tmp_path / "store"
    path.write_text(jsonl(CHAT), encoding="utf-8")
    assert run(capsys, "ingest", str(path), "--path", str(folder), "--user", "maya")[0] == 0
    before = records(folder)
    assert {user for _, _, user, _ in before} == {"maya"}
    code, out, err = run(capsys, "ingest", str(path), "--path", str(folder), "--user", "sam")
    line = error_line(err)
    assert (code, out) == (2, "")
    assert "session 's1'" in line
    assert "stored already for user 'maya', not for user 'sam'" in line
    assert "nothing was stored" in line
    assert "--session" in line
    assert "--namespace" in line
    assert records(folder) == before  # maya's messages are hers still, unchanged
    # Maya's own file again is the same write: nothing stored twice, nothing refused.
    assert run(capsys, "ingest", str(path), "--path", str(folder), "--user", "maya")[0] == 0
    assert records(folder) == before


def test_the_same_file_without_a_user_is_refused_too(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path, folder = tmp_path / "chat.jsonl", tmp_path / "store"
    path.write_text(jsonl(CHAT), encoding="utf-8")
    assert run(capsys, "ingest", str(path), "--path", str(folder))[0] == 0
    before = records(folder)
    code, _, err = run(capsys, "ingest", str(path), "--path", str(folder), "--user", "sam")
    assert code == 2
    assert "stored already for no user, not for user 'sam'" in error_line(err)
    assert records(folder) == before


def test_another_session_stores_the_copy_for_the_other_user(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # What the error says to do works: messages without a session go to --session.
    path, folder = tmp_path / "chat.jsonl", tmp_path / "store"
    path.write_text(jsonl([{k: v for k, v in m.items() if k != "session"} for m in CHAT]))
    for user, session in (("maya", "maya-1"), ("sam", "sam-1")):
        code, _, err = run(
            capsys, "ingest", str(path), "--path", str(folder), "--user", user, "--session", session
        )
        assert code == 0, err
    found = records(folder)
    assert sorted({(s, u) for _, s, u, _ in found}) == [("maya-1", "maya"), ("sam-1", "sam")]
    assert len(found) == 4


# -- a refused file leaves the folder as it was -----------------------------------------------

REFUSED = [
    ('{"session": "s1", "role": "narrator", "text": "Once upon a time"}', "role must be one of"),
    ('{"session": "s1", "role": "user", "text": "x", "timestamp": NaN}', "finite"),
    ('{"session": "s1", "role": "user", "text": "x", "timestamp": Infinity}', "finite"),
    ('{"session": "s1", "role": "user", "text": "x", "metadata": {"a": NaN}}', "not finite"),
    ('{"session": "s1", "role": "user", "text": "x\\ud800y"}', "lone surrogate"),
    ('{"session": "s\\udc00", "role": "user", "text": "x"}', "session_id holds a lone surrogate"),
    ('{"session": "s1", "role": "user", "text": "   "}', "empty text"),
    ('{"session": "s1", "role": "user", "text": 5}', "text must be a str"),
    ('{"session": {}, "role": "user", "text": "x"}', "'session' must be a string"),
    ('{"session": ["s1"], "role": "user", "text": "x"}', "'session' must be a string"),
    ('{"session": true, "role": "user", "text": "x"}', "'session' must be a string"),
]


@pytest.mark.parametrize(("line", "needle"), REFUSED)
def test_a_message_the_core_refuses_creates_no_store(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, line: str, needle: str
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(jsonl(CHAT) + line + "\n", encoding="utf-8")
    folder = tmp_path / "new-store"
    code, out, err = run(capsys, "ingest", str(path), "--path", str(folder), "--session", "d")
    assert (code, out) == (2, "")
    message = error_line(err)
    assert "bad.jsonl:3" in message
    assert needle in message
    assert not folder.exists()


@pytest.mark.parametrize(("line", "needle"), REFUSED[:2])
def test_a_message_the_core_refuses_leaves_a_store_as_it_was(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, line: str, needle: str
) -> None:
    folder = tmp_path / "store"
    good = tmp_path / "good.jsonl"
    good.write_text(jsonl(CHAT[:1]), encoding="utf-8")
    assert run(capsys, "ingest", str(good), "--path", str(folder))[0] == 0
    stored = records(folder)
    before = listing(folder)  # after reading: a store opened to read may touch its files
    bad = tmp_path / "bad.jsonl"
    bad.write_text(jsonl(CHAT[1:]) + line + "\n", encoding="utf-8")
    code, _, err = run(capsys, "ingest", str(bad), "--path", str(folder))
    assert code == 2
    assert needle in error_line(err)
    assert listing(folder) == before
    assert records(folder) == stored


def test_an_id_given_twice_in_a_session_names_both_lines(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "dup.jsonl"
    path.write_text(jsonl([{**CHAT[0], "id": "m1"}, {**CHAT[1], "id": "m1"}]), encoding="utf-8")
    folder = tmp_path / "store"
    code, _, err = run(capsys, "ingest", str(path), "--path", str(folder))
    line = error_line(err)
    assert code == 2
    assert "dup.jsonl:2: session 's1': id 'm1' is given twice (first at " in line
    assert "dup.jsonl:1)" in line
    assert not folder.exists()


def test_a_message_under_sessions_that_names_another_session_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "chat.json"
    path.write_text(json.dumps({"sessions": {"s1": [{**CHAT[0], "session": "s2"}]}}))
    code, _, err = run(capsys, "ingest", str(path), "--path", str(tmp_path / "store"))
    assert code == 2
    assert "sessions.s1[0]: the message says session 's2'" in error_line(err)
    assert not (tmp_path / "store").exists()


def test_a_whole_number_session_is_a_session(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # 0 is a session id, not "no session" (it went to --session, as if it were missing).
    path, folder = tmp_path / "chat.jsonl", tmp_path / "store"
    path.write_text(jsonl([{"session": 0, "role": "user", "text": "hello"}]), encoding="utf-8")
    code, _, err = run(capsys, "ingest", str(path), "--path", str(folder), "--session", "d")
    assert code == 0, err
    assert [s for _, s, _, _ in records(folder)] == ["0"]


# -- a file with no messages ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("empty.jsonl", ""),
        ("blank.jsonl", "\n  \n\n"),
        ("empty.json", ""),
        ("blank.json", " \n"),
        ("list.json", "[]"),
        ("messages.json", '{"messages": []}'),
        ("sessions.json", '{"sessions": {}}'),
        ("sessions-empty.json", '{"sessions": {"s1": []}}'),
    ],
)
def test_a_file_with_no_messages_is_refused_and_creates_no_store(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str, text: str
) -> None:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    folder = tmp_path / "store"
    code, out, err = run(capsys, "ingest", str(path), "--path", str(folder), "--session", "s")
    assert (code, out) == (2, "")
    assert f"{name}: the file holds no messages; nothing was stored" in error_line(err)
    assert not folder.exists()


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('{"messages": "hello"}', "expected a list of messages"),
        ('{"sessions": [1, 2]}', "expected a list of messages"),
        ('"hello"', "expected a list of messages"),
        ("42", "expected a list of messages"),
        ('{"sessions": {"s1": {"role": "user"}}}', "sessions.s1: expected a list of messages"),
        ('[{"session": "s1", "text": "no role"}]', "item 0: expected an object with 'role'"),
        ('[{"session": "s1", "role": 3, "text": "x"}]', "item 0: expected an object with 'role'"),
    ],
)
def test_valid_json_of_another_shape_is_one_error_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, needle: str
) -> None:
    path = tmp_path / "chat.json"
    path.write_text(text, encoding="utf-8")
    folder = tmp_path / "store"
    code, _, err = run(capsys, "ingest", str(path), "--path", str(folder))
    assert code == 2
    assert needle in error_line(err)
    assert not folder.exists()


@pytest.mark.parametrize(
    ("name", "option", "needle"),
    [
        ("chat.jsonl", ["--namespace", ""], "--namespace must be a non-empty str"),
        ("notes.md", ["--namespace", ""], "--namespace must be a non-empty str"),
        ("notes.md", ["--collection", ""], "--collection must be a non-empty str"),
        ("chat.jsonl", ["--user", ""], "--user must be a non-empty str"),
        ("chat.jsonl", ["--user", "\udc80"], "--user holds a lone surrogate"),
    ],
)
def test_a_bad_namespace_user_or_collection_creates_no_store(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str, option: list[str], needle: str
) -> None:
    path = tmp_path / name
    path.write_text(jsonl(CHAT) if name.endswith(".jsonl") else "# Notes\n", encoding="utf-8")
    folder = tmp_path / "store"
    code, _, err = run(capsys, "ingest", str(path), "--path", str(folder), *option)
    assert code == 2
    assert needle in error_line(err)
    assert not folder.exists()
