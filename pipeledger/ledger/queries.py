"""Questions the ledger answers, as library functions over a read-only session.

The CLI, ``--json`` and the web page are thin faces over these functions. Each returns
frozen dataclasses with a ``to_json()``; functions that depend on the time take ``now``
explicitly, so the answers are reproducible.

Definitions used throughout, stated once:

- **The latest run** of a pipeline is the one that started last (ties: the greatest run id).
  **The last success** is the latest run with status ``success`` that is not a reconcile
  (``pipeledger reconcile`` compares, it loads nothing); its ``ended_at`` is what
  freshness is measured from. :func:`last_success` (``Ledger.last_successful_run``) reads
  the latest successful run that is not a backfill, replay or reconcile: the frontier of
  the data. Health counts the runs that load (not reconciles).
- **Rows written** by a run are ``rows_inserted + rows_updated`` (a missing count is 0).
- **Volume** (:func:`volume_anomalies`) compares the rows written by the latest successful
  non-backfill run with the successful non-backfill runs that *started* in the 30 UTC days
  before the UTC day of ``now`` (today's runs and the latest run itself are not history).
  Backfills re-load old data on purpose, so they are no signal of a source's volume.

  ====================  ==================================================================
  level                 when
  ====================  ==================================================================
  CRITICAL              the run wrote 0 rows (whatever the history); or |z| > 3; or the
                        history is constant (stddev 0) and the run differs from it
  INSUFFICIENT_HISTORY  fewer than ``min_history`` (at least 2) runs of history
  WARNING               |z| > 2
  OK                    otherwise (z = 0 when the history is constant and the run equals it)
  ====================  ==================================================================

  ``z = (x - mean) / stddev`` with the sample standard deviation. Counts, sums and sums of
  squares are aggregated in SQL (exactly, in integers) and finished here, the same way on
  both dialects (SQLite has no ``stddev``).
- **Health** (:func:`pipeline_status`) starts from the success rate of the last 7 days
  (successes / finished attempts, where every status but ``running`` and ``skipped`` is
  finished): HEALTHY at >= 90 %, DEGRADED at >= 50 %, CRITICAL below; UNKNOWN when nothing
  finished in 7 days. A volume WARNING makes it at least DEGRADED, a volume CRITICAL makes it
  CRITICAL, and a declared freshness SLA that is exceeded makes it at least DEGRADED.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, fields, is_dataclass, replace
from datetime import UTC, datetime, time, timedelta
from enum import StrEnum
from typing import Any

from pipeledger.errors import AmbiguousRunId
from pipeledger.lateness import LatenessReport, RunLateness, report
from pipeledger.ledger.model import stored_datetime
from pipeledger.ledger.schema import (
    AUDIT,
    DEPENDENCIES,
    PIPELINES,
    QUALITY,
    RECONCILIATIONS,
    RUNS,
    SNAPSHOTS,
    TASKS,
)
from pipeledger.warehouse.dialect import Dialect
from pipeledger.warehouse.session import Session

STATUS_WINDOW = timedelta(days=7)
VOLUME_WINDOW_DAYS = 30
DEFAULT_SLA = timedelta(hours=24)
MIN_PREFIX = 8
UNFINISHED = ("running", "skipped")


class Level(StrEnum):
    OK = "OK"
    WARNING = "WARNING"
    CRITICAL = "CRITICAL"
    INSUFFICIENT_HISTORY = "INSUFFICIENT_HISTORY"


class Health(StrEnum):
    HEALTHY = "HEALTHY"
    UNKNOWN = "UNKNOWN"
    DEGRADED = "DEGRADED"
    CRITICAL = "CRITICAL"

    @property
    def rank(self) -> int:
        return list(Health).index(self)

    def at_least(self, floor: Health) -> Health:
        return self if self.rank >= floor.rank else floor


# -- values -----------------------------------------------------------------------------


def _as_float(value: Any) -> float | None:
    return None if value is None else float(value)


def _as_json(d: Dialect, value: object) -> Any:
    """JSON columns: jsonb arrives parsed (PostgreSQL), text does not (SQLite)."""
    return json.loads(value) if not d.json_parsed and isinstance(value, str) else value


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, StrEnum):
        return value.value
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if is_dataclass(value):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    return value


class _Json:
    def to_json(self) -> dict[str, Any]:
        payload: dict[str, Any] = _plain(self)
        return payload


def _columns(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in fields(cls))


def _build(cls: type[Any], row: Sequence[Any], datetimes: frozenset[str]) -> Any:
    values = dict(zip(_columns(cls), row, strict=False))
    for name in datetimes & values.keys():
        values[name] = stored_datetime(values[name])
    return cls(**values)


def _day_start(now: datetime) -> datetime:
    return datetime.combine(now.astimezone(UTC).date(), time(), UTC)


def written(alias: str) -> str:
    """SQL for the rows a run wrote."""
    return f"(COALESCE({alias}.rows_inserted, 0) + COALESCE({alias}.rows_updated, 0))"


def _latest(d: Dialect, outer: str, condition: str = "") -> str:
    """A correlated subquery: the run id of ``outer``'s latest run meeting ``condition``
    (one probe of the (pipeline, started_at) index per pipeline)."""
    return (
        f"(SELECT r.run_id FROM {d.table(RUNS)} r WHERE r.pipeline = {outer}{condition} "
        "ORDER BY r.started_at DESC, r.run_id DESC LIMIT 1)"
    )


_COMPARES = "'reconcile'"  # runs that load nothing
_SUCCESS = f" AND r.status = 'success' AND r.trigger_type <> {_COMPARES}"
_NOT_FRONTIER = f"('backfill', 'replay', {_COMPARES})"  # runs that re-load old data, or none
_VOLUME = f" AND r.status = 'success' AND r.trigger_type NOT IN {_NOT_FRONTIER}"


# -- 1. list_runs -----------------------------------------------------------------------


@dataclass(frozen=True)
class RunRow(_Json):
    run_id: str
    logical_run_id: str
    attempt: int
    pipeline: str
    status: str
    trigger_type: str
    started_at: datetime
    ended_at: datetime | None
    duration_ms: int | None
    rows_read: int | None
    rows_inserted: int | None
    rows_updated: int | None
    rows_unchanged: int | None
    rows_rejected: int | None
    rows_deleted: int | None
    watermark_before: str | None
    watermark_after: str | None
    error_code: str | None
    error_message: str | None
    parent_run_id: str | None
    data_interval_start: datetime | None
    data_interval_end: datetime | None
    correlation_id: str | None


_RUN_TIMES = frozenset({"started_at", "ended_at", "data_interval_start", "data_interval_end"})


def list_runs_sql(
    d: Dialect,
    pipeline: str | None = None,
    since: datetime | None = None,
    status: str | None = None,
    limit: int = 50,
) -> tuple[str, list[Any]]:
    where: list[str] = []
    params: list[Any] = []
    for clause, value in (("pipeline =", pipeline), ("started_at >=", since), ("status =", status)):
        if value is not None:
            where.append(f"{clause} {d.param}")
            params.append(value)
    condition = f" WHERE {' AND '.join(where)}" if where else ""
    return (
        f"SELECT {', '.join(_columns(RunRow))} FROM {d.table(RUNS)}{condition} "
        f"ORDER BY started_at DESC, run_id DESC LIMIT {d.param}",
        [*params, limit],
    )


def list_runs(
    session: Session,
    pipeline: str | None = None,
    since: datetime | None = None,
    status: str | None = None,
    limit: int = 50,
) -> list[RunRow]:
    """Runs, newest first, optionally of one pipeline, started since ``since``, in ``status``."""
    wanted = None if status is None else str(status)  # a StrEnum binds by its value
    sql, params = list_runs_sql(session.dialect, pipeline, since, wanted, limit)
    return [_build(RunRow, row, _RUN_TIMES) for row in session.query(sql, params)]


# -- 2. show_run ------------------------------------------------------------------------


@dataclass(frozen=True)
class TaskRow(_Json):
    task_run_id: str
    name: str
    seq: int
    status: str
    started_at: datetime
    ended_at: datetime | None
    duration_ms: int | None
    rows_in: int | None
    rows_out: int | None
    rows_rejected: int | None
    bytes: int | None
    error_message: str | None


@dataclass(frozen=True)
class AuditRow(_Json):
    event_id: str
    run_id: str | None
    pipeline: str | None
    event_type: str
    target_table: str | None
    record_count: int | None
    old_values: Any
    new_values: Any
    metadata: Any
    created_at: datetime


@dataclass(frozen=True)
class SnapshotRow(_Json):
    target_table: str
    row_count: int
    max_cursor: str | None
    schema_fingerprint: str
    columns: Any
    created_at: datetime


@dataclass(frozen=True)
class RunDetail(_Json):
    run: RunRow
    triggered_by: str | None
    correlation_id: str | None
    environment: str | None
    bytes_read: int | None
    code_version: str | None
    host: str | None
    pid: int | None
    heartbeat_at: datetime | None
    lease_expires_at: datetime | None
    extra: Any
    tasks: tuple[TaskRow, ...]
    events: tuple[AuditRow, ...]
    snapshots: tuple[SnapshotRow, ...]

    def to_json(self) -> dict[str, Any]:
        payload = super().to_json()
        return {**payload.pop("run"), **payload}


_DETAIL_COLUMNS = (
    "triggered_by", "correlation_id", "environment", "bytes_read", "code_version", "host", "pid",
    "heartbeat_at", "lease_expires_at", "extra",
)  # fmt: skip
_DETAIL_TIMES = frozenset({"heartbeat_at", "lease_expires_at"})


def _match_run_id(session: Session, run_id: str) -> str | None:
    d = session.dialect
    runs = d.table(RUNS)
    if session.query(f"SELECT 1 FROM {runs} WHERE run_id = {d.param}", [run_id]):
        return run_id
    if len(run_id) < MIN_PREFIX:
        return None
    found = [
        str(row[0])
        for row in session.query(
            f"SELECT run_id FROM {runs} WHERE substr(run_id, 1, {d.param}) = {d.param} "
            "ORDER BY run_id LIMIT 6",
            [len(run_id), run_id],
        )
    ]
    if len(found) > 1:
        more = ", ..." if len(found) > 5 else ""
        raise AmbiguousRunId(
            f"run id prefix {run_id!r} matches several runs ({', '.join(found[:5])}{more}); "
            "give more characters"
        )
    return found[0] if found else None


def show_run(session: Session, run_id: str) -> RunDetail | None:
    """One run with its tasks (by seq), audit events and snapshots; None if unknown.

    ``run_id`` may be a prefix of at least 8 characters that matches exactly one run."""
    full = _match_run_id(session, run_id)
    if full is None:
        return None
    d = session.dialect
    p = d.param
    (row,) = session.query(
        f"SELECT {', '.join((*_columns(RunRow), *_DETAIL_COLUMNS))} "
        f"FROM {d.table(RUNS)} WHERE run_id = {p}",
        [full],
    )
    run = _build(RunRow, row, _RUN_TIMES)
    more = dict(zip(_DETAIL_COLUMNS, row[len(_columns(RunRow)) :], strict=True))
    for name in _DETAIL_TIMES:
        more[name] = stored_datetime(more[name])
    more["extra"] = _as_json(d, more["extra"])
    tasks = session.query(
        f"SELECT {', '.join(_columns(TaskRow))} FROM {d.table(TASKS)} WHERE run_id = {p} "
        "ORDER BY seq, started_at",
        [full],
    )
    snapshots = session.query(
        f"SELECT {', '.join(_columns(SnapshotRow))} FROM {d.table(SNAPSHOTS)} "
        f"WHERE run_id = {p} ORDER BY target_table",
        [full],
    )
    return RunDetail(
        run=run,
        **more,
        tasks=tuple(_build(TaskRow, t, frozenset({"started_at", "ended_at"})) for t in tasks),
        events=tuple(_events(session, "run_id", full, None, None, ascending=True)),
        snapshots=tuple(_snapshot(d, s) for s in snapshots),
    )


def _snapshot(d: Dialect, row: Sequence[Any]) -> SnapshotRow:
    snapshot: SnapshotRow = _build(SnapshotRow, row, frozenset({"created_at"}))
    return replace(snapshot, columns=_as_json(d, snapshot.columns))


# -- 6. audit_trail ---------------------------------------------------------------------


def _events(
    session: Session,
    column: str,
    value: str,
    since: datetime | None,
    limit: int | None,
    *,
    ascending: bool = False,
) -> list[AuditRow]:
    d = session.dialect
    params: list[Any] = [value]
    sql = f"SELECT {', '.join(_columns(AuditRow))} FROM {d.table(AUDIT)} WHERE {column} = {d.param}"
    if since is not None:
        sql += f" AND created_at >= {d.param}"
        params.append(since)
    order = "" if ascending else " DESC"
    sql += f" ORDER BY created_at{order}, event_id{order}"
    if limit is not None:
        sql += f" LIMIT {d.param}"
        params.append(limit)
    result = []
    for row in session.query(sql, params):
        event: AuditRow = _build(AuditRow, row, frozenset({"created_at"}))
        parsed = {
            k: _as_json(d, getattr(event, k)) for k in ("old_values", "new_values", "metadata")
        }
        result.append(replace(event, **parsed))
    return result


def audit_trail(
    session: Session, target_table: str, since: datetime | None = None, limit: int = 200
) -> list[AuditRow]:
    """Audit events about ``target_table``, newest first, JSON values parsed."""
    return _events(session, "target_table", target_table, since, limit)


# -- 4. volume_anomalies ----------------------------------------------------------------


@dataclass(frozen=True)
class VolumeAnomaly(_Json):
    pipeline: str
    run_id: str
    started_at: datetime
    rows_written: int
    n: int
    mean: float | None
    stddev: float | None
    z_score: float | None
    level: Level
    reason: str


def _seen(d: Dialect) -> str:
    """Recursive CTE ``seen``: the distinct pipelines of the runs table, one index probe
    each (a loose index scan; a plain DISTINCT would read every run)."""
    runs = d.table(RUNS)
    return (
        f"seen(pipeline) AS (SELECT min(pipeline) FROM {runs} UNION ALL "
        f"SELECT (SELECT min(r.pipeline) FROM {runs} r WHERE r.pipeline > s.pipeline) "
        "FROM seen s WHERE s.pipeline IS NOT NULL)"
    )


_SEEN = "SELECT pipeline FROM seen WHERE pipeline IS NOT NULL"


def _heads(d: Dialect, names: str) -> str:
    """CTE ``heads``: per pipeline, its latest run, last success and last volume run."""
    return (
        f"heads AS (SELECT n.pipeline, {_latest(d, 'n.pipeline')} AS last_run_id, "
        f"{_latest(d, 'n.pipeline', _SUCCESS)} AS success_id, "
        f"{_latest(d, 'n.pipeline', _VOLUME)} AS volume_id FROM ({names}) n)"
    )


def _history(d: Dialect, pipeline: bool = False) -> str:
    """CTE ``history``: count, sum and sum of squares of the rows written by each pipeline's
    successful non-backfill runs in the window (parameters: its start and end, then the
    pipeline if ``pipeline``). One pass, no join: the latest run, if inside the window, is
    taken out afterwards by :func:`_assess_row`."""
    w = written("r")
    only = f" AND r.pipeline = {d.param}" if pipeline else ""
    return (
        f"history AS (SELECT r.pipeline, count(*) AS n, sum({w}) AS s, "
        f"sum({d.exact_square(w)}) AS ss FROM {d.table(RUNS)} r "
        f"WHERE r.status = 'success' AND r.trigger_type NOT IN {_NOT_FRONTIER} "
        f"AND r.started_at >= {d.param} AND r.started_at < {d.param}{only} GROUP BY r.pipeline)"
    )


def volume_window(now: datetime) -> tuple[datetime, datetime]:
    """The history window: the 30 whole UTC days before the UTC day of ``now``."""
    end = _day_start(now)
    return end - timedelta(days=VOLUME_WINDOW_DAYS), end


_VOLUME_COLUMNS = f"v.run_id, v.started_at, {written('v')}, hi.n, hi.s, hi.ss"


def volume_anomalies_sql(d: Dialect, now: datetime, pipeline: str | None) -> tuple[str, list[Any]]:
    runs = d.table(RUNS)
    one = pipeline is not None
    names = f"SELECT CAST({d.param} AS text) AS pipeline" if one else _SEEN
    sql = (
        f"WITH RECURSIVE {'' if one else _seen(d) + ', '}{_heads(d, names)}, {_history(d, one)} "
        f"SELECT h.pipeline, {_VOLUME_COLUMNS} FROM heads h "
        f"JOIN {runs} v ON v.run_id = h.volume_id "
        "LEFT JOIN history hi ON hi.pipeline = h.pipeline ORDER BY h.pipeline"
    )
    window = list(volume_window(now))
    return sql, [pipeline, *window, pipeline] if one else window


def assess_volume(
    pipeline: str,
    run_id: str,
    started_at: datetime,
    x: int,
    n: int,
    total: int,
    squares: int,
    min_history: int = 5,
) -> VolumeAnomaly:
    """Score ``x`` rows written against a history of ``n`` runs with that sum and sum of
    squares (the rules are in the module docstring)."""
    mean = total / n if n else None
    stddev: float | None = None
    z: float | None = None
    if n >= 2:
        # exact in integers: n * sum(x^2) - sum(x)^2 = n (n - 1) * variance
        stddev = math.sqrt((n * squares - total * total) / (n * (n - 1)))
        if stddev > 0:
            z = (x - total / n) / stddev
        elif x * n == total:
            z = 0.0
    level, reason = _level(x, n, mean, stddev, z, max(min_history, 2))
    return VolumeAnomaly(pipeline, run_id, started_at, x, n, mean, stddev, z, level, reason)


def _level(
    x: int, n: int, mean: float | None, stddev: float | None, z: float | None, needed: int
) -> tuple[Level, str]:
    if x == 0:
        return Level.CRITICAL, "zero rows written"
    if n < needed or stddev is None or mean is None:
        return Level.INSUFFICIENT_HISTORY, f"{n} run(s) of history, {needed} needed"
    if z is None:
        return Level.CRITICAL, f"every run of history wrote {mean:,.0f} rows; this one {x:,}"
    verdict = f"z = {z:+.2f} ({x:,} rows vs mean {mean:,.1f} ± {stddev:,.1f})"
    if abs(z) > 3:
        return Level.CRITICAL, verdict
    if abs(z) > 2:
        return Level.WARNING, verdict
    return Level.OK, verdict


def _assess_row(
    row: Sequence[Any], window: tuple[datetime, datetime], min_history: int
) -> VolumeAnomaly | None:
    """Score the volume columns of a row: (pipeline, run_id, started_at, x, n, s, ss)."""
    pipeline, run_id, started, x, n, total, squares = row
    if run_id is None:
        return None
    started_at, x = stored_datetime(started) or window[1], int(x)
    n, total, squares = int(n or 0), int(total or 0), int(squares or 0)
    if window[0] <= started_at < window[1]:  # the latest run is not its own history
        n, total, squares = n - 1, total - x, squares - x * x
    return assess_volume(pipeline, run_id, started_at, x, n, total, squares, min_history)


def volume_anomalies(
    session: Session, now: datetime, pipeline: str | None = None, min_history: int = 5
) -> list[VolumeAnomaly]:
    """The volume verdict on each pipeline's latest successful non-backfill run."""
    sql, params = volume_anomalies_sql(session.dialect, now, pipeline)
    window = volume_window(now)
    found = (_assess_row(row, window, min_history) for row in session.query(sql, params))
    return [a for a in found if a is not None]


# -- 3. pipeline_status -----------------------------------------------------------------


@dataclass(frozen=True)
class PipelineStatus(_Json):
    pipeline: str
    last_run_at: datetime | None
    last_status: str | None
    runs_7d: int
    successes_7d: int
    success_rate_7d: float | None
    avg_rows_7d: float | None
    last_success_at: datetime | None
    freshness_s: float | None
    freshness_sla_s: int | None
    stale: bool
    z_score: float | None
    anomaly: Level | None
    health: Health
    reasons: tuple[str, ...]


def pipeline_status_sql(d: Dialect, now: datetime) -> tuple[str, list[Any]]:
    runs, p = d.table(RUNS), d.param
    names = f"{_SEEN} UNION SELECT name FROM {d.table(PIPELINES)}"
    finished = ", ".join(f"'{s}'" for s in UNFINISHED)
    recent = (
        "recent AS (SELECT r.pipeline, "
        f"sum(CASE WHEN r.status NOT IN ({finished}) THEN 1 ELSE 0 END) AS finished, "
        "sum(CASE WHEN r.status = 'success' THEN 1 ELSE 0 END) AS succeeded, "
        f"avg(CASE WHEN r.status = 'success' THEN {written('r')} END) AS avg_rows "
        f"FROM {runs} r WHERE r.started_at >= {p} AND r.trigger_type <> {_COMPARES} "
        "GROUP BY r.pipeline)"
    )
    sql = (
        f"WITH RECURSIVE {_seen(d)}, {_heads(d, names)}, {_history(d)}, {recent} "
        "SELECT h.pipeline, lr.started_at, lr.status, rc.finished, rc.succeeded, rc.avg_rows, "
        f"ls.ended_at, pl.freshness_sla_s, h.pipeline, {_VOLUME_COLUMNS} FROM heads h "
        f"LEFT JOIN {runs} lr ON lr.run_id = h.last_run_id "
        f"LEFT JOIN {runs} ls ON ls.run_id = h.success_id "
        f"LEFT JOIN {runs} v ON v.run_id = h.volume_id "
        f"LEFT JOIN {d.table(PIPELINES)} pl ON pl.name = h.pipeline "
        "LEFT JOIN recent rc ON rc.pipeline = h.pipeline "
        "LEFT JOIN history hi ON hi.pipeline = h.pipeline ORDER BY h.pipeline"
    )
    return sql, [*volume_window(now), now - STATUS_WINDOW]


def rate_health(successes: int, finished: int) -> Health:
    """Health from the success rate alone, compared exactly (9/10 is HEALTHY)."""
    if finished == 0:
        return Health.UNKNOWN
    if successes * 10 >= finished * 9:
        return Health.HEALTHY
    if successes * 2 >= finished:
        return Health.DEGRADED
    return Health.CRITICAL


def _health(
    successes: int, finished: int, volume: VolumeAnomaly | None, stale: bool
) -> tuple[Health, tuple[str, ...]]:
    health = rate_health(successes, finished)
    reasons = [f"{successes} of {finished} finished run(s) succeeded in 7 days"]
    if volume is not None and volume.level is Level.WARNING:
        health = health.at_least(Health.DEGRADED)
        reasons.append(f"volume WARNING: {volume.reason}")
    if volume is not None and volume.level is Level.CRITICAL:
        health = Health.CRITICAL
        reasons.append(f"volume CRITICAL: {volume.reason}")
    if stale:
        health = health.at_least(Health.DEGRADED)
        reasons.append("freshness SLA exceeded")
    return health, tuple(reasons)


def _status(row: Sequence[Any], now: datetime, min_history: int) -> PipelineStatus:
    pipeline, last_at, last_status, finished, succeeded, avg_rows, success_end, sla = row[:8]
    volume = _assess_row(row[8:], volume_window(now), min_history)
    finished, succeeded = int(finished or 0), int(succeeded or 0)
    last_success_at = stored_datetime(success_end)
    freshness = (now - last_success_at).total_seconds() if last_success_at else None
    sla = None if sla is None else int(sla)
    stale = sla is not None and (freshness is None or freshness > sla)
    health, reasons = _health(succeeded, finished, volume, stale)
    return PipelineStatus(
        pipeline=pipeline, last_run_at=stored_datetime(last_at), last_status=last_status,
        runs_7d=finished, successes_7d=succeeded,
        success_rate_7d=succeeded / finished if finished else None,
        avg_rows_7d=_as_float(avg_rows), last_success_at=last_success_at,
        freshness_s=freshness, freshness_sla_s=sla, stale=stale,
        z_score=volume.z_score if volume else None, anomaly=volume.level if volume else None,
        health=health, reasons=reasons,
    )  # fmt: skip


def pipeline_status(session: Session, now: datetime, min_history: int = 5) -> list[PipelineStatus]:
    """Every pipeline that has runs or is registered: its last run, 7-day success rate and
    volume, freshness against its SLA, volume verdict and health (one query)."""
    sql, params = pipeline_status_sql(session.dialect, now)
    return [_status(row, now, min_history) for row in session.query(sql, params)]


# -- 5. task_trends ---------------------------------------------------------------------


@dataclass(frozen=True)
class TaskTrend(_Json):
    pipeline: str
    task: str
    day: str
    runs: int
    avg_duration_ms: float | None
    max_duration_ms: int | None
    avg_rows_out: float | None


def task_trends_sql(
    d: Dialect, now: datetime, pipeline: str | None, days: int
) -> tuple[str, list[Any]]:
    day = d.utc_day("t.started_at")
    params: list[Any] = [_day_start(now) - timedelta(days=days - 1)]
    condition = ""
    if pipeline is not None:
        condition = f" AND r.pipeline = {d.param}"
        params.append(pipeline)
    sql = (
        f"SELECT r.pipeline, t.name, {day} AS day, count(*), avg(t.duration_ms), "
        f"max(t.duration_ms), avg(t.rows_out) FROM {d.table(TASKS)} t "
        f"JOIN {d.table(RUNS)} r ON r.run_id = t.run_id "
        f"WHERE t.started_at >= {d.param}{condition} "
        f"GROUP BY r.pipeline, t.name, {day} ORDER BY r.pipeline, t.name, day"
    )
    return sql, params


def task_trends(
    session: Session, now: datetime, pipeline: str | None = None, days: int = 14
) -> list[TaskTrend]:
    """Per pipeline, task and UTC day of the last ``days`` days (today included): how many
    times the task ran, its mean and longest duration, its mean rows out."""
    sql, params = task_trends_sql(session.dialect, now, pipeline, days)
    return [
        TaskTrend(p, name, str(day), int(n), _as_float(avg_ms), None if mx is None else int(mx),
                  _as_float(avg_out))
        for p, name, day, n, avg_ms, mx, avg_out in session.query(sql, params)
    ]  # fmt: skip


# -- 7. blocked_pipelines ---------------------------------------------------------------


@dataclass(frozen=True)
class Blocked(_Json):
    downstream: str
    upstream: str
    upstream_last_success: datetime | None
    expected_within_s: int
    reason: str


def dependencies_sql(d: Dialect) -> str:
    return (
        "SELECT e.downstream, e.upstream, ls.ended_at, pl.freshness_sla_s "
        f"FROM {d.table(DEPENDENCIES)} e LEFT JOIN {d.table(PIPELINES)} pl ON pl.name = e.upstream "
        f"LEFT JOIN {d.table(RUNS)} ls ON ls.run_id = {_latest(d, 'e.upstream', _SUCCESS)} "
        "ORDER BY e.downstream, e.upstream"
    )


def _blocked(row: Sequence[Any], now: datetime) -> Blocked | None:
    downstream, upstream, ended, sla = row
    last = stored_datetime(ended)
    expected = int(sla) if sla is not None else int(DEFAULT_SLA.total_seconds())
    if last is None:
        reason = f"upstream {upstream} has never succeeded"
    elif (now - last).total_seconds() > expected:
        age = span((now - last).total_seconds())
        reason = f"upstream {upstream} last succeeded {age} ago; expected within {span(expected)}"
    else:
        return None
    return Blocked(downstream, upstream, last, expected, reason)


def span(seconds: float) -> str:
    """A duration for people: ``1d2h``, ``3h5m``, ``45s``."""
    s = int(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size:
            rest = s % size
            return f"{s // size}{unit}" + (span(rest) if rest and unit != "m" else "")
    return f"{s}s"


def blocked_pipelines(session: Session, now: datetime) -> list[Blocked]:
    """Dependency edges whose upstream never succeeded, or whose last success ended longer
    ago than the upstream's freshness SLA (24 h when it has none): the downstream waits."""
    rows = session.query(dependencies_sql(session.dialect))
    return [b for b in (_blocked(row, now) for row in rows) if b is not None]


# -- 8. prune ---------------------------------------------------------------------------


@dataclass(frozen=True)
class PruneResult(_Json):
    cutoff: datetime
    pipeline_runs: int
    task_runs: int
    audit_events: int
    dataset_snapshots: int
    quality_results: int
    reconciliations: int


def prunable_runs_sql(d: Dialect) -> str:
    """Run ids that ended before the cutoff (one parameter), except running runs, each
    pipeline's last success (freshness) and its last success that is not a backfill,
    replay or reconcile (``last_successful_run`` reads it)."""
    runs = d.table(RUNS)
    later_success = (
        f"SELECT 1 FROM {runs} s WHERE s.pipeline = r.pipeline AND s.status = 'success' "
        f"AND s.trigger_type <> {_COMPARES} "
        "AND (s.started_at > r.started_at OR (s.started_at = r.started_at AND s.run_id > r.run_id))"
    )
    later_frontier = f"{later_success} AND s.trigger_type NOT IN {_NOT_FRONTIER}"
    return (
        f"SELECT r.run_id FROM {runs} r WHERE r.status <> 'running' AND r.ended_at < {d.param} "
        f"AND (r.status <> 'success' OR r.trigger_type = {_COMPARES} OR (EXISTS ({later_success}) "
        f"AND (r.trigger_type IN {_NOT_FRONTIER} OR EXISTS ({later_frontier}))))"
    )


def prune(session: Session, older_than: timedelta, now: datetime) -> PruneResult:
    """Delete runs that ended before ``now - older_than`` with their tasks, audit events,
    snapshots and check results, in ``session`` (a writer); running runs and each
    pipeline's last successes are kept (:func:`prunable_runs_sql`). A run's records go
    before the run (their foreign keys). Returns the rows deleted per table."""
    d = session.dialect
    cutoff = now - older_than
    doomed = prunable_runs_sql(d)
    counts = {
        table.table: session.execute(
            f"DELETE FROM {d.table(table)} WHERE run_id IN ({doomed})", [cutoff]
        )
        # the runs last: they define the set
        for table in (TASKS, AUDIT, SNAPSHOTS, QUALITY, RECONCILIATIONS, RUNS)
    }
    return PruneResult(cutoff=cutoff, **counts)


# -- 9. lateness ------------------------------------------------------------------------


def lateness_sql(d: Dialect) -> str:
    """The ``extra`` of a pipeline's runs that committed, oldest first."""
    return (
        f"SELECT extra FROM {d.table(RUNS)} WHERE pipeline = {d.param} "
        "AND status IN ('success', 'partial') AND extra IS NOT NULL ORDER BY started_at, run_id"
    )


def lateness_report(session: Session, pipeline: str, buffer_s: int) -> LatenessReport:
    """Late rows over the pipeline's history: what the runs that committed measured and
    found (``extra.lateness``; definitions in :mod:`pipeledger.lateness`), against the
    buffer configured now (``buffer_s``)."""
    d = session.dialect
    extras = (_as_json(d, row[0]) for row in session.query(lateness_sql(d), [pipeline]))
    runs = [RunLateness.from_json(e["lateness"]) for e in extras if e and e.get("lateness")]
    return report(pipeline, buffer_s, runs)


# -- the loader's question --------------------------------------------------------------


def last_success_sql(d: Dialect) -> str:
    return (
        f"SELECT data_interval_end FROM {d.table(RUNS)} WHERE pipeline = {d.param} "
        f"AND status = 'success' AND trigger_type NOT IN {_NOT_FRONTIER} "
        "ORDER BY started_at DESC, run_id DESC LIMIT 1"
    )


def last_success(session: Session, pipeline: str) -> datetime | None:
    """``data_interval_end`` of the pipeline's latest successful run (by start time) that
    is not a backfill or a replay: those re-load old data, and must not move the answer
    back (a replay covers no interval at all). None for an integer cursor."""
    rows = session.query(last_success_sql(session.dialect), [pipeline])
    return stored_datetime(rows[0][0]) if rows else None
