r"""The client's stdin, relayed to the MCP SDK: serving stops on a signal, every line is answered.

The SDK reads stdin with a blocking read on a worker thread, which nothing in the process can
interrupt: a server told to stop (SIGTERM, Ctrl+C) while its client keeps stdin open would
wait for the client. `relayed_stdin` points file descriptor 0 at a pipe fed by a relay thread
from the real stdin; `stop` ends the relay and closes the pipe, so the SDK reads the end of
its input and stops as it does when a client leaves.

The SDK stops at the end of its input without waiting for the requests it is still answering:
their work is done (what they stored is kept) but their replies were dropped (about 45 of 100
writes sent back to back, then SIGTERM or stdin closed). So before it closes the pipe, the
relay waits (at most `DRAIN` seconds) until the SDK has read every line passed on, answers
no request (`CALLS`, counted by `ctxbudget.mcp.server` around each one) and every request
passed on has its reply sent (`ctxbudget.mcp.awaiting`: one read but not yet dispatched is in
no handler), for `_QUIET` checks in a row: the replies of requests in flight are sent.

The relay also passes each line on so that the SDK can read it. Its JSON parser refuses some
valid JSON: a lone surrogate escape (``"\\ud800"``), an integer of more than 4,300 digits,
nesting deeper than 200; such a line was dropped without a reply (the client waited forever).
The relay rewrites each such value as ``{TAG: "<its JSON text>"}``, which `restore` turns back
(`ctxbudget.mcp.server` does, before the tool runs), so the value reaches the core's checks and
is refused with the message any caller gets. `TAG` is drawn when the process starts: a client
cannot write one, so only what the relay rewrote is ever turned back (a client's own
``{"$ctxbudget.json": "150"}`` stays an object, refused as one). An object key holding a lone
surrogate becomes ``TAG + ":" + <its JSON text>``, turned back the same way (the call is then
refused for an argument it does not have). A line that is not valid UTF-8 is read with each
invalid byte as a lone surrogate (Python's ``surrogateescape``), so the text holding it is
refused as any lone surrogate is, rather than stored with the byte replaced.

A line the SDK would still drop without a reply (not JSON, a batch, ``"jsonrpc": "1.0"``, an id
it cannot read) is not passed on: the ``refuse`` hook of `relayed_stdin` answers it with a
JSON-RPC error (`ctxbudget.mcp.malformed`, written by `ctxbudget.mcp.stdout`).
"""

from __future__ import annotations

import array
import fcntl
import json
import os
import secrets
import select
import termios
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from decimal import Decimal
from typing import Any

from pydantic_core import from_json

from ctxbudget.mcp.awaiting import AWAITING
from ctxbudget.store.records import first_surrogate

__all__ = [
    "CALLS",
    "DRAIN",
    "TAG",
    "Calls",
    "Refuse",
    "ready",
    "relayed",
    "relayed_stdin",
    "restore",
]

#: The key of a value the relay rewrote (`restore` reads it back): new in each process.
TAG = f"$ctxbudget.json.{secrets.token_hex(8)}"
_KEY_TAG = f"{TAG}:"  # the start of an object key the relay rewrote

#: The longest the relay waits for the requests in flight before it ends the SDK's input.
DRAIN = 30.0
_QUIET = 3  # checks in a row, `_TICK` apart, that find nothing unread and nothing answering
_TICK = 0.02


class Calls:
    """How many requests the server is answering, thread-safe (see the module docstring)."""

    def __init__(self) -> None:
        self._running = 0
        self._lock = threading.Lock()

    def start(self) -> None:
        """A request is being answered."""
        with self._lock:
            self._running += 1

    def end(self) -> None:
        """A request was answered."""
        with self._lock:
            self._running -= 1

    @property
    def running(self) -> int:
        """Requests being answered now."""
        return self._running


#: The requests this process's server is answering.
CALLS = Calls()

#: Called with each line as the SDK reads it: True when it answered the line itself (a line the
#: SDK would drop without a reply: `ctxbudget.mcp.malformed`), which is then not passed on.
Refuse = Callable[[bytes], bool]

_MAX_DIGITS = 4000  # below Python's and the SDK parser's 4,300-digit limit
_MAX_DEPTH = 64  # a line's arguments sit a few levels deep; the SDK parser stops at 200


@contextmanager
def relayed_stdin(refuse: Refuse | None = None) -> Iterator[Callable[[], None]]:
    """File descriptor 0 fed by a relay of the real stdin while inside; yields ``stop``.

    ``stop()`` (safe in a signal handler) ends the relay: the SDK reads the end of its input.
    ``refuse`` sees each line first (`Refuse`). Where ``select.poll`` or a stdin is missing,
    yields a ``stop`` that does nothing.
    """
    try:
        source = os.dup(0)
    except OSError:  # no stdin at all
        yield _nothing
        return
    if not hasattr(select, "poll"):  # Windows: the SDK reads stdin itself
        os.close(source)
        yield _nothing
        return
    read_end, write_end = os.pipe()
    wake_read, wake_write = os.pipe()
    AWAITING.clear()
    os.dup2(read_end, 0)
    os.close(read_end)
    relay = threading.Thread(
        target=_relay,
        args=(source, write_end, wake_read, refuse),
        name="ctxbudget-mcp-stdin",
        daemon=True,
    )
    relay.start()
    stopped = threading.Event()

    def stop() -> None:
        if not stopped.is_set():
            stopped.set()
            os.write(wake_write, b".")

    try:
        yield stop
    finally:
        stop()
        relay.join()
        os.dup2(source, 0)
        for fd in (source, wake_read, wake_write):
            os.close(fd)


def _nothing() -> None:
    return None


def _relay(source: int, sink: int, wake: int, refuse: Refuse | None) -> None:
    """Copy ``source`` to ``sink`` line by line (each made readable) until EOF or ``wake``."""
    os.set_blocking(sink, False)
    pending = bytearray()
    try:
        while ready(source, wake, select.POLLIN):
            data = os.read(source, 1 << 16)
            pending += data
            end = pending.rfind(b"\n") if data else len(pending) - 1  # at the end: all of it
            if end < 0 and data:
                continue
            lines = bytes(pending[: end + 1]).splitlines(keepends=True)
            del pending[: end + 1]
            passed = (readable(line) for line in lines)
            kept = b"".join(line for line in passed if refuse is None or not refuse(line))
            AWAITING.asked(kept)  # before the SDK can read them (and answer)
            if not _send(sink, kept, wake) or not data:
                return
    except OSError:  # the SDK stopped reading (a broken pipe): nothing more to pass on
        return
    finally:
        _drain(sink)
        os.close(sink)


def _drain(sink: int) -> None:
    """Wait until the SDK has read ``sink`` whole and answers nothing (at most `DRAIN` s)."""
    deadline = time.monotonic() + DRAIN
    quiet = 0
    while quiet < _QUIET and time.monotonic() < deadline:
        idle = _unread(sink) == 0 and CALLS.running <= 0 and AWAITING.outstanding == 0
        quiet = quiet + 1 if idle else 0
        time.sleep(_TICK)


def _unread(fd: int) -> int:
    """Bytes written to the pipe ``fd`` and not read yet (0 when it cannot say)."""
    count = array.array("i", [0])
    try:
        fcntl.ioctl(fd, termios.FIONREAD, count, True)
    except OSError:
        return 0
    return count[0]


def ready(fd: int, wake: int, event: int) -> bool:
    """Wait until ``fd`` has ``event`` (``select.POLLIN``/``POLLOUT``); False if ``wake`` is set."""
    poller = select.poll()
    poller.register(fd, event)
    poller.register(wake, select.POLLIN)
    while True:
        ready = dict(poller.poll())
        if wake in ready:
            return False
        if fd in ready:
            return True


def _send(sink: int, data: bytes, wake: int) -> bool:
    view = memoryview(data)
    while view:
        if not ready(sink, wake, select.POLLOUT):
            return False
        try:
            view = view[os.write(sink, view) :]
        except BlockingIOError:
            continue
    return True


def readable(line: bytes) -> bytes:
    """``line`` as the SDK's JSON parser reads it: unchanged, or with unreadable values tagged."""
    body = line.rstrip(b"\r\n")
    try:
        body.decode("utf-8")
        from_json(body)
    except ValueError:  # UnicodeDecodeError too: the SDK would replace the bytes
        pass
    else:
        return line
    try:
        text = _shallow(body.decode("utf-8", "surrogateescape"))
        value = json.loads(text, parse_int=_parse_int)
    except (ValueError, RecursionError):
        return line  # not JSON at all: the SDK says so
    return json.dumps(_tagged(value, 0)).encode() + b"\n"


def _shallow(text: str) -> str:
    """``text`` (JSON) with each array or object nested deeper than `_MAX_DEPTH` tagged whole.

    A scan, not a parse: no recursion however deep the nesting (10,000 levels is valid JSON).
    """
    if text.count("[") + text.count("{") <= _MAX_DEPTH:
        return text
    out: list[str] = []
    depth, start, done, position, quoted = 0, -1, 0, 0, False
    while position < len(text):
        char = text[position]
        if quoted:
            if char == "\\":
                position += 1
            elif char == '"':
                quoted = False
        elif char == '"':
            quoted = True
        elif char in "[{":
            depth += 1
            if depth == _MAX_DEPTH + 1:
                start = position
        elif char in "]}":
            if depth == _MAX_DEPTH + 1 and start >= 0:
                out += [text[done:start], json.dumps({TAG: text[start : position + 1]})]
                done, start = position + 1, -1
            depth -= 1
        position += 1
    out.append(text[done:])
    return "".join(out)


class _Digits(str):
    """The text of an integer too long to convert (kept as written, for `restore`)."""


def _parse_int(text: str) -> int | _Digits:
    return int(text) if len(text) <= _MAX_DIGITS else _Digits(text)


def _tagged(value: object, depth: int) -> object:
    if isinstance(value, _Digits):
        return {TAG: str(value)}
    if isinstance(value, str):
        return {TAG: json.dumps(value)} if first_surrogate(value) else value
    if isinstance(value, dict) and len(value) == 1 and TAG in value:
        return value  # tagged already (by `_shallow`)
    if isinstance(value, list | dict) and depth >= _MAX_DEPTH:
        try:
            return {TAG: json.dumps(value, default=str)}
        except RecursionError:
            return {TAG: "null"}
    if isinstance(value, list):
        return [_tagged(item, depth + 1) for item in value]
    if isinstance(value, dict):
        return {_key(key): _tagged(item, depth + 1) for key, item in value.items()}
    return value


def _key(key: str) -> str:
    return _KEY_TAG + json.dumps(key) if first_surrogate(key) else key


def relayed(arguments: Mapping[str, Any]) -> bool:
    """Whether any argument holds a value the relay rewrote (cheap: a text search)."""
    return any(key.startswith(_KEY_TAG) for key in arguments) or any(
        TAG in str(value) for value in arguments.values() if isinstance(value, dict | list)
    )


def restore(value: Any) -> Any:
    """``value`` with every relayed value (`TAG`) back as the client sent it."""
    if isinstance(value, dict):
        if len(value) == 1 and isinstance(value.get(TAG), str):
            try:
                return _loads(value[TAG])
            except (ValueError, IndexError):
                return value  # not a value the relay wrote: left as sent
        return {_restored_key(key): restore(item) for key, item in value.items()}
    if isinstance(value, list):
        return [restore(item) for item in value]
    return value


def _restored_key(key: object) -> object:
    if isinstance(key, str) and key.startswith(_KEY_TAG):
        try:
            return json.loads(key[len(_KEY_TAG) :])
        except ValueError:
            return key
    return key


def _whole(text: str) -> int:
    return int(Decimal(text))  # a Decimal converts without Python's limit on digits


_KEY = object()  # an object of `_loads` waiting for its next key


def _loads(text: str) -> Any:
    """`json.loads`, without a limit on nesting (a stack, not recursion)."""
    try:
        return json.loads(text, parse_int=_whole)
    except RecursionError:
        pass
    decoder = json.JSONDecoder(parse_int=_whole)
    root: list[Any] = []
    stack: list[list[Any] | dict[Any, Any]] = []
    keys: list[object] = []  # per open object: its pending key, or _KEY

    def put(value: object) -> None:
        if not stack:
            root.append(value)
        elif isinstance(stack[-1], dict):
            stack[-1][keys[-1]] = value
            keys[-1] = _KEY
        else:
            stack[-1].append(value)

    position = 0
    while position < len(text):
        char = text[position]
        if char in " \t\r\n,:":
            position += 1
        elif char in "[{":
            made: list[Any] | dict[Any, Any] = [] if char == "[" else {}
            put(made)
            stack.append(made)
            keys.append(_KEY)
            position += 1
        elif char in "]}":
            stack.pop()
            keys.pop()
            position += 1
        else:
            value, position = decoder.raw_decode(text, position)
            if stack and isinstance(stack[-1], dict) and keys[-1] is _KEY:
                keys[-1] = value
            else:
                put(value)
    (value,) = root
    return value
