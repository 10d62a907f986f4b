"""Run-ledger benchmark for pipeledger on PostgreSQL (a script, not a test).

Two parts, each measured step in a fresh subprocess (as in ``load_bench.py``):

* ``overhead``  the 1M-row first load of ``load_bench``'s orders CSV, then the identical
                re-run, with the ledger enabled (the default: in the warehouse, committed in
                the load's transaction) and disabled (``[ledger] enabled = false``), in
                fresh databases, alternating which variant goes first over ``--repeat``
                rounds; medians and the ratio with/without. In-process wrappers time what
                the ledger adds (prepare, register, the ``running`` record, the dataset
                snapshot, the final record); one extra pair of runs logs every statement's
                server-side duration (``log_min_duration_statement = 0`` for those
                sessions only). The scale check (``--no-scale-check`` skips it) re-runs
                against a ``--scale-factor`` (5x) bigger target with the ledger on, to show
                how the snapshot's cost follows the table.
* ``queries``   a synthetic ledger of ``--runs`` (100,000) runs of 50 pipelines over 60
                days (statuses, triggers and volumes mixed, 3 tasks per finished run),
                written with set-based SQL (the ledger's triggers keep the daily rollup as
                the runs go in), then ``pipeline_status``, ``volume_anomalies``,
                ``list_runs``, ``task_trends``, ``blocked_pipelines`` and the ``sla``
                command's queries through the library on one warm session: median and p95
                of ``--calls`` calls after a warm-up, on PostgreSQL and on the same ledger
                copied into SQLite. ``pipeline_status`` and ``volume_anomalies`` have a
                target on both. Also the ``pipeledger status --json`` command as a whole
                (a new process: interpreter start and imports included), for information.

Results go to the "Run ledger" block of ``bench/RESULTS.md`` (between ``<!-- BEGIN
LEDGER -->`` and ``<!-- END LEDGER -->``; the load benchmark's section is left alone); a
block between ``<!-- BEGIN LEDGER NOTES -->`` and ``<!-- END LEDGER NOTES -->`` is kept.

Usage::

    .venv/bin/python bench/ledger_bench.py                    # both parts (~3 min)
    .venv/bin/python bench/ledger_bench.py --only queries     # query latency only (~1 min)
    .venv/bin/python bench/ledger_bench.py --only overhead --repeat 3
    .venv/bin/python bench/ledger_bench.py --snapshot HEAD    # a clean export of HEAD
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sqlite3
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import load_bench as lb
import psycopg

HERE = Path(__file__).resolve().parent
DEFAULT_RESULTS = HERE / "RESULTS.md"
BEGIN = "<!-- BEGIN LEDGER -->"
END = "<!-- END LEDGER -->"
NOTES_BEGIN = "<!-- BEGIN LEDGER NOTES -->"
NOTES_END = "<!-- END LEDGER NOTES -->"
APP_NAME = "pipeledger-ledger-bench"
LOG_PREFIX = {"log_line_prefix": "'%m [%p] %a '"}
VARIANTS = ("ledger", "no-ledger")

# Targets
MAX_OVERHEAD_RATIO = 1.05
MAX_QUERY_MS = 100.0
TARGETED = ("pipeline_status", "volume_anomalies")  # on both backends

# The synthetic ledger
PIPELINES = 50
DAYS = 60
ANCHOR = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)  # "now" for every time-based query


# --------------------------------------------------------------------------- child: loads

LOAD_PHASES = {
    "prepare": "prepare: migrations check, spool replay, watchdog (opening transaction)",
    "register": "register the pipeline and its dependencies (opening transaction)",
    "running": "record `running` (opening transaction; register + running = open - prepare)",
    "heartbeat": "heartbeat thread start + stop",
    "snapshot": "dataset snapshot: row count and greatest cursor (load transaction)",
    "final": "final record + tasks + audit events + snapshot row (load transaction)",
    "publishing-other": "rest of recording the load (target probe, records in memory)",
}


class Clock:
    def __init__(self) -> None:
        self.totals: dict[str, float] = defaultdict(float)
        self.counts: dict[str, int] = defaultdict(int)

    def add(self, name: str, seconds: float) -> None:
        self.totals[name] += seconds
        self.counts[name] += 1


def _timed(clock: Clock, name: str | Callable[..., str], func: Any) -> Any:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        label = name(*args) if callable(name) else name
        t = time.perf_counter()
        try:
            return func(*args, **kwargs)
        finally:
            clock.add(label, time.perf_counter() - t)

    return wrapper


def instrument(clock: Clock) -> None:
    """Wrap the ledger's seams in this process: each wrapper times one thing the ledger
    adds to a load (the phases of ``LOAD_PHASES``), plus every PostgreSQL connection and
    statement of the step (counted for both variants)."""
    from pipeledger.ledger import ledger as api
    from pipeledger.ledger import store
    from pipeledger.runs import record
    from pipeledger.runs.load import job as loads
    from pipeledger.warehouse.adapters import postgres as pg

    record_mod: Any = record
    loads_mod: Any = loads
    pg_mod: Any = pg
    ledger_cls: Any = api.Ledger
    run_cls: Any = api.Run
    store_cls: Any = store.LedgerStore
    beat_cls: Any = api._Heartbeat
    session_cls: Any = pg.PostgresSession

    def write_label(_self: Any, ops: Any) -> str:
        kind = ops[0].kind if ops else "none"
        return {"pipeline": "register", "run": "running"}.get(kind, f"write {kind}")

    # a run opens with one transaction: upkeep (migrations, spool, watchdog), then register
    # and `running`; later writes of the process go through the store
    ledger_cls._upkeep = _timed(clock, "prepare", ledger_cls._upkeep)
    ledger_cls._open = _timed(clock, "open", ledger_cls._open)
    store_cls.write = _timed(clock, write_label, store_cls.write)
    record_mod.take_snapshot = _timed(clock, "snapshot", record_mod.take_snapshot)
    run_cls.commit_with = _timed(clock, "final", run_cls.commit_with)
    beat_cls.start = _timed(clock, "heartbeat", beat_cls.start)
    beat_cls.stop = _timed(clock, "heartbeat", beat_cls.stop)
    loads_mod.record_load = _timed(clock, "publishing", loads_mod.record_load)
    pg_mod._connect = _timed(clock, "connections", pg_mod._connect)
    session_cls.execute = _timed(clock, "statements", session_cls.execute)
    session_cls.query = _timed(clock, "statements", session_cls.query)


def _config(url: str, work: Path, source: str, ledger: bool) -> Any:
    from pipeledger.config.model import parse_config

    data: dict[str, Any] = {
        "warehouse": {"url": url},
        "pipelines": {
            lb.PIPELINE: {
                "source": {"kind": "csv", "path": source},
                "target": lb.TARGET,
                "key": ["order_id"],
                "cursor": "updated_at",
                "on_conflict": "newer_wins",
                "columns": {"amount": "numeric(12,2)"},
            }
        },
    }
    if not ledger:
        data["ledger"] = {"enabled": False}
    return parse_config(data, work / "pipeledger.toml")


def _install_schema(config: Any, ledger: bool) -> None:
    """Create pipeledger's tables before the timed run, as every run but a database's very
    first finds them: the target is what recording a run costs, not installing the ledger
    (its one-time DDL shows in the server-side times of the logged pair). The process's
    "already migrated" cache is cleared, so the timed run still pays its migrations check."""
    from pipeledger.ledger.tables import LEDGER
    from pipeledger.state.tables import STATE
    from pipeledger.warehouse import migrations
    from pipeledger.warehouse.adapters import open_warehouse

    components = (STATE, LEDGER) if ledger else (STATE,)
    migrations.ensure_migrated(open_warehouse(config.warehouse_url), *components)
    migrations._MIGRATED.clear()


def step_load(
    url: str, work: Path, source: str, ledger: bool, install: bool = True
) -> dict[str, Any]:
    from pipeledger.runs import runner

    runner.prefer_system_allocator()  # as the pipeledger command does
    config = _config(url, work, source, ledger)
    if install:
        _install_schema(config, ledger)
    clock = Clock()
    instrument(clock)
    started = time.perf_counter()
    result = runner.run_one(config, lb.PIPELINE)
    seconds = time.perf_counter() - started
    out = result.to_json()
    t = clock.totals
    phases = {k: t.get(k, 0.0) for k in ("prepare", "register", "running", "heartbeat")}
    if t.get("open"):  # the first run of a process writes register + running in _open
        phases["register"] += t["open"] - t.get("prepare", 0.0)
    phases["snapshot"] = t.get("snapshot", 0.0)
    phases["final"] = t.get("final", 0.0)
    # recording the load (record_load) holds the snapshot; the final record comes after it
    phases["publishing-other"] = max(0.0, t.get("publishing", 0.0) - phases["snapshot"])
    return {
        "seconds": seconds,
        "rows_read": out["rows_read"],
        "rows_inserted": out["rows_inserted"],
        "rows_updated": out["rows_updated"],
        "status": out["status"],
        "phases": {k: round(v, 4) for k, v in phases.items()},
        "connections": clock.counts.get("connections", 0),
        "connect_s": round(t.get("connections", 0.0), 4),
        "statements": clock.counts.get("statements", 0),
        "pipeledger_path": str(Path(runner.__file__).parent),
        "vmhwm_mb": lb.own_peak_rss_mb(),
    }


# --------------------------------------------------------------------------- child: queries


def _percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), int(-(-q * len(ordered) // 100))))
    return ordered[rank - 1]


def _query_calls(now: datetime) -> dict[str, Callable[[Any], Any]]:
    from pipeledger.ledger.reads import queries as q
    from pipeledger.ledger.reads import sla

    week = now - timedelta(days=7)
    return {
        "pipeline_status": lambda s: q.pipeline_status(s, now),
        "volume_anomalies": lambda s: q.volume_anomalies(s, now),
        "volume_anomalies (one pipeline)": lambda s: q.volume_anomalies(s, now, "pipe_07"),
        "list_runs (latest 50)": lambda s: q.list_runs(s),
        "list_runs (one pipeline, failed, 7 days)": lambda s: q.list_runs(
            s, "pipe_03", week, "failed"
        ),
        "task_trends (14 days)": lambda s: q.task_trends(s, now),
        "blocked_pipelines": lambda s: q.blocked_pipelines(s, now),
        "sla (breaches, reliability over 7 and 30 days)": lambda s: sla.reliability(s, now),
    }


def _explain(session: Any, dialect: str, now: datetime) -> dict[str, Any]:
    """Plans of the two target queries (saved by the parent), and PostgreSQL's own
    execution time for them."""
    from pipeledger.ledger.reads import queries as q

    d = session.dialect
    out: dict[str, Any] = {}
    for name, (sql, params) in {
        "pipeline_status": q.pipeline_status_sql(d, now),
        "volume_anomalies": q.volume_anomalies_sql(d, now, None),
    }.items():
        if dialect == "postgres":
            rows = session.query(f"EXPLAIN (ANALYZE, BUFFERS) {sql}", params)
            text = "\n".join(str(r[0]) for r in rows)
            found = re.search(r"Execution Time: ([0-9.]+) ms", text)
            out[name] = {"plan": text, "execution_ms": float(found.group(1)) if found else None}
        else:
            rows = session.query(f"EXPLAIN QUERY PLAN {sql}", params)
            out[name] = {"plan": "\n".join(str(r[-1]) for r in rows), "execution_ms": None}
    return out


def step_queries(url: str, calls: int, warmup: int, cold: int) -> dict[str, Any]:
    from pipeledger.ledger.tables import LEDGER
    from pipeledger.warehouse.adapters import open_warehouse
    from pipeledger.warehouse.migrations import is_migrated

    warehouse = open_warehouse(url)
    dialect = warehouse.dialect.name
    functions = _query_calls(ANCHOR)
    timings: dict[str, dict[str, Any]] = {}
    with warehouse.session(write=False) as session:
        for name, call in functions.items():
            rows = 0
            for _ in range(warmup):
                rows = len(call(session))
            seconds = []
            for _ in range(calls):
                t = time.perf_counter()
                call(session)
                seconds.append(time.perf_counter() - t)
            ms = [s * 1000 for s in seconds]
            timings[name] = {
                "rows": rows,
                "median_ms": statistics.median(ms),
                "p95_ms": _percentile(ms, 95),
                "min_ms": min(ms),
                "max_ms": max(ms),
            }
        plans = _explain(session, dialect, ANCHOR)
    # as the CLI does it: a new connection (and the is_migrated probe) per call
    for name in ("pipeline_status", "volume_anomalies"):
        ms = []
        for _ in range(cold):
            t = time.perf_counter()
            with warehouse.session(write=False) as session:
                if is_migrated(session, LEDGER):
                    functions[name](session)
            ms.append((time.perf_counter() - t) * 1000)
        if ms:
            timings[name]["cold_median_ms"] = statistics.median(ms)
    return {"dialect": dialect, "timings": timings, "plans": plans, "cli": _cli_times(url)}


def _cli_times(url: str, calls: int = 5) -> dict[str, float]:
    """Wall time of ``pipeledger status --json`` as a user runs it (the installed command, a
    new process each time), and of ``pipeledger --help`` (starting Python and the command
    line: what every command pays before its own imports and work)."""
    import tempfile

    lb.compile_bytecode()  # as an installed package has it
    with tempfile.TemporaryDirectory() as folder:
        config = Path(folder) / "pipeledger.toml"
        config.write_text(f'[warehouse]\nurl = "{url}"\n')
        commands = {
            "status_ms": lb.pipeledger_command(["-c", str(config), "status", "--json"]),
            "imports_ms": lb.pipeledger_command(["--help"]),
        }
        found = {}
        for name, command in commands.items():
            ms = []
            for _ in range(calls):
                t = time.perf_counter()
                subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
                ms.append((time.perf_counter() - t) * 1000)
            found[name] = statistics.median(ms)
    return found


# --------------------------------------------------------------------------- the synthetic ledger

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


def build_ledger(url: str, runs: int) -> dict[str, Any]:
    """Migrate the ledger's tables and fill them with set-based SQL; VACUUM ANALYZE."""
    from pipeledger.ledger.tables import LEDGER
    from pipeledger.warehouse.adapters import open_warehouse
    from pipeledger.warehouse.migrations import migrate

    per = runs // PIPELINES
    runs = per * PIPELINES
    step = DAYS * 86_400 // per
    start = ANCHOR - timedelta(days=DAYS)
    params = {"runs": runs, "pipelines": PIPELINES, "per": per, "step": step, "start": start}
    started = time.perf_counter()
    with open_warehouse(url).session() as session:
        migrate(session, LEDGER)
    with psycopg.connect(url) as conn:
        for statement in (_PIPELINES_SQL, _DEPENDENCIES_SQL, _RUNS_SQL, _TASKS_SQL):
            conn.execute(statement, params)
        conn.commit()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
        counts = {
            table: int(row[0])
            for table in ("pipeline_runs", "task_runs", "pipelines", "pipeline_dependencies")
            if (row := conn.execute(f"SELECT count(*) FROM pipeledger.{table}").fetchone())  # noqa: S608
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
        "seconds": time.perf_counter() - started,
        "counts": counts,
        "statuses": mix,
        "triggers": triggers,
        "size": str(size[0]) if size else "?",
        "runs_per_pipeline": per,
        "step_s": step,
    }


def copy_to_sqlite(url: str, path: Path) -> float:
    """The same ledger in an embedded SQLite file, values encoded as the adapter does."""
    from pipeledger.ledger.tables import LEDGER
    from pipeledger.warehouse.adapters import open_warehouse
    from pipeledger.warehouse.adapters.sqlite import _value
    from pipeledger.warehouse.migrations import migrate

    started = time.perf_counter()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    sqlite_url = f"sqlite:///{path}"
    with open_warehouse(sqlite_url).session() as session:
        migrate(session, LEDGER)
    target = sqlite3.connect(path, isolation_level=None)
    target.execute("BEGIN")
    with psycopg.connect(url) as conn:
        for table in ("pipelines", "pipeline_dependencies", "pipeline_runs", "task_runs"):
            columns = [
                str(r[0])
                for r in conn.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_schema = "
                    "'pipeledger' AND table_name = %s ORDER BY ordinal_position",
                    [table],
                ).fetchall()
            ]
            select = ", ".join(f"{c}::text" if c == "extra" else c for c in columns)
            marks = ", ".join("?" for _ in columns)
            insert = f'INSERT INTO "pipeledger.{table}" ({", ".join(columns)}) VALUES ({marks})'  # noqa: S608
            with conn.cursor(name=f"copy_{table}") as cursor:
                cursor.execute(f"SELECT {select} FROM pipeledger.{table}")  # noqa: S608
                while chunk := cursor.fetchmany(20_000):
                    target.executemany(insert, ([_value(v) for v in row] for row in chunk))
    target.execute("COMMIT")
    target.execute("ANALYZE")
    target.close()
    return time.perf_counter() - started


# --------------------------------------------------------------------------- parent


@dataclass
class LoadRun:
    variant: str
    step: str
    round: int
    seconds: float
    rows_read: int
    rows_inserted: int
    status: str
    phases: dict[str, float]
    connections: int
    connect_s: float
    statements: int
    rss_mb: float
    server: dict[str, float] = field(default_factory=dict)


def run_child(args_: list[str], env_extra: dict[str, str] | None = None) -> dict[str, Any]:
    command = [sys.executable, str(Path(__file__).resolve()), *args_]
    env = {**os.environ, "PGAPPNAME": APP_NAME, **(env_extra or {})}
    out = subprocess.run(command, stdout=subprocess.PIPE, text=True, env=env, check=True).stdout
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


def load_step(
    url: str, work: Path, source: str, variant: str, step: str, rnd: int, logged: bool
) -> LoadRun:
    wait_quiet()
    lb.settle(url)
    env = {"PGOPTIONS": "-c log_min_duration_statement=0"} if logged else None
    args = ["--step", "load", "--url", url, "--work", str(work), "--source", source]
    args += ["--ledger", "on" if variant == "ledger" else "off"]
    args += ["--fresh-schema"] if logged else []  # the logged pair shows the one-time DDL
    print(f"  {variant:<10} {step:<11}{' (logged)' if logged else ''} ...", end="", flush=True,
          file=sys.stderr)  # fmt: skip
    data = run_child(args, env)
    run = LoadRun(
        variant, step, rnd, float(data["seconds"]), int(data["rows_read"]),
        int(data["rows_inserted"]), str(data["status"]), data["phases"],
        int(data["connections"]), float(data["connect_s"]), int(data["statements"]),
        float(data["vmhwm_mb"]),
    )  # fmt: skip
    print(f" {run.seconds:7.3f} s  read {run.rows_read:>9,}  {run.status}", file=sys.stderr)
    return run


def _server_label(statement: str) -> str:
    text = statement.lstrip()
    if text.startswith("SELECT count(*), max("):
        return "dataset snapshot"
    if re.search(r"schema_migrations|pg_advisory_xact_lock|CREATE SCHEMA", text):
        return "migrations check"
    if re.match(r"CREATE (UNIQUE )?(TABLE|INDEX)", text) and re.search(r'\bpipeledger"?\.', text):
        return "migrations DDL (first run in a database only)"
    if re.search(
        r'"?(pipeline_runs|task_runs|audit_events|dataset_snapshots|pipelines|'
        r'pipeline_dependencies)"?\b',
        text,
    ):
        return "ledger tables (reads + writes)"
    if text.upper().startswith("COMMIT"):
        return "COMMIT"
    if text.startswith("COPY"):
        return "COPY into staging"
    return lb._classify(text).removeprefix("sql: ")


def server_times(log_path: Path, offset: int) -> dict[str, float]:
    with log_path.open("rb") as f:
        f.seek(offset)
        text = f.read().decode("utf-8", "replace")
    totals: dict[str, float] = defaultdict(float)
    for line in text.splitlines():
        if f" {APP_NAME} LOG:" not in line:
            continue
        match = lb._LOG_DURATION.search(line)
        if match:
            totals[_server_label(match.group(2))] += float(match.group(1)) / 1000.0
    return {k: round(v, 4) for k, v in sorted(totals.items(), key=lambda kv: -kv[1])}


def _link(work: Path, rows: int, base: Path) -> str:
    source = work / f"ledger-source-{rows}"
    source.mkdir(exist_ok=True)
    for old in source.iterdir():
        old.unlink()
    os.link(base, source / base.name)
    return source.name


def overhead(
    url: str, log_path: Path | None, work: Path, args: argparse.Namespace
) -> dict[str, Any]:
    rows = args.rows
    changed, new = int(rows * lb.CHANGED_FRACTION), int(rows * lb.NEW_FRACTION)
    print(f"data: {rows:,} rows under {work} ...", file=sys.stderr)
    data = lb.generate_in_child(work, rows, args.seed, changed, new)
    source = _link(work, rows, data.base)
    runs: list[LoadRun] = []
    for rnd in range(args.repeat):
        order = VARIANTS if rnd % 2 == 0 else VARIANTS[::-1]
        print(f"round {rnd + 1} of {args.repeat}: {' then '.join(order)}", file=sys.stderr)
        for variant in order:
            with lb.fresh_database(url, f"pipeledger_ledger_bench_{rnd}") as db:
                runs.append(load_step(db, work, source, variant, "first-load", rnd, False))
                runs.append(load_step(db, work, source, variant, "rerun", rnd, False))
    logged: list[LoadRun] = []
    if log_path is not None:
        print("logged pair (server-side statement times, not in the medians)", file=sys.stderr)
        for variant in VARIANTS:
            with lb.fresh_database(url, "pipeledger_ledger_bench_logged") as db:
                for step in ("first-load", "rerun"):
                    mark = log_path.stat().st_size
                    run = load_step(db, work, source, variant, step, -1, True)
                    run.server = server_times(log_path, mark)
                    logged.append(run)
    scale: list[LoadRun] = []
    big_rows = 0
    if args.scale_check:
        big_rows = rows * args.scale_factor
        print(f"scale check: {big_rows:,} rows, ledger on", file=sys.stderr)
        big = lb.generate_in_child(work, big_rows, args.seed, changed, new)
        big_source = _link(work, big_rows, big.base)
        with lb.fresh_database(url, "pipeledger_ledger_bench_scale") as db:
            for step in ("first-load", "rerun"):
                scale.append(load_step(db, work, big_source, "ledger", step, -1, False))
    return {
        "rows": rows,
        "file_mb": data.base.stat().st_size / 1e6,
        "runs": runs,
        "logged": logged,
        "scale": scale,
        "big_rows": big_rows,
    }


def queries(url: str, work: Path, args: argparse.Namespace) -> dict[str, Any]:
    with lb.fresh_database(url, "pipeledger_ledger_bench_queries") as db:
        print(f"building a ledger of {args.runs:,} runs ...", file=sys.stderr)
        built = build_ledger(db, args.runs)
        print(f"  done in {built['seconds']:.1f} s: {built['counts']}", file=sys.stderr)
        sqlite_path = work / "ledger-bench.sqlite"
        copy_s = copy_to_sqlite(db, sqlite_path)
        print(f"  copied to SQLite in {copy_s:.1f} s", file=sys.stderr)
        out: dict[str, Any] = {"built": built, "sqlite_copy_s": copy_s}
        for name, target in (("postgres", db), ("sqlite", f"sqlite:///{sqlite_path}")):
            wait_quiet()
            lb.settle(db)
            print(f"  timing queries on {name} ...", file=sys.stderr)
            result = run_child(
                ["--step", "queries", "--url", target, "--calls", str(args.calls),
                 "--warmup", str(args.warmup), "--cold", str(args.cold)]
            )  # fmt: skip
            for qname, t in result["timings"].items():
                print(
                    f"    {qname:<42} median {t['median_ms']:8.2f} ms  p95 {t['p95_ms']:8.2f}"
                    f" ms  ({t['rows']} rows)",
                    file=sys.stderr,
                )
            out[name] = result
            plans = work / f"ledger_plans_{name}.txt"
            plans.write_text(
                "\n\n".join(f"-- {k}\n{v['plan']}" for k, v in result["plans"].items()) + "\n"
            )
        out["sqlite_mb"] = sqlite_path.stat().st_size / 1e6
    return out


# --------------------------------------------------------------------------- report


Target = lb.Target


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def _pick(runs: list[LoadRun], variant: str, step: str) -> list[LoadRun]:
    return [r for r in runs if r.variant == variant and r.step == step]


def overhead_figures(ov: dict[str, Any]) -> tuple[list[str], list[Target]]:
    runs: list[LoadRun] = ov["runs"]
    lines = [
        "### Ledger overhead",
        "",
        f"The {ov['rows']:,}-row orders CSV of the load benchmark ({ov['file_mb']:.0f} MB) loaded "
        "into an empty target, then the identical re-run (reads 1 row, writes none, but "
        "scans the file), with the ledger on (default: ledger tables in the warehouse, the "
        "final record committed in the load's transaction) and off (`[ledger] enabled = "
        "false`). Each round uses a fresh database per variant and alternates which variant "
        "goes first; every step is its own subprocess, timed around `runner.run_one` "
        "(imports and interpreter start excluded). pipeledger's tables are created before "
        "the timed step, as every run but a database's first finds them (the timed run "
        "still checks its migrations); the one-time DDL is in the logged pair's server "
        "times. The ratio is of the medians; `paired` is the median of the per-round ratios.",
        "",
    ]
    table = []
    targets: list[Target] = []
    for step in ("first-load", "rerun"):
        on, off = _pick(runs, "ledger", step), _pick(runs, "no-ledger", step)
        m_on, m_off = _median([r.seconds for r in on]), _median([r.seconds for r in off])
        pairs = [a.seconds / b.seconds for a, b in zip(on, off, strict=True)]
        ratio = m_on / m_off
        table.append(
            [
                step,
                f"{m_on:.3f}",
                " / ".join(f"{r.seconds:.2f}" for r in on),
                f"{m_off:.3f}",
                " / ".join(f"{r.seconds:.2f}" for r in off),
                f"{(m_on - m_off) * 1000:+.0f}",
                f"{ratio:.3f}",
                f"{_median(pairs):.3f}",
                f"{_median([float(r.connections) for r in on]):.0f} / "
                f"{_median([float(r.connections) for r in off]):.0f}",
                f"{_median([float(r.statements) for r in on]):.0f} / "
                f"{_median([float(r.statements) for r in off]):.0f}",
                f"{max(r.rss_mb for r in on):.0f} / {max(r.rss_mb for r in off):.0f}",
            ]
        )
        if step == "first-load":
            targets.append(
                Target(
                    f"{ov['rows']:,}-row first load with ledger / without <= {MAX_OVERHEAD_RATIO}",
                    ratio <= MAX_OVERHEAD_RATIO,
                    f"{m_on:.3f} s / {m_off:.3f} s = {ratio:.3f} (medians of {len(on)} "
                    f"rounds; paired per round {' / '.join(f'{p:.3f}' for p in pairs)})",
                )
            )
    lines += lb._fmt_table(
        [
            "step",
            "ledger on: s (median)",
            "each round",
            "ledger off: s (median)",
            "each round",
            "added ms",
            "ratio on/off",
            "paired",
            "connections on / off",
            "statements on / off",
            "peak RSS MB on / off",
        ],
        table,
    )
    lines += [
        "",
        "What the ledger adds, client side (in-process wrappers around the ledger's seams; "
        "medians over the ledger-on rounds, ms):",
        "",
    ]
    rows = []
    for key, label in LOAD_PHASES.items():
        first = _median(
            [r.phases.get(key, 0.0) * 1000 for r in _pick(runs, "ledger", "first-load")]
        )
        rerun = _median([r.phases.get(key, 0.0) * 1000 for r in _pick(runs, "ledger", "rerun")])
        rows.append([label, f"{first:.1f}", f"{rerun:.1f}"])
    totals = []
    for step in ("first-load", "rerun"):
        on = _pick(runs, "ledger", step)
        totals.append(_median([sum(r.phases.values()) * 1000 for r in on]))
    rows.append(["**sum**", f"{totals[0]:.1f}", f"{totals[1]:.1f}"])
    conn = []
    for step in ("first-load", "rerun"):
        on, off = _pick(runs, "ledger", step), _pick(runs, "no-ledger", step)
        conn.append(
            f"{_median([r.connect_s * 1000 for r in on]):.1f} vs "
            f"{_median([r.connect_s * 1000 for r in off]):.1f}"
        )
    rows.append(["(connecting, all connections of the step: on vs off)", conn[0], conn[1]])
    lines += lb._fmt_table(["phase", "first load ms", "re-run ms"], rows)
    logged: list[LoadRun] = ov["logged"]
    if logged:
        lines += [
            "",
            "Server side, one extra run per variant with every statement's duration logged "
            "(`log_min_duration_statement = 0` for the step's sessions; not in the medians), "
            "seconds per statement class:",
            "",
        ]
        for r in logged:
            parts = ", ".join(f"{k} {v:.3f}" for k, v in r.server.items() if v >= 0.0005)
            lines.append(f"- **{r.variant} {r.step}** ({r.seconds:.2f} s): {parts}")
    scale: list[LoadRun] = ov["scale"]
    if scale:
        lines += [
            "",
            f"Scale check (ledger on, one round): the same runs against a {ov['big_rows']:,}-row "
            "target.",
            "",
        ]
        srows = []
        one = {s: _pick(runs, "ledger", s) for s in ("first-load", "rerun")}
        for r in scale:
            base = _median([x.phases["snapshot"] * 1000 for x in one[r.step]])
            srows.append(
                [
                    r.step,
                    f"{r.seconds:.2f}",
                    f"{r.phases['snapshot'] * 1000:.0f}",
                    f"{base:.0f}",
                    f"{sum(r.phases.values()) * 1000:.0f}",
                ]
            )
        lines += lb._fmt_table(
            [
                "step",
                f"seconds ({ov['big_rows']:,} rows)",
                f"snapshot ms ({ov['big_rows']:,} rows)",
                f"snapshot ms ({ov['rows']:,} rows, median)",
                "ledger total ms",
            ],
            srows,
        )
    return lines, targets


def query_figures(qr: dict[str, Any]) -> tuple[list[str], list[Target]]:
    built = qr["built"]
    counts = built["counts"]
    statuses = ", ".join(f"{k} {v:,}" for k, v in built["statuses"].items())
    triggers = ", ".join(f"{k} {v:,}" for k, v in built["triggers"].items())
    lines = [
        "### Query latency",
        "",
        f"A synthetic ledger: {counts['pipeline_runs']:,} runs of {counts['pipelines']} "
        f"pipelines over {DAYS} days ({built['runs_per_pipeline']:,} per pipeline, one every "
        f"{built['step_s'] // 60} min), {counts['task_runs']:,} task runs (extract, transform, "
        f"load per finished run), {counts['pipeline_dependencies']} dependency edges; "
        f"{built['size']} on PostgreSQL after `VACUUM ANALYZE`, {qr['sqlite_mb']:.0f} MB as "
        f"SQLite. Statuses: {statuses}. Triggers: {triggers}. The latest run of some "
        "pipelines is a volume anomaly (x5, zero rows, x1.5), two pipelines fail often in the "
        f"last 7 days. Written by set-based SQL in {built['seconds']:.1f} s. Every function "
        "is called through `pipeledger.ledger.reads.queries` on one open session (warm connection, "
        "one read transaction) in a fresh subprocess, with `now` fixed at the end of the "
        "history; the median and p95 (nearest rank) are over the timed calls after the "
        "warm-up calls. `new session` is the median with a new connection and the "
        "`is_migrated` probe per call, as the CLI does it. `status` and `anomalies` read "
        "the daily rollup (`pipeline_days`) that triggers keep as the runs are written.",
        "",
    ]
    rows = []
    targets: list[Target] = []
    pg, lite = qr["postgres"]["timings"], qr["sqlite"]["timings"]
    for name, t in pg.items():
        s = lite.get(name, {})
        exec_ms = qr["postgres"]["plans"].get(name, {}).get("execution_ms")
        rows.append(
            [
                name,
                str(t["rows"]),
                f"{t['median_ms']:.2f}",
                f"{t['p95_ms']:.2f}",
                f"{t['cold_median_ms']:.1f}" if "cold_median_ms" in t else "-",
                f"{exec_ms:.2f}" if exec_ms is not None else "-",
                f"{s.get('median_ms', float('nan')):.2f}",
                f"{s.get('p95_ms', float('nan')):.2f}",
                f"{s['cold_median_ms']:.1f}" if "cold_median_ms" in s else "-",
                "target" if name in TARGETED else "info",
            ]
        )
    for name in TARGETED:
        for label, timings in (("PostgreSQL", pg), ("SQLite", lite)):
            t = timings[name]
            worst = max(t["median_ms"], t["p95_ms"])
            targets.append(
                Target(
                    f"`{name}` on {label} < {MAX_QUERY_MS:.0f} ms (median and p95)",
                    worst < MAX_QUERY_MS,
                    f"median {t['median_ms']:.2f} ms, p95 {t['p95_ms']:.2f} ms over "
                    f"{qr['calls']} calls ({t['rows']} rows); new session "
                    f"{t.get('cold_median_ms', float('nan')):.1f} ms",
                )
            )
    lines += lb._fmt_table(
        [
            "function",
            "rows returned",
            "PostgreSQL median ms",
            "p95 ms",
            "new session ms",
            "EXPLAIN ANALYZE ms",
            "SQLite median ms",
            "SQLite p95 ms",
            "SQLite new session ms",
            "",
        ],
        rows,
    )
    cli = {name: qr[name].get("cli", {}) for name in ("postgres", "sqlite")}
    lines += [
        "",
        "The command as a whole, `pipeledger status --json` in a new process (median of 5, "
        "information): PostgreSQL "
        f"{cli['postgres'].get('status_ms', float('nan')):.0f} ms, SQLite "
        f"{cli['sqlite'].get('status_ms', float('nan')):.0f} ms, of which starting Python and "
        "the command line (`pipeledger --help`) take "
        f"{cli['sqlite'].get('imports_ms', float('nan')):.0f} ms whatever the ledger holds; "
        "the rest is the command's own imports (the PostgreSQL driver's ~0.29 s on "
        "PostgreSQL), connecting and the query.",
        "Plans of the two target queries: `bench/work/ledger_plans_postgres.txt` and "
        "`bench/work/ledger_plans_sqlite.txt` (written by the run).",
    ]
    return lines, targets


OVERHEAD_TITLE = "### Ledger overhead"
QUERIES_TITLE = "### Query latency"
_TARGET_PREFIX = {OVERHEAD_TITLE: "1,000,000-row first load", QUERIES_TITLE: "`"}


def _kept(previous: str, title: str) -> tuple[list[str], list[Target]]:
    """A section (and its targets) of the previous report, for a part this run did not
    measure (``--only``), marked as such."""
    if BEGIN not in previous or END not in previous:
        return [], []
    block = previous[previous.index(BEGIN) : previous.index(END)]
    if title not in block:
        return [], []
    start = block.index(title)
    ends = [block.find(t, start + len(title)) for t in (QUERIES_TITLE, "### Targets")]
    text = block[start : min(e for e in ends if e > 0)].strip("\n")
    run = re.search(r"^Run .*? by `[^`]*`", block, re.MULTILINE)
    when = f" ({run.group(0)[4:]})" if run else ""
    body = [title, "", f"Kept from the previous report{when}: not measured by this run."]
    body += text.splitlines()[1:]
    found = []
    for row in re.findall(r"^\| (.+?) \| (PASS|FAIL|SKIP) \| (.*) \|$", block, re.MULTILINE):
        if row[0].startswith(_TARGET_PREFIX[title]):
            found.append(Target(row[0], None if row[1] == "SKIP" else row[1] == "PASS", row[2]))
    return body, found


def _notes(previous: str) -> str:
    if NOTES_BEGIN in previous and NOTES_END in previous:
        return previous[previous.index(NOTES_BEGIN) : previous.index(NOTES_END) + len(NOTES_END)]
    return f"{NOTES_BEGIN}\n### Notes\n\n(none yet)\n{NOTES_END}"


def write_report(
    path: Path,
    ov: dict[str, Any] | None,
    qr: dict[str, Any] | None,
    info: dict[str, str],
) -> list[Target]:
    previous = lb._read(str(path))
    command = " ".join(["bench/ledger_bench.py", *sys.argv[1:]])
    lines = [
        BEGIN,
        "# Run ledger",
        "",
        f"Run {datetime.now(UTC):%Y-%m-%d %H:%M} UTC by `{command}` (this block is written by "
        "`bench/ledger_bench.py`; the load benchmark keeps it).",
        "",
    ]
    targets: list[Target] = []
    for part, title in ((ov, OVERHEAD_TITLE), (qr, QUERIES_TITLE)):
        if part is None:  # not measured this time: the previous run's section stays
            body, found = _kept(previous, title)
        else:
            body, found = overhead_figures(part) if part is ov else query_figures(part)
        lines += [*body, ""] if body else []
        targets += found
    lines += ["### Targets", ""]
    lines += lb._fmt_table(
        ["target", "result", "detail"], [[t.name, t.verdict, t.detail] for t in targets]
    )
    lines += ["", "### Machine", ""]
    lines += [f"- {k}: {v}" for k, v in info.items()]
    lines += ["", _notes(previous), END]
    block = "\n".join(lines)
    if BEGIN in previous and END in previous:
        head = previous[: previous.index(BEGIN)]
        tail = previous[previous.index(END) + len(END) :]
        text = head + block + tail
    else:
        text = previous.rstrip("\n") + "\n\n" + block + "\n"
    path.write_text(text)
    return targets


def busy() -> list[str]:
    """Other heavy processes (a test suite, another benchmark) that would skew the figures."""
    out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    mine, pid = set(), os.getpid()
    while pid > 1:  # this process and its ancestors (the shell that started it)
        mine.add(str(pid))
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    found = []
    for line in out.splitlines()[1:]:
        other, _, cmd = line.strip().partition(" ")
        if other in mine:
            continue
        if re.search(r"pytest|load_bench\.py|ledger_bench\.py|merge_experiments\.py", cmd):
            found.append(line.strip())
    return found


WAIT_BUSY_S = 1800.0
_ignore_busy = False


def wait_quiet() -> None:
    """Before each measured step: wait (up to ``WAIT_BUSY_S``) while a test suite or another
    benchmark runs, so that steps do not share the CPU with them."""
    if _ignore_busy:
        return
    deadline = time.monotonic() + WAIT_BUSY_S
    announced = False
    while others := busy():
        if time.monotonic() > deadline:
            raise SystemExit("still busy after 30 min:\n  " + "\n  ".join(others))
        if not announced:
            print("  waiting for: " + "; ".join(o[:80] for o in others), file=sys.stderr)
            announced = True
        time.sleep(5)


def main_parent(args: argparse.Namespace) -> None:
    global _ignore_busy
    _ignore_busy = args.ignore_busy
    work = Path(args.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    snapshot = lb.use_snapshot(work, args.snapshot) if args.snapshot else None
    wait_quiet()
    url = args.postgres_url or os.environ.get(lb.URL_ENV)
    server, log_path = None, None
    if not url:
        from pipeledger.testing.postgres import ThrowawayPostgres

        server = ThrowawayPostgres(settings={**lb.SERVER_SETTINGS, **LOG_PREFIX})
        url = server.start()
        log_path = server.log_path
        print(f"throwaway PostgreSQL at {url}", file=sys.stderr)
    ov: dict[str, Any] | None = None
    qr: dict[str, Any] | None = None
    try:
        if args.only in (None, "overhead"):
            ov = overhead(url, log_path if args.server_log else None, work, args)
        if args.only in (None, "queries"):
            qr = queries(url, work, args)
            qr["calls"] = args.calls
        info = lb.machine(url, snapshot)
    finally:
        if server is not None:
            server.stop()
    targets = write_report(Path(args.results), ov, qr, info)
    for t in targets:
        print(f"{t.verdict}  {t.name}: {t.detail}")
    plain = None
    if ov is not None:
        plain = {**ov, **{k: [vars(r) for r in ov[k]] for k in ("runs", "logged", "scale")}}
    dump = {"overhead": plain, "queries": qr}
    (work / "ledger_last_run.json").write_text(json.dumps(dump, indent=2, default=str))
    print(f"\nwrote {args.results}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--only", choices=["overhead", "queries"], help="run one part only")
    p.add_argument("--rows", type=int, default=1_000_000, help="rows in the load's source CSV")
    p.add_argument("--repeat", type=int, default=5, help="A/B rounds of the overhead part")
    p.add_argument(
        "--no-scale-check",
        dest="scale_check",
        action="store_false",
        help="skip the ledger-on runs against a --scale-factor x bigger target",
    )
    p.add_argument("--scale-factor", type=int, default=5)
    p.add_argument(
        "--no-server-log",
        dest="server_log",
        action="store_false",
        help="skip the extra pair of runs with server-side statement times",
    )
    p.add_argument("--runs", type=int, default=100_000, help="runs in the synthetic ledger")
    p.add_argument("--calls", type=int, default=30, help="timed calls per query function")
    p.add_argument("--warmup", type=int, default=3, help="untimed calls first")
    p.add_argument("--cold", type=int, default=10, help="calls with a new session each")
    p.add_argument("--work", default=str(lb.DEFAULT_WORK), help="work folder (git-ignored)")
    p.add_argument("--postgres-url", default=None, help=f"existing server (or ${lb.URL_ENV})")
    p.add_argument("--snapshot", metavar="REV", help="benchmark pipeledger/ as committed at REV")
    p.add_argument(
        "--ignore-busy", action="store_true", help="do not wait while tests or benchmarks run"
    )
    p.add_argument("--seed", type=int, default=lb.SEED)
    p.add_argument("--results", default=str(DEFAULT_RESULTS))
    # internal: one step in this (fresh) process
    p.add_argument("--step", choices=["load", "queries"], help=argparse.SUPPRESS)
    p.add_argument("--url", help=argparse.SUPPRESS)
    p.add_argument("--source", help=argparse.SUPPRESS)
    p.add_argument("--ledger", choices=["on", "off"], default="on", help=argparse.SUPPRESS)
    p.add_argument("--fresh-schema", action="store_true", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.step == "load":
        out = step_load(
            args.url, Path(args.work), args.source, args.ledger == "on", not args.fresh_schema
        )
        print(json.dumps(out))
    elif args.step == "queries":
        print(json.dumps(step_queries(args.url, args.calls, args.warmup, args.cold)))
    else:
        main_parent(args)


if __name__ == "__main__":
    main()
