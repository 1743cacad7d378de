"""An edited message is never sent with its old text.

Through a door that edits (``edit``: the memory's ``replace_message``, sync or async): a
conversation is stored, one of its messages is replaced, and every ``send`` after the edit
returned receives the new text where the message is received at all, never the old one, in this
session and in another session of the same user (which recalls it by search); a report lists
the message once. A door without an edit operation skips, saying so. Embedded and on a Chroma
server.
"""

from __future__ import annotations

from typing import Any

import pytest
from _suite import PROPERTY, WORDS, conversations, fresh, needs, tagged, turns_of
from drivers.base import Turn
from explained import explained
from hypothesis import given, settings
from hypothesis import strategies as st

EDITS = settings(PROPERTY, max_examples=4)
words = st.lists(st.sampled_from(WORDS), min_size=2, max_size=8)


def _listed(report: Any, item_id: str) -> int:
    """How many times the report lists the item (included and pruned), by its caller id.

    Any of the reports' shapes (`explained`): an `AssembledContext`, or a door's document.
    """
    found = explained(report)
    ids = [*found.included, *(p.id for p in found.pruned)]
    return sum(i == item_id or i.endswith(f'"{item_id}"]') for i in ids)


@pytest.mark.parametrize(
    "place_kind", ["embedded", pytest.param("server", marks=pytest.mark.integration)]
)
@EDITS
@given(
    conversation=conversations,
    pick=st.integers(0, 20),
    said=words,
    budget=st.sampled_from([150, 3000]),
)
def test_an_edited_message_is_never_sent_with_its_old_text(
    driver: Any, place_kind: str, conversation: list[list[str]], pick: int, said: list[str],
    budget: int,
) -> None:  # fmt: skip
    needs(driver, "edit")
    needs(driver, "add")
    needs(driver, "send")
    session, other, user = fresh("s"), fresh("s"), fresh("u")
    turns = turns_of(conversation, session)
    driver.add(session, user, turns)
    driver.add(other, user, [Turn("user", tagged(["hello", "again"]), f"{other}-0")])
    old = turns[pick % len(turns)]
    new = tagged(said)
    driver.edit(session, user, old.id, new)
    for name in (session, other):
        for query in (old.text, new):  # asked with either text: recalled by search too
            got = driver.send(name, user, query.rsplit(" ", 1)[0], budget)
            received = got.texts or [text for _, text in got.got]
            assert not any(old.text in text for text in received), (
                f"{driver.name} sent {old.id}'s old text after its edit"
            )
            if got.report is not None:
                assert _listed(got.report, old.id) <= 1
                if name == session and budget > 1000:
                    assert _listed(got.report, old.id) == 1  # roomy: offered, once
                    assert any(new in text for text in received)
