"""The id check of a write sees what another memory object did to the session (issue 40).

An app's memory holds a copy of the session (it assembled from it); an admin task on the same
folder deletes or replaces one of its messages, or does nothing; then the app stores a message
under that id. The write is judged by what the store holds now, never by the app's copy: a
deleted id takes the new message, a replaced one refuses anything but its new content, and
an untouched one refuses other content. Whoever answers the check from a copy kept in memory
(issue 40's "no read per message") must keep this property. With ``first_write_wins`` (the
LangChain middleware's writes: no read before them) the store holds the same, and a refusal
is a warning that names the id instead.
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.errors import StoreInputError
from ctxbudget.memory.context import ContextMemory
from ctxbudget.store.records import Record

ORIGINAL = "the train leaves at nine"
REPLACEMENT = "the train leaves at ten"
TEXTS = {"original": ORIGINAL, "replacement": REPLACEMENT, "new": "the bus leaves at noon"}


def _replace(admin: ContextMemory) -> None:
    record = Record(
        id="m1",
        kind="message",
        text=REPLACEMENT,
        namespace=admin.namespace,
        session_id="s1",
        role="assistant",
    )
    admin.store.add([record], replace=True)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    action=st.sampled_from(["none", "delete", "replace"]),
    sent=st.sampled_from(sorted(TEXTS)),
    write_behind=st.booleans(),
    first_write_wins=st.booleans(),
)
def test_a_write_is_judged_by_what_the_store_holds_not_by_a_copy(
    embedder: OnnxEmbedder,
    caplog: pytest.LogCaptureFixture,
    action: str,
    sent: str,
    write_behind: bool,
    first_write_wins: bool,
) -> None:
    # With first_write_wins (the LangChain middleware's) the ids are not read before the
    # write: the store's write finds them. The same outcome, with a warning for an error.
    caplog.clear()
    with tempfile.TemporaryDirectory() as root:
        folder = Path(root) / "db"
        app = ContextMemory(path=folder, embedder=embedder, write_behind=write_behind)
        admin = ContextMemory(path=folder, embedder=embedder, write_behind=False)
        try:
            app.add_messages(
                "s1",
                [
                    {"id": "m0", "role": "user", "text": "when does the train leave?"},
                    {"id": "m1", "role": "assistant", "text": ORIGINAL},
                ],
            )
            app.flush()
            app.assemble("s1", "the train", budget=500)  # the app's copy holds m1 as it was
            if action == "delete":
                admin.store.delete(["m1"], namespace=admin.namespace, session_id="s1")
            elif action == "replace":
                _replace(admin)
            held = {"none": ORIGINAL, "delete": None, "replace": REPLACEMENT}[action]
            text = TEXTS[sent]
            stored_before = {"m0": "when does the train leave?"}
            conflict = held is not None and text != held
            if first_write_wins:
                with caplog.at_level(logging.WARNING):
                    given = [{"id": "m1", "role": "assistant", "text": text}, ("user", "bus?")]
                    ids = app.add_messages("s1", given, first_write_wins=True)
                    app.flush()
                assert ids[0] == "m1"
                stored_before[ids[1]] = "bus?"  # the rest is stored
                warned = [r.getMessage() for r in caplog.records if "first write" in r.getMessage()]
                assert len(warned) == conflict and all("'m1'" in w for w in warned), warned
                expected = held if conflict else text
            elif conflict:
                with pytest.raises(StoreInputError, match="already stored with different"):
                    app.add_message("s1", "assistant", text, id="m1")
                expected = held
            else:
                assert app.add_message("s1", "assistant", text, id="m1") == "m1"
                expected = text
            app.flush()
            stored = {r.id: r.text for r in admin.history("s1")}
            assert stored == {**stored_before, "m1": expected}
        finally:
            app.close()
            admin.close()
