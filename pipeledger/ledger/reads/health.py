"""The ledger's health questions: :func:`pipeline_status` (success rate, freshness, volume)
and :func:`volume_anomalies`. The words (health, volume sample, freshness) are defined in
:mod:`pipeledger.ledger.reads.queries`."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from pipeledger.ledger.reads.answers import (
    _SUCCESS,
    FAILURES,
    FRESHNESS_REASON,
    STATUS_WINDOW,
    VOLUME_WINDOW_DAYS,
    Answer,
    Health,
    Level,
    _day,
    _day_start,
    _latest,
    _sample,
    span,
)
from pipeledger.ledger.rollup import counts, finished, written
from pipeledger.ledger.tables import (
    DAYS,
    PIPELINES,
    RUNS,
    SNAPSHOTS,
    stored_datetime,
    tenant_is,
)
from pipeledger.warehouse.dialect import Dialect
from pipeledger.warehouse.session import Session

# -- 4. volume_anomalies ----------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
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
    each (a loose index scan of the tenant's part; a plain DISTINCT would read every run)."""
    runs = d.table(RUNS)
    return (
        f"seen(pipeline) AS (SELECT min(f.pipeline) FROM {runs} f WHERE {tenant_is(d, 'f')} "
        f"UNION ALL SELECT (SELECT min(r.pipeline) FROM {runs} r WHERE {tenant_is(d, 'r')} "
        "AND r.pipeline > s.pipeline) FROM seen s WHERE s.pipeline IS NOT NULL)"
    )


_SEEN = "SELECT pipeline FROM seen WHERE pipeline IS NOT NULL"


def _heads(d: Dialect, names: str, failures: bool = False) -> str:
    """CTE ``heads``: per pipeline, its latest run, last success and latest volume sample;
    with ``failures``, also its latest failure that started since the parameter (a
    bounded probe of the index: a pipeline that never fails is not read to its start)."""
    failed = ", ".join(f"'{s}'" for s in FAILURES)
    failure = f" AND r.status IN ({failed}) AND r.started_at >= {d.param}"
    latest_failure = f", {_latest(d, 'n.pipeline', failure)} AS failure_id" if failures else ""
    return (
        f"heads AS MATERIALIZED (SELECT n.pipeline, {_latest(d, 'n.pipeline')} AS last_run_id, "
        f"{_latest(d, 'n.pipeline', _SUCCESS)} AS success_id, "
        f"{_latest(d, 'n.pipeline', _sample(d))} AS volume_id{latest_failure} FROM ({names}) n)"
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
        f"WHERE {tenant_is(d, 'y')} AND y.day >= {d.param} AND y.day < {d.param}{only} "
        "GROUP BY y.pipeline)"
    )


def volume_window(now: datetime) -> tuple[datetime, datetime]:
    """The history window: the 30 whole UTC days before the UTC day of ``now``."""
    end = _day_start(now)
    return end - timedelta(days=VOLUME_WINDOW_DAYS), end


def _of(d: Dialect, run_id: str, expression: str) -> str:
    """``expression`` (over ``x``) of the run ``run_id`` (an expression of ``heads``)
    names, as a scalar subquery: one probe of the primary key per pipeline whatever the
    ledger's size (a join to the runs is hashed over every run once pipelines are many)."""
    return (
        f"(SELECT {expression} FROM {d.table(RUNS)} x "
        f"WHERE x.run_id = {run_id} AND {tenant_is(d, 'x')})"
    )


def _volume_columns(d: Dialect) -> str:
    v = "h.volume_id"
    return f"{v}, {_of(d, v, 'x.started_at')}, {_of(d, v, written('x'))}, hi.n, hi.s, hi.ss"


def _window_days(now: datetime) -> list[str]:
    return [_day(moment) for moment in volume_window(now)]


def volume_anomalies_sql(d: Dialect, now: datetime, pipeline: str | None) -> tuple[str, list[Any]]:
    one = pipeline is not None
    names = f"SELECT CAST({d.param} AS text) AS pipeline" if one else _SEEN
    sql = (
        f"WITH RECURSIVE {'' if one else _seen(d) + ', '}{_heads(d, names)}, {_history(d, one)} "
        f"SELECT h.pipeline, {_volume_columns(d)} FROM heads h "
        "LEFT JOIN history hi ON hi.pipeline = h.pipeline WHERE h.volume_id IS NOT NULL "
        "ORDER BY h.pipeline"
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
    return VolumeAnomaly(
        pipeline=pipeline,
        run_id=run_id,
        started_at=started_at,
        rows_written=x,
        n=n,
        mean=mean,
        stddev=stddev,
        z_score=z,
        level=level,
        reason=reason,
    )


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


@dataclass(frozen=True, kw_only=True)
class PipelineStatus(Answer):
    pipeline: str
    last_run_id: str | None
    last_run_at: datetime | None
    last_status: str | None
    last_error: str | None  # the latest run's error, when it has one
    last_failure_run_id: str | None  # the latest failed, timed-out or abandoned run in 7 days
    last_failure_at: datetime | None
    last_failure_status: str | None
    last_failure_error: str | None
    runs_7d: int  # finished: queued, skipped and rejected runs are not among them
    successes_7d: int
    rejected_7d: int  # work refused in 7 days (a limit, a full queue, a refused range, a duplicate)
    queued: int  # runs waiting for a slot now
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
        f"FROM {d.table(DAYS)} y WHERE {tenant_is(d, 'y')} AND y.day > {p}"
    )
    first_day = (
        f"SELECT r.pipeline, {each['finished']}, {each['succeeded']}, {each['success_rows']} "
        f"FROM {d.table(RUNS)} r WHERE {tenant_is(d, 'r')} AND {finished('r')} "
        f"AND r.started_at >= {p} "
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


def pipeline_status_sql(
    d: Dialect, now: datetime, pipeline: str | None = None
) -> tuple[str, list[Any]]:
    """Every pipeline's status, or ``pipeline``'s only (its runs' probes alone)."""
    one = pipeline is not None
    names = (
        f"SELECT CAST({d.param} AS text) AS pipeline"
        if one
        else f"{_SEEN} UNION SELECT k.name FROM {d.table(PIPELINES)} k WHERE {tenant_is(d, 'k')}"
    )
    newest = (
        f"(SELECT sn.max_cursor FROM {d.table(SNAPSHOTS)} sn WHERE sn.run_id = h.volume_id "
        f"AND {tenant_is(d, 'sn')} ORDER BY sn.created_at DESC LIMIT 1)"
    )
    last, success, failure = "h.last_run_id", "h.success_id", "h.failure_id"
    volume = "h.volume_id"
    sql = (
        f"WITH RECURSIVE {'' if one else _seen(d) + ', '}{_heads(d, names, failures=True)}, "
        f"{_history(d, one)}, {_recent(d)} "
        f"SELECT h.pipeline, {last}, {_of(d, last, 'x.started_at')}, {_of(d, last, 'x.status')}, "
        f"{_of(d, last, 'x.duration_ms')}, rc.finished, rc.succeeded, rc.success_rows, "
        f"{_of(d, success, 'x.ended_at')}, pl.freshness_sla_s, pl.max_duration_s, "
        f"pl.created_at, {newest}, {_of(d, volume, 'x.watermark_after')}, h.pipeline, "
        f"{_volume_columns(d)}, {_of(d, last, 'x.error_message')}, {failure}, "
        f"{_of(d, failure, 'x.started_at')}, {_of(d, failure, 'x.status')}, "
        f"{_of(d, failure, 'x.error_message')} "
        f"FROM heads h LEFT JOIN {d.table(PIPELINES)} pl ON pl.name = h.pipeline "
        f"AND {tenant_is(d, 'pl')} "
        "LEFT JOIN recent rc ON rc.pipeline = h.pipeline "
        "LEFT JOIN history hi ON hi.pipeline = h.pipeline ORDER BY h.pipeline"
    )
    named = [pipeline] if one else []
    return sql, [now - STATUS_WINDOW, *named, *_window_days(now), *named, *status_window(now)]


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
    volume = _assess_row(row[14:21], volume_window(now), min_history)
    last_error, failure_id, failure_at, failure_status, failure_error = row[21:26]
    finished, succeeded = int(finished or 0), int(succeeded or 0)
    last_success_at = stored_datetime(success_end)
    newest = data_time(cursor or watermark)
    sla, duration, max_duration = map(_optional_int, (sla, duration, max_duration))
    late = lateness(now, sla, last_success_at, newest, stored_datetime(registered))
    slow = _slow(duration, max_duration)
    health, reasons = _health(succeeded, finished, volume, late, slow)
    return PipelineStatus(
        pipeline=pipeline,
        last_run_id=last_run_id,
        last_run_at=stored_datetime(last_at),
        last_status=last_status,
        last_error=last_error,
        last_failure_run_id=failure_id,
        last_failure_at=stored_datetime(failure_at),
        last_failure_status=failure_status,
        last_failure_error=failure_error,
        runs_7d=finished,
        successes_7d=succeeded,
        rejected_7d=0,
        queued=0,
        success_rate_7d=succeeded / finished if finished else None,
        avg_rows_7d=int(success_rows or 0) / succeeded if succeeded else None,
        last_success_at=last_success_at,
        freshness_s=(now - last_success_at).total_seconds() if last_success_at else None,
        freshness_sla_s=sla,
        newest_data_at=newest,
        data_age_s=(now - newest).total_seconds() if newest else None,
        due_at=late.due_at,
        stale=late.late,
        last_duration_ms=duration,
        max_duration_s=max_duration,
        slow=slow is not None,
        z_score=volume.z_score if volume else None,
        anomaly=volume.level if volume else None,
        health=health,
        reasons=reasons,
    )


def pipeline_status(
    session: Session, now: datetime, min_history: int = 5, pipeline: str | None = None
) -> list[PipelineStatus]:
    """Every pipeline that has runs or is registered (or ``pipeline``, if it is): its last
    run, 7-day success rate and volume, freshness against its SLA (from its last success
    and from its data), volume verdict, whether its latest run was slow, and health (one
    query)."""
    return [s for s, _ in status_with_volumes(session, now, min_history, pipeline)]


def set_apart_sql(d: Dialect) -> str:
    """Per pipeline, the rejected runs since a moment and the runs queued now (from the
    index on status: both are rare)."""
    return (
        "SELECT r.pipeline, sum(CASE WHEN r.status = 'rejected' THEN 1 ELSE 0 END), "
        "sum(CASE WHEN r.status = 'queued' THEN 1 ELSE 0 END) "
        f"FROM {d.table(RUNS)} r WHERE {tenant_is(d, 'r')} AND (r.status = 'queued' OR "
        f"(r.status = 'rejected' AND r.started_at >= {d.param})) GROUP BY r.pipeline"
    )


def set_apart(session: Session, since: datetime) -> dict[str, tuple[int, int]]:
    """What status counts apart from failures: (rejected work, runs queued) per pipeline."""
    rows = session.query(set_apart_sql(session.dialect), [since])
    return {str(p): (int(rejected or 0), int(queued or 0)) for p, rejected, queued in rows}


def status_with_volumes(
    session: Session, now: datetime, min_history: int = 5, pipeline: str | None = None
) -> list[tuple[PipelineStatus, VolumeAnomaly | None]]:
    """:func:`pipeline_status` with each pipeline's volume verdict (what
    :func:`volume_anomalies` answers for it, None without a volume sample): both from the
    one status query, whose row already holds the volume columns."""
    sql, params = pipeline_status_sql(session.dialect, now, pipeline)
    rows = session.query(sql, params)
    known = [row for row in rows if pipeline is None or row[1] is not None or row[11] is not None]
    apart = set_apart(session, now - STATUS_WINDOW)
    window = volume_window(now)
    found = []
    for row in known:
        s = _status(row, now, min_history)
        rejected, queued = apart.get(s.pipeline, (0, 0))
        volume = _assess_row(row[14:21], window, min_history)
        found.append((replace(s, rejected_7d=rejected, queued=queued), volume))
    return found
