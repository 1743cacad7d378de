"""``ctxbudget ingest``: chat logs (JSON, JSON Lines) and text documents into the store.

And ``ctxbudget index-entities``: the entities of documents stored already, indexed for entity
memory (`ContextMemory.index_document_entities`). The input schema is documented in
``ctxbudget ingest --help`` (`ctxbudget.cli.epilogs.INGEST`); keep the two together.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

from ctxbudget.cli.chat_log import read_chat_log, refuse_other_users
from ctxbudget.cli.options import UsageError, open_memory
from ctxbudget.cli.progress import ProgressEmbedder
from ctxbudget.errors import CtxBudgetError, StoreInputError
from ctxbudget.store.records import require_name

__all__ = ["index_entities", "ingest"]


def ingest(args: argparse.Namespace) -> int:
    """``ctxbudget ingest FILE``: store the messages of a JSON or JSON Lines file."""
    path = Path(args.file)
    _check_file(path)
    suffix = path.suffix.lower()
    stem, name = _valid(path.stem), _valid(path.name)
    document = suffix in (".txt", ".md", ".markdown", ".rst")
    _check_names(path, args, document=document)
    # The file is read and checked before the store is opened: a bad file leaves no new store.
    if document:
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
    # Every message of every session is checked before a store is opened (or created): a bad
    # file stores nothing (not the sessions before the bad one) and leaves the folder as it was.
    log = read_chat_log(path, text, session=args.session, user=args.user, namespace=args.namespace)
    memory = open_memory(args)
    refuse_other_users(memory, log, path)
    records = log.records
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
        f"stored {_count(len(records), 'message')} in {_count(len(log.sessions), 'session')} "
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


def _check_names(path: Path, args: argparse.Namespace, *, document: bool) -> None:
    """``--namespace``, ``--user`` and ``--collection`` (a document's) as the core checks them."""
    names = [("--namespace", args.namespace)]
    if args.user is not None:
        names.append(("--user", args.user))
    if document:
        names.append(("--collection", args.collection))
    for option, value in names:
        try:
            require_name(option, value)
        except StoreInputError as exc:
            msg = f"{path}: {exc}; nothing was stored"
            raise UsageError(msg) from exc


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
