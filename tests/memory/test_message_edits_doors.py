"""`replace_message` / `delete_messages` (and their async twins) given what users really pass.

Every bad input is refused with an error of ctxbudget's tree that says what and where, and the
store is left byte for byte as it was: every collection of the store (the meta collection with
the sessions' stamps included), each row's id, document, metadata and vector. numpy strings are
taken as the str they are. Embedded Chroma and a Chroma server; the default embedder.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from ctxbudget import ContextMemory
from ctxbudget.errors import CtxBudgetError, MemoryClosedError, StoreInputError
from ctxbudget.store.chroma_store import ChromaStore
from tests.conftest import StoreFactory

OLD = "My locker code at the gym is 4471"
NEW = "My locker code at the gym is 9902"

Call = Callable[[ContextMemory], Any]


def raw(store: ChromaStore) -> list[tuple[str, list[tuple[str, str, str, bytes]]]]:
    """Every row of every collection of ``store``: id, document, metadata (JSON), vector bytes."""
    name = store._name  # the store's collections are named after it
    out = []
    for col in sorted(store._client.list_collections(), key=lambda c: c.name):
        if col.name != name and not col.name.startswith(f"{name}."):
            continue
        got = col.get(include=["documents", "metadatas", "embeddings"])
        vectors = got["embeddings"] if got["embeddings"] is not None else [None] * len(got["ids"])
        rows = [
            (
                key,
                str(doc),
                json.dumps(meta, sort_keys=True),
                b"" if vec is None else np.asarray(vec, dtype=np.float32).tobytes(),
            )
            for key, doc, meta, vec in zip(
                got["ids"], got["documents"], got["metadatas"], vectors, strict=True
            )
        ]
        out.append((col.name, sorted(rows)))
    return out


def seeded(open_store: StoreFactory) -> ContextMemory:
    memory = ContextMemory(store=open_store())
    memory.add_messages(
        "gym",
        [
            {"id": "q1", "role": "user", "text": OLD},
            {"id": "a1", "role": "assistant", "text": "Noted, I will remember it."},
        ],
        user_id="ana",
    )
    memory.add_message("bob-s", "user", "Bob's own words", id="b1", user_id="bob")
    memory.pin("gym", "Ana swims on Mondays", id="swim")
    memory.push_task("gym", "find the locker")
    memory.flush()
    return memory


def case(name: str, call: Call, *needles: str) -> Any:
    return pytest.param(call, needles, id=name)


def rep(*args: Any, **kwargs: Any) -> Call:
    return lambda m: m.replace_message(*args, **kwargs)


def dele(*args: Any) -> Call:
    return lambda m: m.delete_messages(*args)


LIMIT = 1_000_000  # MemoryConfig().max_message_chars

REFUSED = [
    # -- session_id and id -------------------------------------------------------------------
    case("sid-int", rep(7, "q1", NEW), "session_id must be a non-empty str, got 7"),
    case("sid-none", rep(None, "q1", NEW), "session_id must be a non-empty str, got None"),
    case("sid-empty", rep("", "q1", NEW), "session_id must be a non-empty str, got ''"),
    case("sid-surrogate", rep("\ud800", "q1", NEW), "session_id holds a lone surrogate U+D800"),
    case("id-int", rep("gym", 1, NEW), "id must be a non-empty str, got 1"),
    case("id-none", rep("gym", None, NEW), "id must be a non-empty str, got None"),
    case("id-empty", rep("gym", "", NEW), "id must be a non-empty str, got ''"),
    case("id-surrogate", rep("gym", "q\ud800", NEW), "id holds a lone surrogate U+D800"),
    case("id-unknown", rep("gym", "nope", NEW), "holds no message 'nope' to replace"),
    case("id-other-session", rep("gym", "b1", NEW), "holds no message 'b1'"),
    case("id-other-users-session", rep("bob-s", "q1", NEW), "session 'bob-s'", "no message"),
    case("id-pin", rep("gym", "swim", NEW), "'swim' of session 'gym' is a pinned record"),
    case("id-task", rep("gym", "ctxbudget:task:0", NEW), "starts with 'ctxbudget:'"),
    # -- text ------------------------------------------------------------------------------
    case("text-none", rep("gym", "q1", None), "replace_message of 'q1'", "text must be a str"),
    case("text-bytes", rep("gym", "q1", b"x"), "text must be a str, got bytes"),
    case("text-blank", rep("gym", "q1", " \n"), "has empty text"),
    case("text-huge", rep("gym", "q1", "x" * (LIMIT + 1)), "max_message_chars"),
    case(
        "text-surrogate",
        rep("gym", "q1", "bad \ud800 text"),
        "replace_message of 'q1'",
        "text holds a lone surrogate U+D800",
    ),
    # -- the other fields ------------------------------------------------------------------
    case("role-bad", rep("gym", "q1", NEW, role="wizard"), "role must be one of"),
    case("role-int", rep("gym", "q1", NEW, role=1), "role must be one of"),
    case(
        "ts-nan",
        rep("gym", "q1", NEW, timestamp=float("nan")),
        "replace_message of 'q1'",
        "timestamp must be a finite number",
    ),
    case("ts-inf", rep("gym", "q1", NEW, timestamp=float("inf")), "finite number"),
    case("ts-np-nan", rep("gym", "q1", NEW, timestamp=np.float64("nan")), "finite number"),
    case("ts-huge", rep("gym", "q1", NEW, timestamp=np.float32(1e30)), "years 1 and 9999"),
    case("ts-bool", rep("gym", "q1", NEW, timestamp=True), "timestamp must be a number"),
    case("ts-text", rep("gym", "q1", NEW, timestamp="yesterday"), "timestamp"),
    case(
        "name-int",
        rep("gym", "q1", NEW, name=3),
        'name must be a str, the speaker\'s name (None or "": none), got 3',
    ),
    case("name-surrogate", rep("gym", "q1", NEW, name="\udc00"), "name holds a lone surrogate"),
    case("user-other", rep("gym", "q1", NEW, user_id="bob"), "stored by user 'ana'"),
    case("user-empty", rep("gym", "q1", NEW, user_id=""), "user_id must be a non-empty str"),
    case("user-int", rep("gym", "q1", NEW, user_id=3), "user_id must be a non-empty str, got 3"),
    case("meta-list", rep("gym", "q1", NEW, metadata=[1]), "metadata must be a dict"),
    case("meta-nan", rep("gym", "q1", NEW, metadata={"a": float("nan")}), "is not finite"),
    case("meta-object", rep("gym", "q1", NEW, metadata={"a": object()}), "metadata['a']"),
    case("calls-str", rep("gym", "q1", NEW, tool_calls="c1"), "tool_calls must be a list"),
    case("call-id-int", rep("gym", "q1", NEW, tool_call_id=5), "tool_call_id must be"),
    # -- delete_messages -------------------------------------------------------------------
    case("ids-str", dele("gym", "q1"), "ids must be a list", "pass ['q1']"),
    case("ids-bytes", dele("gym", b"q1"), "ids must be a list"),
    case("ids-generator", dele("gym", (i for i in ["q1"])), "ids must be a list"),
    case("ids-none", dele("gym", None), "ids must be a list"),
    case("ids-array", dele("gym", np.array(["q1"])), "ids must be a list"),
    case("ids-int", dele("gym", ["q1", 1]), "id must be a non-empty str, got 1"),
    case("ids-none-in", dele("gym", ["q1", None]), "id must be a non-empty str, got None"),
    case("ids-empty-in", dele("gym", ["q1", ""]), "id must be a non-empty str"),
    case("ids-surrogate", dele("gym", ["q1", "\ud800"]), "lone surrogate"),
    case("ids-pin", dele("gym", ["q1", "swim"]), "ids ['swim'] of session 'gym' are not"),
    case("ids-task", dele("gym", ["q1", "ctxbudget:task:0"]), "starts with 'ctxbudget:'"),
    case("del-sid-int", dele(1, ["q1"]), "session_id must be a non-empty str, got 1"),
    case("del-sid-none", dele(None, ["q1"]), "session_id must be a non-empty str"),
    case("del-sid-surrogate", dele("g\ud800", ["q1"]), "lone surrogate"),
]


def _refused(memory: ContextMemory, call: Call, needles: tuple[str, ...]) -> None:
    before = raw(memory.store)
    with pytest.raises(CtxBudgetError) as caught:
        call(memory)
    assert isinstance(caught.value, StoreInputError), repr(caught.value)
    for needle in needles:
        assert needle in str(caught.value), str(caught.value)
    assert "nothing was" in str(caught.value), str(caught.value)  # what happened: nothing
    assert raw(memory.store) == before


@pytest.mark.parametrize(("call", "needles"), REFUSED)
def test_a_bad_input_is_refused_clearly_and_changes_nothing(
    open_store: StoreFactory, call: Call, needles: tuple[str, ...]
) -> None:
    memory = seeded(open_store)
    _refused(memory, call, needles)
    assert [r.text for r in memory.history("gym")] == [OLD, "Noted, I will remember it."]
    memory.close()


@pytest.mark.parametrize(("call", "needles"), REFUSED[::3])
def test_the_async_twins_refuse_the_same(
    open_store: StoreFactory, call: Call, needles: tuple[str, ...]
) -> None:
    memory = seeded(open_store)

    def twin(m: ContextMemory) -> Any:
        # The same call through areplace_message / adelete_messages.
        class Async:
            def replace_message(self, *a: Any, **k: Any) -> Any:
                return asyncio.run(m.areplace_message(*a, **k))

            def delete_messages(self, *a: Any, **k: Any) -> Any:
                return asyncio.run(m.adelete_messages(*a, **k))

        return call(Async())  # type: ignore[arg-type]

    _refused(memory, twin, needles)
    memory.close()


def test_what_is_accepted_round_trips(open_store: StoreFactory) -> None:
    memory = seeded(open_store)
    # numpy strings are str: taken as the str they hold, and a plain str comes back.
    got = memory.replace_message(np.str_("gym"), np.str_("q1"), np.str_(NEW), role=np.str_("user"))
    assert got == "q1" and type(got) is str
    assert [(r.id, r.text) for r in memory.history("gym")][0] == ("q1", NEW)
    # A NUL is kept, as add_message keeps it (docs/reliability.md, "Boundaries").
    memory.replace_message("gym", "a1", "noted\x00 twice")
    assert memory.history("gym")[1].text == "noted\x00 twice"
    # Ids: a tuple, duplicates, unknown ids and ids of other sessions or users count only what
    # the named session held.
    assert memory.delete_messages("gym", ("nope", "b1")) == 0
    assert memory.delete_messages(np.str_("gym"), [np.str_("a1"), "a1", "b1"]) == 1
    assert [r.text for r in memory.history("bob-s")] == ["Bob's own words"]
    assert memory.store.get(["swim"], namespace="default", session_id="gym")[0].text
    memory.close()


async def test_closed_memory_refuses_edits_clearly(open_store: StoreFactory) -> None:
    memory = seeded(open_store)
    await memory.aclose()
    for call in (
        lambda: memory.replace_message("gym", "q1", NEW),
        lambda: memory.delete_messages("gym", ["q1"]),
    ):
        with pytest.raises(MemoryClosedError, match="closed"):
            call()
    with pytest.raises(MemoryClosedError, match="closed"):
        await memory.areplace_message("gym", "q1", NEW)
    with pytest.raises(MemoryClosedError, match="closed"):
        await memory.adelete_messages("gym", ["q1"])
    again = ContextMemory(store=open_store())
    assert [r.text for r in again.history("gym")] == [OLD, "Noted, I will remember it."]
    again.close()
