"""Dashboard benchmark: every page of ``pipeledger ui`` over a big ledger (a script, not a
test).

A synthetic ledger of ``--runs`` (100,000) runs of ``--nodes`` (500) nodes (four in five
loads, the rest models reading two loads each) over 30 days, ending now: statuses,
triggers and volumes mixed, 3 tasks per finished run, 3 check results per run of every
fourth load, one DAG run (correlation id) per round of the schedule across all nodes, a
watermark per load, alerts of the failures of the last 7 days. It is written with
set-based SQL into PostgreSQL (the ledger's triggers keep the daily rollup as the runs go
in), then copied into an embedded SQLite file; the config of the 500 nodes goes beside
each. For each backend the dashboard serves on a free port of 127.0.0.1 in this process,
and each page is fetched ``--calls`` times after a warm-up (the wall time a browser waits
for the HTML: the queries, the rendering and HTTP): median, p95 and max, against the
target of 200 ms. On PostgreSQL every statement the pages ran is then EXPLAINed with the
values it ran with: none may read ``pipeline_runs`` with a sequential scan.

Results go to the "Web dashboard" block of ``bench/RESULTS.md`` (between ``<!-- BEGIN
WEB -->`` and ``<!-- END WEB -->``).

Usage::

    .venv/bin/python bench/web_bench.py                       # ~3 min
    .venv/bin/python bench/web_bench.py --runs 20000 --calls 3 --no-write
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psycopg

from pipeledger import api

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "RESULTS.md"
BEGIN, END = "<!-- BEGIN WEB -->", "<!-- END WEB -->"
TARGET_MS = 200.0
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
    return {
        "overview": "/",
        f"node ({checked}: checks, schedule, watermark)": node,
        "node, filtered (status=failed, since=14d)": f"{node}?status=failed&since=14d",
        "node, a page deep in its history (before=)": f"{node}?before={deep}",
        f"node ({model}: a model)": f"/node/{quote(model)}",
        f"run (partial, checks; its DAG run of {nodes} nodes)": f"/run/{failed}",
        "dag": "/dag",
        "alerts and SLAs": "/alerts",
        "/api/status (JSON)": "/api/status",
        "/api/runs (JSON, 50 newest)": "/api/runs",
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


# --------------------------------------------------------------------------- measuring


@dataclass
class Timing:
    page: str
    path: str
    status: int
    bytes: int
    ms: list[float]

    @property
    def median(self) -> float:
        return statistics.median(self.ms)

    @property
    def p95(self) -> float:
        ordered = sorted(self.ms)
        return ordered[max(0, min(len(ordered) - 1, -(-95 * len(ordered) // 100) - 1))]

    @property
    def ok(self) -> bool:
        return self.status == 200 and self.p95 < TARGET_MS


def fetch(url: str) -> tuple[int, int, float]:
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=120) as response:
        body = response.read()
        status = response.status
    return status, len(body), (time.perf_counter() - started) * 1000


def measure(ledger: Ledger, calls: int, warmup: int) -> list[Timing]:
    running = api.start_ui(ledger.config, port=0)
    try:
        found = []
        for page, path in ledger.pages.items():
            for _ in range(warmup):
                fetch(running.url + path)
            results = [fetch(running.url + path) for _ in range(calls)]
            status, size = results[-1][0], results[-1][1]
            found.append(Timing(page, path, status, size, [ms for _, _, ms in results]))
        return found
    finally:
        running.stop()


@contextmanager
def statements() -> Iterator[list[tuple[str, tuple[Any, ...]]]]:
    """Every statement PostgreSQL sessions of this process query while the block runs."""
    from pipeledger.warehouse.adapters.postgres import PostgresSession

    seen: list[tuple[str, tuple[Any, ...]]] = []
    original = PostgresSession.query

    def query(self: PostgresSession, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        seen.append((sql, tuple(params)))
        return original(self, sql, params)

    PostgresSession.query = query  # type: ignore[assignment,method-assign]
    try:
        yield seen
    finally:
        PostgresSession.query = original  # type: ignore[method-assign]


def _scans(plan: dict[str, Any]) -> Iterator[tuple[str, str]]:
    yield str(plan.get("Node Type")), str(plan.get("Relation Name", ""))
    for child in plan.get("Plans", []):
        yield from _scans(child)


def sequential_scans(url: str, seen: Sequence[tuple[str, tuple[Any, ...]]]) -> dict[str, Any]:
    """EXPLAIN each distinct statement that names the runs table: which read it whole."""
    distinct = {sql: params for sql, params in seen if "pipeline_runs" in sql}
    found: list[str] = []
    with psycopg.connect(url) as conn:
        for sql, params in distinct.items():
            row = conn.execute(f"EXPLAIN (FORMAT JSON) {sql}", list(params)).fetchone()
            assert row is not None
            plan = row[0][0]["Plan"]
            if ("Seq Scan", "pipeline_runs") in set(_scans(plan)):
                found.append(sql[:160])
    return {"explained": len(distinct), "statements": len(seen), "seq_scans": found}


# --------------------------------------------------------------------------- the report


def table(timings: Sequence[Timing]) -> list[str]:
    lines = [
        "| page | median ms | p95 ms | max ms | KB | < 200 ms |",
        "| --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for t in timings:
        mark = "PASS" if t.ok else f"FAIL (HTTP {t.status})" if t.status != 200 else "FAIL"
        lines.append(
            f"| {t.page} | {t.median:.1f} | {t.p95:.1f} | {max(t.ms):.1f} | "
            f"{t.bytes / 1024:.0f} | {mark} |"
        )
    return lines


def report(
    args: argparse.Namespace,
    built: dict[str, float],
    results: dict[str, list[Timing]],
    scans: dict[str, Any],
) -> str:
    lines = [
        BEGIN,
        "## Web dashboard (`bench/web_bench.py`)",
        "",
        f"{args.runs:,} runs of {args.nodes} nodes over {DAYS} days (3 tasks per finished run, "
        "3 check results per run of every fourth load, one DAG run per round across all nodes); "
        f"each page fetched {args.calls} times after {args.warmup} warm-up(s), the wall time "
        "of the whole request (queries, rendering, HTTP) from a client on the same host. "
        f"Built in {built['postgres']:.0f} s (PostgreSQL) and copied to SQLite in "
        f"{built['sqlite']:.0f} s. Target: every page < {TARGET_MS:.0f} ms (p95).",
        "",
    ]
    for backend, timings in results.items():
        lines += [f"**{backend}**", "", *table(timings), ""]
    verdict = "none" if not scans["seq_scans"] else f"{len(scans['seq_scans'])}: FAIL"
    lines += [
        f"EXPLAIN on PostgreSQL of the {scans['explained']} distinct statements that name "
        f"`pipeline_runs` (of {scans['statements']} the pages ran): sequential scans of the runs "
        f"table: {verdict}.",
        *[f"- `{sql}`" for sql in scans["seq_scans"]],
        END,
    ]
    return "\n".join(lines)


def replace_block(path: Path, block: str) -> None:
    old = path.read_text() if path.exists() else ""
    if BEGIN in old and END in old:
        head, rest = old.split(BEGIN, 1)
        new = head + block + rest.split(END, 1)[1]
    else:
        new = old.rstrip() + "\n\n" + block + "\n"
    path.write_text(new)


@contextmanager
def postgres(given: str | None) -> Iterator[str]:
    """A fresh database: on the server at ``given``, or on a throwaway server."""
    if given:
        yield _database(given)
        return
    from pipeledger.testing.postgres import ThrowawayPostgres

    with ThrowawayPostgres() as server:
        yield _database(server.url)


def _database(server: str) -> str:
    name = f"web_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return f"{server.rpartition('/')[0]}/{name}"


def timed(step: Callable[[], Ledger]) -> tuple[Ledger, float]:
    started = time.perf_counter()
    return step(), time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--calls", type=int, default=7)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--postgres-url", help="a server to make the database on")
    parser.add_argument("--no-write", action="store_true", help="leave bench/RESULTS.md alone")
    args = parser.parse_args(argv)
    now = datetime.now(UTC)
    with postgres(args.postgres_url) as url, tempfile.TemporaryDirectory() as work:
        folder = Path(work)
        (folder / "pg").mkdir()
        (folder / "sqlite").mkdir()
        pg, pg_s = timed(lambda: build_postgres(url, folder / "pg", args.runs, args.nodes, now))
        lite, lite_s = timed(lambda: copy_to_sqlite(pg, folder / "sqlite", args.nodes))
        with statements() as seen:
            results = {"PostgreSQL": measure(pg, args.calls, args.warmup)}
        results["SQLite"] = measure(lite, args.calls, args.warmup)
        scans = sequential_scans(url, seen)
    block = report(args, {"postgres": pg_s, "sqlite": lite_s}, results, scans)
    print(block)
    if not args.no_write:
        replace_block(RESULTS, block)
    failed = [t for timings in results.values() for t in timings if not t.ok]
    return 1 if failed or scans["seq_scans"] else 0


if __name__ == "__main__":
    sys.exit(main())
