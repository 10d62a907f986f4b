"""SQL text for writing the ledger, built by pure functions (adapters execute it)."""

from __future__ import annotations

from pipeledger.ledger.schema import (
    AUDIT,
    AUDIT_TABLE,
    DEPENDENCIES,
    PIPELINE_TABLE,
    PIPELINES,
    QUALITY,
    QUALITY_TABLE,
    RECONCILIATION_TABLE,
    RECONCILIATIONS,
    RUN_TABLE,
    RUNS,
    SNAPSHOT_TABLE,
    SNAPSHOTS,
    TASK_TABLE,
    TASKS,
    UNREGISTERED,
)
from pipeledger.warehouse.dialect import Dialect

RUN_COLUMNS = RUN_TABLE.column_names
TASK_COLUMNS = TASK_TABLE.column_names
EVENT_COLUMNS = AUDIT_TABLE.column_names
SNAPSHOT_COLUMNS = SNAPSHOT_TABLE.column_names
PIPELINE_COLUMNS = PIPELINE_TABLE.column_names
QUALITY_COLUMNS = QUALITY_TABLE.column_names
RECONCILIATION_COLUMNS = RECONCILIATION_TABLE.column_names
_TABLES = (RUN_TABLE, TASK_TABLE, AUDIT_TABLE, SNAPSHOT_TABLE, QUALITY_TABLE, RECONCILIATION_TABLE)
JSON_COLUMNS = frozenset().union(*(t.json_columns for t in _TABLES))


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


def insert_reconciliation(d: Dialect) -> str:
    return (
        f"{_insert(d, d.table(RECONCILIATIONS), RECONCILIATION_COLUMNS)} "
        "ON CONFLICT (run_id) DO NOTHING"
    )


def ensure_pipeline(d: Dialect) -> str:
    """The registry row a run's foreign key needs, for a pipeline that never registered
    (parameters: name, created_at, updated_at); a registration later fills it in."""
    p = d.param
    return (
        f"INSERT INTO {d.table(PIPELINES)} (name, version, created_at, updated_at) "
        f"VALUES ({p}, '{UNREGISTERED}', {p}, {p}) ON CONFLICT (name) DO NOTHING"
    )


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
