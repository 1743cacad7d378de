"""``ctxbudget ingest``: chat logs (JSON, JSON Lines) and text documents into the store.

And ``ctxbudget index-entities``: the entities of documents stored already, indexed for entity
memory (`ContextMemory.index_document_entities`). The input schema is documented in
``ctxbudget ingest --help`` (`ctxbudget.cli.epilogs.INGEST`); keep the two together.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ctxbudget.cli.options import UsageError, open_memory, whole_number
from ctxbudget.cli.progress import ProgressEmbedder
from ctxbudget.errors import CtxBudgetError

__all__ = ["index_entities", "ingest"]


def ingest(args: argparse.Namespace) -> int:
    """``ctxbudget ingest FILE``: store the messages of a JSON or JSON Lines file."""
    path = Path(args.file)
    _check_file(path)
    suffix = path.suffix.lower()
    stem, name = _valid(path.stem), _valid(path.name)
    # The file is read and checked before the store is opened: a bad file leaves no new store.
    if suffix in (".txt", ".md", ".markdown", ".rst"):
        text = _read_text(path)
        if not text.strip():
            msg = f"{path}: the file holds no text; nothing was stored"
            raise UsageError(msg)
        memory = open_memory(args)
        _load_model(memory)
        try:
            ids = memory.add_documents(
                [{"id": stem, "text": text, "source": name}],
                collection=args.collection,
                progress=args.progress,
            )
        except CtxBudgetError as exc:
            msg = f"{path}: {exc}"
            raise UsageError(msg) from exc
        print(f"stored {name} as {_count(len(ids), 'chunk')} in collection {args.collection!r}")
        return 0
    if suffix not in (".json", ".jsonl"):
        msg = f"{path}: unknown file type {suffix or '(none)'}; use .jsonl, .json, .txt or .md"
        raise UsageError(msg)
    text = _read_text(path)
    sessions: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for where, message in list(_messages(path, text)):
        session = message.pop("session", None) or message.pop("session_id", None) or args.session
        if not session:
            msg = f"{where}: the message has no 'session' and no --session was given"
            raise UsageError(msg)
        if "role" not in message or not isinstance(message.get("role"), str):
            msg = f"{where}: expected an object with 'role' and 'text' (or 'content')"
            raise UsageError(msg)
        sessions.setdefault(str(session), []).append((where, message))
    memory = open_memory(args)
    # Every message of every session is checked before the first is written: a bad file
    # stores nothing (not the sessions before the bad one).
    records = []
    file_id = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    for session, entries in sessions.items():
        for index, (where, message) in enumerate(entries):
            if message.get("id") is None:
                message["id"] = _message_id(file_id, session, index)
            try:
                record = memory.writes.message_record(session, index, message, args.user)
                memory.store.check([record])
            except CtxBudgetError as exc:
                problem = str(exc).replace("record 0 ", f"message {index} ", 1)
                msg = (
                    f"{where}: session {session!r}: {problem.removesuffix('; nothing was written')}"
                    " (nothing of this session, nor of any other in the file, was stored)"
                )
                raise UsageError(msg) from exc
            records.append(record)
    if records:
        _load_model(memory)
    try:
        memory.writes.write(records, "message", args.progress)
        memory.flush()  # stored, not only acknowledged, before it says so
    except CtxBudgetError as exc:
        msg = f"{path}: {exc} (nothing of the file was stored)"
        raise UsageError(msg) from exc
    except KeyboardInterrupt:  # Ctrl+C or SIGTERM: main says which, after the store is closed
        print(
            f"ctxbudget: ingest of {name} stopped: the messages stored so far are kept; run the "
            "same command again to store the rest (a message is not stored twice)",
            file=sys.stderr,
        )
        raise
    print(
        f"stored {_count(len(records), 'message')} in {_count(len(sessions), 'session')} "
        f"from {name}"
    )
    return 0


def index_entities(args: argparse.Namespace) -> int:
    """``ctxbudget index-entities``: index the entities of stored document chunks."""
    memory = open_memory(args, read_only=True)
    names = args.collection or None

    def say(collection: str, done: int, total: int) -> None:
        if args.progress:
            print(f"{collection}: {done}/{total} chunks", file=sys.stderr)

    try:
        found = memory.index_document_entities(names, rebuild=args.rebuild, progress=say)
    except CtxBudgetError as exc:
        raise UsageError(str(exc)) from exc
    if args.json:
        print(json.dumps(dataclasses.asdict(found), sort_keys=True))
        return 0
    if not found.chunks:
        which = ", ".join(repr(c) for c in names) if names else "any collection"
        print(f"no document chunks stored in {which} (namespace {args.namespace!r})")
        return 0
    print(
        f"indexed {_count(found.chunks, 'chunk')} of "
        f"{', '.join(repr(c) for c in found.collections)}: {found.naming} of them name "
        f"{_count(found.entities, 'entity', 'entities')}"
    )
    return 0


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else many or one + 's'}"


def _load_model(memory: Any) -> None:
    # The model's load line, if any, before the import's progress bar rather than inside it.
    embedder = memory.store.embedder
    if isinstance(embedder, ProgressEmbedder):
        embedder.load()


def _valid(text: str) -> str:
    """A file name as valid text: bytes that were not UTF-8 (surrogate escapes) become U+FFFD."""
    try:
        raw = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a surrogate no file name decodes to
        raw = text.encode("utf-8", "surrogatepass")
    return raw.decode("utf-8", "replace")


def _check_file(path: Path) -> None:
    """A `UsageError` unless ``path`` is a regular file (a folder or a FIFO is said as one)."""
    if path.is_file():
        return
    if path.is_dir():
        what = "a folder, not a file; give the file itself"
    elif path.exists():  # a FIFO, a socket, a device: nothing ingest can read whole
        what = "not a regular file (a pipe or a device); save the input to a file first"
    else:
        what = "no such file"
    msg = f"{path}: {what}"
    raise UsageError(msg)


def _read_text(path: Path) -> str:
    # "utf-8-sig": a byte order mark (Windows editors write one) is not part of the text.
    try:
        return path.read_text("utf-8-sig")
    except UnicodeDecodeError as exc:
        msg = f"{path}: not UTF-8 text (byte {exc.start}); convert it to UTF-8 first"
        raise UsageError(msg) from exc
    except OSError as exc:
        msg = f"{path}: cannot be read ({exc.strerror or exc})"
        raise UsageError(msg) from exc


def _json(text: str, where: str, *, lines: bool) -> Any:
    # Whole numbers of any length are read (Python's own int() refuses over 4,300 digits with a
    # ValueError), so that the core's checks judge them: a 5,000-digit timestamp is refused as
    # the core refuses it, naming the message, not as unreadable JSON.
    try:
        return json.loads(text, parse_int=whole_number)
    except json.JSONDecodeError as exc:
        line = f":{exc.lineno}" if lines else ""
        msg = f"{where}{line}: not valid JSON ({exc.msg} at column {exc.colno})"
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


def _message_id(file_id: str, session: str, index: int) -> str:
    """The id of a message the file gives none: the same each time the same file is ingested.

    ``"<session>:<hex>"``, the hex from the file's content, the session and the message's place
    in it: ingesting a file again (after Ctrl+C, or by mistake) stores nothing twice, and no two
    different files share an id.
    """
    key = "\0".join((file_id, session, str(index))).encode("utf-8", "surrogatepass")
    return f"{session}:{hashlib.sha256(key).hexdigest()[:16]}"


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
    value = _json(text, str(path), lines=True)
    if isinstance(value, dict) and isinstance(value.get("messages"), list):
        value = value["messages"]
    if isinstance(value, dict) and isinstance(value.get("sessions"), dict):
        for session, messages in value["sessions"].items():
            if not isinstance(messages, list):
                msg = f"{path}: sessions.{session}: expected a list of messages"
                raise UsageError(msg)
            for index, message in enumerate(messages):
                if isinstance(message, dict):
                    yield f"{path}: sessions.{session}[{index}]", {"session": session, **message}
                else:
                    msg = f"{path}: sessions.{session}[{index}]: expected an object"
                    raise UsageError(msg)
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
