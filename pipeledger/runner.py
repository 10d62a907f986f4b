"""The library face of pipeledger: run, backfill and read state. The CLI is a thin layer on it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

from pipeledger.adapters import open_warehouse
from pipeledger.config import Config
from pipeledger.errors import BackfillRangeError
from pipeledger.load import sql
from pipeledger.load.loader import ProgressCallback, load_pipeline
from pipeledger.load.result import LoadResult
from pipeledger.watermark import CursorValue, Window, from_text


def run(
    config: Config, names: Sequence[str] = (), *, on_progress: ProgressCallback | None = None
) -> list[LoadResult]:
    """Incremental run of the named pipelines (all when none is named), in order.

    Raises the first failure after the pipelines before it have committed; use
    :func:`run_one` to handle pipelines one by one.
    """
    return [run_one(config, name, on_progress=on_progress) for name in names or config.pipelines]


def run_one(
    config: Config, name: str, *, on_progress: ProgressCallback | None = None
) -> LoadResult:
    config.pipeline(name)
    warehouse = open_warehouse(config.warehouse_url)
    return load_pipeline(name, config, warehouse, on_progress=on_progress)


def backfill_window(start: str, end: str, max_backfill: timedelta | None, pipeline: str) -> Window:
    """``start <= cursor <= end``; refused when inverted or wider than ``max_backfill``."""
    try:
        lower, upper = from_text(start), from_text(end)
    except ValueError as exc:
        raise BackfillRangeError(
            f"pipeline {pipeline}: --start/--end must be ISO dates, timestamps or integers ({exc})"
        ) from None
    if type(lower) is not type(upper) and not _both_times(lower, upper):
        raise BackfillRangeError(f"pipeline {pipeline}: --start and --end are of different kinds")
    if _greater(lower, upper):
        raise BackfillRangeError(f"pipeline {pipeline}: --start {start} is after --end {end}")
    if max_backfill is not None:
        span = _span(lower, upper)
        if span is None:
            raise BackfillRangeError(
                f"pipeline {pipeline}: max_backfill is a duration but the range is integers"
            )
        if span > max_backfill:
            raise BackfillRangeError(
                f"pipeline {pipeline}: range {start} .. {end} spans {span}, more than "
                f"max_backfill = {max_backfill}; split it into smaller backfills"
            )
    return Window(lower=lower, upper=upper, backfill=True)


def _as_datetime(value: CursorValue) -> datetime:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=None)
    assert isinstance(value, date)
    return datetime(value.year, value.month, value.day)


def _both_times(a: CursorValue, b: CursorValue) -> bool:
    return isinstance(a, date) and isinstance(b, date)


def _naive(value: CursorValue) -> datetime:
    moment = _as_datetime(value)
    if moment.tzinfo is not None:
        from datetime import UTC

        moment = moment.astimezone(UTC).replace(tzinfo=None)
    return moment


def _greater(a: CursorValue, b: CursorValue) -> bool:
    if isinstance(a, int) and isinstance(b, int):
        return a > b
    return _naive(a) > _naive(b)


def _span(a: CursorValue, b: CursorValue) -> timedelta | None:
    if isinstance(a, int) or isinstance(b, int):
        return None
    return _naive(b) - _naive(a)


def backfill(
    config: Config,
    name: str,
    start: str,
    end: str,
    *,
    on_progress: ProgressCallback | None = None,
) -> LoadResult:
    """Reprocess exactly ``start <= cursor <= end`` with the same merge; the live
    watermark does not move."""
    pipeline = config.pipeline(name)
    window = backfill_window(start, end, pipeline.max_backfill, name)
    warehouse = open_warehouse(config.warehouse_url)
    return load_pipeline(
        name, config, warehouse, mode="backfill", window=window, on_progress=on_progress
    )


@dataclass(frozen=True)
class WatermarkRow:
    pipeline: str
    partition: str
    cursor_column: str
    cursor_type: str
    watermark: str
    run_id: str
    updated_at: str

    def to_json(self) -> dict[str, Any]:
        return {
            "pipeline": self.pipeline,
            "partition": self.partition or None,
            "cursor_column": self.cursor_column,
            "cursor_type": self.cursor_type,
            "watermark": self.watermark,
            "run_id": self.run_id,
            "updated_at": self.updated_at,
        }


def state(config: Config, name: str | None = None) -> list[WatermarkRow]:
    """Watermarks per pipeline and partition, read without taking any lock."""
    if name is not None:
        config.pipeline(name)
    warehouse = open_warehouse(config.warehouse_url)
    with warehouse.session(write=False) as session:
        if session.table_columns(sql.STATE_TABLE) is None:
            return []
        rows = session.query(sql.read_all_state(session.dialect))
    out = [
        WatermarkRow(*(str(v) if not isinstance(v, datetime) else v.isoformat() for v in r))
        for r in rows
    ]
    return [row for row in out if name is None or row.pipeline == name]
