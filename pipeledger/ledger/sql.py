"""SQL text for writing the ledger, built by pure functions (adapters execute it)."""

from __future__ import annotations

from typing import Literal

from pipeledger.ledger.tables import (
    AUDIT,
    AUDIT_TABLE,
    CANCEL_TABLE,
    CANCELLATIONS,
    DEPENDENCIES,
    DEPENDENCY_TABLE,
    HOLDS_KEY,
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
    declared_tenant,
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


def _run(d: Dialect, alias: str = "") -> str:
    """SQL: the row is the run bound next, of the session's declared tenant (the run's
    key since ledger migration 16: one probe of it, not a scan; and on SQLite, where a
    writer sees every tenant's rows, only its own)."""
    return f"{alias}tenant = {declared_tenant(d)} AND {alias}run_id = {d.param}"


def _own(d: Dialect, alias: str = "") -> str:
    """SQL: the row is the session's declared tenant's."""
    return f"{alias}tenant = {declared_tenant(d)}"


def upsert_run(d: Dialect) -> str:
    """Insert a run, or bring a still-running one up to date. A final state never changes."""
    updates = ", ".join(f"{c} = excluded.{c}" for c in RUN_COLUMNS if c != "run_id")
    return (
        f"{_insert(d, d.table(RUNS) + ' AS r', RUN_COLUMNS)} "
        f"ON CONFLICT ({RUN_TABLE.conflict}) DO UPDATE SET {updates} WHERE r.status = 'running'"
    )


def finish_run(d: Dialect) -> str:
    """Move a running run to its final state; 0 rows means someone (the watchdog) was first."""
    columns = tuple(c for c in RUN_COLUMNS if c != "run_id")
    sets = ", ".join(f"{c} = {d.json_param if c in JSON_COLUMNS else d.param}" for c in columns)
    return f"UPDATE {d.table(RUNS)} SET {sets} WHERE {_run(d)} AND status = 'running'"


def heartbeat(d: Dialect, status: Literal["running", "queued"] = "running") -> str:
    """Renew the lease of a run still in ``status`` (a queued run keeps its place alive)."""
    p = d.param
    return (
        f"UPDATE {d.table(RUNS)} SET heartbeat_at = {p}, lease_expires_at = {p} "
        f"WHERE {_run(d)} AND status = '{status}'"
    )


def insert_task(d: Dialect) -> str:
    return (
        f"{_insert(d, d.table(TASKS), TASK_COLUMNS)} ON CONFLICT ({TASK_TABLE.conflict}) DO NOTHING"
    )


def insert_event(d: Dialect) -> str:
    return (
        f"{_insert(d, d.table(AUDIT), EVENT_COLUMNS)} "
        f"ON CONFLICT ({AUDIT_TABLE.conflict}) DO NOTHING"
    )


def insert_snapshot(d: Dialect) -> str:
    return (
        f"{_insert(d, d.table(SNAPSHOTS), SNAPSHOT_COLUMNS)} "
        f"ON CONFLICT ({SNAPSHOT_TABLE.conflict}) DO NOTHING"
    )


def insert_quality(d: Dialect) -> str:
    return (
        f"{_insert(d, d.table(QUALITY), QUALITY_COLUMNS)} "
        f"ON CONFLICT ({QUALITY_TABLE.conflict}) DO NOTHING"
    )


def insert_reconciliation(d: Dialect) -> str:
    return (
        f"{_insert(d, d.table(RECONCILIATIONS), RECONCILIATION_COLUMNS)} "
        f"ON CONFLICT ({RECONCILIATION_TABLE.conflict}) DO NOTHING"
    )


def ensure_pipeline(d: Dialect) -> str:
    """The registry row a run's foreign key needs, for a pipeline that never registered
    (parameters: name, created_at, updated_at); a registration later fills it in."""
    p = d.param
    return (
        f"INSERT INTO {d.table(PIPELINES)} (name, version, created_at, updated_at) "
        f"VALUES ({p}, '{UNREGISTERED}', {p}, {p}) "
        f"ON CONFLICT ({PIPELINE_TABLE.conflict}) DO NOTHING"
    )


def upsert_pipeline(d: Dialect) -> str:
    keep = {"name", "created_at"}
    updates = ", ".join(f"{c} = excluded.{c}" for c in PIPELINE_COLUMNS if c not in keep)
    return (
        f"{_insert(d, d.table(PIPELINES), PIPELINE_COLUMNS)} "
        f"ON CONFLICT ({PIPELINE_TABLE.conflict}) DO UPDATE SET {updates}"
    )


def delete_dependencies(d: Dialect) -> str:
    return f"DELETE FROM {d.table(DEPENDENCIES)} WHERE {_own(d)} AND downstream = {d.param}"


def insert_dependency(d: Dialect) -> str:
    p = d.param
    return (
        f"INSERT INTO {d.table(DEPENDENCIES)} (upstream, downstream, created_at) "
        f"VALUES ({p}, {p}, {p}) ON CONFLICT ({DEPENDENCY_TABLE.conflict}) DO NOTHING"
    )


def running_runs(d: Dialect) -> str:
    return (
        f"SELECT run_id, started_at, host, pid, lease_expires_at FROM {d.table(RUNS)} "
        f"WHERE {_own(d)} AND status = 'running'"
    )


def abandon_run(d: Dialect) -> str:
    p = d.param
    return (
        f"UPDATE {d.table(RUNS)} SET status = 'abandoned', ended_at = {p}, duration_ms = {p}, "
        f"error_code = 'LEASE_EXPIRED', error_message = {p} "
        f"WHERE {_run(d)} AND status = 'running'"
    )


def _holds_key() -> str:
    return "status IN (" + ", ".join(f"'{status}'" for status in HOLDS_KEY) + ")"


def key_holder(d: Dialect) -> str:
    """The run of a pipeline that holds an idempotency key (parameters: pipeline, key)."""
    return (
        f"SELECT run_id, status FROM {d.table(RUNS)} "
        f"WHERE {_own(d)} AND pipeline = {d.param} AND idempotency_key = {d.param} "
        f"AND {_holds_key()}"
    )


def read_run(d: Dialect) -> str:
    """One run's row, every column (parameter: run_id)."""
    return f"SELECT {', '.join(RUN_COLUMNS)} FROM {d.table(RUNS)} WHERE {_run(d)}"


def request_cancel(d: Dialect) -> str:
    p = d.param
    return (
        f"INSERT INTO {d.table(CANCELLATIONS)} (run_id, requested_at, requested_by, reason) "
        f"VALUES ({p}, {p}, {p}, {p}) ON CONFLICT ({CANCEL_TABLE.conflict}) DO NOTHING"
    )


def cancel_request(d: Dialect) -> str:
    return f"SELECT requested_by, reason FROM {d.table(CANCELLATIONS)} WHERE {_run(d)}"


SCHEDULED = "substr(idempotency_key, 1, 9) = 'schedule:'"  # as migration 15's index says


def _names(d: Dialect, column: str, count: int) -> str:
    """``column`` is one of ``count`` bound names (one array where arrays bind)."""
    if d.array_params:
        return f"{column} = ANY(CAST({d.param} AS text[]))"
    return f"{column} IN ({d.marks(count)})"


def scheduled_spans(d: Dialect, pipelines: int) -> str:
    """Of ``pipelines`` pipelines (bound: one array where arrays bind), the ends of each
    one's first and latest scheduled intervals whose run holds its key: one statement,
    read from the partial index of the keys held (migration 5)."""
    return (
        f"SELECT pipeline, min(data_interval_end), max(data_interval_end) FROM {d.table(RUNS)} "
        f"WHERE {_own(d)} AND {_names(d, 'pipeline', pipelines)} AND idempotency_key IS NOT NULL "
        f"AND {SCHEDULED} AND {_holds_key()} GROUP BY pipeline"
    )


def latest_scheduled(d: Dialect, pipelines: int) -> str:
    """Of ``pipelines`` pipelines (bound as in :func:`scheduled_spans`), each one's latest
    scheduled run, whatever its state: one probe of migration 15's index each, in one
    statement."""
    one = f"SELECT CAST({d.param} AS text) AS pipeline"
    names = (
        f"SELECT unnest(CAST({d.param} AS text[])) AS pipeline"
        if d.array_params
        else " UNION ALL ".join([one] * pipelines)
    )
    latest = (
        f"(SELECT x.run_id FROM {d.table(RUNS)} x WHERE {_own(d, 'x.')} "
        "AND x.pipeline = n.pipeline "
        f"AND {SCHEDULED.replace('idempotency_key', 'x.idempotency_key')} "
        "ORDER BY x.data_interval_end DESC, x.started_at DESC, x.run_id DESC LIMIT 1)"
    )
    return (
        f"WITH heads AS (SELECT n.pipeline, {latest} AS run_id FROM ({names}) n) "
        "SELECT h.pipeline, r.run_id, r.status, r.data_interval_start, r.data_interval_end "
        f"FROM heads h JOIN {d.table(RUNS)} r ON {_own(d, 'r.')} AND r.run_id = h.run_id"
    )


def held_keys(d: Dialect, pipelines: int, keys: int) -> str:
    """Which of ``keys`` keys runs of ``pipelines`` pipelines hold (parameters: the
    pipelines, then the keys; one array each where arrays bind): the caller keeps the
    (pipeline, key) pairs it asked about."""
    return (
        f"SELECT pipeline, idempotency_key FROM {d.table(RUNS)} "
        f"WHERE {_own(d)} AND {_names(d, 'pipeline', pipelines)} "
        f"AND {_names(d, 'idempotency_key', keys)} "
        f"AND {_holds_key()}"
    )


def attempts_since(d: Dialect) -> str:
    """How many attempts a pipeline has made since an instant (skipped runs made none)."""
    return (
        f"SELECT count(*) FROM {d.table(RUNS)} WHERE {_own(d)} AND pipeline = {d.param} "
        f"AND started_at >= {d.param} AND status <> 'skipped'"
    )
