"""SLA breaches and reliability (definitions in :mod:`pipeledger.ledger.reads.queries`).

A freshness breach is recorded once per episode of lateness: :func:`observe` opens one
when it first sees a pipeline late (due when the SLA passed) and ends it when it first
sees the pipeline fresh again; at most one is open per pipeline (a unique index), so two
observers at once record it once. A run slower than its pipeline's ``max_duration`` is a
breach of its own, keyed by the run. :func:`breaches` lists them and :func:`reliability`
sums up each pipeline's last 7 and 30 days.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from pipeledger.ledger.reads.answers import FAILURES
from pipeledger.ledger.reads.health import _recent, status_window
from pipeledger.ledger.reads.queries import (
    FRESHNESS_REASON,
    Answer,
    PipelineStatus,
    pipeline_status,
    span,
)
from pipeledger.ledger.rollup import COMPARES, NOT_FRONTIER
from pipeledger.ledger.tables import (
    BREACH_TABLE,
    BREACHES,
    PIPELINES,
    RUNS,
    stored_datetime,
    tenant_is,
)
from pipeledger.warehouse.dialect import Dialect
from pipeledger.warehouse.session import Session

BreachKind = Literal["freshness", "duration"]
WINDOWS = (7, 30)  # days of reliability: a short window, and the long one that holds it
_COLUMNS = BREACH_TABLE.column_names


@dataclass(frozen=True, kw_only=True)
class Breach(Answer):
    breach_id: str
    pipeline: str
    kind: BreachKind
    run_id: str | None  # the slow run; freshness: the latest run when it was seen late
    due_at: datetime  # when it became late
    detected_at: datetime  # when it was first seen late
    ended_at: datetime | None  # when it was first seen fresh again (duration: the run's end)
    sla_s: int  # freshness_sla or max_duration
    reason: str
    late_s: float  # how late: from due_at to its end (or to now, while open)

    @property
    def open(self) -> bool:
        return self.ended_at is None


# -- recording --------------------------------------------------------------------------


def insert_breach_sql(d: Dialect) -> str:
    """A breach, unless one is already open for the pipeline and kind (or the id exists)."""
    columns = ", ".join(_COLUMNS)
    return (
        f"INSERT INTO {d.table(BREACHES)} ({columns}) VALUES ({d.marks(len(_COLUMNS))}) "
        "ON CONFLICT DO NOTHING"
    )


def open_breaches_sql(d: Dialect) -> str:
    return (
        f"SELECT b.pipeline, b.breach_id FROM {d.table(BREACHES)} b "
        f"WHERE {tenant_is(d, 'b')} AND b.kind = 'freshness' AND b.ended_at IS NULL"
    )


def end_breach_sql(d: Dialect) -> str:
    p = d.param
    return (
        f"UPDATE {d.table(BREACHES)} SET ended_at = {p} WHERE breach_id = {p} AND ended_at IS NULL"
    )


def slow_runs_sql(d: Dialect) -> str:
    """Runs that ended since the parameter and took longer than their max_duration."""
    return (
        "SELECT r.run_id, r.pipeline, r.started_at, r.ended_at, r.duration_ms, "
        f"pl.max_duration_s FROM {d.table(RUNS)} r "
        f"JOIN {d.table(PIPELINES)} pl ON pl.name = r.pipeline AND {tenant_is(d, 'pl')} "
        f"WHERE {tenant_is(d, 'r')} AND r.ended_at >= {d.param} AND pl.max_duration_s IS NOT NULL "
        "AND r.duration_ms > pl.max_duration_s * 1000"
    )


def _record(session: Session, breach: Breach) -> bool:
    values = [getattr(breach, column) for column in _COLUMNS]
    return session.execute(insert_breach_sql(session.dialect), values) == 1


def _freshness_breach(status: PipelineStatus, now: datetime) -> Breach:
    assert status.due_at is not None and status.freshness_sla_s is not None
    why = next((r for r in status.reasons if r.startswith(FRESHNESS_REASON)), FRESHNESS_REASON)
    return Breach(
        breach_id=str(uuid.uuid4()),
        pipeline=status.pipeline,
        kind="freshness",
        run_id=status.last_run_id,
        due_at=status.due_at,
        detected_at=now,
        ended_at=None,
        sla_s=status.freshness_sla_s,
        reason=why,
        late_s=(now - status.due_at).total_seconds(),
    )


def _duration_breach(row: Sequence[Any], now: datetime) -> Breach:
    run_id, pipeline, started, ended, duration_ms, max_s = row
    started_at, max_duration = stored_datetime(started), int(max_s)
    assert started_at is not None
    took = int(duration_ms) / 1000
    return Breach(
        breach_id=str(uuid.uuid5(uuid.NAMESPACE_URL, f"pipeledger:duration:{run_id}")),
        pipeline=pipeline,
        kind="duration",
        run_id=str(run_id),
        due_at=started_at + timedelta(seconds=max_duration),
        detected_at=now,
        ended_at=stored_datetime(ended),
        sla_s=max_duration,
        reason=f"run {str(run_id)[:8]} took {span(took)} (max_duration {span(max_duration)})",
        late_s=took - max_duration,
    )


def observe(session: Session, now: datetime, runs_since: datetime) -> list[Breach]:
    """Open a freshness breach for each pipeline seen late without one open, end the open
    breach of each pipeline seen fresh, and record every run that ended since
    ``runs_since`` slower than its max_duration; in ``session`` (a writer). Returns the
    breaches this call opened."""
    d = session.dialect
    opened = dict(session.query(open_breaches_sql(d)))
    found: list[Breach] = []
    for status in pipeline_status(session, now):
        if status.stale and status.pipeline not in opened:
            found.append(_freshness_breach(status, now))
        elif not status.stale and status.pipeline in opened:
            session.execute(end_breach_sql(d), [now, opened[status.pipeline]])
    found += [_duration_breach(row, now) for row in session.query(slow_runs_sql(d), [runs_since])]
    return [breach for breach in found if _record(session, breach)]


# -- reading ----------------------------------------------------------------------------


def breaches_sql(d: Dialect) -> str:
    return (
        f"SELECT {', '.join(_COLUMNS)} FROM {d.table(BREACHES)} b WHERE {tenant_is(d, 'b')} "
        f"AND (b.ended_at IS NULL OR b.due_at >= {d.param} OR b.detected_at >= {d.param}) "
        "ORDER BY b.due_at DESC, b.breach_id"
    )


def _breach(row: Sequence[Any], now: datetime) -> Breach:
    values = dict(zip(_COLUMNS, row, strict=True))
    for name in ("due_at", "detected_at", "ended_at"):
        values[name] = stored_datetime(values[name])
    values["sla_s"] = int(values["sla_s"])
    values["late_s"] = ((values["ended_at"] or now) - values["due_at"]).total_seconds()
    return Breach(**values)


def breaches(session: Session, now: datetime, days: int = 30) -> list[Breach]:
    """Breaches due or seen in the last ``days`` days, and every open one, newest first."""
    since = now - timedelta(days=days)
    rows = session.query(breaches_sql(session.dialect), [since, since])
    return [_breach(row, now) for row in rows]


@dataclass(frozen=True, kw_only=True)
class Reliability(Answer):
    pipeline: str
    days: int
    runs: int  # finished
    successes: int
    success_rate: float | None
    recoveries: int  # failure episodes that ended with a success
    mttr_s: float | None  # mean time to recovery
    failing_since: datetime | None  # a failure episode still open
    p95_duration_ms: int | None  # of successful runs
    breaches: int
    late_s: float  # time spent in breach (freshness), within the window


def _among(d: Dialect, column: str, among: int, keyword: str = "AND") -> str:
    """`` AND column IN (...)`` of ``among`` bound names (none: every pipeline)."""
    return f" {keyword} {column} IN ({d.marks(among)})" if among else ""


def timed_successes_sql(d: Dialect, among: int = 0) -> str:
    """Per pipeline, of its runs that started since the window's start: how many finished
    and succeeded (:func:`recent_counts`: from the daily rollup), and how many of the
    successes have a duration (less those without one: a probe of an empty range, as a
    rule). Parameters: :func:`status_window`, then the start, then the ``among``
    pipelines it is about, if any (else every pipeline)."""
    without = (
        f"SELECT count(*) FROM {d.table(RUNS)} z WHERE {tenant_is(d, 'z')} "
        "AND z.pipeline = rc.pipeline "
        f"AND z.status = 'success' AND z.trigger_type <> {COMPARES} "
        f"AND z.started_at >= {d.param} AND z.duration_ms IS NULL"
    )
    return (
        f"WITH {_recent(d)} SELECT rc.pipeline, rc.finished, rc.succeeded, "
        f"rc.succeeded - ({without}) FROM recent rc{_among(d, 'rc.pipeline', among, 'WHERE')} "
        "ORDER BY rc.pipeline"
    )


P95_CHUNK = 200  # pipelines per statement (SQLite allows 500 terms in a UNION ALL)


def _percentile(d: Dialect, pipeline: str, offset: str) -> str:
    return (
        f"(SELECT r.duration_ms FROM {d.table(RUNS)} r WHERE {tenant_is(d, 'r')} "
        f"AND r.pipeline = {pipeline} "
        "AND r.status = 'success' AND r.duration_ms IS NOT NULL "
        f"AND r.started_at >= {d.param} AND r.trigger_type <> {COMPARES} "
        f"ORDER BY r.duration_ms DESC LIMIT 1 OFFSET {offset})"
    )


def p95_sql(d: Dialect, pipelines: int = 1) -> str:
    """The nearest-rank 95th percentile duration of each pipeline's successful runs that
    started since the window's start (loads: a reconcile's duration is another job's),
    given how many there are (:func:`timed_successes_sql`): the one at offset ``n -
    rank`` from the longest, read from the end of the (pipeline, status, duration) index,
    about 5% of a pipeline's successes, never its every run.

    Parameters: where a correlated subquery's OFFSET may name the outer query (and arrays
    bind), the start, then the pipelines and their offsets as two arrays (one statement
    for every pipeline; ``pipelines`` is ignored). Elsewhere one probe per pipeline in a
    UNION ALL of ``pipelines``: its name twice, the start, its offset."""
    p = d.param
    if d.correlated_limit and d.array_params:
        return (
            f"SELECT c.pipeline, {_percentile(d, 'c.pipeline', 'c.skip')} "
            f"FROM unnest(CAST({p} AS text[]), CAST({p} AS bigint[])) AS c(pipeline, skip)"
        )
    probe = f"SELECT CAST({p} AS text) AS pipeline, {_percentile(d, p, p)} AS duration_ms"
    return " UNION ALL ".join([probe] * pipelines)


def nearest_rank_offset(n: int) -> int:
    """The offset from the longest of ``n`` durations of their nearest-rank 95th
    percentile (rank ``ceil(0.95 n)`` from the shortest)."""
    return n - (95 * n + 99) // 100


def _p95_statements(
    d: Dialect, since: datetime, asked: Sequence[tuple[str, int]]
) -> list[tuple[str, list[Any]]]:
    if d.correlated_limit and d.array_params:
        names, skips = [p for p, _ in asked], [nearest_rank_offset(n) for _, n in asked]
        return [(p95_sql(d), [since, names, skips])]
    chunks = [asked[i : i + P95_CHUNK] for i in range(0, len(asked), P95_CHUNK)]
    return [
        (p95_sql(d, len(c)), [v for p, n in c for v in (p, p, since, nearest_rank_offset(n))])
        for c in chunks
    ]


def _p95(session: Session, since: datetime, timed: dict[str, int]) -> dict[str, int]:
    asked = [(pipeline, n) for pipeline, n in timed.items() if n > 0]
    found: dict[str, int] = {}
    for sql, params in _p95_statements(session.dialect, since, asked) if asked else []:
        rows = session.query(sql, params)
        found.update({str(p): int(ms) for p, ms in rows if ms is not None})
    return found


def _next_sql(d: Dialect, column: str) -> str:
    """``column`` of the run that counts for recovery (a success or a failure; no
    backfill, replay or reconcile) just after the failure ``f`` in its pipeline's start
    order: a probe of the (pipeline, started_at, run_id, status, trigger_type, ended_at)
    index that stops at the first such run."""
    kinds = ", ".join(f"'{s}'" for s in ("success", *FAILURES))
    return (
        f"SELECT {column} FROM {d.table(RUNS)} o WHERE {tenant_is(d, 'o')} "
        "AND o.pipeline = f.pipeline AND (o.started_at, o.run_id) > (f.started_at, f.run_id) "
        f"AND o.status IN ({kinds}) AND o.trigger_type NOT IN {NOT_FRONTIER} "
        "ORDER BY o.started_at, o.run_id LIMIT 1"
    )


def transitions_sql(d: Dialect, among: int = 0) -> str:
    """The failures that started since the parameter (no backfills, replays or
    reconciles), in start order, each with the run id and end of the run that counts for
    recovery just after it (:func:`_next_sql`). A pipeline can only go from succeeding
    to failing at a failure, and back at the run after a failure, so the runs that open
    and close its failure episodes are all here (:func:`_recoveries`): the read follows the
    failures (a partial index), not every run of the window. Then the ``among``
    pipelines it is about, if any (else every pipeline). Where a join may name the
    columns before it (``LATERAL``) the next run is one probe, elsewhere one a column."""
    failed = ", ".join(f"'{s}'" for s in FAILURES)
    where = (
        f"WHERE {tenant_is(d, 'f')} AND f.status IN ({failed}) AND f.started_at >= {d.param} "
        f"AND f.trigger_type NOT IN {NOT_FRONTIER}{_among(d, 'f.pipeline', among)}"
    )
    columns = "f.pipeline, f.started_at, f.run_id, f.ended_at"
    order = "ORDER BY f.pipeline, f.started_at, f.run_id"
    runs = d.table(RUNS)
    if d.lateral_joins:
        after = _next_sql(d, "o.run_id, o.ended_at")
        return (
            f"SELECT {columns}, a.run_id, a.ended_at FROM {runs} f "
            f"LEFT JOIN LATERAL ({after}) a ON true {where} {order}"
        )
    after = f"({_next_sql(d, 'o.run_id')}), ({_next_sql(d, 'o.ended_at')})"
    return f"SELECT {columns}, {after} FROM {runs} f {where} {order}"


@dataclass
class _Recovery:
    took: list[float]
    failing_since: datetime | None = None

    def recovered(self, at: datetime | None) -> None:
        """A success that ended ``at`` follows a failure."""
        if self.failing_since is not None and at is not None:
            self.took.append((at - self.failing_since).total_seconds())
            self.failing_since = None


# a failure of transitions_sql, its datetimes as datetimes: pipeline, started_at, run_id,
# ended_at, and the run id and end of the run after it
_Failure = tuple[str, datetime, str, datetime | None, str | None, datetime | None]


def _recoveries(failures: Sequence[_Failure], since: datetime) -> dict[str, _Recovery]:
    """Per pipeline, how long each failure episode since ``since`` took to recover, and
    whether one is still open (the module docstring's mean time to recovery), from the
    failures of :func:`transitions_sql`, in its order. A failure opens an episode unless
    the run before it, in the window, failed too: unless it is the next run of the failure
    before it in the rows. The run after a failure closes the episode when it succeeded:
    when it is not the next failure in the rows."""
    found: dict[str, _Recovery] = defaultdict(lambda: _Recovery([]))
    before: tuple[str, str | None, datetime | None] | None = None  # pipeline, the next run
    for pipeline, started, run_id, ended, after, after_ended in failures:
        if started < since:
            continue
        followed = before is not None and before[:2] == (pipeline, run_id)
        if before is not None and not followed and before[1] is not None:
            found[before[0]].recovered(before[2])
        if not followed:
            found[pipeline].failing_since = ended
        before = (pipeline, after, after_ended)
    if before is not None and before[1] is not None:
        found[before[0]].recovered(before[2])
    return found


def _both_recoveries(
    session: Session, since: datetime, short_since: datetime, among: Sequence[str] | None = None
) -> tuple[dict[str, _Recovery], dict[str, _Recovery]]:
    """The recoveries of the long window and of the short one, from one read (of the
    ``among`` pipelines only, when given)."""
    sql = transitions_sql(session.dialect, len(among or ()))
    failures = [_failure(row) for row in session.query(sql, [since, *(among or ())])]
    return _recoveries(failures, since), _recoveries(failures, short_since)


def _failure(row: Sequence[Any]) -> _Failure:
    pipeline, started, run_id, ended, after, after_ended = row
    at = stored_datetime(started)
    assert at is not None  # a run's started_at is never NULL
    return pipeline, at, run_id, stored_datetime(ended), after, stored_datetime(after_ended)


def _time_late(found: Sequence[Breach], since: datetime, now: datetime) -> float:
    """Seconds of freshness breach inside ``[since, now]``."""
    spans = [(max(b.due_at, since), b.ended_at or now) for b in found if b.kind == "freshness"]
    return sum(max((end - start).total_seconds(), 0.0) for start, end in spans)


def _window(
    session: Session,
    now: datetime,
    days: int,
    found: Sequence[Breach],
    recovered: dict[str, _Recovery],
    among: Sequence[str] | None = None,
) -> list[Any]:
    d, since = session.dialect, now - timedelta(days=days)
    params = [*status_window(now, timedelta(days=days)), since, *(among or ())]
    counts, timed = {}, {}
    for pipeline, finished, succeeded, n in session.query(
        timed_successes_sql(d, len(among or ())), params
    ):
        counts[pipeline] = (int(finished), int(succeeded))
        timed[pipeline] = int(n)
    p95 = _p95(session, since, timed)
    mine: dict[str, list[Breach]] = defaultdict(list)
    for b in found:
        if (b.open or b.due_at >= since) and (among is None or b.pipeline in among):
            mine[b.pipeline].append(b)
    rows = []
    for pipeline in sorted(set(counts) | set(p95) | set(recovered) | set(mine)):
        runs, successes = counts.get(pipeline, (0, 0))
        r = recovered.get(pipeline, _Recovery([]))
        rows.append(
            Reliability(
                pipeline=pipeline,
                days=days,
                runs=runs,
                successes=successes,
                success_rate=successes / runs if runs else None,
                recoveries=len(r.took),
                mttr_s=sum(r.took) / len(r.took) if r.took else None,
                failing_since=r.failing_since,
                p95_duration_ms=p95.get(pipeline),
                breaches=len(mine[pipeline]),
                late_s=_time_late(mine[pipeline], since, now),
            )
        )
    return rows


def reliability(session: Session, now: datetime) -> list[Reliability]:
    """Per pipeline, over its last 7 and 30 days: runs, success rate, mean time to
    recovery, p95 duration of successes, breaches and time spent late."""
    short, long = WINDOWS
    found = breaches(session, now, long)
    recovered = _both_recoveries(session, now - timedelta(days=long), now - timedelta(days=short))
    by_days = {long: recovered[0], short: recovered[1]}
    rows = [row for days in WINDOWS for row in _window(session, now, days, found, by_days[days])]
    return sorted(rows, key=lambda r: (r.pipeline, r.days))


@dataclass(frozen=True)
class SlaReport:
    """``pipeledger sla``: the breaches of the last 30 days, and reliability per pipeline."""

    breaches: Sequence[Breach]
    reliability: Sequence[Reliability]

    def to_json(self) -> dict[str, Any]:
        return {
            "breaches": [b.to_json() for b in self.breaches],
            "reliability": [r.to_json() for r in self.reliability],
        }


def sla_report(session: Session, now: datetime) -> SlaReport:
    return SlaReport(breaches(session, now), reliability(session, now))


# -- the worst first, a page of them ------------------------------------------------------


def rank_sql(d: Dialect) -> str:
    """Per pipeline with runs in the short window: how many finished and succeeded (from
    the daily rollup, as :func:`timed_successes_sql`), and the state of its latest success
    or failure in that window (one probe of the tenant's (pipeline, started_at) index: a
    failure there is an episode still open, the reliability's ``failing_since``).
    Parameters: :func:`status_window` of the short window, then its start."""
    kinds = ", ".join(f"'{s}'" for s in ("success", *FAILURES))
    latest = (
        f"(SELECT r.status FROM {d.table(RUNS)} r WHERE {tenant_is(d, 'r')} "
        f"AND r.pipeline = rc.pipeline AND r.started_at >= {d.param} "
        f"AND r.status IN ({kinds}) AND r.trigger_type NOT IN {NOT_FRONTIER} "
        "ORDER BY r.started_at DESC, r.run_id DESC LIMIT 1)"
    )
    return (
        f"WITH {_recent(d)} SELECT rc.pipeline, rc.finished, rc.succeeded, {latest} FROM recent rc"
    )


Rank = tuple[int, float, str]  # (0 while failing, else 1; short window's success rate; name)


def rank(session: Session, now: datetime, found: Sequence[Breach]) -> dict[str, Rank]:
    """Every pipeline :func:`reliability` has a short window's row for, with its place
    (lowest first: still failing, then the success rate, none last, then the name), from
    the rollup and one probe per pipeline, never the runs of the window: the pipelines
    with runs in it, and those with a breach open or due in it (``found``)."""
    short = timedelta(days=WINDOWS[0])
    since = now - short
    rows = session.query(rank_sql(session.dialect), [*status_window(now, short), since])
    places: dict[str, Rank] = {}
    for pipeline, finished, succeeded, latest in rows:
        rate = int(succeeded) / int(finished) if int(finished or 0) else 2.0
        places[str(pipeline)] = (0 if latest not in (None, "success") else 1, rate, str(pipeline))
    for b in found:
        if (b.open or b.due_at >= since) and b.pipeline not in places:
            places[b.pipeline] = (1, 2.0, b.pipeline)
    return places


@dataclass(frozen=True)
class SlaPage:
    """The dashboard's alerts page: every breach of the last 30 days (and the open ones),
    and the reliability of the ``limit`` least reliable pipelines, both windows each,
    worst first; the rows of :class:`SlaReport` for them. ``nodes``: how many were ranked."""

    breaches: Sequence[Breach]
    reliability: Sequence[Reliability]
    nodes: int

    def to_json(self) -> dict[str, Any]:
        return {
            "breaches": [b.to_json() for b in self.breaches],
            "reliability": [r.to_json() for r in self.reliability],
            "nodes": self.nodes,
        }


def sla_page(session: Session, now: datetime, limit: int) -> SlaPage:
    """The ``limit`` least reliable pipelines' rows of :func:`sla_report`, worst first: the
    rank from the rollup (:func:`rank`), then the runs of those pipelines alone."""
    short, long = WINDOWS
    found = breaches(session, now, long)
    places = rank(session, now, found)
    worst = sorted(places, key=places.__getitem__)[: max(limit, 0)]
    if not worst:
        return SlaPage(found, (), len(places))
    recovered = _both_recoveries(
        session, now - timedelta(days=long), now - timedelta(days=short), worst
    )
    by_days = {long: recovered[0], short: recovered[1]}
    rows = [
        row for days in WINDOWS for row in _window(session, now, days, found, by_days[days], worst)
    ]
    order = {name: i for i, name in enumerate(worst)}
    rows.sort(key=lambda r: (order[r.pipeline], r.days))
    return SlaPage(found, rows, len(places))
