"""The door ``ctxbudget``, the command line: ``ingest`` to store, ``assemble --json`` to send.

Run in-process (``ctxbudget.cli.main.main`` with argv, stdout and stderr captured), so a call
costs no interpreter start and its spans reach the suite's exporter; each call opens and
closes its own store, as the command does. What the caller receives is the document's
``messages``; the report is the rest of the document (``included`` ids, ``tokens_used``).

Values are passed as a user writes them: a flag's value as text (``--budget 200``), a chat
log's fields as JSON in an ``ingest`` file. A command line has no bool and no numeric string
apart from a number, and no ``k``: those cases are `Inexpressible`. The command's error is
one ``ctxbudget: error:`` line and exit status 2; it does not name the error's class.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import math
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from numbers import Integral
from pathlib import Path
from typing import Any

from ctxbudget.cli.main import main

from .base import Inexpressible, Place, Received, Refusal, Turn
from .common import (
    SPANS,
    Registry,
    assembly_tokens,
    count_sent,
    identify,
    refusal_of,
    texts_of,
)

__all__ = ["Cli", "chosen_of", "deep_json", "digits", "document_received", "make"]

BAD_SESSION = "bad-values"
PREFIX = "ctxbudget: error: "


@contextlib.contextmanager
def digits() -> Iterator[None]:
    """Ints of any length may be written as text (Python refuses over 4,300 digits)."""
    before = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        yield
    finally:
        sys.set_int_max_str_digits(before)


def deep_json(value: object) -> str | None:
    """JSON for a chain of single lists (``[[[...]]]``), which json.dumps cannot nest so deep."""
    depth = 0
    while isinstance(value, list):
        depth += 1
        if not value:
            return "[" * depth + "]" * depth
        if len(value) != 1:
            return None
        value = value[0]
    return None


def to_json(value: object) -> str:
    """JSON as a client would write it: surrogates as escapes, ints of any length, deep lists."""
    deep = deep_json(value)
    if deep is not None and deep.count("[") > 100:
        return deep
    if isinstance(value, Integral) and not isinstance(value, bool):
        value = int(value)
    with digits():
        return json.dumps(value, ensure_ascii=True)


def chosen_of(document: Mapping[str, Any], known: Mapping[str, str]) -> list[tuple[str, str]]:
    """(caller id, stored text) of each included item a caller can know, from a document."""
    out = []
    for entry in document["included"]:
        caller_id = str(entry.get("record_id", entry["id"]))
        if "record_id" not in entry and caller_id.startswith("ctxbudget:"):
            continue  # ctxbudget's own items (system prompt, query)
        out.append((caller_id, known.get(caller_id, "")))
    return out


def document_received(
    document: Mapping[str, Any], known: Mapping[str, str], span: int | None = None
) -> Received:
    """What a caller of ``assemble --json`` (or the MCP ``context`` tool) received."""
    texts = texts_of(document["messages"])
    return Received(
        got=identify(texts, known),
        chosen=chosen_of(document, known),
        available=document["tokens_available"],
        sent_tokens=count_sent(document["messages"]),
        report_tokens=document["tokens_used"],
        span_tokens=span,
        report=document,
        texts=texts,
        messages=list(document["messages"]),
    )


class Cli:
    """``ctxbudget ingest`` and ``ctxbudget assemble --json``, in-process."""

    name = "cli"
    can = frozenset({"add", "send", "report", "span", "removal", "bad"})
    takes = frozenset({"budget", "query", "text", "timestamp", "session_id", "user_id"})

    def __init__(self, place: Place) -> None:
        self.options = place.cli_options()
        if place.folder is not None:
            os.makedirs(place.folder, exist_ok=True)  # assemble reads a store folder only
        self.registry = Registry()
        self._files = Path(tempfile.mkdtemp(prefix="ctxbudget-cli-driver-"))
        self._names = itertools.count()

    def run(self, *argv: str) -> tuple[int, str, str]:
        """``ctxbudget <place options> argv``: the exit status, stdout and stderr."""
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main([*self.options, *argv])
            except SystemExit as exc:  # argparse's own refusals
                code = exc.code if isinstance(exc.code, int) else 2
        return code, out.getvalue(), err.getvalue()

    def _ingest(self, lines: Sequence[str], user: str | None) -> tuple[int, str, str]:
        path = self._files / f"log-{next(self._names)}.jsonl"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return self.run("ingest", str(path), *(["--user", user] if user else []))

    def add(self, session: str, user: str, turns: Sequence[Turn]) -> None:
        lines = [
            json.dumps({"session": session, "id": t.id, "role": t.role, "text": t.text})
            for t in turns
        ]
        code, _, err = self._ingest(lines, user)
        if code != 0:
            msg = f"ctxbudget ingest failed ({code}): {err}"
            raise AssertionError(msg)
        for turn in turns:
            self.registry.note(turn.id, turn.text)

    def _assemble(self, session: str, user: str | None, query: str, budget: str) -> Any:
        argv = ["assemble", query, "--session", session, f"--budget={budget}", "--json"]
        return self.run(*argv, *(["--user", user] if user else []))

    def send(self, session: str, user: str, query: str, budget: int) -> Received:
        SPANS.clear()
        code, out, err = self._assemble(session, user, query, str(budget))
        if code != 0:
            msg = f"ctxbudget assemble failed ({code}): {err}"
            raise AssertionError(msg)
        return document_received(json.loads(out), self.registry.texts, assembly_tokens())

    def bad(self, argument: str, value: object) -> Refusal | None:
        try:
            return self._bad(argument, value)
        except Inexpressible:
            raise
        except Exception as exc:  # noqa: BLE001 - escaped the command: a traceback for the user
            return refusal_of(exc)

    def _bad(self, argument: str, value: object) -> Refusal | None:
        if argument == "budget":
            code, _, err = self._assemble(BAD_SESSION, None, "hello", _flag(value))
        elif argument == "query":
            if not isinstance(value, str):
                msg = "a command line's query is text"
                raise Inexpressible(msg)
            code, _, err = self._assemble(BAD_SESSION, None, value, "500")
        elif argument == "k":
            msg = "the command line has no k"
            raise Inexpressible(msg)
        elif argument == "user_id":
            if not isinstance(value, str):
                msg = "--user is text"
                raise Inexpressible(msg)
            line = json.dumps({"session": BAD_SESSION, "role": "user", "text": "hello"})
            code, _, err = self._ingest([line], value)
        elif argument in ("text", "timestamp", "session_id"):
            if deep_json(value) is not None:
                msg = "Python's json reads no file nested this deep: the file is refused, unread"
                raise Inexpressible(msg)
            field = {"text": "text", "timestamp": "timestamp", "session_id": "session"}[argument]
            entry = {"session": BAD_SESSION, "role": "user", "text": "hello"}
            entry.pop(field, None)
            head = json.dumps({**entry, "id": f"bad-{next(self._names)}"})[:-1]
            code, _, err = self._ingest([f'{head}, "{field}": {to_json(value)}}}'], None)
        else:  # an unknown argument: an unknown flag
            code, _, err = self.run(
                "assemble", "hello", "--session", BAD_SESSION, f"--{argument}={_flag(value)}"
            )
        if code == 0:
            return None
        line = err.strip().splitlines()[-1] if err.strip() else ""
        clear = code == 2 and line.startswith(PREFIX) and "Traceback" not in err
        return Refusal(f"exit {code}", line.removeprefix(PREFIX), clear)

    def close(self) -> None:
        shutil.rmtree(self._files, ignore_errors=True)

    def after_close(self) -> BaseException | None:
        return None  # each command opens and closes its own store: nothing stays open


def _flag(value: object) -> str:
    """A flag's value as a user types it."""
    if isinstance(value, bool) or value is None:
        msg = "a command line has no bool or None: every flag is text"
        raise Inexpressible(msg)
    if isinstance(value, str):
        msg = "every flag is text: '200' is how a command line writes the number 200"
        raise Inexpressible(msg)
    if isinstance(value, Integral):
        with digits():
            return str(int(value))
    if isinstance(value, float):
        return "nan" if math.isnan(value) else repr(value)
    msg = f"a command line cannot pass a {type(value).__name__}"
    raise Inexpressible(msg)


def make(place: Place) -> Cli:
    """The driver of the ``ctxbudget`` command line on ``place``."""
    return Cli(place)
