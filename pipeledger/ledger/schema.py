"""The ledger's tables, as versioned migrations for both dialects.

Two components are migrated separately because they may live in different databases:
``state`` (watermarks, always in the warehouse, so they commit with the rows) and
``ledger`` (runs, tasks, audit events, snapshots, pipelines, dependencies, quality
results; in the warehouse by default, or in a database of its own).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

from pipeledger.adapters.base import Session, Warehouse
from pipeledger.errors import WarehouseError
from pipeledger.load.sql import (
    STATE_TABLE,
    Dialect,
    fingerprint_guard_table,
    forget_hash_function,
    quote,
    renewed_guard_table,
)
from pipeledger.schema import TableName

Component = Literal["state", "ledger"]
SCHEMA = "pipeledger"


def table(name: str) -> TableName:
    return TableName(SCHEMA, name)


PIPELINES = table("pipelines")
RUNS = table("pipeline_runs")
TASKS = table("task_runs")
AUDIT = table("audit_events")
SNAPSHOTS = table("dataset_snapshots")
STATE = STATE_TABLE
DEPENDENCIES = table("pipeline_dependencies")
MIGRATIONS = table("schema_migrations")
QUALITY = table("quality_results")


def _types(d: Dialect) -> dict[str, str]:
    if d.name == "postgres":
        return {"ts": "timestamptz", "json": "jsonb", "big": "bigint"}
    return {"ts": "timestamptz", "json": "text", "big": "integer"}


def _state(d: Dialect) -> list[str]:
    t = _types(d)
    return [
        f"CREATE TABLE IF NOT EXISTS {d.table(STATE)} ("
        "pipeline text NOT NULL, partition_key text NOT NULL, cursor_column text NOT NULL, "
        "cursor_type text NOT NULL, watermark text NOT NULL, run_id text NOT NULL, "
        f"updated_at {t['ts']} NOT NULL, PRIMARY KEY (pipeline, partition_key))"
    ]


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


def migrations(d: Dialect, component: Component) -> list[tuple[int, str, list[str]]]:
    """Versioned schema changes of one component, applied in order, each once."""
    schema = [f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}"] if d.name == "postgres" else []
    if component == "state":
        forget = [forget_hash_function()] if d.name == "postgres" else []
        return [
            (1, "watermark state per pipeline and partition", [*schema, *_state(d)]),
            (2, "trigger function: an outside UPDATE clears the row's fingerprint", forget),
            (3, "fingerprint guards: which trigger guards a target, and since when",
             [fingerprint_guard_table(d), *forget]),
            # committed migrations never change; never CREATE OR REPLACE the trigger
            # function again either: that voids every guard
            (4, "fingerprint guards replace a guards table of an earlier shape",
             renewed_guard_table(d)),
        ]  # fmt: skip
    return [
        (1, "run ledger: pipelines, runs, tasks, audit, snapshots, dependencies",
         [*schema, *_ledger(d)]),
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


_LOCK = 0x706C6467  # one migrator at a time on PostgreSQL ("pldg")


def migrate(session: Session, component: Component) -> list[int]:
    """Apply the component's pending migrations in this session's transaction."""
    d = session.dialect
    if d.name == "postgres":
        session.execute("SELECT pg_advisory_xact_lock(%s)", [_LOCK])
    bookkeeping, p = d.table(MIGRATIONS), d.param
    done: set[int] = set()
    if session.table_columns(MIGRATIONS) is not None:
        query = f"SELECT version FROM {bookkeeping} WHERE component = {p}"
        done = {int(row[0]) for row in session.query(query, [component])}
    pending = [m for m in migrations(d, component) if m[0] not in done]
    if not pending:  # nothing to create: a role that may not create anything runs too
        return []
    try:
        return _apply(session, component, pending)
    except WarehouseError as exc:
        if exc.sqlstate != WarehouseError.INSUFFICIENT_PRIVILEGE:
            raise
        versions = ", ".join(str(version) for version, _, _ in pending)
        raise WarehouseError(
            f"pipeledger's {component} tables need migration {versions}, which this role may "
            "not apply: run `pipeledger ledger migrate` once as a role that may create objects "
            f"(the owner), then run again; nothing was written ({exc})"
        ) from None


def _apply(
    session: Session, component: Component, pending: list[tuple[int, str, list[str]]]
) -> list[int]:
    d = session.dialect
    bookkeeping, p = d.table(MIGRATIONS), d.param
    if d.name == "postgres":
        # a migration waits at most 30 s for a table that a long run still uses (the run
        # that needs it then fails and says so), instead of queueing every run behind it
        session.execute("SET LOCAL lock_timeout = '30s'")
        session.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
    session.execute(
        f"CREATE TABLE IF NOT EXISTS {bookkeeping} (component text NOT NULL, "
        "version integer NOT NULL, description text NOT NULL, applied_at timestamptz NOT NULL, "
        "PRIMARY KEY (component, version))"
    )
    applied: list[int] = []
    for version, description, statements in pending:
        for statement in statements:
            session.execute(statement)
        session.execute(
            f"INSERT INTO {bookkeeping} (component, version, description, applied_at) "
            f"VALUES ({p}, {p}, {p}, {p})",
            [component, version, description, datetime.now(UTC)],
        )
        applied.append(version)
    return applied


def is_migrated(session: Session, component: Component) -> bool:
    """Whether the component's tables exist (readers must not create anything)."""
    probe = STATE if component == "state" else RUNS
    return session.table_columns(probe) is not None


_MIGRATED: set[tuple[str, str]] = set()  # (database url, component) checked by this process


def mark_migrated(url: str, *components: Component) -> None:
    _MIGRATED.update((url, component) for component in components)


def migrate_database(warehouse: Warehouse, *components: Component) -> dict[str, list[int]]:
    """Apply pending migrations of ``components`` in one short transaction (once per
    process and database: a second call costs nothing)."""
    pending = [c for c in components if (warehouse.url, c) not in _MIGRATED]
    if not pending:
        return {}
    with warehouse.session() as session:
        applied: dict[str, list[int]] = {c: migrate(session, c) for c in pending}
    mark_migrated(warehouse.url, *pending)
    return applied
