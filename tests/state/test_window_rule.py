"""The watermark rule: a closed lower bound moved back by the lateness, a full read the first
time, cursors as text and the greatest cursor seen per partition."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pyarrow as pa
import pytest

from pipeledger.state.watermark import (
    CursorValue,
    WatermarkTracker,
    Window,
    arrow_filter,
    from_text,
    incremental_window,
    to_text,
)

T = datetime(2024, 1, 2, 12, 0, tzinfo=UTC)


def test_incremental_window_is_closed_and_subtracts_lateness() -> None:
    window = incremental_window({"": T}, timedelta(hours=2), partitioned=False)
    assert window == Window(lower=T - timedelta(hours=2))
    batch = pa.record_batch(
        {
            "c": pa.array(
                [T - timedelta(hours=2, microseconds=1), T - timedelta(hours=2), T],
                pa.timestamp("us", tz="UTC"),
            )
        }
    )
    expression = arrow_filter(window, "c", batch.schema.field("c").type, None)
    assert batch.filter(expression).num_rows == 2


def test_first_run_reads_everything() -> None:
    assert incremental_window({}, timedelta(hours=2), partitioned=False).is_full
    assert arrow_filter(Window(), "c", pa.int64(), None) is None


def test_integer_cursor_takes_integer_lateness() -> None:
    assert incremental_window({"": 100}, 5, partitioned=False).lower == 95
    with pytest.raises(ValueError):
        incremental_window({"": 100}, timedelta(hours=1), partitioned=False)


@pytest.mark.parametrize(
    "value",
    [7, date(2024, 1, 2), datetime(2024, 1, 2, 3, 4, 5, 6), datetime(2024, 1, 2, 3, tzinfo=UTC)],
)
def test_cursor_text_round_trips(value: CursorValue) -> None:
    assert from_text(to_text(value)) == value


def test_tracker_keeps_the_greatest_cursor_per_partition() -> None:
    tracker = WatermarkTracker("c", "p")
    tracker.observe(pa.record_batch({"p": ["a", "b", "a"], "c": [3, 9, 5]}))
    tracker.observe(pa.record_batch({"p": ["a"], "c": [4]}))
    assert tracker.seen == {"a": 5, "b": 9}
    assert tracker.advanced({"a": 7, "b": 2}) == {"b": 9}
