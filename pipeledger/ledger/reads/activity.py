"""What the ledger's recent activity looks like at a glance: :func:`work_by_state` (runs
per hour and state) and :func:`volume_days` (rows per interval, per pipeline and day).

- **Work by state**: the runs that started in each UTC hour of the window, by the state
  they are in now (a run still going counts as ``running`` in the hour it started). The
  states are whatever the runs hold: a state a later release adds shows up as it is.
- **Volume per day**: per pipeline and UTC day, the volume samples (the intervals, see
  :mod:`pipeledger.ledger.reads.queries`) and the rows they wrote, from the daily rollup:
  the days behind the volume verdict, without reading the runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from pipeledger.ledger.reads.answers import Answer, _day
from pipeledger.ledger.tables import DAYS, RUNS, tenant_is
from pipeledger.warehouse.dialect import Dialect
from pipeledger.warehouse.session import Session


@dataclass(frozen=True, kw_only=True)
class WorkHour(Answer):
    hour: str  # UTC, as 2024-06-15T10
    status: str
    runs: int


def work_by_state_sql(d: Dialect) -> str:
    """Runs per UTC hour of their start and state, since the parameter (on the
    started_at index)."""
    hour = d.time_label("started_at", "hour")
    return (
        f"SELECT {hour} AS hour, status, count(*) FROM {d.table(RUNS)} w "
        f"WHERE {tenant_is(d, 'w')} AND started_at >= {d.param} "
        f"GROUP BY {hour}, status ORDER BY hour, status"
    )


def hour_start(now: datetime, hours: int) -> datetime:
    """The start of the first whole UTC hour of the ``hours`` ending with ``now``'s hour."""
    top = now.replace(minute=0, second=0, microsecond=0)
    return top - timedelta(hours=hours - 1)


def work_by_state(session: Session, now: datetime, hours: int = 24) -> list[WorkHour]:
    """Per UTC hour of the last ``hours`` (this one included) and state: the runs that
    started in it. Hours without runs are left out."""
    rows = session.query(work_by_state_sql(session.dialect), [hour_start(now, hours)])
    return [WorkHour(hour=str(h), status=str(s), runs=int(n)) for h, s, n in rows]


@dataclass(frozen=True, kw_only=True)
class VolumeDay(Answer):
    pipeline: str
    day: str  # UTC, as 2024-06-15
    samples: int  # intervals
    rows: int  # written by them

    @property
    def mean(self) -> float | None:
        """Rows per interval that day."""
        return self.rows / self.samples if self.samples else None


def volume_days_sql(d: Dialect, pipeline: bool, among: int = 0) -> str:
    """Parameters: the first day, then the pipeline if ``pipeline``, else the ``among``
    pipelines if any (the overview's page of nodes: their days, not every node's)."""
    only = f" AND pipeline = {d.param}" if pipeline else ""
    if among and not pipeline:
        only = f" AND pipeline IN ({d.marks(among)})"
    return (
        f"SELECT pipeline, day, samples, sample_rows FROM {d.table(DAYS)} y "
        f"WHERE {tenant_is(d, 'y')} AND day >= {d.param}{only} AND samples > 0 "
        "ORDER BY pipeline, day"
    )


def volume_days(
    session: Session,
    now: datetime,
    pipeline: str | None = None,
    days: int = 30,
    among: Sequence[str] = (),
) -> list[VolumeDay]:
    """Per pipeline (or one, or those ``among``) and UTC day of the last ``days`` (today
    included) that had intervals: how many, and the rows they wrote."""
    first: list[Any] = [_day(now - timedelta(days=days - 1))]
    params = first if pipeline is None else [*first, pipeline]
    if pipeline is None and among:
        params += list(among)
    sql = volume_days_sql(session.dialect, pipeline is not None, 0 if pipeline else len(among))
    rows = session.query(sql, params)
    return [
        VolumeDay(pipeline=str(p), day=str(day), samples=int(n), rows=int(total))
        for p, day, n, total in rows
    ]
