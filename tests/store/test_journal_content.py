"""A write journal holding lines ctxbudget did not write never blocks opening the store.

A dead writer's journal is replayed by the next store opening the folder. Whatever else the
file holds (JSON of another shape, wrong types, nesting deeper than Python's parser goes, bytes
that are not UTF-8, a line cut in the middle), opening raises nothing, stores every acknowledged
batch around it in order, and moves the lines it did not understand aside to
``<name>.quarantined`` with a warning naming that file. A real embedded Chroma throughout.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxbudget import ContextMemory
from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.store.chroma_store import ChromaStore
from ctxbudget.store.journal import JOURNAL_FOLDER, read_batches
from ctxbudget.store.journal_lines import batch_line, done_line
from ctxbudget.store.records import Record

COLLECTION = "ctxbudget"  # ContextMemory's default store name


def message(namespace: str, number: int, session: str = "s1") -> Record:
    return Record(
        id=f"m{number}",
        kind="message",
        text=f"acknowledged message {number}: the parcel goes to door {number}",
        namespace=namespace,
        session_id=session,
        role="user" if number % 2 == 0 else "assistant",
    )


def journal_folder(folder: Path) -> Path:
    where = folder / JOURNAL_FOLDER / COLLECTION
    where.mkdir(parents=True, exist_ok=True)
    return where


def write_journal(folder: Path, lines: list[bytes]) -> Path:
    """A dead writer's journal (nobody holds its lock) in the store folder ``folder``."""
    path = journal_folder(folder) / f"{uuid.uuid4().hex}.jsonl"
    path.write_bytes(b"".join(lines))
    return path


def stored(store: ChromaStore, namespace: str, session: str = "s1") -> list[str]:
    return [r.id for r in store.session_messages(namespace=namespace, session_id=session)]


def warned_about(caplog: pytest.LogCaptureFixture, target: Path) -> bool:
    return any(
        r.levelno == logging.WARNING and str(target) in r.getMessage() for r in caplog.records
    )


@pytest.fixture
def folder(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "chroma"


def meta_of(namespace: str, number: int) -> dict[str, Any]:
    (_, meta) = json.loads(batch_line("b", [message(namespace, number)]))["records"][0]
    return dict(meta)


def line(value: object) -> bytes:
    return json.dumps(value).encode() + b"\n"


def batch_with(namespace: str, number: int, **changes: object) -> bytes:
    """A batch line of message ``number`` with its metadata fields changed (None: removed)."""
    record = message(namespace, number)
    meta = meta_of(namespace, number)
    for key, value in changes.items():
        if value is None:
            meta.pop(key, None)
        else:
            meta[key] = value
    return line({"batch": f"x{number}", "records": [[record.text, meta]]})


NS = "default"
DEEP = b"[" * 200_000 + b"]" * 200_000 + b"\n"

HOSTILE: dict[str, bytes] = {
    "metadata is a list": line({"batch": "x", "records": [["text", ["ns", "default"]]]}),
    "metadata is a str": line({"batch": "x", "records": [["text", "metadata"]]}),
    "records is a dict": line({"batch": "x", "records": {"text": "meta"}}),
    "record is a str": line({"batch": "x", "records": ["text"]}),
    "record of three parts": line({"batch": "x", "records": [["text", {}, 1]]}),
    "line is a list": line([{"batch": "x", "records": []}]),
    "line is a str": line("done"),
    "line is null": b"null\n",
    "batch id is an int": line({"batch": 7, "records": []}),
    "done ids are ints": line({"done": [1, 2]}),
    "done is a str": line({"done": "x"}),
    "an extra key": line({"batch": "x", "records": [], "more": 1}),
    "text is an int": line({"batch": "x", "records": [[5, meta_of(NS, 90)]]}),
    "rid missing": batch_with(NS, 91, rid=None),
    "kind is a list": batch_with(NS, 92, kind=["message"]),
    "role is a dict": batch_with(NS, 93, role={"a": 1}),
    "seq is a str": batch_with(NS, 94, seq="3"),
    "tool_calls not JSON": batch_with(NS, 95, tool_calls="[not json"),
    "tool_calls an int": batch_with(NS, 96, tool_calls=7),
    "tool_calls nested deep": batch_with(NS, 97, tool_calls="[" * 100_000 + "]" * 100_000),
    "tokens a list": batch_with(NS, 98, tokens="[1]"),
    "nested deep": DEEP,
    "object nested deep": b'{"a":' * 100_000 + b"1" + b"}" * 100_000 + b"\n",
    "not JSON": b"garbage, not JSON\n",
    "not UTF-8": b'{"done":["\xff\xfe"]}\n',
    "cut in the middle": batch_line("x", [message(NS, 99)])[:40] + b"\n",
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_line_the_code_did_not_write_is_quarantined_and_the_batches_around_it_stored(
    folder: Path, embedder: OnnxEmbedder, caplog: pytest.LogCaptureFixture, case: str
) -> None:
    lines = [
        batch_line("a", [message(NS, 0), message(NS, 1)]),
        HOSTILE[case],
        batch_line("b", [message(NS, 2)]),
    ]
    path = write_journal(folder, lines)
    caplog.set_level(logging.WARNING)
    with ChromaStore(folder, embedder=embedder) as store:  # replays the journal as it opens
        assert stored(store, NS) == ["m0", "m1", "m2"]
    target = path.with_suffix(".quarantined")
    assert target.read_bytes() == HOSTILE[case]
    assert warned_about(caplog, target)
    assert not path.exists()
    with ChromaStore(folder, embedder=embedder) as store:  # nothing left to replay
        assert stored(store, NS) == ["m0", "m1", "m2"]


def test_a_valid_batch_then_garbage_no_longer_blocks_the_memory_nor_loses_the_batch(
    folder: Path, embedder: OnnxEmbedder, caplog: pytest.LogCaptureFixture
) -> None:
    # The reported case: every open failed, and moving the file as the error said lost the batch.
    path = write_journal(folder, [batch_line("a", [message(NS, 0)]), b"{oops\n"])
    caplog.set_level(logging.WARNING)
    with ContextMemory(folder, embedder=embedder) as memory:
        assert [r.id for r in memory.history("s1")] == ["m0"]
        memory.add_message("s1", "user", "a later question", id="later")
        assert [r.id for r in memory.history("s1")] == ["m0", "later"]
    assert path.with_suffix(".quarantined").read_bytes() == b"{oops\n"
    assert warned_about(caplog, path.with_suffix(".quarantined"))
    assert not list(journal_folder(folder).glob("*.jsonl"))


def test_a_line_cut_by_a_crash_at_the_end_is_ignored_not_quarantined(
    folder: Path, embedder: OnnxEmbedder
) -> None:
    cut = batch_line("b", [message(NS, 1)])[:-5]  # no newline: never acknowledged
    path = write_journal(folder, [batch_line("a", [message(NS, 0)]), cut])
    with ChromaStore(folder, embedder=embedder) as store:
        assert stored(store, NS) == ["m0"]
    assert not path.exists() and not path.with_suffix(".quarantined").exists()


@pytest.mark.parametrize(
    "tail",
    [b"\x00" * 2048, b"garbage without an end", b'{"batch":"b","rec\x00\x00'],
    ids=["zeroed by a crash", "not a line of ours", "ours, then zeros"],
)
def test_an_unterminated_end_no_append_leaves_is_kept_aside_not_dropped(
    folder: Path, embedder: OnnxEmbedder, caplog: pytest.LogCaptureFixture, tail: bytes
) -> None:
    # A file zeroed at its size after a crash (ext4 may leave one) held acknowledged batches:
    # it was read as one line cut by a crash and deleted without a word.
    path = write_journal(folder, [tail])
    caplog.set_level(logging.WARNING)
    with ChromaStore(folder, embedder=embedder) as store:
        assert stored(store, NS) == []
    target = path.with_suffix(".quarantined")
    assert target.read_bytes() == tail
    assert warned_about(caplog, target)


def test_read_batches_skips_what_the_code_did_not_write(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    path.write_bytes(
        batch_line("a", [message(NS, 0)])
        + DEEP
        + HOSTILE["metadata is a list"]
        + batch_line("b", [message(NS, 1)])
        + done_line(["a"])
    )
    assert [b.id for b in read_batches(path)] == ["b"]


# -- the property: any file, any mix ---------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=12,
)


def is_journal_shape(value: object) -> bool:
    return isinstance(value, dict) and set(value) in ({"done"}, {"batch", "records"})


def nested(depth: int, leaf: str = "1") -> str:
    return "[" * depth + leaf + "]" * depth


not_a_dict = json_values.filter(lambda v: not isinstance(v, dict))
not_a_list = json_values.filter(lambda v: not isinstance(v, list))

# Each entry: ("batch", number of records), ("done", index of an earlier entry), ("bad", how).
entries = st.lists(
    st.one_of(
        st.tuples(st.just("batch"), st.integers(1, 3)),
        st.tuples(st.just("done"), st.integers(0, 20)),
        st.tuples(
            st.just("bad"),
            st.one_of(
                st.tuples(st.just("value"), json_values.filter(lambda v: not is_journal_shape(v))),
                st.tuples(st.just("meta"), not_a_dict),
                st.tuples(st.just("records"), not_a_list),
                st.tuples(st.just("record"), not_a_list),
                st.tuples(st.just("deep"), st.integers(1_000, 50_000)),
                st.tuples(st.just("deep_meta"), st.integers(1_000, 50_000)),
                st.tuples(st.just("cut"), st.integers(1, 60)),
                st.tuples(st.just("bytes"), st.binary(min_size=1, max_size=20)),
            ),
        ),
    ),
    max_size=12,
)


def hostile_line(how: tuple[str, Any], namespace: str, number: int) -> bytes:
    kind, arg = how
    record = message(namespace, number)
    if kind == "value":
        return line(arg)
    if kind == "meta":
        return line({"batch": f"q{number}", "records": [[record.text, arg]]})
    if kind == "records":
        return line({"batch": f"q{number}", "records": arg})
    if kind == "record":
        return line({"batch": f"q{number}", "records": [arg]})
    if kind == "deep":
        return nested(arg).encode() + b"\n"
    if kind == "deep_meta":
        return batch_with(namespace, number, tool_calls=nested(arg, '"c"'))
    if kind == "cut":
        full = batch_line(f"q{number}", [record])
        return full[: min(arg, len(full) - 2)] + b"\n"
    raw = bytes(arg).replace(b"\n", b"")
    return (raw if raw.strip() else b"\xff") + b"\n"


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(plan=entries, cut_tail=st.booleans())
def test_opening_a_folder_with_any_journal_stores_every_acknowledged_batch_in_order(
    folder: Path,
    embedder: OnnxEmbedder,
    caplog: pytest.LogCaptureFixture,
    plan: list[tuple[str, Any]],
    cut_tail: bool,
) -> None:
    namespace = f"ns{uuid.uuid4().hex[:12]}"
    lines: list[bytes] = []
    batches: dict[int, list[str]] = {}  # entry index -> its record ids
    bad: list[bytes] = []
    number = 0
    for index, (kind, arg) in enumerate(plan):
        if kind == "batch":
            records = [message(namespace, number + k) for k in range(arg)]
            number += arg
            batches[index] = [r.id for r in records]
            lines.append(batch_line(f"b{index}", records))
        elif kind == "done":
            if arg in batches:
                lines.append(done_line([f"b{arg}"]))
                batches.pop(arg)
        else:
            bad.append(hostile_line(arg, namespace, 1000 + index))
            lines.append(bad[-1])
    if cut_tail:  # a crash in the middle of the last append: never acknowledged
        lines.append(batch_line("tail", [message(namespace, 9999)])[:-3])
    path = write_journal(folder, lines)
    caplog.clear()
    caplog.set_level(logging.WARNING)
    with ChromaStore(folder, embedder=embedder) as store:  # raises nothing
        assert stored(store, namespace) == [i for ids in batches.values() for i in ids]
    target = path.with_suffix(".quarantined")
    if bad:
        assert target.read_bytes() == b"".join(bad)
        assert warned_about(caplog, target)
    else:
        assert not target.exists()
    assert not path.exists()
