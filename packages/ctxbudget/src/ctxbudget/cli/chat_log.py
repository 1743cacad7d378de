"""A chat log file (JSON, JSON Lines) read for ``ctxbudget ingest``: every message checked.

`read_chat_log` reads the file and makes the record of every message, with every check the
core makes (`ctxbudget.memory.writing.message_records`, `ctxbudget.store.writes.check_batch`),
before any store is opened: a refused file leaves the folder as it was. `refuse_other_users`
then refuses, by name, messages a store holds already for another user (the same file
ingested again with another ``--user``): one user's messages are never given to another.

The input schema is documented in ``ctxbudget ingest --help`` (`ctxbudget.cli.epilogs.INGEST`)
and docs/quickstart.md, "The command"; keep the three together.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ctxbudget.cli.options import UsageError, whole_number
from ctxbudget.errors import StoreInputError
from ctxbudget.memory.policy.config import MemoryConfig
from ctxbudget.memory.writing.message_records import message_record
from ctxbudget.store.records import Record, require_name
from ctxbudget.store.validate import same_write
from ctxbudget.store.writes import check_batch

__all__ = ["ChatLog", "message_id", "read_chat_log", "refuse_other_users"]

_UNSTORED = "(nothing of this session, nor of any other in the file, was stored)"


@dataclasses.dataclass(frozen=True, slots=True)
class ChatLog:
    """The checked records of a chat log, in the file's order within each session.

    Attributes:
        records: every message's record (none stored yet).
        sessions: the sessions they belong to, in the order first seen.
    """

    records: list[Record]
    sessions: list[str]


def read_chat_log(
    path: Path, text: str, *, session: str | None, user: str | None, namespace: str
) -> ChatLog:
    """The records of the messages in ``text`` (the file at ``path``), every one checked.

    ``session``: the session of messages that name none (``--session``); ``user``: the user of
    every message (``--user``; else each message's ``user_id``).

    Raises:
        UsageError: the first thing wrong, by line (.jsonl) or item, and that nothing was
            stored; a file with no message at all too.
    """
    sessions: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for where, message in _messages(path, text):
        name = _session_of(where, message, session)
        if not isinstance(message.get("role"), str):
            msg = f"{where}: expected an object with 'role' and 'text' (or 'content')"
            raise UsageError(msg)
        sessions.setdefault(name, []).append((where, message))
    if not sessions:
        msg = f"{path}: the file holds no messages; nothing was stored"
        raise UsageError(msg)
    file_id = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    config = MemoryConfig()  # the command's memory has the default settings
    records: list[Record] = []
    for name, entries in sessions.items():
        seen: dict[str, str] = {}  # a given id: where it was first
        for index, (where, message) in enumerate(entries):
            if message.get("id") is None or message.get("id") == "":
                # "" is no id (the core's `given_id` too): the file's own, not a random one,
                # so that ingesting the file again stores nothing twice.
                message["id"] = message_id(file_id, name, index)
            try:
                record = message_record(
                    name, index, message, user, namespace=namespace, config=config
                )
                check_batch([record])
            except StoreInputError as exc:
                problem = str(exc).replace("record 0 ", f"message {index} ", 1)
                problem = problem.removesuffix("; nothing was written")
                msg = f"{where}: session {name!r}: {problem} {_UNSTORED}"
                raise UsageError(msg) from exc
            if record.id in seen:
                msg = (
                    f"{where}: session {name!r}: id {record.id!r} is given twice (first at "
                    f"{seen[record.id]}); give each message of a session its own id {_UNSTORED}"
                )
                raise UsageError(msg)
            seen[record.id] = where
            records.append(record)
    return ChatLog(records, list(sessions))


def refuse_other_users(memory: Any, log: ChatLog, path: Path) -> None:
    """Refuse the file when ``memory`` holds its messages already for another user.

    The ids of messages are unique within their session, so the same file ingested again
    with another ``--user`` (or with one after none) gives the ids stored for the first: the
    store would refuse "other content". Said here for what it is: nothing is re-assigned, and
    nothing of the first user's changes.

    Raises:
        UsageError: the session, both users, the ids and what to do instead.
    """
    memory.flush()  # every message acknowledged before is where `get` reads it
    by_session: dict[str, list[Record]] = {}
    for record in log.records:
        by_session.setdefault(record.session_id or "", []).append(record)
    for session, records in by_session.items():
        found = memory.store.get(
            [r.id for r in records], namespace=memory.namespace, session_id=session
        )
        stored = {r.id: r for r in found}
        clashes = [
            (record, old)
            for record in records
            if (old := stored.get(record.id)) is not None
            and not same_write(record, old)
            and same_write(dataclasses.replace(record, user_id=old.user_id), old)
        ]
        if not clashes:
            continue
        record, old = clashes[0]
        copy = "without a user" if record.user_id is None else f"for {_who(record.user_id)}"
        ids = [r.id for r, _ in clashes[:3]] + (["..."] if len(clashes) > 3 else [])
        msg = (
            f"{path}: session {session!r}: {len(clashes)} of the file's messages are stored "
            f"already for {_who(old.user_id)}, not for {_who(record.user_id)} (ids {ids}); a "
            "user's messages are never given to another, so nothing was stored. To store a "
            f"copy {copy}, give it a session of its own (--session NAME "
            "for messages without a 'session' field, or other session ids in the file), or "
            "another --namespace or --path"
        )
        raise UsageError(msg)


def message_id(file_id: str, session: str, index: int) -> str:
    """The id of a message the file gives none: the same each time the same file is ingested.

    ``"<session>:<hex>"``, the hex the first 16 of the SHA-256 of the file's content (its own
    SHA-256), the session and the message's place in it: ingesting a file again (after Ctrl+C,
    or by mistake) stores nothing twice, and no two different files share an id.
    """
    key = "\0".join((file_id, session, str(index))).encode("utf-8", "surrogatepass")
    return f"{session}:{hashlib.sha256(key).hexdigest()[:16]}"


def _who(user: str | None) -> str:
    return "no user" if user is None else f"user {user!r}"


def _session_of(where: str, message: dict[str, Any], default: str | None) -> str:
    """The message's session (``session``, else ``session_id``, else ``default``), checked.

    A whole number is a session id as its digits (0 too); anything else that is not text is
    refused rather than written as Python shows it.
    """
    given = message.pop("session", None)
    alias = message.pop("session_id", None)
    if given is None or given == "":
        given = alias
    if given is None or given == "":
        given = default
    if given is None or given == "":
        msg = f"{where}: the message has no 'session' and no --session was given"
        raise UsageError(msg)
    if isinstance(given, int) and not isinstance(given, bool):
        given = str(given)
    if not isinstance(given, str):
        msg = f"{where}: 'session' must be a string (or a whole number), got {type(given).__name__}"
        raise UsageError(msg)
    try:
        return require_name("session_id", given)  # the core's words for it (conformance suite)
    except StoreInputError as exc:
        msg = f"{where}: {exc}"
        raise UsageError(msg) from exc


def _json(text: str, where: str, *, lines: bool) -> Any:
    # Whole numbers of any length are read (Python's own int() refuses over 4,300 digits with a
    # ValueError), so that the core's checks judge them: a 5,000-digit timestamp is refused as
    # the core refuses it, naming the message, not as unreadable JSON.
    try:
        return json.loads(text, parse_int=whole_number, object_pairs_hook=_one_value_per_key)
    except json.JSONDecodeError as exc:
        line = f":{exc.lineno}" if lines else ""
        said = exc.msg.removesuffix(" at")  # "Unterminated string starting at" (a position)
        msg = f"{where}{line}: not valid JSON ({said} at column {exc.colno})"
        raise UsageError(msg) from exc
    except _DuplicateKeyError as exc:
        msg = (
            f"{where}: the key {exc.key!r} is given twice in one object; JSON readers keep "
            "only one of the two values, so give it once; nothing was stored"
        )
        raise UsageError(msg) from exc
    except UsageError as exc:  # a number of more digits than anyone writes
        msg = f"{where}: {exc}"
        raise UsageError(msg) from exc
    except ValueError as exc:  # anything else Python's json cannot make a value of
        msg = f"{where}: not readable as JSON ({exc}); nothing was stored"
        raise UsageError(msg) from exc
    except RecursionError as exc:
        msg = f"{where}: JSON nested too deeply for Python to read; flatten it"
        raise UsageError(msg) from exc


class _DuplicateKeyError(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _one_value_per_key(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object of ``pairs``; a key given twice is refused rather than one value lost.

    ``{"text": "a", "text": "b"}`` would store "b" only, and ``{"sessions": {"s": [...],
    "s": [...]}}`` the second session's messages only, with nothing said.
    """
    value = dict(pairs)
    if len(value) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKeyError(key)
            seen.add(key)
    return value


def _messages(path: Path, text: str) -> Iterator[tuple[str, dict[str, Any]]]:
    if path.suffix.lower() == ".jsonl":
        # Lines end at "\n" only: str.splitlines would also cut at U+2028 and other breaks
        # that JSON strings may hold as they are.
        for number, line in enumerate(text.split("\n"), start=1):
            if not line.strip():
                continue
            value = _json(line, f"{path}:{number}", lines=False)
            if not isinstance(value, dict):
                msg = (
                    f"{path}:{number}: expected a JSON object per line, got {type(value).__name__}"
                )
                raise UsageError(msg)
            yield f"{path}:{number}", value
        return
    if not text.strip():  # no JSON value at all: said as what it is, not "Expecting value"
        return
    value = _json(text, str(path), lines=True)
    if isinstance(value, dict) and "messages" in value and "sessions" in value:
        msg = (
            f"{path}: both 'messages' and 'sessions' are given; one of them would be left "
            "out: put the messages of 'messages' under 'sessions' (or in a file of their own)"
        )
        raise UsageError(msg)
    if isinstance(value, dict) and isinstance(value.get("messages"), list):
        value = value["messages"]
    if isinstance(value, dict) and isinstance(value.get("sessions"), dict):
        for session, messages in value["sessions"].items():
            if not isinstance(messages, list):
                msg = f"{path}: sessions.{session}: expected a list of messages"
                raise UsageError(msg)
            for index, message in enumerate(messages):
                where = f"{path}: sessions.{session}[{index}]"
                if not isinstance(message, dict):
                    msg = f"{where}: expected an object"
                    raise UsageError(msg)
                own = message.get("session", message.get("session_id"))
                if own is not None and own not in ("", session):
                    msg = (
                        f"{where}: the message says session {own!r}; leave 'session' out of "
                        "the messages under 'sessions' (their key is their session)"
                    )
                    raise UsageError(msg)
                yield where, {**message, "session": session}
        return
    if not isinstance(value, list):
        msg = (
            f"{path}: expected a list of messages, {{'messages': [...]}} or "
            "{'sessions': {id: [...]}}"
        )
        raise UsageError(msg)
    for index, message in enumerate(value):
        if not isinstance(message, dict):
            msg = f"{path}: item {index}: expected an object, got {type(message).__name__}"
            raise UsageError(msg)
        yield f"{path}: item {index}", message
