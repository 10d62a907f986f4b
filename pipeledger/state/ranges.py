"""An explicit range to reprocess (``pipeledger backfill --start --end``): the window it
covers, refused when inverted or wider than the pipeline's ``max_backfill``, and the data
interval the ledger files it under. A date-only end covers that whole day."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

from pipeledger.common.durations import span
from pipeledger.errors import BackfillRangeError
from pipeledger.state.watermark import Window, from_text, is_whole_day


def backfill_window(start: str, end: str, max_backfill: timedelta | None, pipeline: str) -> Window:
    """``start <= cursor <= end``; refused when inverted or wider than ``max_backfill``."""
    try:
        lower, upper = from_text(start), from_text(end)
    except ValueError as exc:
        raise BackfillRangeError(
            f"pipeline {pipeline}: --start/--end must be ISO dates, timestamps or integers ({exc})"
        ) from None
    if isinstance(lower, int) != isinstance(upper, int):
        raise BackfillRangeError(f"pipeline {pipeline}: --start and --end are of different kinds")
    if isinstance(lower, int) and isinstance(upper, int):
        if lower > upper:
            raise BackfillRangeError(f"pipeline {pipeline}: --start {start} is after --end {end}")
        if max_backfill is not None:
            raise BackfillRangeError(
                f"pipeline {pipeline}: max_backfill is a duration but the range is integers"
            )
        return Window(lower=lower, upper=upper, backfill=True)
    assert isinstance(lower, date) and isinstance(upper, date)
    first, last = utc_naive(lower), utc_naive(upper)
    inverted = first >= last + timedelta(days=1) if is_whole_day(upper) else first > last
    if inverted:  # a date-only end covers that whole day
        raise BackfillRangeError(f"pipeline {pipeline}: --start {start} is after --end {end}")
    width = utc_naive(upper) - utc_naive(lower)
    if max_backfill is not None and width > max_backfill:
        raise BackfillRangeError(
            f"pipeline {pipeline}: range {start} .. {end} spans {span(width.total_seconds())}, "
            f"more than max_backfill = {span(max_backfill.total_seconds())}; split it into "
            "smaller backfills; nothing was read or written"
        )
    return Window(lower=lower, upper=upper, backfill=True)


def data_interval(window: Window) -> tuple[datetime, datetime] | None:
    """The interval of a date or timestamp window, as the ledger files a backfill."""
    lower, upper = window.lower, window.upper
    if not isinstance(lower, date) or not isinstance(upper, date):
        return None
    end = utc_naive(upper) + (timedelta(days=1) if is_whole_day(upper) else timedelta())
    return (utc_naive(lower).replace(tzinfo=UTC), end.replace(tzinfo=UTC))


def utc_naive(value: date) -> datetime:
    """A date or timestamp as a naive UTC timestamp, so bounds of any kind compare."""
    moment = value if isinstance(value, datetime) else datetime(value.year, value.month, value.day)
    return moment.astimezone(UTC).replace(tzinfo=None) if moment.tzinfo else moment
