"""The client's stdout, shared by the MCP SDK and the stdin relay: whole lines, one at a time.

The SDK writes each reply to stdout itself, in pieces (a large reply is several writes). The
stdin relay (`ctxbudget.mcp.stdio`) answers the lines the SDK would drop without a reply
(`ctxbudget.mcp.malformed`); writing its reply between two pieces of one of the SDK's would
tear both. So while serving, file descriptor 1 is a pipe: the SDK writes into it (it claims
fd 1 as the wire, as it does any stdout), a thread copies it to the client's stdout one whole
line at a time, and `Replies.send` writes the relay's own lines between them, under the same
lock. Nothing but whole JSON-RPC lines reaches the client.

A write waits until the client's stdout takes it (a pipe the client reads): a client that
stops reading stalls replies, as it stalled the SDK before. Leaving `relayed_stdout` points
fd 1 back at the client's stdout and copies what the SDK wrote before it stopped (at most
`DRAIN` seconds for a client that does not read).
"""

from __future__ import annotations

import os
import select
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from ctxbudget.mcp.awaiting import AWAITING
from ctxbudget.mcp.stdio import DRAIN, ready

__all__ = ["Replies", "relayed_stdout"]

_PIECE = getattr(select, "PIPE_BUF", 512)  # written whole once poll says the pipe has room


class Replies:
    """The client's stdout: each line written whole, one writer at a time (thread-safe)."""

    def __init__(self, fd: int, abort: int) -> None:
        self._fd = fd
        self._abort = abort
        self._lock = threading.Lock()

    def send(self, data: bytes) -> bool:
        """Write ``data`` (whole lines) to the client; False once stdout is gone or aborted."""
        with self._lock:
            view = memoryview(data)
            while view:
                if not ready(self._fd, self._abort, select.POLLOUT):
                    return False
                try:
                    view = view[os.write(self._fd, view[:_PIECE]) :]
                except OSError:  # the client closed its end
                    return False
            return True


@contextmanager
def relayed_stdout() -> Iterator[Replies | None]:
    """File descriptor 1 a pipe copied line by line to the client's stdout while inside.

    Yields the `Replies` that write to the client between those lines; None (and fd 1 left
    as it is) where ``select.poll`` or a stdout is missing.
    """
    try:
        target = os.dup(1)
    except OSError:  # no stdout at all
        yield None
        return
    if not hasattr(select, "poll"):  # Windows: the stdin relay does not run either
        os.close(target)
        yield None
        return
    read_end, write_end = os.pipe()
    finish_read, finish_write = os.pipe()
    abort_read, abort_write = os.pipe()
    os.dup2(write_end, 1)
    os.close(write_end)
    replies = Replies(target, abort_read)
    copier = threading.Thread(
        target=_copy,
        args=(read_end, replies, finish_read),
        name="ctxbudget-mcp-stdout",
        daemon=True,
    )
    copier.start()
    AWAITING.counting = True
    try:
        yield replies
    finally:
        AWAITING.counting = False
        # The SDK keeps its own copy of the pipe open for good: the copier never reads an end
        # of file, so it is told that what the pipe holds now is all there is.
        os.dup2(target, 1)
        os.write(finish_write, b".")
        copier.join(DRAIN)
        if copier.is_alive():  # the client does not read its stdout
            os.write(abort_write, b".")
            copier.join()
        for fd in (read_end, target, finish_read, finish_write, abort_read, abort_write):
            os.close(fd)


def _copy(source: int, replies: Replies, finish: int) -> None:
    """Copy ``source`` to ``replies`` whole line by whole line until told to ``finish``."""
    pending = bytearray()
    open_ = True  # False once the client's stdout is gone: the rest is read and dropped
    while ready(source, finish, select.POLLIN):
        data = os.read(source, 1 << 16)
        if not data:
            break
        pending += data
        end = pending.rfind(b"\n")
        if end >= 0:
            lines = bytes(pending[: end + 1])
            del pending[: end + 1]
            open_ = open_ and replies.send(lines)
            AWAITING.answered(lines)  # sent (or the client is gone: nothing to wait for)
    os.set_blocking(source, False)
    while True:  # what the SDK wrote before it stopped
        try:
            data = os.read(source, 1 << 16)
        except BlockingIOError:
            break
        if not data:
            break
        pending += data
    if pending and open_:
        replies.send(bytes(pending))
    AWAITING.answered(bytes(pending))
