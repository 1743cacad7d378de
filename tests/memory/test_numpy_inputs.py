"""numpy values a caller hands a message: metadata scalars and dates are taken as Python's.

Numbers are taken from numpy everywhere else (budgets, ``k``, timestamps); message metadata
refused ``float32`` and ``int64`` (``float64`` passed, being a float) and refused numpy's bool
saying bools are kept. A ``datetime64`` or a ``date`` as a timestamp was refused without saying
what to pass. Real parts: an embedded Chroma, the default embedder.
"""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxbudget import ContextMemory
from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.errors import StoreInputError

SETTINGS = settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.fixture(scope="module")
def memory(tmp_path_factory: pytest.TempPathFactory, embedder: OnnxEmbedder) -> ContextMemory:
    folder: Path = tmp_path_factory.mktemp("numpy-inputs")
    return ContextMemory(folder / "db", embedder=embedder, write_behind=False)


scalars = st.one_of(
    st.integers(-(2**31), 2**31 - 1).map(np.int64),
    st.integers(-(2**15), 2**15 - 1).map(np.int32),
    st.integers(0, 255).map(np.uint8),
    st.floats(allow_nan=False, allow_infinity=False, width=32).map(np.float32),
    st.floats(allow_nan=False, allow_infinity=False).map(np.float64),
    st.booleans().map(np.bool_),
)


@SETTINGS
@given(value=scalars)
def test_numpy_scalars_in_metadata_are_kept_as_the_python_values_they_hold(
    memory: ContextMemory, value: np.generic
) -> None:
    session = f"meta-{uuid.uuid4().hex}"
    memory.add_messages(
        session, [{"role": "user", "content": "hello", "metadata": {"v": value}}], progress=False
    )
    (stored,) = memory.history(session)
    kept = stored.metadata["v"]
    assert kept == value.item() and type(kept) is type(value.item())


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (np.datetime64("2024-03-01T10:00:00"), datetime(2024, 3, 1, 10, tzinfo=UTC)),
        (
            np.datetime64("2024-03-01T10:00:00.250", "ms"),
            datetime(2024, 3, 1, 10, 0, 0, 250_000, tzinfo=UTC),
        ),
        (date(2024, 3, 1), datetime(2024, 3, 1, tzinfo=UTC)),
    ],
    ids=["datetime64[s]", "datetime64[ms]", "date"],
)
def test_numpy_and_calendar_dates_are_timestamps(
    memory: ContextMemory, given: object, expected: datetime
) -> None:
    session = f"date-{type(given).__name__}-{expected.microsecond}"
    memory.add_message(session, "user", "when was this", timestamp=given)  # type: ignore[arg-type]
    (stored,) = memory.history(session)
    assert stored.timestamp == expected.timestamp()


@pytest.mark.parametrize(
    ("given", "says"),
    [(np.datetime64("NaT"), "NaT"), (object(), "convert it")],
    ids=["NaT", "an object"],
)
def test_what_is_no_date_is_refused_saying_what_to_pass(
    memory: ContextMemory, given: object, says: str
) -> None:
    with pytest.raises(StoreInputError, match=says):
        memory.add_message("refused", "user", "never stored", timestamp=given)  # type: ignore[arg-type]
    assert memory.history("refused") == []
