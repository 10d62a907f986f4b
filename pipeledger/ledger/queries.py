"""Questions the ledger answers, as library functions over a read-only session.

The CLI, ``--json`` and the web page are thin faces over these functions. Each returns
frozen dataclasses with a ``to_json()``; functions that depend on the time take ``now``
explicitly, so the answers are reproducible.

Definitions used throughout, stated once (their SQL is in :mod:`pipeledger.ledger.rollup`):

- **The latest run** of a pipeline is the one that started last (ties: the greatest run id).
  **The last success** is the latest run with status ``success`` that is not a reconcile
  (``pipeledger reconcile`` compares, it loads nothing); its ``ended_at`` is what
  freshness is measured from. :func:`last_success` (``Ledger.last_successful_run``) reads
  the latest successful run that is not a backfill, replay or reconcile: the frontier of
  the data.
- **Rows written** by a run are ``rows_inserted + rows_updated`` (a missing count is 0). A
  run has **finished** in every state but ``running`` and ``skipped``; it **published** its
  rows when it ended ``success`` or ``partial`` (rows quarantined, the rest published).
  Health, volume and reliability count the runs that load: a reconcile is none of them.
- A **no-op re-run** wrote no rows and left the watermark where it found it: it read
  nothing new (a load that re-read the rows at its watermark and the lateness behind it, a
  model whose upstreams brought no change). It says nothing about a source's volume: a
  re-run after a success, by hand or by a second scheduler, must not look like a source
  that dried up. A source that did dry up is what freshness from the data (below) sees.
- **Volume** (:func:`volume_anomalies`) compares like with like: the rows written in one
  scheduled interval with those written in earlier intervals. A **volume sample** is an
  interval's total: the rows written by the runs that published it, leaving out backfills
  and replays (they re-load old data on purpose), reconciles and no-op re-runs. The
  attempts of an interval share its logical run, and an interval has at most one published
  attempt (a retry follows only a failure, which rolled back; a scheduled interval's
  idempotency key admits one success), so its total is the rows written by that attempt;
  an unscheduled run is an interval of its own (the stretch of the cursor it covered). The
  **latest interval** (the latest sample by start) is judged against the samples that
  *started* in the 30 UTC days before the UTC day of ``now`` (today's and the latest itself
  are not history). The samples are counted per pipeline and UTC day in the daily rollup.

  ====================  ==================================================================
  level                 when
  ====================  ==================================================================
  CRITICAL              the interval wrote 0 rows though the watermark moved (whatever the
                        history); or |z| > 3; or the history is constant (stddev 0) and
                        the interval differs from it
  INSUFFICIENT_HISTORY  fewer than ``min_history`` (at least 2) samples of history
  WARNING               |z| > 2
  OK                    otherwise (z = 0 when the history is constant and the run equals it)
  ====================  ==================================================================

  ``z = (x - mean) / stddev`` with the sample standard deviation. Counts, sums and sums of
  squares are aggregated in SQL (exactly, in integers) and finished here, the same way on
  both dialects (SQLite has no ``stddev``).
- **Freshness** (``freshness_sla``) is judged twice: from the last success (its
  ``ended_at``) and from the data, the **newest data** being the newest cursor loaded: the
  greatest cursor of the target's snapshot after the latest volume sample (its watermark
  when it has no snapshot). A date counts as the end of its day, a timestamp without a time
  zone as UTC; an integer cursor tells no time, and then only the last success counts.
  A pipeline is **late** (``stale``) when either is older than its SLA, or when it never
  succeeded; it was **due** when the first of them passed the SLA (never succeeded: its
  registration plus the SLA). So a pipeline whose runs succeed but load nothing new (a
  source that stopped) is late, and so is one that keeps loading data that is already old.
- **Health** (:func:`pipeline_status`) starts from the success rate of the last 7 days
  (successes / finished runs that started in the 7 days before ``now``): HEALTHY at
  >= 90 %, DEGRADED at >= 50 %, CRITICAL below; UNKNOWN when nothing finished in 7 days. A
  volume WARNING makes it at least DEGRADED, a volume CRITICAL makes it CRITICAL; being
  late, or a latest run that took longer than the pipeline's ``max_duration``, makes it at
  least DEGRADED.
- **SLA breaches** (:mod:`pipeledger.ledger.sla`): a freshness breach is an episode of
  lateness, recorded once: from when it was due to when the pipeline was first seen fresh
  again; how late it was is that span (so far, while it lasts). It is seen late by what
  looks after every run (``pipeledger.alerts``), by ``pipeledger watchdog`` and by
  ``serve``. A run slower than ``max_duration`` is a breach of its own, due at its start
  plus ``max_duration`` and ended with the run.
- **Reliability** (:func:`reliability`), per pipeline over the last 7 and 30 days: the
  success rate as for health; the **mean time to recovery**, over the failure episodes
  that recovered (an episode: consecutive ``failed``, ``timed_out`` or ``abandoned`` runs,
  in start order, backfills and replays left out), from the end of its first failure to
  the end of the success that ended it; and the **p95 duration** of successful runs
  (nearest rank).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, fields, is_dataclass, replace
from datetime import UTC, date, datetime, time, timedelta
from enum import StrEnum
from typing import Any

from pipeledger.errors import AmbiguousRunId
from pipeledger.lateness import LatenessReport, RunLateness, report
from pipeledger.ledger.rollup import COMPARES, NOT_FRONTIER, counts, finished, sample, written
from pipeledger.ledger.schema import (
    AUDIT,
    DAYS,
    DEPENDENCIES,
    PIPELINES,
    QUALITY,
    RECONCILIATIONS,
    RUNS,
    SNAPSHOTS,
    TASKS,
    stored_datetime,
)
from pipeledger.warehouse.dialect import Dialect
from pipeledger.warehouse.session import Session

STATUS_WINDOW = timedelta(days=7)
VOLUME_WINDOW_DAYS = 30
DEFAULT_SLA = timedelta(hours=24)
FRESHNESS_REASON = "freshness SLA exceeded"
MIN_PREFIX = 8


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


class Answer:
    """An answer of the ledger: a frozen dataclass that says itself as JSON."""

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


def _day(moment: datetime) -> str:
    """The UTC day of an instant, as the rollup keys it (``YYYY-MM-DD``)."""
    return moment.astimezone(UTC).date().isoformat()


def _latest(d: Dialect, outer: str, condition: str = "") -> str:
    """A correlated subquery: the run id of ``outer``'s latest run meeting ``condition``
    (one probe of the (pipeline, started_at) index per pipeline)."""
    return (
        f"(SELECT r.run_id FROM {d.table(RUNS)} r WHERE r.pipeline = {outer}{condition} "
        "ORDER BY r.started_at DESC, r.run_id DESC LIMIT 1)"
    )


_SUCCESS = f" AND r.status = 'success' AND r.trigger_type <> {COMPARES}"


def _sample(d: Dialect) -> str:
    return f" AND {sample(d, 'r')}"


# -- 1. list_runs -----------------------------------------------------------------------


@dataclass(frozen=True)
class RunRow(Answer):
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
class TaskRow(Answer):
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
class AuditRow(Answer):
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
class SnapshotRow(Answer):
    target_table: str
    row_count: int
    max_cursor: str | None
    schema_fingerprint: str
    columns: Any
    created_at: datetime


@dataclass(frozen=True)
class RunDetail(Answer):
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
class VolumeAnomaly(Answer):
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
    """CTE ``heads``: per pipeline, its latest run, last success and latest volume sample."""
    return (
        f"heads AS (SELECT n.pipeline, {_latest(d, 'n.pipeline')} AS last_run_id, "
        f"{_latest(d, 'n.pipeline', _SUCCESS)} AS success_id, "
        f"{_latest(d, 'n.pipeline', _sample(d))} AS volume_id FROM ({names}) n)"
    )


def _history(d: Dialect, pipeline: bool = False) -> str:
    """CTE ``history``: count, sum and sum of squares of each pipeline's volume samples in
    the window, from the daily rollup (parameters: the window's first and end day, then the
    pipeline if ``pipeline``). The latest sample, if inside the window, is taken out
    afterwards by :func:`_assess_row`."""
    only = f" AND y.pipeline = {d.param}" if pipeline else ""
    return (
        "history AS (SELECT y.pipeline, sum(y.samples) AS n, sum(y.sample_rows) AS s, "
        f"sum(y.sample_squares) AS ss FROM {d.table(DAYS)} y "
        f"WHERE y.day >= {d.param} AND y.day < {d.param}{only} GROUP BY y.pipeline)"
    )


def volume_window(now: datetime) -> tuple[datetime, datetime]:
    """The history window: the 30 whole UTC days before the UTC day of ``now``."""
    end = _day_start(now)
    return end - timedelta(days=VOLUME_WINDOW_DAYS), end


_VOLUME_COLUMNS = f"v.run_id, v.started_at, {written('v')}, hi.n, hi.s, hi.ss"


def _window_days(now: datetime) -> list[str]:
    return [_day(moment) for moment in volume_window(now)]


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
    window = _window_days(now)
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
        return Level.CRITICAL, "zero rows written though the watermark moved"
    if n < needed or stddev is None or mean is None:
        return Level.INSUFFICIENT_HISTORY, f"{n} interval(s) of history, {needed} needed"
    if z is None:
        return Level.CRITICAL, f"every interval of history wrote {mean:,.0f} rows; this one {x:,}"
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
    """The volume verdict on each pipeline's latest interval (its latest volume sample)."""
    sql, params = volume_anomalies_sql(session.dialect, now, pipeline)
    window = volume_window(now)
    found = (_assess_row(row, window, min_history) for row in session.query(sql, params))
    return [a for a in found if a is not None]


# -- 3. pipeline_status -----------------------------------------------------------------


@dataclass(frozen=True)
class PipelineStatus(Answer):
    pipeline: str
    last_run_id: str | None
    last_run_at: datetime | None
    last_status: str | None
    runs_7d: int
    successes_7d: int
    success_rate_7d: float | None
    avg_rows_7d: float | None
    last_success_at: datetime | None
    freshness_s: float | None  # since the last success ended
    freshness_sla_s: int | None
    newest_data_at: datetime | None
    data_age_s: float | None
    due_at: datetime | None  # when it was (or will be) late
    stale: bool  # late: the module docstring's freshness
    last_duration_ms: int | None
    max_duration_s: int | None
    slow: bool  # the latest run took longer than max_duration
    z_score: float | None
    anomaly: Level | None
    health: Health
    reasons: tuple[str, ...]


def _recent(d: Dialect) -> str:
    """CTE ``recent``: per pipeline, of the runs that started since the status window's
    start, how many finished and succeeded and the rows the successes wrote. Whole days
    come from the daily rollup, the rest of the first day from the runs (parameters: that
    day, the start, the end of that day)."""
    each, p = dict(counts(d, "r")), d.param
    days = (
        "SELECT y.pipeline, y.finished, y.succeeded, y.success_rows "
        f"FROM {d.table(DAYS)} y WHERE y.day > {p}"
    )
    first_day = (
        f"SELECT r.pipeline, {each['finished']}, {each['succeeded']}, {each['success_rows']} "
        f"FROM {d.table(RUNS)} r WHERE {finished('r')} AND r.started_at >= {p} "
        f"AND r.started_at < {p}"
    )
    return (
        "recent AS (SELECT x.pipeline, sum(x.finished) AS finished, "
        "sum(x.succeeded) AS succeeded, sum(x.success_rows) AS success_rows "
        f"FROM ({days} UNION ALL {first_day}) x GROUP BY x.pipeline)"
    )


def status_window(now: datetime, window: timedelta = STATUS_WINDOW) -> list[Any]:
    """The parameters of :func:`_recent` for the ``window`` before ``now``."""
    since = now - window
    return [_day(since), since, _day_start(since) + timedelta(days=1)]


def recent_counts_sql(d: Dialect) -> str:
    return f"WITH {_recent(d)} SELECT pipeline, finished, succeeded FROM recent"


def recent_counts(
    session: Session, now: datetime, window: timedelta = STATUS_WINDOW
) -> dict[str, tuple[int, int]]:
    """Per pipeline, how many runs that started in ``window`` before ``now`` finished, and
    how many of them succeeded."""
    rows = session.query(recent_counts_sql(session.dialect), status_window(now, window))
    return {str(p): (int(n), int(ok)) for p, n, ok in rows}


def pipeline_status_sql(d: Dialect, now: datetime) -> tuple[str, list[Any]]:
    runs = d.table(RUNS)
    names = f"{_SEEN} UNION SELECT name FROM {d.table(PIPELINES)}"
    newest = (
        f"(SELECT sn.max_cursor FROM {d.table(SNAPSHOTS)} sn WHERE sn.run_id = h.volume_id "
        "ORDER BY sn.created_at DESC LIMIT 1)"
    )
    sql = (
        f"WITH RECURSIVE {_seen(d)}, {_heads(d, names)}, {_history(d)}, {_recent(d)} "
        "SELECT h.pipeline, h.last_run_id, lr.started_at, lr.status, lr.duration_ms, rc.finished, "
        "rc.succeeded, rc.success_rows, ls.ended_at, pl.freshness_sla_s, pl.max_duration_s, "
        f"pl.created_at, {newest}, v.watermark_after, h.pipeline, {_VOLUME_COLUMNS} "
        f"FROM heads h LEFT JOIN {runs} lr ON lr.run_id = h.last_run_id "
        f"LEFT JOIN {runs} ls ON ls.run_id = h.success_id "
        f"LEFT JOIN {runs} v ON v.run_id = h.volume_id "
        f"LEFT JOIN {d.table(PIPELINES)} pl ON pl.name = h.pipeline "
        "LEFT JOIN recent rc ON rc.pipeline = h.pipeline "
        "LEFT JOIN history hi ON hi.pipeline = h.pipeline ORDER BY h.pipeline"
    )
    return sql, [*_window_days(now), *status_window(now)]


def data_time(cursor: str | None) -> datetime | None:
    """The instant a stored cursor value stands for (the module docstring's newest data):
    a date is the end of its day, a timestamp without a zone is UTC, an integer is no time;
    a partitioned pipeline's watermarks (a JSON object) stand for their newest."""
    text = (cursor or "").strip()
    try:
        if text.startswith("{"):
            known = [t for t in map(data_time, map(str, json.loads(text).values())) if t]
            return max(known, default=None)
        if not text or text.lstrip("-").isdigit():
            return None
        if len(text) == 10:
            return datetime.combine(date.fromisoformat(text) + timedelta(days=1), time(), UTC)
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


@dataclass(frozen=True)
class Lateness:
    """A pipeline's freshness against its SLA (the module docstring's freshness)."""

    late: bool
    due_at: datetime | None
    reasons: tuple[str, ...]


def lateness(
    now: datetime,
    sla_s: int | None,
    last_success_at: datetime | None,
    newest_data_at: datetime | None,
    registered_at: datetime | None,
) -> Lateness:
    if sla_s is None:
        return Lateness(False, None, ())
    sla = timedelta(seconds=sla_s)
    dues: dict[str, datetime] = {}  # why it would be late -> from when
    if last_success_at is None:
        dues["never succeeded"] = (registered_at or now) + sla
    else:
        dues[f"last success {span((now - last_success_at).total_seconds())} ago"] = (
            last_success_at + sla
        )
    if newest_data_at is not None:
        age = span((now - newest_data_at).total_seconds())
        dues[f"newest data {age} old"] = newest_data_at + sla
    reasons = tuple(f"{why} (SLA {span(sla_s)})" for why, due in dues.items() if now > due)
    return Lateness(bool(reasons), min(dues.values()), reasons)


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
    successes: int,
    finished: int,
    volume: VolumeAnomaly | None,
    late: Lateness,
    slow: str | None,
) -> tuple[Health, tuple[str, ...]]:
    health = rate_health(successes, finished)
    reasons = [f"{successes} of {finished} finished run(s) succeeded in 7 days"]
    if volume is not None and volume.level is Level.WARNING:
        health = health.at_least(Health.DEGRADED)
        reasons.append(f"volume WARNING: {volume.reason}")
    if volume is not None and volume.level is Level.CRITICAL:
        health = Health.CRITICAL
        reasons.append(f"volume CRITICAL: {volume.reason}")
    if late.late:
        health = health.at_least(Health.DEGRADED)
        reasons.append(f"{FRESHNESS_REASON}: " + "; ".join(late.reasons))
    if slow:
        health = health.at_least(Health.DEGRADED)
        reasons.append(slow)
    return health, tuple(reasons)


def _slow(duration_ms: int | None, max_duration_s: int | None) -> str | None:
    """Why the latest run counts as slow, or None."""
    if duration_ms is None or max_duration_s is None or duration_ms <= max_duration_s * 1000:
        return None
    return f"the latest run took {span(duration_ms / 1000)} (max_duration {span(max_duration_s)})"


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


def _status(row: Sequence[Any], now: datetime, min_history: int) -> PipelineStatus:
    pipeline, last_run_id, last_at, last_status, duration, finished, succeeded = row[:7]
    success_rows, success_end, sla, max_duration, registered, cursor, watermark = row[7:14]
    volume = _assess_row(row[14:], volume_window(now), min_history)
    finished, succeeded = int(finished or 0), int(succeeded or 0)
    last_success_at = stored_datetime(success_end)
    newest = data_time(cursor or watermark)
    sla, duration, max_duration = map(_optional_int, (sla, duration, max_duration))
    late = lateness(now, sla, last_success_at, newest, stored_datetime(registered))
    slow = _slow(duration, max_duration)
    health, reasons = _health(succeeded, finished, volume, late, slow)
    return PipelineStatus(
        pipeline=pipeline, last_run_id=last_run_id, last_run_at=stored_datetime(last_at),
        last_status=last_status,
        runs_7d=finished, successes_7d=succeeded,
        success_rate_7d=succeeded / finished if finished else None,
        avg_rows_7d=int(success_rows or 0) / succeeded if succeeded else None,
        last_success_at=last_success_at,
        freshness_s=(now - last_success_at).total_seconds() if last_success_at else None,
        freshness_sla_s=sla, newest_data_at=newest,
        data_age_s=(now - newest).total_seconds() if newest else None,
        due_at=late.due_at, stale=late.late, last_duration_ms=duration,
        max_duration_s=max_duration, slow=slow is not None,
        z_score=volume.z_score if volume else None, anomaly=volume.level if volume else None,
        health=health, reasons=reasons,
    )  # fmt: skip


def pipeline_status(session: Session, now: datetime, min_history: int = 5) -> list[PipelineStatus]:
    """Every pipeline that has runs or is registered: its last run, 7-day success rate and
    volume, freshness against its SLA (from its last success and from its data), volume
    verdict, whether its latest run was slow, and health (one query)."""
    sql, params = pipeline_status_sql(session.dialect, now)
    return [_status(row, now, min_history) for row in session.query(sql, params)]


# -- 5. task_trends ---------------------------------------------------------------------


@dataclass(frozen=True)
class TaskTrend(Answer):
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
class Blocked(Answer):
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
class PruneResult(Answer):
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
        f"AND s.trigger_type <> {COMPARES} "
        "AND (s.started_at > r.started_at OR (s.started_at = r.started_at AND s.run_id > r.run_id))"
    )
    later_frontier = f"{later_success} AND s.trigger_type NOT IN {NOT_FRONTIER}"
    return (
        f"SELECT r.run_id FROM {runs} r WHERE r.status <> 'running' AND r.ended_at < {d.param} "
        f"AND (r.status <> 'success' OR r.trigger_type = {COMPARES} OR (EXISTS ({later_success}) "
        f"AND (r.trigger_type IN {NOT_FRONTIER} OR EXISTS ({later_frontier}))))"
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
        f"AND status = 'success' AND trigger_type NOT IN {NOT_FRONTIER} "
        "ORDER BY started_at DESC, run_id DESC LIMIT 1"
    )


def last_success(session: Session, pipeline: str) -> datetime | None:
    """``data_interval_end`` of the pipeline's latest successful run (by start time) that
    is not a backfill or a replay: those re-load old data, and must not move the answer
    back (a replay covers no interval at all). None for an integer cursor."""
    rows = session.query(last_success_sql(session.dialect), [pipeline])
    return stored_datetime(rows[0][0]) if rows else None
