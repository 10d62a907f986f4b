"""A backfill's --start/--end as a window: a date-only end covers its whole day, an end
before the start and a range over max_backfill are refused."""

from __future__ import annotations

from datetime import date, timedelta

import pytest

from pipeledger.errors import BackfillRangeError
from pipeledger.state.ranges import backfill_window
from pipeledger.state.watermark import from_text


def test_backfill_window_rules() -> None:
    window = backfill_window("2024-01-01", "2024-01-31", timedelta(days=31), "orders")
    assert (window.lower, window.upper, window.backfill) == (
        date(2024, 1, 1),
        date(2024, 1, 31),
        True,
    )
    with pytest.raises(BackfillRangeError, match="after --end"):
        backfill_window("2024-02-01", "2024-01-01", None, "orders")
    with pytest.raises(BackfillRangeError, match="max_backfill"):
        backfill_window("2024-01-01", "2024-03-01", timedelta(days=30), "orders")
    with pytest.raises(BackfillRangeError):
        backfill_window("yesterday", "today", None, "orders")


@pytest.mark.parametrize(
    "start",
    [
        "2024-01-01T09:00:00Z",
        "2024-01-01T23:59:59.999999+00:00",
        "2024-01-01 12:00:00",
        "2024-01-01",
    ],
)
def test_a_date_only_backfill_end_covers_its_whole_day(start: str) -> None:
    window = backfill_window(start, "2024-01-01", None, "orders")
    assert (window.lower, window.upper) == (from_text(start), date(2024, 1, 1))


@pytest.mark.parametrize(
    ("start", "end"),
    [
        ("2024-01-02T00:00:00Z", "2024-01-01"),  # the first instant after the end's day
        ("2024-01-02", "2024-01-01"),
        ("2024-01-01T10:00:00Z", "2024-01-01T09:59:59Z"),  # a timestamp end is exact
        ("2024-01-01T01:00:00+02:00", "2023-12-31T23:59:00+01:00"),  # 23:00Z after 22:59Z
    ],
)
def test_an_end_before_the_start_is_refused(start: str, end: str) -> None:
    with pytest.raises(BackfillRangeError, match="after --end"):
        backfill_window(start, end, None, "orders")
