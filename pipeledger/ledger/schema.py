"""The run ledger's tables, as versioned migrations for both dialects (the ``ledger``
component: in the warehouse by default, or in a database of its own)."""

from __future__ import annotations

from pipeledger.schema import TableName
from pipeledger.warehouse.dialect import Dialect, quote
from pipeledger.warehouse.migrations import SCHEMA, Component, Migration, create_schema


def table(name: str) -> TableName:
    return TableName(SCHEMA, name)


PIPELINES = table("pipelines")
RUNS = table("pipeline_runs")
TASKS = table("task_runs")
AUDIT = table("audit_events")
SNAPSHOTS = table("dataset_snapshots")
DEPENDENCIES = table("pipeline_dependencies")
QUALITY = table("quality_results")


def _types(d: Dialect) -> dict[str, str]:
    return {"ts": "timestamptz", "json": d.json_type, "big": d.int64_type}


def _ledger(d: Dialect) -> list[str]:
    t = _types(d)
    ts, js, big = t["ts"], t["json"], t["big"]
    runs = d.table(RUNS)
    return [
        f"CREATE TABLE IF NOT EXISTS {d.table(PIPELINES)} ("
        "name text PRIMARY KEY, version text NOT NULL, description text, owner text, "
        "source_system text, target_system text, freshness_sla_s bigint, "
        f"created_at {ts} NOT NULL, updated_at {ts} NOT NULL)",
        f"CREATE TABLE IF NOT EXISTS {runs} ("
        "run_id text PRIMARY KEY, logical_run_id text NOT NULL, attempt integer NOT NULL, "
        "parent_run_id text, correlation_id text, pipeline text NOT NULL, "
        "trigger_type text NOT NULL, triggered_by text, environment text, status text NOT NULL, "
        f"started_at {ts} NOT NULL, ended_at {ts}, duration_ms {big}, "
        f"rows_read {big}, rows_inserted {big}, rows_updated {big}, rows_unchanged {big}, "
        f"rows_rejected {big}, bytes_read {big}, watermark_before text, watermark_after text, "
        f"data_interval_start {ts}, data_interval_end {ts}, error_code text, error_message text, "
        f"code_version text, host text, pid integer, heartbeat_at {ts}, lease_expires_at {ts}, "
        f"extra {js}, UNIQUE (logical_run_id, attempt))",
        f"CREATE INDEX IF NOT EXISTS {quote('pipeline_runs_pipeline_started')} "
        f"ON {runs} (pipeline, started_at DESC)",
        f"CREATE INDEX IF NOT EXISTS {quote('pipeline_runs_status')} ON {runs} (status)",
        f"CREATE INDEX IF NOT EXISTS {quote('pipeline_runs_started')} ON {runs} (started_at)",
        f"CREATE TABLE IF NOT EXISTS {d.table(TASKS)} ("
        "task_run_id text PRIMARY KEY, run_id text NOT NULL, name text NOT NULL, "
        f"seq integer NOT NULL, status text NOT NULL, started_at {ts} NOT NULL, ended_at {ts}, "
        f"duration_ms {big}, rows_in {big}, rows_out {big}, rows_rejected {big}, bytes {big}, "
        "error_message text)",
        f"CREATE INDEX IF NOT EXISTS {quote('task_runs_run')} ON {d.table(TASKS)} (run_id)",
        f"CREATE TABLE IF NOT EXISTS {d.table(AUDIT)} ("
        "event_id text PRIMARY KEY, run_id text, pipeline text, event_type text NOT NULL, "
        f"target_table text, record_count {big}, old_values {js}, new_values {js}, "
        f"metadata {js}, created_at {ts} NOT NULL)",
        f"CREATE INDEX IF NOT EXISTS {quote('audit_events_target')} "
        f"ON {d.table(AUDIT)} (target_table, created_at)",
        f"CREATE INDEX IF NOT EXISTS {quote('audit_events_run')} ON {d.table(AUDIT)} (run_id)",
        f"CREATE TABLE IF NOT EXISTS {d.table(SNAPSHOTS)} ("
        f"run_id text NOT NULL, target_table text NOT NULL, row_count {big} NOT NULL, "
        f"max_cursor text, schema_fingerprint text NOT NULL, columns {js} NOT NULL, "
        f"created_at {ts} NOT NULL, PRIMARY KEY (run_id, target_table))",
        f"CREATE INDEX IF NOT EXISTS {quote('dataset_snapshots_target')} "
        f"ON {d.table(SNAPSHOTS)} (target_table, created_at)",
        f"CREATE TABLE IF NOT EXISTS {d.table(DEPENDENCIES)} ("
        "upstream text NOT NULL, downstream text NOT NULL, "
        f"created_at {ts} NOT NULL, PRIMARY KEY (upstream, downstream))",
    ]


def ledger_migrations(d: Dialect) -> list[Migration]:
    """The ledger's schema changes, applied in order, each once."""
    return [
        (1, "run ledger: pipelines, runs, tasks, audit, snapshots, dependencies",
         [*create_schema(d), *_ledger(d)]),
        (2, "quality gate results per run and check", _quality(d)),
        (3, "task trends by time",
         [f"CREATE INDEX IF NOT EXISTS {quote('task_runs_started')} "
          f"ON {d.table(TASKS)} (started_at)"]),
    ]  # fmt: skip


def _quality(d: Dialect) -> list[str]:
    t = _types(d)
    return [
        f"CREATE TABLE IF NOT EXISTS {d.table(QUALITY)} ("
        "result_id text PRIMARY KEY, run_id text NOT NULL, pipeline text NOT NULL, "
        "target_table text, check_name text NOT NULL, kind text NOT NULL, level text NOT NULL, "
        f"status text NOT NULL, observed text, expected text, failing_rows {t['big']}, "
        f"sample_keys {t['json']}, created_at {t['ts']} NOT NULL)",
        f"CREATE INDEX IF NOT EXISTS {quote('quality_results_run')} ON {d.table(QUALITY)} (run_id)",
        f"CREATE INDEX IF NOT EXISTS {quote('quality_results_pipeline')} "
        f"ON {d.table(QUALITY)} (pipeline, created_at)",
    ]


LEDGER = Component("ledger", ledger_migrations, RUNS)
