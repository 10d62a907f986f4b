"""Watermarks and the read window they imply.

The rule, stated once:

* An **incremental** run reads rows with ``cursor >= watermark - lateness``: a *closed*
  lower bound, so the row that set the watermark is read again (the merge absorbs it as
  unchanged), and rows that arrive late but within ``lateness`` are still picked up.
  With ``partition_by`` every partition value has its own watermark and its own lower
  bound; a partition never seen before is read from its beginning.
* A **backfill** reads ``start <= cursor <= end`` (closed at both ends) for every
  partition, and never moves a live watermark. A date-only ``end`` covers that whole day.
* After the rows are merged, each partition's watermark becomes
  ``max(old watermark, greatest cursor staged)`` in the same transaction as the rows.
  A watermark never moves backwards.
* A **full snapshot** (``sync = "full"``) and a pipeline that reads **files once**
  (``incremental = "files"``) read no window: the whole source, or each new or changed
  file whole, whatever its cursors. With a cursor their watermark is still kept as above
  (``pipeledger state``, freshness); without one they have none, and what stands in for
  it is the snapshot's fingerprint or the files taken (:mod:`pipeledger.state.snapshots`,
  :mod:`pipeledger.state.files`).

Cursor values are ``int``, ``datetime.date`` or ``datetime.datetime``; the text form
stored in the state table is ISO 8601 (UTC for aware timestamps) or a decimal integer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported by the functions on Arrow data: reading state needs no pyarrow
    import pyarrow as pa
    import pyarrow.compute as pc

CursorValue = int | date | datetime
UNPARTITIONED = ""


@dataclass(frozen=True)
class Window:
    """Which cursor values one run reads. ``lower``/``upper`` are closed bounds."""

    lower: CursorValue | None = None
    upper: CursorValue | None = None
    partition_lower: Mapping[str, CursorValue] = field(default_factory=dict)
    backfill: bool = False

    @property
    def is_full(self) -> bool:
        return self.lower is None and self.upper is None and not self.partition_lower


def incremental_window(
    watermarks: Mapping[str, CursorValue], lateness: timedelta | int, partitioned: bool
) -> Window:
    """The window of an incremental run, from the stored watermarks."""
    if not partitioned:
        mark = watermarks.get(UNPARTITIONED)
        return Window(lower=None if mark is None else subtract(mark, lateness))
    return Window(partition_lower={p: subtract(v, lateness) for p, v in watermarks.items()})


def subtract(value: CursorValue, lateness: timedelta | int) -> CursorValue:
    """``value - lateness``; an integer cursor takes an integer lateness."""
    if isinstance(value, datetime | date) and isinstance(lateness, int):
        lateness = timedelta(seconds=lateness) if lateness else timedelta()
    if isinstance(value, int) and isinstance(lateness, timedelta):
        if lateness:
            raise ValueError("an integer cursor needs an integer lateness, not a duration")
        return value
    return value - lateness  # type: ignore[operator]


def is_whole_day(value: CursorValue) -> bool:
    """A date given as a bound (not a timestamp): as an end it means the whole day."""
    return isinstance(value, date) and not isinstance(value, datetime)


def to_text(value: CursorValue) -> str:
    """The canonical text stored for a cursor value."""
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            value = value.astimezone(UTC)
        return value.isoformat(sep="T", timespec="microseconds")
    if isinstance(value, date):
        return value.isoformat()
    return str(int(value))


def from_text(text: str) -> CursorValue:
    """Parse a stored or user-given cursor value: integer, ISO date or ISO timestamp."""
    stripped = text.strip()
    if stripped.lstrip("-").isdigit():
        return int(stripped)
    if len(stripped) == 10:
        return date.fromisoformat(stripped)
    return datetime.fromisoformat(stripped.replace("Z", "+00:00"))


def coerce(value: CursorValue, arrow_type: pa.DataType) -> pa.Scalar:
    """``value`` as an Arrow scalar of the cursor column's type, for comparisons."""
    import pyarrow as pa

    if pa.types.is_timestamp(arrow_type):
        if not isinstance(value, datetime):
            if isinstance(value, int):
                raise ValueError(f"cursor is a timestamp; {value!r} is an integer")
            value = datetime(value.year, value.month, value.day)
        if arrow_type.tz is None and value.tzinfo is not None:
            value = value.astimezone(UTC).replace(tzinfo=None)
        elif arrow_type.tz is not None and value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
    elif pa.types.is_date(arrow_type):
        if isinstance(value, int):
            raise ValueError(f"cursor is a date; {value!r} is an integer")
        if isinstance(value, datetime):
            value = value.date()
    elif not isinstance(value, int):
        raise ValueError(f"cursor is an integer; {to_text(value)!r} is not")
    return pa.scalar(value, type=arrow_type)


def arrow_filter(
    window: Window, cursor: str, cursor_type: pa.DataType, partition_by: str | None
) -> pc.Expression | None:
    """The window as an Arrow expression (also used for Parquet row-group pruning)."""
    if window.is_full:
        return None
    import pyarrow.compute as pc

    column = pc.field(cursor)
    conditions: list[pc.Expression] = []
    if window.lower is not None:
        conditions.append(column >= coerce(window.lower, cursor_type))
    if window.upper is not None:
        upper = window.upper
        if isinstance(upper, date) and is_whole_day(upper):  # the whole day of a date end
            conditions.append(column < coerce(upper + timedelta(days=1), cursor_type))
        else:
            conditions.append(column <= coerce(window.upper, cursor_type))
    if window.partition_lower and partition_by is not None:
        conditions.append(_partition_filter(window, column, cursor_type, partition_by))
    expression = conditions[0]
    for condition in conditions[1:]:
        expression = expression & condition
    return expression


def window_mask(
    window: Window, batch: pa.RecordBatch, cursor: str, partition_by: str | None
) -> pa.ChunkedArray | pa.Array | None:
    """:func:`arrow_filter` evaluated on ``batch``: which rows are in the window (null:
    not known, and dropped by a filter, as the expression's). Compute kernels on the
    columns: filtering with the expression itself loads Arrow's query engine (acero and
    the dataset module, ~25 MB resident)."""
    if window.is_full:
        return None
    import pyarrow as pa
    import pyarrow.compute as pc

    column = batch.column(cursor)
    kind = column.type
    conditions = []
    if window.lower is not None:
        conditions.append(pc.greater_equal(column, coerce(window.lower, kind)))
    if window.upper is not None:
        upper = window.upper
        if isinstance(upper, date) and is_whole_day(upper):  # the whole day of a date end
            conditions.append(pc.less(column, coerce(upper + timedelta(days=1), kind)))
        else:
            conditions.append(pc.less_equal(column, coerce(upper, kind)))
    if window.partition_lower and partition_by is not None:
        partition = pc.cast(batch.column(partition_by), pa.string())
        known = pa.array(list(window.partition_lower), pa.string())
        mask = pc.invert(pc.is_in(partition, value_set=known))
        for value, lower in window.partition_lower.items():
            here = pc.and_kleene(
                pc.equal(partition, value), pc.greater_equal(column, coerce(lower, kind))
            )
            mask = pc.or_kleene(mask, here)
        conditions.append(mask)
    result = conditions[0]
    for condition in conditions[1:]:
        result = pc.and_kleene(result, condition)
    return result


def _partition_filter(
    window: Window, column: pc.Expression, cursor_type: pa.DataType, partition_by: str
) -> pc.Expression:
    import pyarrow as pa
    import pyarrow.compute as pc

    partition = pc.field(partition_by).cast(pa.string())
    known = list(window.partition_lower)
    expression = ~partition.isin(known)
    for value, lower in window.partition_lower.items():
        expression = expression | ((partition == value) & (column >= coerce(lower, cursor_type)))
    return expression


class WatermarkTracker:
    """Greatest cursor seen per partition among the rows staged by one run (a pipeline
    without a cursor sees none: it has no watermark)."""

    def __init__(self, cursor: str | None, partition_by: str | None) -> None:
        self._cursor = cursor
        self._partition_by = partition_by
        self.seen: dict[str, CursorValue] = {}
        self.least: CursorValue | None = None  # over every partition

    def observe(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows == 0 or not self._cursor:
            return
        import pyarrow as pa
        import pyarrow.compute as pc

        bounds = pc.min_max(batch.column(self._cursor))
        low, high = bounds["min"].as_py(), bounds["max"].as_py()
        if low is not None and (self.least is None or low < self.least):
            self.least = low
        if self._partition_by is None:
            self._raise(UNPARTITIONED, high)
            return
        table = pa.table(
            {
                "p": batch.column(self._partition_by).cast(pa.string()),
                "c": batch.column(self._cursor),
            }
        )
        grouped = table.group_by("p").aggregate([("c", "max")])
        for part, high in zip(grouped["p"].to_pylist(), grouped["c_max"].to_pylist(), strict=True):
            self._raise(part, high)

    def _raise(self, partition: str, value: CursorValue | None) -> None:
        if value is None:
            return
        current = self.seen.get(partition)
        if current is None or value > current:  # type: ignore[operator]
            self.seen[partition] = value

    def advanced(self, before: Mapping[str, CursorValue]) -> dict[str, CursorValue]:
        """The watermarks to store: ``max(before, seen)`` for every partition that moved."""
        moved: dict[str, CursorValue] = {}
        for partition, value in self.seen.items():
            old = before.get(partition)
            if old is None or value > old:  # type: ignore[operator]
                moved[partition] = value
        return moved
