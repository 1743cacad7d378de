"""The lines of a write journal (`ctxbudget.store.journal`): written, then read back strictly.

A journal file is UTF-8 JSON, one object per line, each ended by a newline:

- ``{"batch": ID, "records": [[text, metadata], ...]}``: an acknowledged batch, each record in
  the store's own codec (`store.records.encode_record`);
- ``{"done": [ID, ...]}``: those batches are in Chroma.

Reading accepts exactly what `batch_line` and `done_line` write, and a batch only if its records
are ones the store takes (`store.writes.check_batch`, the check every acknowledged batch passed).
Anything else, a line the code did not write (another program, a disk error, an edit by hand:
JSON of another shape, wrong types, nesting deeper than the parser goes, bytes that are not
UTF-8), is returned apart in `JournalContent.bad`, never raised, so the batches around it are
still stored and the caller can move it aside. A last line without its newline was cut by a
crash in the middle of an append, before the batch was acknowledged: it is left out.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ctxbudget.errors import StoreInputError
from ctxbudget.store.records import Record, decode_record, encode_record
from ctxbudget.store.writes import check_batch

__all__ = ["JournalBatch", "JournalContent", "batch_line", "done_line", "read_journal"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class JournalBatch:
    """One acknowledged batch: its id and its records (as given, before the store's seqs)."""

    id: str
    records: tuple[Record, ...]


@dataclass(frozen=True, slots=True)
class JournalContent:
    """What a journal file holds.

    Attributes:
        batches: the batches not marked done, in the order they were acknowledged.
        bad: the complete lines the code did not write, as found, with their line numbers.
    """

    batches: tuple[JournalBatch, ...]
    bad: tuple[tuple[int, bytes], ...]


def batch_line(batch_id: str, records: Sequence[Record]) -> bytes:
    """The line acknowledging a batch."""
    return _line({"batch": batch_id, "records": [[r.text, encode_record(r, "")] for r in records]})


def done_line(batch_ids: Sequence[str]) -> bytes:
    """The line marking batches as stored."""
    return _line({"done": list(batch_ids)})


def _line(value: dict[str, object]) -> bytes:
    return (json.dumps(value, ensure_ascii=False, separators=(",", ":")) + "\n").encode()


def read_journal(path: Path) -> JournalContent:
    """The unfinished batches of a journal file and the lines it holds that the code did not write.

    Raises:
        OSError: the file cannot be read.
    """
    batches: dict[str, JournalBatch] = {}
    bad: list[tuple[int, bytes]] = []
    with path.open("rb") as file:  # a line at a time: a batch's line may be large
        for number, raw in enumerate(file, start=1):
            if not raw.endswith(b"\n"):
                if _cut(raw):
                    logger.info(
                        "journal %s: line %d cut by a crash, never acknowledged", path, number
                    )
                else:  # no append of ours ends so (a file zeroed by a crash): kept aside
                    bad.append((number, raw))
                break
            if not raw.strip():
                continue
            line = _parse(raw)
            if isinstance(line, JournalBatch):
                batches[line.id] = line
            elif isinstance(line, list):
                for batch_id in line:
                    batches.pop(batch_id, None)
            else:
                bad.append((number, raw))
    return JournalContent(tuple(batches.values()), tuple(bad))


_STARTS = (b'{"batch":', b'{"done":')  # how every line the code writes starts


def _cut(raw: bytes) -> bool:
    """Whether an unterminated last line can be the start of a line the code writes."""
    if b"\x00" in raw:
        return False
    return any(start.startswith(raw) or raw.startswith(start) for start in _STARTS)


def _parse(raw: bytes) -> JournalBatch | list[str] | None:
    """A batch, the ids of a done line, or None: a line the code did not write."""
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):  # not JSON, not UTF-8, or nested deeper than Python goes
        return None
    if not isinstance(value, dict):
        return None
    if value.keys() == {"done"}:
        done = value["done"]
        if isinstance(done, list) and all(isinstance(i, str) for i in done):
            return done
        return None
    if value.keys() != {"batch", "records"} or not isinstance(value["batch"], str):
        return None
    items = value["records"]
    if not isinstance(items, list):
        return None
    records: list[Record] = []
    for item in items:
        if not (isinstance(item, list) and len(item) == 2):
            return None
        text, meta = item
        if not isinstance(text, str) or not isinstance(meta, dict):
            return None
        try:
            records.append(decode_record(text, meta))
        # A metadata field of the wrong type or shape, or a JSON string in it nested too deep.
        except (KeyError, TypeError, ValueError, AttributeError, RecursionError):
            return None
    try:
        check_batch(records)  # every acknowledged batch passed this check
    except (StoreInputError, TypeError):  # TypeError: a kind or role that is a list or a dict
        return None
    return JournalBatch(value["batch"], tuple(records))
