"""Reconcile windows: the UTC hour, day or month a row's cursor falls in (or a width of
integer cursor values). Each window is half-open, ``start <= cursor < end``; SQL labels
every row with its window (the same text on both warehouses, so source and target rows are
grouped by one expression), and a label turns back into its bounds here, or into the
closed ranges a backfill of that window takes. A pipeline without a cursor has one window,
its whole snapshot (:meth:`Grain.whole`), with no bounds."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import get_args

from pipeledger.errors import ConfigError
from pipeledger.state.watermark import CursorValue, to_text
from pipeledger.warehouse.dialect import Dialect, TimeUnit

INTEGER_TYPES = frozenset({"smallint", "integer", "bigint"})
_TICK = timedelta(microseconds=1)
WHOLE = "all"  # the one window of a pipeline without a cursor


@dataclass(frozen=True)
class Grain:
    """How rows are grouped into windows: a time unit, or a width of integer values."""

    cursor_type: str  # the cursor column's SQL type ("" without a cursor)
    unit: TimeUnit | None = None
    width: int | None = None

    @classmethod
    def whole(cls) -> Grain:
        """One window: the whole snapshot of a pipeline without a cursor."""
        return cls("")

    @property
    def is_whole(self) -> bool:
        return self.unit is None and self.width is None

    @classmethod
    def parse(cls, by: str | None, cursor_type: str, pipeline: str) -> Grain:
        """``--by``: hour, day (the default) or month for a time cursor; a width (``1000``)
        for an integer cursor."""
        if cursor_type in INTEGER_TYPES:
            if by is None or not by.isdigit() or int(by) < 1:
                raise ConfigError(
                    f"pipeline {pipeline}: the cursor is an integer; give --by N, the width of "
                    "a window in cursor values (e.g. --by 1000)"
                )
            return cls(cursor_type, width=int(by))
        unit = by or "day"
        if unit not in get_args(TimeUnit) or (unit == "hour" and cursor_type == "date"):
            kinds = "day or month" if cursor_type == "date" else "hour, day or month"
            raise ConfigError(f"pipeline {pipeline}: --by {unit}: use {kinds} for this cursor")
        return cls(cursor_type, unit=unit)  # type: ignore[arg-type]

    @property
    def name(self) -> str:
        return WHOLE if self.is_whole else self.unit or str(self.width)

    def label(self, d: Dialect, column: str) -> str:
        """SQL: the window of ``column`` (a qualified, quoted cursor) as text."""
        if self.is_whole:
            return f"CAST('{WHOLE}' AS TEXT)"  # PostgreSQL groups by no bare constant
        if self.unit is not None:
            return d.time_label(column, self.unit)
        n = int(self.width or 1)  # a validated integer, inlined
        up, down = d.quotient(column, str(n)), d.quotient(f"({column} + 1)", str(n))
        floor = f"(CASE WHEN {column} >= 0 THEN {up} ELSE {down} - 1 END)"
        return f"CAST({floor} * {n} AS TEXT)"

    @property
    def fine(self) -> Grain:
        """The finest grain whose windows lie inside this one's: the hour for a timestamp
        cursor (the day for a date), else this grain. Sums compared per fine window narrow
        the join of source and target to the rows of the fine windows that differ."""
        if self.unit is None:
            return self
        return Grain(self.cursor_type, unit="day" if self.cursor_type == "date" else "hour")

    def coarse(self, fine_label: str) -> str:
        """The label of this grain's window holding a :attr:`fine` window (labels are
        prefixes of finer ones: ``2024-01-05T10`` is in ``2024-01-05`` and ``2024-01``)."""
        if self.unit is None:
            return fine_label
        return fine_label[: _WIDTHS[self.unit]]

    def bucket(self, d: Dialect, column: str) -> str:
        """SQL: a value per window of ``column`` (as :meth:`label`), cheaper per row than
        the label itself; :meth:`bucket_label` names its window."""
        if self.unit is not None:
            return d.time_bucket(column, self.unit)
        return self.label(d, column)

    def bucket_label(self, d: Dialect, bucket: str) -> str:
        """SQL: the window's label of a :meth:`bucket` value."""
        return d.time_label(bucket, self.unit) if self.unit is not None else bucket

    def bounds(self, label: str) -> tuple[CursorValue, CursorValue] | None:
        """The window a label names: ``[start, end)`` (None: the whole snapshot)."""
        if self.is_whole:
            return None
        if self.width is not None:
            return int(label), int(label) + self.width
        unit = self.unit or "day"
        first = datetime.strptime(label, _FORMATS[unit])
        end = _next(first, unit)
        if self.cursor_type == "date":
            return first.date(), end.date()
        if self.cursor_type == "timestamptz":
            return first.replace(tzinfo=UTC), end.replace(tzinfo=UTC)
        return first, end

    def backfill_ranges(
        self, labels: Sequence[str], at_most: timedelta | None
    ) -> list[tuple[str, str]]:
        """The closed ranges (as ``backfill --start/--end`` take them) that cover exactly
        these windows: windows that touch share a range (one read of the source instead of
        several), each range no wider than ``at_most`` (a pipeline's ``max_backfill``)."""
        spans: list[list[CursorValue]] = []
        bounds = [b for b in map(self.bounds, labels) if b is not None]
        for start, end in sorted(bounds):
            if spans and spans[-1][1] == start:
                spans[-1][1] = end
            else:
                spans.append([start, end])
        return [piece for start, end in spans for piece in self._pieces(start, end, at_most)]

    def _pieces(
        self, start: CursorValue, end: CursorValue, at_most: timedelta | None
    ) -> list[tuple[str, str]]:
        if isinstance(start, int) and isinstance(end, int):
            return [(str(start), str(end - 1))]
        first, last = _moment(start), _moment(end)
        step = at_most or (last - first)
        if self.cursor_type == "date":  # whole days: a date-only end covers its day
            step = timedelta(days=max(1, step.days))
        pieces = []
        while first < last:
            stop = min(first + step, last)
            pieces.append(self._closed(first, stop))
            first = stop
        return pieces

    def _closed(self, first: datetime, stop: datetime) -> tuple[str, str]:
        if self.cursor_type == "date":
            return to_text(first.date()), to_text((stop - timedelta(days=1)).date())
        return to_text(first), to_text(stop - _TICK)


_FORMATS = {"hour": "%Y-%m-%dT%H", "day": "%Y-%m-%d", "month": "%Y-%m"}
_WIDTHS = {"hour": 13, "day": 10, "month": 7}


def _next(moment: datetime, unit: str) -> datetime:
    if unit == "hour":
        return moment + timedelta(hours=1)
    if unit == "day":
        return moment + timedelta(days=1)
    return moment.replace(year=moment.year + moment.month // 12, month=moment.month % 12 + 1)


def _moment(value: CursorValue) -> datetime:
    if isinstance(value, datetime):
        return value
    assert isinstance(value, date)
    return datetime(value.year, value.month, value.day)
