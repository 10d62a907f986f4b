"""The questions the dashboard and ``sla``/``tasks`` ask, read at scale (migration 12): the
same answers as the straightforward queries over every run, and plans that read the runs
and tasks through an index, never a table whole. Timings are ``python -m bench.web``'s."""

from __future__ import annotations

import random
import re
from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import pytest

from pipeledger.ledger.reads import health, queries, sla
from pipeledger.ledger.reads.health import status_window
from pipeledger.ledger.reads.recent import latest_runs
from pipeledger.ledger.tables import RUNS, stored_datetime
from pipeledger.ledger.tables import TASKS as TASKS_TABLE
from pipeledger.warehouse.session import Session
from tests.ledger_fixtures import NOW, ledger, reading

STATES = ["success"] * 6 + ["failed", "timed_out", "abandoned", "partial", "cancelled", "skipped"]
TRIGGERS = ["scheduled"] * 5 + ["manual", "retry", "backfill", "replay", "reconcile"]
PIPELINES = [f"p{i:02d}" for i in range(12)]

# the straightforward questions, over every run of the window (the SQL before migration 12)
P95 = (
    "SELECT x.pipeline, x.duration_ms FROM (SELECT r.pipeline, r.duration_ms, "
    "row_number() OVER (PARTITION BY r.pipeline ORDER BY r.duration_ms) AS position, "
    "count(*) OVER (PARTITION BY r.pipeline) AS n FROM {runs} r WHERE r.status = 'success' "
    "AND r.started_at >= {p} AND r.trigger_type <> 'reconcile' AND r.duration_ms IS NOT NULL) x "
    "WHERE x.position = (95 * x.n + 99) / 100"
)
TRANSITIONS = (
    "SELECT x.pipeline, x.failing, x.ended_at FROM (SELECT r.pipeline, r.started_at, r.run_id, "
    "r.ended_at, CASE WHEN r.status = 'success' THEN 0 ELSE 1 END AS failing, "
    "lag(CASE WHEN r.status = 'success' THEN 0 ELSE 1 END) OVER (PARTITION BY r.pipeline "
    "ORDER BY r.started_at, r.run_id) AS before FROM {runs} r WHERE r.started_at >= {p} "
    "AND r.status IN ('success', 'failed', 'timed_out', 'abandoned') "
    "AND r.trigger_type NOT IN ('backfill', 'replay', 'reconcile')) x "
    "WHERE x.before IS NULL OR x.before <> x.failing ORDER BY x.pipeline, x.started_at, x.run_id"
)
COUNTS = (
    "SELECT r.pipeline, count(*), sum(CASE WHEN r.status = 'success' THEN 1 ELSE 0 END) "
    "FROM {runs} r WHERE r.started_at >= {p} AND r.status NOT IN ('running', 'skipped') "
    "AND r.trigger_type <> 'reconcile' GROUP BY r.pipeline"
)
TASKS = (
    "SELECT r.pipeline, t.name, {day} AS day, count(*), avg(t.duration_ms), "
    "max(t.duration_ms), avg(t.rows_out) FROM {tasks} t JOIN {runs} r ON r.run_id = t.run_id "
    "WHERE t.started_at >= {p} GROUP BY r.pipeline, t.name, {day} ORDER BY 1, 2, 3"
)


def seed(url: str, runs_per_pipeline: int = 70) -> None:
    """Runs of mixed states and triggers over 35 days, durations with ties, runs that
    started at the same instant, successes without a duration, tasks with and without
    rows out; written in no particular order (a run may finish after a later one)."""
    rng = random.Random(19)
    with ledger(url) as b:
        for name in PIPELINES:
            b.pipeline(name)
        planned = [
            (name, NOW - timedelta(days=35) + timedelta(hours=12 * k + rng.choice([0, 0, 1])))
            for name in PIPELINES
            for k in range(runs_per_pipeline)
        ]
        rng.shuffle(planned)
        for name, start in planned:
            status = rng.choice(STATES)
            run = b.run(
                name,
                start,
                status=status,
                trigger=rng.choice(TRIGGERS),
                duration=timedelta(seconds=rng.choice([30, 60, 60, 90, 120, 600])),
            )
            if status == "success" and rng.random() < 0.05:
                b.session.execute(
                    "UPDATE " + b.session.dialect.table(RUNS) + " SET duration_ms = NULL "
                    f"WHERE run_id = {b.session.dialect.param}",
                    [run.run_id],
                )
            for seq, task in enumerate(("extract", "load")[: rng.randint(0, 2)], start=1):
                rows = None if rng.random() < 0.2 else rng.randint(0, 50)
                b.task(run, task, seq, duration_ms=rng.choice([10, 20, 20, 35]), rows_out=rows)


def _sql(session: Session, template: str) -> str:
    d = session.dialect
    return template.format(
        runs=d.table(RUNS),
        tasks=d.table(TASKS_TABLE),
        p=d.param,
        day=d.utc_day("t.started_at"),
    )


def _straightforward(session: Session, days: int) -> dict[str, tuple[Any, ...]]:
    """Per pipeline: (runs, successes, p95, recoveries' durations, failing since)."""
    since = NOW - timedelta(days=days)
    counts = {p: (int(n), int(ok)) for p, n, ok in session.query(_sql(session, COUNTS), [since])}
    p95 = {p: int(ms) for p, ms in session.query(_sql(session, P95), [since])}
    took: dict[str, list[float]] = defaultdict(list)
    failing: dict[str, datetime | None] = {}
    for pipeline, bad, ended in session.query(_sql(session, TRANSITIONS), [since]):
        at = stored_datetime(ended)
        if int(bad):
            failing[pipeline] = at
        elif failing.get(pipeline) is not None and at is not None:
            took[pipeline].append((at - failing.pop(pipeline)).total_seconds())  # type: ignore[operator]
    names = set(counts) | set(p95) | set(took) | set(failing)
    return {p: (*counts.get(p, (0, 0)), p95.get(p), sorted(took[p]), failing.get(p)) for p in names}


def test_sla_equals_the_straightforward_queries_over_every_run(warehouse_url: str) -> None:
    seed(warehouse_url)
    with reading(warehouse_url) as session:
        found = sla.reliability(session, NOW)
        for days in sla.WINDOWS:
            expected = _straightforward(session, days)
            got = {
                r.pipeline: (
                    r.runs,
                    r.successes,
                    r.p95_duration_ms,
                    r.recoveries,
                    r.mttr_s,
                    r.failing_since,
                )
                for r in found
                if r.days == days
            }
            assert set(got) == set(expected)
            for pipeline, (runs, ok, p95, took, since) in expected.items():
                mttr = sum(took) / len(took) if took else None
                assert got[pipeline] == (runs, ok, p95, len(took), mttr, since), (pipeline, days)
    assert any(r.recoveries for r in found) and any(r.failing_since for r in found)
    assert any(r.p95_duration_ms for r in found if r.days == 7)


def test_task_trends_equal_the_straightforward_query_over_every_task(warehouse_url: str) -> None:
    seed(warehouse_url)
    with reading(warehouse_url) as session:
        start = NOW.replace(hour=0, minute=0) - timedelta(days=13)
        rows = session.query(_sql(session, TASKS), [start])
        expected = [
            (p, t, str(day), int(n), avg_ms, mx, avg_out)
            for p, t, day, n, avg_ms, mx, avg_out in rows
        ]
        got = [
            (
                t.pipeline,
                t.task,
                t.day,
                t.runs,
                t.avg_duration_ms,
                t.max_duration_ms,
                t.avg_rows_out,
            )
            for t in queries.task_trends(session, NOW)
        ]
        one = queries.task_trends(session, NOW, "p03")
    assert len(got) == len(expected) > 50
    for mine, theirs in zip(got, expected, strict=True):
        assert mine[:4] == theirs[:4] and mine[5] == (None if theirs[5] is None else int(theirs[5]))
        for a, b in ((mine[4], theirs[4]), (mine[6], theirs[6])):
            assert (a is None) == (b is None) and (a is None or a == pytest.approx(float(b)))
    assert [(t.task, t.day) for t in one] == [(g[1], g[2]) for g in got if g[0] == "p03"]


def test_a_task_recorded_twice_counts_once(warehouse_url: str) -> None:
    with ledger(warehouse_url) as b:
        b.pipeline("orders")
        run = b.run("orders", NOW - timedelta(hours=1))
        task = b.task(run, "load", 1, duration_ms=40, rows_out=None)
        from pipeledger.ledger import store as st

        st.apply(b.session, st.task_op(task))  # the spool's replay records it again
    with reading(warehouse_url) as session:
        (trend,) = queries.task_trends(session, NOW)
    assert (trend.runs, trend.avg_duration_ms, trend.max_duration_ms, trend.avg_rows_out) == (
        1,
        40.0,
        40,
        None,
    )


def _statements(session: Session) -> list[tuple[str, str, Sequence[Any]]]:
    """The statements of the overview's status, ``sla`` and ``tasks``, with their values."""
    d, since = session.dialect, NOW - timedelta(days=30)
    asked = [("p01", 3), ("p02", 1)]
    p95 = sla._p95_statements(d, since, asked)
    return [
        ("status", *health.pipeline_status_sql(d, NOW)),
        ("sla counts", sla.timed_successes_sql(d), [*status_window(NOW, timedelta(30)), since]),
        *(("sla p95", sql, params) for sql, params in p95),
        ("sla recoveries", sla.transitions_sql(d), [since]),
        ("tasks", *queries.task_trends_sql(d, NOW, None, 14)),
        ("tasks of one", *queries.task_trends_sql(d, NOW, "p01", 14)),
        ("tasks, the slowest", *queries.task_trends_sql(d, NOW, None, 14, 5)),
    ]


def _whole_tables(session: Session, sql: str, params: Sequence[Any]) -> set[str]:
    """The big ledger tables the plan reads whole (PostgreSQL: with sequential scans
    priced out, so a plan that has an index to use uses it; SQLite: a bare SCAN of a
    name the statement gives those tables, not a subquery)."""
    big = {"pipeline_runs", "task_runs"}
    if session.dialect.has_schemas:
        session.execute("SET LOCAL enable_seqscan = off")
        rows = session.query(f"EXPLAIN (FORMAT JSON) {sql}", params)
        found: set[str] = set()
        todo = [rows[0][0][0]["Plan"]]
        while todo:
            node = todo.pop()
            if node["Node Type"] == "Seq Scan" and node.get("Relation Name") in big:
                found.add(node["Relation Name"])
            todo += node.get("Plans", [])
        return found
    d = session.dialect
    aliases = {
        alias: name
        for name, table in (("pipeline_runs", RUNS), ("task_runs", TASKS_TABLE))
        for alias in re.findall(rf"{re.escape(d.table(table))} (\w+)", sql)
    }
    for derived in re.findall(r"\) (\w+)", sql):  # a subquery's name: SCAN of its rows
        aliases.pop(derived, None)
    plan = session.query(f"EXPLAIN QUERY PLAN {sql}", params)
    bare = [str(row[3]).split() for row in plan if str(row[3]).startswith("SCAN ")]
    return {aliases[words[1]] for words in bare if len(words) == 2 and words[1] in aliases}


def test_the_questions_read_runs_and_tasks_through_indexes(warehouse_url: str) -> None:
    seed(warehouse_url, runs_per_pipeline=20)
    with reading(warehouse_url) as session:
        for what, sql, params in _statements(session):
            assert _whole_tables(session, sql, params) == set(), what


def test_the_latest_runs_of_more_pipelines_than_a_union_takes(warehouse_url: str) -> None:
    names = [f"n{i:03d}" for i in range(520)]  # SQLite takes 500 terms in a UNION ALL
    with ledger(warehouse_url) as b:
        for i, name in enumerate(names[::2]):
            b.pipeline(name)
            b.run(name, NOW - timedelta(hours=2), status="failed")
            b.run(name, NOW - timedelta(hours=1, minutes=i % 7))
    with reading(warehouse_url) as session:
        found = latest_runs(session, names)
    assert list(found) == names[::2]
    assert {v["status"] for v in found.values()} == {"success"}


def test_questions_of_one_page_share_a_session_and_keep_their_failures(
    warehouse_url: str,
) -> None:
    from pipeledger.errors import PipeledgerError
    from pipeledger.ledger.reads import reading as ask
    from pipeledger.ledger.reads import shared_reads

    seed(warehouse_url, runs_per_pipeline=3)
    with shared_reads():
        with ask(warehouse_url, current=True) as first:
            assert first is not None
            before = first.query(f"SELECT count(*) FROM {first.dialect.table(RUNS)}")
        with pytest.raises(PipeledgerError), ask(warehouse_url) as failing:
            assert failing is first
            failing.query("SELECT no_such_column FROM " + failing.dialect.table(RUNS))
        with ask(warehouse_url) as after:  # the failed question's savepoint rolled back
            assert after is first
            assert after.query(f"SELECT count(*) FROM {after.dialect.table(RUNS)}") == before
    with ask(warehouse_url) as alone:
        assert alone is not first  # outside the block: a session per question
