"""A write that meets a closed store says so with `MemoryClosedError`, not a plain `StoreError`.

An add already running when another thread closes the memory (``write_behind=False``) reached
`writes.unwritten`, which rewrote every `StoreError` as a plain one: code catching
`MemoryClosedError` missed it. The message already says nothing was done.
"""

from __future__ import annotations

import pytest

from ctxbudget.errors import MemoryClosedError, StoreError, StoreInputError
from ctxbudget.store.writes import unwritten


@pytest.mark.parametrize("error", [MemoryClosedError, StoreInputError])
def test_errors_that_say_nothing_was_done_pass_as_they_are(error: type[StoreError]) -> None:
    raised = error("closed (nothing was done)")
    with pytest.raises(error) as caught, unwritten():
        raise raised
    assert caught.value is raised


def test_another_store_error_says_nothing_was_written() -> None:
    with pytest.raises(StoreError, match="nothing was written$") as caught, unwritten():
        raise StoreError("the disk is full")
    assert type(caught.value) is StoreError
