"""The synthetic ledger the dashboard benchmark reads (:mod:`bench.web`).

``runs`` runs of ``nodes`` nodes (four in five loads, the rest models reading two loads
each) over 30 days, ending now: statuses, triggers and volumes mixed, 3 tasks per finished
run, 3 check results per run of every fourth load, one DAG run (correlation id) per round
of the schedule across all nodes, a watermark per load, alerts of the failures of the last
7 days. It is written with set-based SQL into PostgreSQL (the ledger's triggers keep the
daily rollup as the runs go in), then copied into an embedded SQLite file; the config of
the nodes goes beside each.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psycopg

from pipeledger import api

DAYS = 30
LOAD_SHARE = 0.8  # of the nodes; the rest are models
TABLES = (
    "pipelines",
    "pipeline_dependencies",
    "pipeline_runs",
    "task_runs",
    "quality_results",
    "alerts",
    "pipeline_state",
)


def node_name(p: int, loads: int) -> str:
    return f"load_{p:03d}" if p < loads else f"model_{p:03d}"


# --------------------------------------------------------------------------- the config


def config_text(url: str, nodes: int) -> str:
    """The config of the synthetic nodes: loads from files that are not there (nothing
    runs), every fourth with checks, every fifth with a schedule; models over two loads."""
    loads = int(nodes * LOAD_SHARE)
    lines = [f'[warehouse]\nurl = "{url}"\n']
    for p in range(loads):
        lines += [
            f"[pipelines.{node_name(p, loads)}]",
            f'source = {{ kind = "csv", path = "data/{node_name(p, loads)}_*.csv" }}',
            f'target = "analytics.{node_name(p, loads)}"',
            'key = ["order_id"]',
            'cursor = "updated_at"',
            'on_conflict = "update"',
        ]
        if p % 5 == 0:
            lines.append('schedule = "0 * * * *"')
        if p % 4 == 0:
            lines.append(f"[pipelines.{node_name(p, loads)}.checks]")
            lines.append('not_null = ["status"]')
        lines.append("")
    for p in range(loads, nodes):
        a, b = (p * 4) % loads, (p * 4 + 1) % loads
        tables = [f"analytics.{node_name(u, loads)}" for u in (a, b)]
        selects = [f"select status, count(*) as n from {t} group by status" for t in tables]
        query = " union all ".join(selects)  # the model's SQL, in the config
        lines += [
            f"[models.{node_name(p, loads)}]",
            f'query = "{query}"',
            f'target = "mart.{node_name(p, loads)}"',
            'materialized = "replace"',
            "",
        ]
    return "\n".join(lines)


# --------------------------------------------------------------------------- the ledger

# u1..u3: uniform in [0, 10000) per run (hashes of its number); k: the run's round
_RUNS_SQL = """
INSERT INTO pipeledger.pipeline_runs (
    run_id, logical_run_id, attempt, parent_run_id, correlation_id, pipeline, trigger_type,
    triggered_by, environment, status, started_at, ended_at, duration_ms, rows_read,
    rows_inserted, rows_updated, rows_unchanged, rows_rejected, bytes_read, watermark_before,
    watermark_after, error_code, error_message, code_version, host, pid, extra)
WITH g AS (
    SELECT i, (i - 1) %% %(nodes)s AS p, (i - 1) / %(nodes)s AS k,
           abs(hashtext('a' || i)::bigint) %% 10000 AS u1,
           abs(hashtext('b' || i)::bigint) %% 10000 AS u2,
           abs(hashtext('c' || i)::bigint) %% 10000 AS u3
    FROM generate_series(1, %(runs)s) AS i
), s AS (
    SELECT g.*,
        %(start)s::timestamptz + ((k * %(step)s + p * 3) * interval '1 second') AS started_at,
        CASE WHEN u1 < 9000 THEN 'success' WHEN u1 < 9450 THEN 'failed'
             WHEN u1 < 9550 THEN 'partial' WHEN u1 < 9650 THEN 'cancelled'
             WHEN u1 < 9700 THEN 'timed_out' WHEN u1 < 9900 THEN 'skipped'
             ELSE 'abandoned' END AS status,
        CASE WHEN u2 < 8500 THEN 'scheduled' WHEN u2 < 9300 THEN 'manual'
             WHEN u2 < 9700 THEN 'retry' ELSE 'backfill' END AS trigger_type,
        ((p %% 10) + 1) * 1000 * (8000 + u3 * 4 / 10) / 10000 AS written,
        1000 + u3 * 3 AS duration_ms
    FROM g
)
SELECT md5('run' || i)::uuid::text, md5('run' || i)::uuid::text,
       CASE WHEN trigger_type = 'retry' THEN 2 ELSE 1 END, NULL, 'dag-' || k,
       CASE WHEN p < %(loads)s THEN 'load_' ELSE 'model_' END || lpad(p::text, 3, '0'),
       trigger_type, 'scheduler@etl-01', 'prod', status, started_at,
       started_at + duration_ms * interval '1 millisecond', duration_ms,
       CASE WHEN status = 'skipped' THEN NULL ELSE written + written / 10 END,
       CASE WHEN status IN ('success', 'partial') THEN written * 7 / 10
            WHEN status = 'skipped' THEN NULL ELSE 0 END,
       CASE WHEN status IN ('success', 'partial') THEN written - written * 7 / 10
            WHEN status = 'skipped' THEN NULL ELSE 0 END,
       CASE WHEN status = 'skipped' THEN NULL ELSE written / 10 END,
       CASE WHEN status = 'partial' THEN 3 WHEN status = 'skipped' THEN NULL ELSE 0 END,
       CASE WHEN status = 'skipped' THEN NULL ELSE written * 120 END,
       to_char(started_at - interval '3 hours', 'YYYY-MM-DD"T"HH24:MI:SS'),
       to_char(started_at, 'YYYY-MM-DD"T"HH24:MI:SS'),
       CASE WHEN status IN ('failed', 'partial', 'timed_out') THEN 'WarehouseError:40P01'
            WHEN status = 'abandoned' THEN 'LEASE_EXPIRED' END,
       CASE WHEN status IN ('failed', 'timed_out')
            THEN 'PostgreSQL statement failed: deadlock detected; nothing was written'
            WHEN status = 'abandoned' THEN 'lease expired without a heartbeat' END,
       '0.1.0', 'etl-01', 10000 + i %% 50000, '{"mode": "incremental"}'::jsonb
FROM s
"""

_TASKS_SQL = """
INSERT INTO pipeledger.task_runs (
    task_run_id, run_id, name, seq, status, started_at, ended_at, duration_ms, rows_in,
    rows_out, rows_rejected, bytes, error_message)
SELECT md5('task' || r.run_id || t.n)::uuid::text, r.run_id,
       (ARRAY['extract', 'quality', 'load'])[t.n], t.n,
       CASE WHEN r.status = 'success' OR t.n < 3 THEN 'success' ELSE 'failed' END,
       r.started_at + (t.n - 1) * (r.duration_ms / 3) * interval '1 millisecond',
       r.started_at + t.n * (r.duration_ms / 3) * interval '1 millisecond',
       r.duration_ms / 3, r.rows_read, r.rows_read, 0, r.bytes_read,
       CASE WHEN r.status <> 'success' AND t.n = 3 THEN r.error_message END
FROM pipeledger.pipeline_runs r CROSS JOIN generate_series(1, 3) AS t(n)
WHERE r.status <> 'skipped'
"""

_CHECKS_SQL = """
INSERT INTO pipeledger.quality_results (
    result_id, run_id, pipeline, target_table, check_name, kind, level, status, observed,
    expected, failing_rows, sample_keys, created_at)
SELECT md5('check' || r.run_id || c.name)::uuid::text, r.run_id, r.pipeline,
       'analytics.' || r.pipeline, c.name, c.kind, c.level,
       CASE WHEN r.status = 'partial' AND c.name = 'not_null:status' THEN 'fail' ELSE 'pass' END,
       CASE WHEN r.status = 'partial' AND c.name = 'not_null:status'
            THEN '3 failing row(s)' ELSE '0 failing row(s)' END,
       c.expected, CASE WHEN r.status = 'partial' AND c.name = 'not_null:status' THEN 3 END,
       '[]'::jsonb, r.ended_at
FROM pipeledger.pipeline_runs r CROSS JOIN (VALUES
    ('key_not_null:order_id', 'key', 'row', 'no empty key'),
    ('key_unique:order_id', 'key', 'row', 'unique keys'),
    ('not_null:status', 'not_null', 'row', 'no NULL')) AS c(name, kind, level, expected)
WHERE r.status NOT IN ('skipped') AND r.pipeline LIKE 'load_%%'
  AND substr(r.pipeline, 6)::int %% 4 = 0
"""

_PIPELINES_SQL = """
INSERT INTO pipeledger.pipelines (
    name, version, description, owner, source_system, target_system, freshness_sla_s,
    created_at, updated_at)
SELECT CASE WHEN p < %(loads)s THEN 'load_' ELSE 'model_' END || lpad(p::text, 3, '0'),
       'a1b2c3', 'synthetic node ' || p, 'team-' || p %% 5, 'csv', 'analytics',
       CASE p %% 3 WHEN 0 THEN 26 * 3600 WHEN 1 THEN 6 * 3600 END,
       %(start)s::timestamptz, %(start)s::timestamptz
FROM generate_series(0, %(nodes)s - 1) AS p
"""

_DEPENDENCIES_SQL = """
INSERT INTO pipeledger.pipeline_dependencies (upstream, downstream, created_at)
SELECT DISTINCT 'load_' || lpad(((p * 4 + d) %% %(loads)s)::text, 3, '0'),
       'model_' || lpad(p::text, 3, '0'), %(start)s::timestamptz
FROM generate_series(%(loads)s, %(nodes)s - 1) AS p CROSS JOIN generate_series(0, 1) AS d
"""

_STATE_SQL = """
INSERT INTO pipeledger.pipeline_state (
    pipeline, partition_key, cursor_column, cursor_type, watermark, run_id, updated_at)
SELECT DISTINCT ON (r.pipeline) r.pipeline, '', 'updated_at', 'timestamptz',
       r.watermark_after || '.000000+00:00', r.run_id, r.ended_at
FROM pipeledger.pipeline_runs r
WHERE r.pipeline LIKE 'load_%%' AND r.status = 'success'
ORDER BY r.pipeline, r.started_at DESC
"""

_ALERTS_SQL = """
INSERT INTO pipeledger.alerts (
    alert_key, webhook, event, pipeline, run_id, reason, payload, status, attempts,
    created_at, next_attempt_at, last_attempt_at, delivered_at, last_error)
SELECT 'failed:' || r.pipeline || ':' || r.run_id, 'oncall', 'failed', r.pipeline, r.run_id,
       'run ' || left(r.run_id, 8) || ' failed', '{}'::jsonb, 'delivered', 1, r.ended_at,
       r.ended_at, r.ended_at, r.ended_at, NULL
FROM pipeledger.pipeline_runs r
WHERE r.status = 'failed' AND r.started_at >= %(week)s
"""


@dataclass
class Ledger:
    """Where the synthetic ledger is, and the runs the pages are asked about."""

    config: Path
    url: str
    pages: dict[str, str] = field(default_factory=dict)  # label -> path


def build_postgres(url: str, folder: Path, runs: int, nodes: int, now: datetime) -> Ledger:
    loads = int(nodes * LOAD_SHARE)
    per = runs // nodes
    start = now - timedelta(days=DAYS)
    params = {
        "runs": per * nodes,
        "nodes": nodes,
        "loads": loads,
        "step": DAYS * 86_400 // per,
        "start": start,
        "week": now - timedelta(days=7),
    }
    config = folder / "pipeledger.toml"
    config.write_text(config_text(url, nodes))
    api.migrate(config)
    with psycopg.connect(url) as conn:
        for statement in (_PIPELINES_SQL, _DEPENDENCIES_SQL, _RUNS_SQL, _TASKS_SQL, _CHECKS_SQL):
            conn.execute(statement, params)
        conn.execute(_STATE_SQL)
        conn.execute(_ALERTS_SQL, params)
        conn.execute("CREATE SCHEMA IF NOT EXISTS analytics")
        for p in range(0, loads, 40):  # a few quarantine tables, to be counted
            conn.execute(
                f'CREATE TABLE analytics."{node_name(p, loads)}_quarantine" ('
                "quarantine_id text PRIMARY KEY, run_id text NOT NULL, pipeline text NOT NULL, "
                "check_name text NOT NULL, reason text NOT NULL, key_values jsonb NOT NULL, "
                "row_data jsonb NOT NULL, row_hash bigint, quarantined_at timestamptz NOT NULL, "
                "resolved_at timestamptz, resolved_by_run text, last_checked_run text)"
            )
        conn.commit()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
    return Ledger(config, url, pages(url, loads, nodes, depth=per * 3 // 4))


def pages(url: str, loads: int, nodes: int, depth: int) -> dict[str, str]:
    """The pages to time: one of each kind, the heavy cases among them."""
    checked, model = node_name(0, loads), node_name(nodes - 1, loads)
    with psycopg.connect(url) as conn:

        def one(sql: str, *values: object) -> str:
            row = conn.execute(sql, list(values)).fetchone()
            assert row is not None, sql
            return str(row[0])

        failed = one(
            "SELECT run_id FROM pipeledger.pipeline_runs WHERE status = 'partial' "
            "AND pipeline LIKE 'load_%%' AND substr(pipeline, 6)::int %% 4 = 0 "
            "ORDER BY started_at DESC LIMIT 1"
        )
        deep = one(
            "SELECT run_id FROM pipeledger.pipeline_runs WHERE pipeline = %s "
            "ORDER BY started_at DESC OFFSET %s LIMIT 1",
            checked,
            depth,
        )
    node = f"/node/{quote(checked)}"
    named = f"?name={quote(checked)}"
    return {
        "overview": "/",
        f"node ({checked}: checks, schedule, watermark)": node,
        "node, filtered (status=failed, since=14d)": f"{node}?status=failed&since=14d",
        "node, a page deep in its history (before=)": f"{node}?before={deep}",
        f"node ({model}: a model)": f"/node/{quote(model)}",
        f"run (partial, checks; its DAG run of {nodes} nodes)": f"/run/{failed}",
        "dag": "/dag",
        "alerts and SLAs": "/alerts",
        "/api/status": "/api/status",
        "/api/anomalies": "/api/anomalies",
        "/api/blocked": "/api/blocked",
        "/api/runs (50 newest)": "/api/runs",
        f"/api/runs?name={checked}": f"/api/runs{named}",
        "/api/show/{run}": f"/api/show/{failed}",
        f"/api/checks/{checked}": f"/api/checks/{quote(checked)}",
        "/api/dag": "/api/dag",
        "/api/schedule": "/api/schedule",
        "/api/state": "/api/state",
        f"/api/quarantine/{checked}": f"/api/quarantine/{quote(checked)}",
        "/api/sla": "/api/sla",
        "/api/alerts": "/api/alerts",
        "/api/tasks": "/api/tasks",
        f"/api/tasks?name={checked}": f"/api/tasks{named}",
        "/api/work": "/api/work",
        "/api/volumes": "/api/volumes",
        f"/api/volumes?name={checked}": f"/api/volumes{named}",
    }


def _sqlite_value(value: Any) -> Any:
    """A value as the SQLite adapter stores it (instants as UTC ISO text, JSON as text)."""
    if isinstance(value, datetime):
        moment = value.astimezone(UTC).replace(tzinfo=None)
        return moment.isoformat(timespec="microseconds") + "+00:00"
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, dict | list):
        return json.dumps(value)
    return value


def copy_to_sqlite(source: Ledger, folder: Path, nodes: int) -> Ledger:
    """The same ledger (and state) in an embedded SQLite file, with its own config."""
    path = folder / "warehouse.db"
    url = f"sqlite:///{path}"
    config = folder / "pipeledger.toml"
    config.write_text(config_text(url, nodes))
    api.migrate(config)
    target = sqlite3.connect(path, isolation_level=None)
    target.execute("BEGIN")
    with psycopg.connect(source.url) as conn:
        for table in TABLES:
            columns = [
                str(r[0])
                for r in conn.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_schema = "
                    "'pipeledger' AND table_name = %s ORDER BY ordinal_position",
                    [table],
                ).fetchall()
            ]
            names = ", ".join(columns)
            marks = ", ".join("?" for _ in columns)
            insert = f'INSERT INTO "pipeledger.{table}" ({names}) VALUES ({marks})'
            with conn.cursor(name=f"copy_{table}") as cursor:
                cursor.execute(f"SELECT {names} FROM pipeledger.{table}")
                while chunk := cursor.fetchmany(20_000):
                    target.executemany(insert, ([_sqlite_value(v) for v in r] for r in chunk))
        for name in conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'analytics'"
        ).fetchall():
            target.execute(
                f'CREATE TABLE "analytics.{name[0]}" (quarantine_id text PRIMARY KEY, '
                "run_id text NOT NULL, pipeline text NOT NULL, check_name text NOT NULL, "
                "reason text NOT NULL, key_values text NOT NULL, row_data text NOT NULL, "
                "row_hash integer, quarantined_at text NOT NULL, resolved_at text, "
                "resolved_by_run text, last_checked_run text)"
            )
    target.execute("COMMIT")
    target.execute("ANALYZE")
    target.close()
    return Ledger(config, url, source.pages)
