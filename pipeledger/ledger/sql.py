"""SQL text for writing the ledger, built by pure functions (adapters execute it)."""

from __future__ import annotations

from pipeledger.ledger.schema import (
    AUDIT,
    DEPENDENCIES,
    PIPELINES,
    QUALITY,
    RUNS,
    SNAPSHOTS,
    TASKS,
)
from pipeledger.warehouse.dialect import Dialect

RUN_COLUMNS = (
    "run_id", "logical_run_id", "attempt", "parent_run_id", "correlation_id", "pipeline",
    "trigger_type", "triggered_by", "environment", "status", "started_at", "ended_at",
    "duration_ms", "rows_read", "rows_inserted", "rows_updated", "rows_unchanged",
    "rows_rejected", "bytes_read", "watermark_before", "watermark_after",
    "data_interval_start", "data_interval_end", "error_code", "error_message", "code_version",
    "host", "pid", "heartbeat_at", "lease_expires_at", "extra",
)  # fmt: skip
TASK_COLUMNS = (
    "task_run_id", "run_id", "name", "seq", "status", "started_at", "ended_at", "duration_ms",
    "rows_in", "rows_out", "rows_rejected", "bytes", "error_message",
)  # fmt: skip
EVENT_COLUMNS = (
    "event_id", "run_id", "pipeline", "event_type", "target_table", "record_count",
    "old_values", "new_values", "metadata", "created_at",
)  # fmt: skip
SNAPSHOT_COLUMNS = (
    "run_id", "target_table", "row_count", "max_cursor", "schema_fingerprint", "columns",
    "created_at",
)  # fmt: skip
PIPELINE_COLUMNS = (
    "name", "version", "description", "owner", "source_system", "target_system",
    "freshness_sla_s", "created_at", "updated_at",
)  # fmt: skip
QUALITY_COLUMNS = (
    "result_id", "run_id", "pipeline", "target_table", "check_name", "kind", "level", "status",
    "observed", "expected", "failing_rows", "sample_keys", "created_at",
)  # fmt: skip
JSON_COLUMNS = frozenset(
    {"extra", "old_values", "new_values", "metadata", "columns", "sample_keys"}
)


def _marks(d: Dialect, columns: tuple[str, ...]) -> str:
    return ", ".join(d.json_param if c in JSON_COLUMNS else d.param for c in columns)


def _insert(d: Dialect, table: str, columns: tuple[str, ...]) -> str:
    return f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({_marks(d, columns)})"


def upsert_run(d: Dialect) -> str:
    """Insert a run, or bring a still-running one up to date. A final state never changes."""
    updates = ", ".join(f"{c} = excluded.{c}" for c in RUN_COLUMNS if c != "run_id")
    return (
        f"{_insert(d, d.table(RUNS) + ' AS r', RUN_COLUMNS)} "
        f"ON CONFLICT (run_id) DO UPDATE SET {updates} WHERE r.status = 'running'"
    )


def finish_run(d: Dialect) -> str:
    """Move a running run to its final state; 0 rows means someone (the watchdog) was first."""
    columns = tuple(c for c in RUN_COLUMNS if c != "run_id")
    sets = ", ".join(f"{c} = {d.json_param if c in JSON_COLUMNS else d.param}" for c in columns)
    return f"UPDATE {d.table(RUNS)} SET {sets} WHERE run_id = {d.param} AND status = 'running'"


def heartbeat(d: Dialect) -> str:
    p = d.param
    return (
        f"UPDATE {d.table(RUNS)} SET heartbeat_at = {p}, lease_expires_at = {p} "
        f"WHERE run_id = {p} AND status = 'running'"
    )


def insert_task(d: Dialect) -> str:
    return f"{_insert(d, d.table(TASKS), TASK_COLUMNS)} ON CONFLICT (task_run_id) DO NOTHING"


def insert_event(d: Dialect) -> str:
    return f"{_insert(d, d.table(AUDIT), EVENT_COLUMNS)} ON CONFLICT (event_id) DO NOTHING"


def insert_snapshot(d: Dialect) -> str:
    return (
        f"{_insert(d, d.table(SNAPSHOTS), SNAPSHOT_COLUMNS)} "
        "ON CONFLICT (run_id, target_table) DO NOTHING"
    )


def insert_quality(d: Dialect) -> str:
    return f"{_insert(d, d.table(QUALITY), QUALITY_COLUMNS)} ON CONFLICT (result_id) DO NOTHING"


def upsert_pipeline(d: Dialect) -> str:
    keep = {"name", "created_at"}
    updates = ", ".join(f"{c} = excluded.{c}" for c in PIPELINE_COLUMNS if c not in keep)
    return (
        f"{_insert(d, d.table(PIPELINES), PIPELINE_COLUMNS)} "
        f"ON CONFLICT (name) DO UPDATE SET {updates}"
    )


def delete_dependencies(d: Dialect) -> str:
    return f"DELETE FROM {d.table(DEPENDENCIES)} WHERE downstream = {d.param}"


def insert_dependency(d: Dialect) -> str:
    p = d.param
    return (
        f"INSERT INTO {d.table(DEPENDENCIES)} (upstream, downstream, created_at) "
        f"VALUES ({p}, {p}, {p}) ON CONFLICT (upstream, downstream) DO NOTHING"
    )


def running_runs(d: Dialect) -> str:
    return (
        f"SELECT run_id, started_at, host, pid, lease_expires_at FROM {d.table(RUNS)} "
        "WHERE status = 'running'"
    )


def abandon_run(d: Dialect) -> str:
    p = d.param
    return (
        f"UPDATE {d.table(RUNS)} SET status = 'abandoned', ended_at = {p}, duration_ms = {p}, "
        f"error_code = 'LEASE_EXPIRED', error_message = {p} "
        f"WHERE run_id = {p} AND status = 'running'"
    )
