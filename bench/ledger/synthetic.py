"""The synthetic ledger of the query part: ``--runs`` runs of 50 pipelines over 60 days
(statuses, triggers and volumes mixed, 3 tasks per finished run, 20 dependency edges),
written with set-based SQL into PostgreSQL (the ledger's triggers keep the daily rollup
as the runs go in), and the same ledger copied into an embedded SQLite file."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg

PIPELINES = 50
DAYS = 60
ANCHOR = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)  # "now" for every time-based query
TABLES = ("pipelines", "pipeline_dependencies", "pipeline_runs", "task_runs")

# 2,000 runs per pipeline, one every 2,592 s (43 min) with a per-pipeline offset, ending just
# before ANCHOR. u1..u3 are uniform in [0, 10000) per run (hash of its number).
_RUNS_SQL = """
INSERT INTO pipeledger.pipeline_runs (
    run_id, logical_run_id, attempt, parent_run_id, correlation_id, pipeline, trigger_type,
    triggered_by, environment, status, started_at, ended_at, duration_ms, rows_read,
    rows_inserted, rows_updated, rows_unchanged, rows_rejected, bytes_read, watermark_before,
    watermark_after, data_interval_start, data_interval_end, error_code, error_message,
    code_version, host, pid, heartbeat_at, lease_expires_at, extra)
WITH g AS (
    SELECT i, (i - 1) %% %(pipelines)s AS p, (i - 1) / %(pipelines)s AS k,
           abs(hashtext('a' || i)::bigint) %% 10000 AS u1,
           abs(hashtext('b' || i)::bigint) %% 10000 AS u2,
           abs(hashtext('c' || i)::bigint) %% 10000 AS u3
    FROM generate_series(1, %(runs)s) AS i
), h AS (
    SELECT g.*, %(per)s AS per,
           %(start)s::timestamptz + ((k * %(step)s + p * 37) * interval '1 second') AS started_at,
           ((p %% 10) + 1) * 1000 * (1 + p / 10) AS base
    FROM g
), s AS (
    SELECT h.*,
        CASE
            WHEN k = per - 1 AND p %% 17 = 0 THEN 'running'
            WHEN k = per - 1 THEN 'success'
            WHEN p IN (3, 4) AND k >= per - 233 AND u1 < 4000 + 1500 * (p - 3) THEN 'failed'
            WHEN u1 < 9000 THEN 'success'
            WHEN u1 < 9450 THEN 'failed'
            WHEN u1 < 9550 THEN 'partial'
            WHEN u1 < 9650 THEN 'cancelled'
            WHEN u1 < 9700 THEN 'timed_out'
            WHEN u1 < 9900 THEN 'skipped'
            WHEN u1 < 9950 THEN 'abandoned'
            ELSE 'success'
        END AS status,
        CASE
            WHEN k = per - 1 THEN 'scheduled'
            WHEN u2 < 8500 THEN 'scheduled'
            WHEN u2 < 9300 THEN 'manual'
            WHEN u2 < 9700 THEN 'retry'
            ELSE 'backfill'
        END AS trigger_type,
        -- rows written: the pipeline's base volume +-20%%; the latest run of some pipelines
        -- is an anomaly (x5, zero, x1.5)
        CASE
            WHEN k = per - 1 AND p %% 10 = 7 THEN base * 5
            WHEN k = per - 1 AND p %% 10 = 8 THEN 0
            WHEN k = per - 1 AND p %% 10 = 9 THEN base * 3 / 2
            ELSE (base * (8000 + u3 * 4 / 10)) / 10000
        END AS written,
        1000 + u3 * 3 + (p * 500) AS duration_ms
    FROM h
)
SELECT md5('run' || i)::uuid::text, md5('run' || i)::uuid::text,
       CASE WHEN trigger_type = 'retry' THEN 2 ELSE 1 END, NULL, NULL,
       'pipe_' || lpad(p::text, 2, '0'), trigger_type, 'scheduler@etl-01', 'prod', status,
       started_at,
       CASE WHEN status = 'running' THEN NULL
            ELSE started_at + duration_ms * interval '1 millisecond' END,
       CASE WHEN status = 'running' THEN NULL ELSE duration_ms END,
       CASE WHEN status IN ('skipped', 'running') THEN NULL ELSE written + written / 10 END,
       CASE WHEN status = 'success' THEN written * 7 / 10
            WHEN status IN ('skipped', 'running') THEN NULL ELSE 0 END,
       CASE WHEN status = 'success' THEN written - written * 7 / 10
            WHEN status IN ('skipped', 'running') THEN NULL ELSE 0 END,
       CASE WHEN status IN ('skipped', 'running') THEN NULL ELSE written / 10 END,
       CASE WHEN status IN ('skipped', 'running') THEN NULL ELSE 0 END,
       CASE WHEN status IN ('skipped', 'running') THEN NULL ELSE written * 120 END,
       to_char(started_at - interval '43 minutes', 'YYYY-MM-DD"T"HH24:MI:SS'),
       to_char(started_at, 'YYYY-MM-DD"T"HH24:MI:SS'),
       CASE WHEN trigger_type = 'backfill' THEN started_at - interval '7 days' END,
       CASE WHEN trigger_type = 'backfill' THEN started_at - interval '6 days' END,
       CASE WHEN status IN ('failed', 'partial', 'timed_out') THEN 'WarehouseError:40P01'
            WHEN status = 'abandoned' THEN 'LEASE_EXPIRED' END,
       CASE WHEN status IN ('failed', 'partial', 'timed_out')
            THEN 'PostgreSQL statement failed: deadlock detected'
            WHEN status = 'abandoned' THEN 'lease expired without a heartbeat' END,
       '0.1.0', 'etl-01', 10000 + i %% 50000,
       started_at + duration_ms * interval '1 millisecond',
       started_at + interval '5 minutes',
       jsonb_build_object('mode', CASE WHEN trigger_type = 'backfill'
                                       THEN 'backfill' ELSE 'incremental' END,
                          'rows_superseded', 0)
FROM s
"""

_TASKS_SQL = """
INSERT INTO pipeledger.task_runs (
    task_run_id, run_id, name, seq, status, started_at, ended_at, duration_ms, rows_in,
    rows_out, rows_rejected, bytes, error_message)
SELECT md5('task' || r.run_id || t.n)::uuid::text, r.run_id,
       (ARRAY['extract', 'transform', 'load'])[t.n], t.n,
       CASE WHEN r.status = 'success' OR t.n < 3 THEN 'success' ELSE 'failed' END,
       r.started_at + (t.n - 1) * (r.duration_ms / 3) * interval '1 millisecond',
       r.started_at + t.n * (r.duration_ms / 3) * interval '1 millisecond',
       r.duration_ms / 3 + t.n * 7, r.rows_read, r.rows_read, 0, r.bytes_read,
       CASE WHEN r.status <> 'success' AND t.n = 3 THEN r.error_message END
FROM pipeledger.pipeline_runs r CROSS JOIN generate_series(1, 3) AS t(n)
WHERE r.status NOT IN ('skipped', 'running')
"""

_PIPELINES_SQL = """
INSERT INTO pipeledger.pipelines (
    name, version, description, owner, source_system, target_system, freshness_sla_s,
    created_at, updated_at)
SELECT 'pipe_' || lpad(p::text, 2, '0'), 'a1b2c3d4e5f6', 'synthetic pipeline ' || p,
       'team-' || p %% 5, 'csv landing/pipe_' || p || '/*.csv',
       'postgresql://etl@warehouse/dw analytics.pipe_' || p,
       CASE p %% 3 WHEN 0 THEN 26 * 3600 WHEN 1 THEN 1800 END,
       %(start)s::timestamptz, %(start)s::timestamptz
FROM generate_series(0, %(pipelines)s - 1) AS p
"""

# 20 edges: pipe_25..pipe_44 each wait on pipe_00..pipe_19
_DEPENDENCIES_SQL = """
INSERT INTO pipeledger.pipeline_dependencies (upstream, downstream, created_at)
SELECT 'pipe_' || lpad(p::text, 2, '0'), 'pipe_' || lpad((p + 25)::text, 2, '0'),
       %(start)s::timestamptz
FROM generate_series(0, 19) AS p
"""


def _counts(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    """What the ledger holds: rows per table, the statuses' and triggers' mix, its size."""
    counts = {
        table: int(row[0])
        for table in ("pipeline_runs", "task_runs", "pipelines", "pipeline_dependencies")
        if (row := conn.execute(f"SELECT count(*) FROM pipeledger.{table}").fetchone())
    }
    mix = {
        str(status): int(n)
        for status, n in conn.execute(
            "SELECT status, count(*) FROM pipeledger.pipeline_runs GROUP BY status "
            "ORDER BY count(*) DESC"
        ).fetchall()
    }
    triggers = {
        str(kind): int(n)
        for kind, n in conn.execute(
            "SELECT trigger_type, count(*) FROM pipeledger.pipeline_runs "
            "GROUP BY trigger_type ORDER BY count(*) DESC"
        ).fetchall()
    }
    size = conn.execute(
        "SELECT pg_size_pretty(sum(pg_total_relation_size(c.oid))) FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = 'pipeledger' AND c.relkind = 'r'"
    ).fetchone()
    return {
        "counts": counts,
        "statuses": mix,
        "triggers": triggers,
        "size": str(size[0]) if size else "?",
    }


def build_ledger(url: str, runs: int) -> dict[str, Any]:
    """Migrate the ledger's tables and fill them with set-based SQL; VACUUM ANALYZE."""
    from pipeledger.ledger.tables import LEDGER
    from pipeledger.warehouse.adapters import open_warehouse
    from pipeledger.warehouse.migrations import migrate

    per = runs // PIPELINES
    step = DAYS * 86_400 // per
    start = ANCHOR - timedelta(days=DAYS)
    params = {
        "runs": per * PIPELINES,
        "pipelines": PIPELINES,
        "per": per,
        "step": step,
        "start": start,
    }
    started = time.perf_counter()
    with open_warehouse(url).session() as session:
        migrate(session, LEDGER)
    with psycopg.connect(url) as conn:
        for statement in (_PIPELINES_SQL, _DEPENDENCIES_SQL, _RUNS_SQL, _TASKS_SQL):
            conn.execute(statement, params)
        conn.commit()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
        built = _counts(conn)
    seconds = time.perf_counter() - started
    return {"seconds": seconds, **built, "runs_per_pipeline": per, "step_s": step}


def _columns(conn: psycopg.Connection[Any], table: str) -> list[str]:
    rows = conn.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_schema = "
        "'pipeledger' AND table_name = %s ORDER BY ordinal_position",
        [table],
    ).fetchall()
    return [str(r[0]) for r in rows]


def copy_to_sqlite(url: str, path: Path) -> float:
    """The same ledger in an embedded SQLite file, written through the adapter (which
    stores each value as the ledger's own writes do); the seconds it took."""
    from pipeledger.ledger.tables import LEDGER
    from pipeledger.warehouse.adapters import open_warehouse
    from pipeledger.warehouse.migrations import migrate

    started = time.perf_counter()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    with (
        open_warehouse(f"sqlite:///{path}").session() as target,
        psycopg.connect(url) as conn,
    ):
        migrate(target, LEDGER)
        for table in TABLES:
            columns = _columns(conn, table)
            select = ", ".join(f"{c}::text" if c == "extra" else c for c in columns)
            marks = ", ".join("?" for _ in columns)
            insert = f'INSERT INTO "pipeledger.{table}" ({", ".join(columns)}) VALUES ({marks})'
            with conn.cursor(name=f"copy_{table}") as cursor:
                cursor.execute(f"SELECT {select} FROM pipeledger.{table}")
                while chunk := cursor.fetchmany(20_000):
                    for row in chunk:
                        target.execute(insert, row)
        target.execute("ANALYZE")
    return time.perf_counter() - started
