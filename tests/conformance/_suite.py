"""What the suite's test modules share: capability checks, conversations, settings.

Texts are single lines of a few common words and a unique tag (``q00042``), so each is found
exactly where it was sent, and no text is part of another.
"""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from drivers.base import Turn
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

__all__ = [
    "PROPERTY",
    "WORDS",
    "conversations",
    "eventually",
    "fresh",
    "kept",
    "needs",
    "tagged",
    "turns_of",
]

PROPERTY = settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

WORDS = (
    "lisbon cat miso cello garden train sister coffee piano winter market river bread "
    "sunday trip dog pixel recipe doctor concert book museum bike spring"
).split()

_TAGS = itertools.count()

word_lists = st.lists(st.sampled_from(WORDS), min_size=2, max_size=12)
conversations = st.lists(word_lists, min_size=1, max_size=8)
"""A conversation: each turn's words (roles alternate from user; texts get tags)."""


def needs(driver: Any, capability: str) -> None:
    """Skip, saying why, when ``driver`` cannot do ``capability``."""
    if capability not in driver.can:
        pytest.skip(f"{driver.name} has no {capability!r} (its driver says so)")


def kept(driver: Any, memory: Any, session: str, user: str) -> list[str]:
    """The texts ``memory`` (another object) reads of what the door stored for ``session``.

    The session's history, or the door's own reading (``kept``) where it stores turns elsewhere.
    """
    if "kept" in driver.can:
        return list(driver.kept(memory, session, user))
    return [r.text for r in memory.history(session)]


def fresh(prefix: str) -> str:
    """An id no other example uses."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def tagged(words: Sequence[str]) -> str:
    """One line of text with a unique tag."""
    return f"{' '.join(words)} q{next(_TAGS):05d}"


def turns_of(conversation: Sequence[Sequence[str]], prefix: str) -> list[Turn]:
    """The turns of a drawn conversation: roles alternate, each with a unique id and tag."""
    return [
        Turn("user" if n % 2 == 0 else "assistant", tagged(words), f"{prefix}-{n}")
        for n, words in enumerate(conversation)
    ]


def eventually(read: Callable[[], Any], done: Callable[[Any], bool], wait: float = 10.0) -> Any:
    """``read()`` until ``done`` holds or ``wait`` seconds passed; the last value read.

    For what another object or process acknowledged and stores in the background: not a
    timing assertion, a bounded wait for the state the assertion then checks.
    """
    deadline = time.monotonic() + wait
    while True:
        value = read()
        if done(value) or time.monotonic() > deadline:
            return value
        time.sleep(0.2)
