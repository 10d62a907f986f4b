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
- **SLA breaches** (:mod:`pipeledger.ledger.reads.sla`): a freshness breach is an episode of
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

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from pipeledger.ledger.reads.answers import (
    _SUCCESS,
    DEFAULT_SLA,
    FRESHNESS_REASON,
    MIN_PREFIX,
    STATUS_WINDOW,
    VOLUME_WINDOW_DAYS,
    Answer,
    Health,
    Level,
    _as_json,
    _day,
    _day_start,
    _latest,
    span,
)
from pipeledger.ledger.reads.detail import (
    AuditRow,
    RunDetail,
    SnapshotRow,
    TaskRow,
    audit_trail,
    show_run,
)
from pipeledger.ledger.reads.health import (
    Lateness,
    PipelineStatus,
    VolumeAnomaly,
    assess_volume,
    data_time,
    lateness,
    pipeline_status,
    pipeline_status_sql,
    rate_health,
    recent_counts,
    recent_counts_sql,
    status_window,
    volume_anomalies,
    volume_anomalies_sql,
    volume_window,
)
from pipeledger.ledger.reads.runs import RunRow, list_runs, list_runs_sql
from pipeledger.ledger.rollup import COMPARES, NOT_FRONTIER
from pipeledger.ledger.tables import (
    ACCESS,
    AUDIT,
    DEPENDENCIES,
    PIPELINES,
    QUALITY,
    RECONCILIATIONS,
    RUNS,
    SNAPSHOTS,
    TASK_DAYS,
    TASKS,
    stored_datetime,
    tenant_is,
)
from pipeledger.state.lateness import LatenessReport, RunLateness, report
from pipeledger.warehouse.dialect import Dialect
from pipeledger.warehouse.session import Session

# -- 5. task_trends ---------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class TaskTrend(Answer):
    pipeline: str
    task: str
    day: str
    runs: int
    avg_duration_ms: float | None
    max_duration_ms: int | None
    avg_rows_out: float | None


def task_trends_sql(
    d: Dialect, now: datetime, pipeline: str | None, days: int, limit: int | None = None
) -> tuple[str, list[Any]]:
    """From the tasks' daily rollup (:func:`pipeledger.ledger.rollup.task_triggers`): the
    window is whole UTC days, so the days' counts are the tasks' own. With ``limit``, only
    the ``limit`` (pipeline, task) series that took longest in the window (the longest
    ``duration_max`` of their days; ties by name), each with all its days."""
    first = _day(_day_start(now) - timedelta(days=days - 1))
    params: list[Any] = [first]
    condition = ""
    mine = tenant_is(d, "y")
    if pipeline is not None:
        condition = f" AND y.pipeline = {d.param}"
        params.append(pipeline)
    columns = (
        "y.pipeline, y.task, y.day, y.runs, y.duration_n, y.duration_sum, "
        "y.duration_max, y.rows_out_n, y.rows_out_sum"
    )
    order = "ORDER BY y.pipeline, y.task, y.day"
    if limit is None:
        sql = (
            f"SELECT {columns} FROM {d.table(TASK_DAYS)} y "
            f"WHERE {mine} AND y.day >= {d.param}{condition} {order}"
        )
        return sql, params
    series = (
        f"SELECT y.pipeline, y.task FROM {d.table(TASK_DAYS)} y "
        f"WHERE {mine} AND y.day >= {d.param}{condition} GROUP BY y.pipeline, y.task "
        "ORDER BY coalesce(max(y.duration_max), -1) DESC, y.pipeline, y.task "
        f"LIMIT {int(limit)}"
    )
    sql = (
        f"WITH series AS ({series}) SELECT {columns} FROM {d.table(TASK_DAYS)} y "
        "JOIN series s ON s.pipeline = y.pipeline AND s.task = y.task "
        f"WHERE {mine} AND y.day >= {d.param} {order}"
    )
    return sql, [*params, first]


def _mean(n: Any, total: Any) -> float | None:
    """``avg`` of the values present: exact integer sums, one rounding (``total / n``)."""
    return int(total) / int(n) if n else None


def task_trends(
    session: Session,
    now: datetime,
    pipeline: str | None = None,
    days: int = 14,
    limit: int | None = None,
) -> list[TaskTrend]:
    """Per pipeline, task and UTC day of the last ``days`` days (today included): how many
    times the task ran, its mean and longest duration, its mean rows out. ``limit``: of
    the ``limit`` tasks that took longest in the window (:func:`task_trends_sql`)."""
    sql, params = task_trends_sql(session.dialect, now, pipeline, days, limit)
    return [
        TaskTrend(
            pipeline=p,
            task=name,
            day=str(day),
            runs=int(n),
            avg_duration_ms=_mean(dn, ds),
            max_duration_ms=None if mx is None else int(mx),
            avg_rows_out=_mean(rn, rs),
        )
        for p, name, day, n, dn, ds, mx, rn, rs in session.query(sql, params)
    ]


# -- 7. blocked_pipelines ---------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Blocked(Answer):
    downstream: str
    upstream: str
    upstream_last_success: datetime | None
    expected_within_s: int
    reason: str


def dependencies_sql(d: Dialect) -> str:
    """Each edge with its upstream's last success: a scalar subquery per edge (a probe of
    the index, then of the primary key), never a join over every run."""
    ended = (
        f"(SELECT ls.ended_at FROM {d.table(RUNS)} ls "
        f"WHERE ls.run_id = {_latest(d, 'e.upstream', _SUCCESS)} AND {tenant_is(d, 'ls')})"
    )
    return (
        f"SELECT e.downstream, e.upstream, {ended}, pl.freshness_sla_s "
        f"FROM {d.table(DEPENDENCIES)} e LEFT JOIN {d.table(PIPELINES)} pl ON pl.name = e.upstream "
        f"AND {tenant_is(d, 'pl')} WHERE {tenant_is(d, 'e')} ORDER BY e.downstream, e.upstream"
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
    return Blocked(
        downstream=downstream,
        upstream=upstream,
        upstream_last_success=last,
        expected_within_s=expected,
        reason=reason,
    )


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
    access_reads: int  # the access audit's minutes before the cutoff


def prune_access_sql(d: Dialect) -> str:
    """The access audit's rows of minutes before the cutoff (one parameter), of every
    tenant: a read belongs to no run, so none is kept for a run's sake."""
    return f"DELETE FROM {d.table(ACCESS)} WHERE minute < {d.param}"


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
    before the run (their foreign keys). The access audit's rows of minutes before the
    same cutoff go too. Returns the rows deleted per table."""
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
    counts[ACCESS.table] = _prune_access(session, cutoff)
    return PruneResult(cutoff=cutoff, **counts)


def _prune_access(session: Session, cutoff: datetime) -> int:
    """A ledger from before migration 14 has no access rows to delete."""
    if session.table_columns(ACCESS) is None:
        return 0
    return session.execute(prune_access_sql(session.dialect), [cutoff])


# -- 9. lateness ------------------------------------------------------------------------


def lateness_sql(d: Dialect) -> str:
    """The ``extra`` of a pipeline's runs that committed, oldest first."""
    return (
        f"SELECT extra FROM {d.table(RUNS)} r WHERE {tenant_is(d, 'r')} AND pipeline = {d.param} "
        "AND status IN ('success', 'partial') AND extra IS NOT NULL ORDER BY started_at, run_id"
    )


def lateness_report(session: Session, pipeline: str, buffer_s: int) -> LatenessReport:
    """Late rows over the pipeline's history: what the runs that committed measured and
    found (``extra.lateness``; definitions in :mod:`pipeledger.state.lateness`), against the
    buffer configured now (``buffer_s``)."""
    d = session.dialect
    extras = (_as_json(d, row[0]) for row in session.query(lateness_sql(d), [pipeline]))
    runs = [RunLateness.from_json(e["lateness"]) for e in extras if e and e.get("lateness")]
    return report(pipeline, buffer_s, runs)


# -- the loader's question --------------------------------------------------------------


def last_success_sql(d: Dialect) -> str:
    return (
        f"SELECT data_interval_end FROM {d.table(RUNS)} r WHERE {tenant_is(d, 'r')} "
        f"AND pipeline = {d.param} "
        f"AND status = 'success' AND trigger_type NOT IN {NOT_FRONTIER} "
        "ORDER BY started_at DESC, run_id DESC LIMIT 1"
    )


def last_success(session: Session, pipeline: str) -> datetime | None:
    """``data_interval_end`` of the pipeline's latest successful run (by start time) that
    is not a backfill or a replay: those re-load old data, and must not move the answer
    back (a replay covers no interval at all). None for an integer cursor."""
    rows = session.query(last_success_sql(session.dialect), [pipeline])
    return stored_datetime(rows[0][0]) if rows else None


__all__ = [
    "DEFAULT_SLA",
    "FRESHNESS_REASON",
    "MIN_PREFIX",
    "STATUS_WINDOW",
    "VOLUME_WINDOW_DAYS",
    "Answer",
    "AuditRow",
    "Blocked",
    "Health",
    "Lateness",
    "Level",
    "PipelineStatus",
    "PruneResult",
    "RunDetail",
    "RunRow",
    "SnapshotRow",
    "TaskRow",
    "TaskTrend",
    "VolumeAnomaly",
    "assess_volume",
    "audit_trail",
    "blocked_pipelines",
    "data_time",
    "dependencies_sql",
    "last_success",
    "last_success_sql",
    "lateness",
    "lateness_report",
    "lateness_sql",
    "list_runs",
    "list_runs_sql",
    "pipeline_status",
    "pipeline_status_sql",
    "prunable_runs_sql",
    "prune",
    "prune_access_sql",
    "rate_health",
    "recent_counts",
    "recent_counts_sql",
    "show_run",
    "span",
    "status_window",
    "task_trends",
    "task_trends_sql",
    "volume_anomalies",
    "volume_anomalies_sql",
    "volume_window",
]
