"""Lateness, measured: how late a row was, the small histogram a run keeps of it, and what
a pipeline's history says about its ``lateness`` buffer.

A row's **lateness** is ``watermark - cursor``, with the watermark (of the row's partition)
that the run which saw the row started from. A row an incremental run reads with
``cursor < watermark`` arrived after an earlier run had passed its cursor: the buffer
(``lateness``) **caught** it. A row later than the buffer is **missed**: no incremental run
reads it (``pipeledger.runs.load.late`` says who notices). Rows read below the watermark that the
target already held unchanged were **re-read** for nothing: the buffer's cost.

Lateness is in whole seconds, rounded up, for time cursors (a date counts from its
midnight) and in cursor units for integer cursors.

A run keeps a **histogram** of the lateness of the rows it caught and of those it knows the
buffer missed. Each value is rounded *up* to two significant digits (1, 2, ..., 99, 100, 110,
..., 990, 1000, 1100, ...): at most 90 buckets per power of ten, so a run's record stays
small whatever it read, and a percentile read from the histograms is exact to two
significant digits and never below the true value (a buffer that long catches the row).
Percentiles are nearest-rank: the ``q``-quantile is the smallest value with at least
``ceil(q * n)`` of the ``n`` values at or below it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING, Any

from pipeledger.state.watermark import CursorValue, coerce, from_text

# numpy and pyarrow are imported where rows are measured: reading a report needs neither
if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

Histogram = Mapping[int, int]  # rounded lateness -> rows
_POWERS = [10**n for n in range(19)]
_PER_UNIT = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}
DAY_S = 86_400


def rounded(values: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Each (positive integer) value rounded up to two significant digits."""
    import numpy as np

    powers = np.array(_POWERS, dtype=np.int64)
    values = np.asarray(values, dtype=np.int64)
    digits = np.searchsorted(powers, values, side="right")  # 1234 -> 4
    scale = powers[np.maximum(digits - 2, 0)]
    out: np.ndarray[Any, Any] = (values + scale - 1) // scale * scale
    return out


def histogram(values: np.ndarray[Any, Any]) -> dict[int, int]:
    """How many values fall in each rounded bucket."""
    import numpy as np

    if not len(values):
        return {}
    buckets, counts = np.unique(rounded(values), return_counts=True)
    return {int(b): int(c) for b, c in zip(buckets, counts, strict=True)}


def merged(histograms: Iterable[Histogram]) -> dict[int, int]:
    total: dict[int, int] = {}
    for one in histograms:
        for bucket, count in one.items():
            total[int(bucket)] = total.get(int(bucket), 0) + int(count)
    return total


def percentile(hist: Histogram, q: float) -> int | None:
    """The nearest-rank ``q``-quantile of the histogram's values (None when empty)."""
    n = sum(hist.values())
    if not n:
        return None
    rank, seen = max(1, math.ceil(q * n)), 0
    for bucket in sorted(hist):
        seen += hist[bucket]
        if seen >= rank:
            return bucket
    return max(hist)


def seconds(span: timedelta | int) -> int:
    """A lateness setting (a duration, or cursor units) as the number lateness is told in."""
    return math.ceil(span.total_seconds()) if isinstance(span, timedelta) else int(span)


def late_by(watermark: CursorValue, cursor: CursorValue) -> int:
    """How late one row is: ``watermark - cursor``, rounded up (module docstring)."""
    if isinstance(watermark, int) and isinstance(cursor, int):
        return watermark - cursor
    later, earlier = _instant(watermark), _instant(cursor)
    if (later.tzinfo is None) != (earlier.tzinfo is None):  # a date against a timestamptz
        later, earlier = later.replace(tzinfo=None), earlier.replace(tzinfo=None)
    return math.ceil((later - earlier).total_seconds())


def _instant(value: CursorValue) -> datetime:
    if isinstance(value, datetime):
        return value
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day)
    raise ValueError(f"a time cursor cannot be compared with the integer {value!r}")


def stored_cursor(value: object) -> CursorValue:
    """A cursor value as a warehouse returns it (SQLite: its ISO text)."""
    if isinstance(value, int | date):
        return value
    return from_text(str(value))


def late_by_array(watermark: CursorValue, cursors: pa.Array) -> np.ndarray[Any, Any]:
    """:func:`late_by` of every value of an Arrow cursor column (no Python per row)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = cursors.type
    ticks_type = pa.int32() if pa.types.is_date32(kind) else pa.int64()  # days, or ticks
    mark = int(pc.cast(coerce(watermark, kind), ticks_type).as_py())
    ticks = pc.cast(cursors, ticks_type).to_numpy(zero_copy_only=False).astype(np.int64)
    behind: np.ndarray[Any, Any] = mark - ticks
    if pa.types.is_timestamp(kind):
        return -(-behind // _PER_UNIT[kind.unit])
    return behind * DAY_S if pa.types.is_date(kind) else behind


@dataclass(frozen=True)
class RunLateness:
    """What one run learned about late rows; kept in its ledger record (``extra.lateness``).

    ``measured``: an incremental run that started from a watermark (a history's runs).
    ``rows_new`` and ``advanced_s`` (how far its watermark moved) give the rate at which
    rows arrive per unit of cursor, from which the cost of another buffer is estimated.
    """

    buffer_s: int
    measured: bool = False
    rows_caught: int = 0
    rows_reread: int = 0
    rows_missed: int = 0
    caught: Histogram = field(default_factory=dict)
    missed: Histogram = field(default_factory=dict)
    max_caught_s: int | None = None
    rows_new: int = 0
    advanced_s: int = 0
    missed_cursors: tuple[str, str] | None = None  # least and greatest cursor missed
    missed_in: tuple[str, ...] = ()  # where the missed rows were seen (files)

    def to_json(self) -> dict[str, Any]:
        return {
            "buffer_s": self.buffer_s,
            "measured": self.measured,
            "rows_caught": self.rows_caught,
            "rows_reread": self.rows_reread,
            "rows_missed": self.rows_missed,
            "caught": {str(k): v for k, v in sorted(self.caught.items())},
            "missed": {str(k): v for k, v in sorted(self.missed.items())},
            "max_caught_s": self.max_caught_s,
            "rows_new": self.rows_new,
            "advanced_s": self.advanced_s,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunLateness:
        def hist(name: str) -> dict[int, int]:
            return {int(k): int(v) for k, v in (data.get(name) or {}).items()}

        return cls(
            buffer_s=int(data.get("buffer_s") or 0),
            measured=bool(data.get("measured")),
            rows_caught=int(data.get("rows_caught") or 0),
            rows_reread=int(data.get("rows_reread") or 0),
            rows_missed=int(data.get("rows_missed") or 0),
            caught=hist("caught"),
            missed=hist("missed"),
            max_caught_s=data.get("max_caught_s"),
            rows_new=int(data.get("rows_new") or 0),
            advanced_s=int(data.get("advanced_s") or 0),
        )


SUGGESTED_SHARE = 0.999  # of late rows a suggested buffer would have caught


@dataclass(frozen=True)
class LatenessReport:
    """A pipeline's late rows over its history (``pipeledger lateness``)."""

    pipeline: str
    runs: int
    late_rows_caught: int
    late_rows_missed: int
    lateness_p50_s: int | None
    lateness_p90_s: int | None
    lateness_p99_s: int | None
    lateness_max_s: int | None
    buffer_s: int
    rows_reread_per_run: float | None
    suggested_buffer_s: int
    suggested_rows_reread_per_run: float | None

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def report(pipeline: str, buffer_s: int, runs: Iterable[RunLateness]) -> LatenessReport:
    """Sum the runs' records. The suggested buffer is the lateness that 99.9 % of all late
    rows (caught and missed) did not exceed; its cost, the rows a run would re-read with
    it, is the rate rows arrive at (rows new to a run per unit its watermark advanced)
    times the buffer."""
    records = list(runs)
    measured = [r for r in records if r.measured]
    caught = merged(r.caught for r in records)
    everything = merged([caught, *(r.missed for r in records)])
    reread = sum(r.rows_reread for r in measured)
    suggested = percentile(everything, SUGGESTED_SHARE) or 0
    advanced = sum(r.advanced_s for r in measured)
    rate = sum(r.rows_new for r in measured) / advanced if advanced else None
    maxima = [r.max_caught_s for r in records if r.max_caught_s is not None]
    return LatenessReport(
        pipeline=pipeline,
        runs=len(measured),
        late_rows_caught=sum(r.rows_caught for r in records),
        late_rows_missed=sum(r.rows_missed for r in records),
        lateness_p50_s=percentile(caught, 0.5),
        lateness_p90_s=percentile(caught, 0.9),
        lateness_p99_s=percentile(caught, 0.99),
        lateness_max_s=max(maxima, default=None),
        buffer_s=buffer_s,
        rows_reread_per_run=reread / len(measured) if measured else None,
        suggested_buffer_s=suggested,
        suggested_rows_reread_per_run=None if rate is None else round(rate * suggested, 1),
    )
