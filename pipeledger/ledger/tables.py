"""The run ledger's tables, as versioned migrations for both dialects (the ``ledger``
component: in the warehouse by default, or in a database of its own).

Each table is described once (:class:`LedgerTable`): its columns, constraints, indexes and
the foreign key that ties it to its parent. The migrations, the column lists the writers
bind (:mod:`pipeledger.ledger.sql`) and the SQLite rebuild of migration 4 derive from it.

Foreign keys (migration 4): every run belongs to a registered pipeline, and every task,
audit event (when it names a run), dataset snapshot and check result to a run. Writers
keep that order: a pipeline's registration commits with its run's ``running`` row, a run
whose pipeline never registered (``Ledger().run("x")``) first adds a placeholder row for
it (version ``unregistered``; a registration later fills it in), the spool replays in the
order it was written, and ``ledger prune`` deletes a run's records before the run.

Idempotency (migration 5): a run may carry an ``idempotency_key``; a partial unique index
lets one run of a pipeline hold a key while it is running or after it succeeded (a failed
run's key may be taken again). A cancel request (``pipeledger cancel``) is a row in
``run_cancellations``, which the run's heartbeat reads.

Migration 6 adds the daily rollup of the runs (:mod:`pipeledger.ledger.rollup`), kept by
triggers on ``pipeline_runs``: a later migration that rebuilds that table on SQLite (as
migration 4 does) must create them again. Columns a migration adds to a table described
here are listed in its ``added``, so that the table's first migration does not make them.

Tenants (migrations 13 and 16): every row carries a ``tenant``, which leads every index
(13) and every primary key, unique constraint and foreign key (16): a pipeline's name, a
run's id, a rollup's day are each unique within a tenant, and a writer's ``ON CONFLICT``
names the tenant first (:attr:`LedgerTable.conflict`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from pipeledger.common.columns import TableName
from pipeledger.ledger import rollup
from pipeledger.warehouse.dialect import Dialect, quote
from pipeledger.warehouse.migrations import SCHEMA, Component, Migration, create_schema

UNREGISTERED = "unregistered"  # the version of a pipeline known only from its runs


def stored_datetime(value: object) -> datetime | None:
    """A timestamp as the ledger's database returns it: PostgreSQL gives a datetime, SQLite
    the ISO text it was stored as."""
    if value is None or isinstance(value, datetime):
        return value
    return datetime.fromisoformat(str(value))


def table(name: str) -> TableName:
    return TableName(SCHEMA, name)


PIPELINES = table("pipelines")
RUNS = table("pipeline_runs")
TASKS = table("task_runs")
AUDIT = table("audit_events")
SNAPSHOTS = table("dataset_snapshots")
DEPENDENCIES = table("pipeline_dependencies")
QUALITY = table("quality_results")
DAYS = table("pipeline_days")
TASK_DAYS = table("task_days")
ALERTS = table("alerts")
BREACHES = table("sla_breaches")
RECONCILIATIONS = table("reconciliations")
CANCELLATIONS = table("run_cancellations")
QUEUES = table("run_queues")
SLOTS = table("run_slots")
ACCESS = table("access_reads")
# the states in which a run holds its idempotency key (a key of any other may be reused)
HOLDS_KEY = ("running", "success", "partial")


@dataclass(frozen=True)
class ForeignKey:
    column: str
    parent: TableName
    parent_column: str
    on_delete: str = ""  # what deleting the parent row does (" ON DELETE CASCADE")


# the migration from which every key leads with the tenant: primary keys, unique
# constraints and foreign keys (the tenant and the column, to the parent's tenant and key)
TENANT_KEYS = 16
# what the failures' partial index holds since migration 17 (after the tenant)
FAILURE_COLUMNS = "pipeline, started_at, run_id, status, trigger_type, ended_at"


def _led(columns: tuple[str, ...], version: int | None) -> tuple[str, ...]:
    """``columns`` as a key of migration ``version`` (None: now) names them: the tenant
    first from migration 16 on."""
    if (version is not None and version < TENANT_KEYS) or columns[0] == "tenant":
        return columns
    return ("tenant", *columns)


@dataclass(frozen=True)
class LedgerTable:
    """One ledger table. Column types may name ``{ts}`` (an instant), ``{json}`` and
    ``{big}`` (a 64-bit integer): each dialect's own type of that kind. ``key`` (the
    primary key) and ``unique`` (unique constraints) are as the table was first made;
    from migration 16 on each leads with the tenant, and so does the foreign key."""

    name: TableName
    columns: tuple[tuple[str, str], ...]
    key: tuple[str, ...]
    unique: tuple[tuple[str, ...], ...] = ()
    indexes: tuple[tuple[str, str], ...] = ()  # (index name, indexed columns)
    foreign_key: ForeignKey | None = None
    added: tuple[tuple[int, str, str], ...] = ()  # (migration, name, type) added later

    def columns_at(self, version: int | None = None) -> tuple[tuple[str, str], ...]:
        """The columns as of migration ``version`` (None: now). A migration builds the
        table it knows, so that the later ones that add columns still apply."""
        later = tuple((n, k) for v, n, k in self.added if version is None or v <= version)
        return self.columns + later

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.columns_at())

    @property
    def json_columns(self) -> frozenset[str]:
        return frozenset(name for name, kind in self.columns_at() if "{json}" in kind)

    @property
    def conflict(self) -> str:
        """The primary key's columns as a writer's ``ON CONFLICT (...)`` names them."""
        return ", ".join(self.primary_key())

    def primary_key(self, version: int | None = None) -> tuple[str, ...]:
        return _led(self.key, version)

    def uniques(self, version: int | None = None) -> tuple[tuple[str, ...], ...]:
        return tuple(_led(columns, version) for columns in self.unique)

    def references(self, d: Dialect, version: int | None = None) -> str:
        """The foreign key's clause as of migration ``version`` (None: now)."""
        key = self.foreign_key
        assert key is not None
        column, parent = _led((key.column,), version), _led((key.parent_column,), version)
        return (
            f"FOREIGN KEY ({', '.join(column)}) REFERENCES {d.table(key.parent)} "
            f"({', '.join(parent)}){key.on_delete}"
        )

    def body(self, d: Dialect, version: int | None = None, tenant: str = "") -> str:
        """The columns and keys as of migration ``version`` (None: now); ``tenant``: the
        tenant column's type, for a table made again with it (migration 13 added it to
        the tables that lack it among their columns). A key of one column is declared on
        the column, a longer one as a constraint (as the first migrations made them)."""
        types = {"ts": "timestamptz", "json": d.json_type, "big": d.int64_type}
        key = self.primary_key(version)
        parts = [
            f"{name} {kind.format(**types)}" + (" PRIMARY KEY" if key == (name,) else "")
            for name, kind in self.columns_at(version)
        ]
        if tenant:
            parts.append(f"tenant {tenant}")
        if len(key) > 1:
            parts.append(f"PRIMARY KEY ({', '.join(key)})")
        parts += [f"UNIQUE ({', '.join(columns)})" for columns in self.uniques(version)]
        return ", ".join(parts)

    def create(self, d: Dialect, version: int) -> str:
        """The table as migration ``version`` first makes it."""
        return f"CREATE TABLE IF NOT EXISTS {d.table(self.name)} ({self.body(d, version)})"

    def add_columns(self, d: Dialect, version: int) -> list[str]:
        """Migration ``version``'s new columns."""
        types = {"ts": "timestamptz", "json": d.json_type, "big": d.int64_type}
        return [
            f"ALTER TABLE {d.table(self.name)} ADD COLUMN {name} {kind.format(**types)}"
            for v, name, kind in self.added
            if v == version
        ]

    def index(self, d: Dialect, name: str) -> str:
        columns = dict(self.indexes)[name]
        return f"CREATE INDEX IF NOT EXISTS {quote(name)} ON {d.table(self.name)} ({columns})"


_RUN_ID = ForeignKey("run_id", RUNS, "run_id")

PIPELINE_TABLE = LedgerTable(
    PIPELINES,
    columns=(
        ("name", "text"),
        ("version", "text NOT NULL"),
        ("description", "text"),
        ("owner", "text"),
        ("source_system", "text"),
        ("target_system", "text"),
        ("freshness_sla_s", "bigint"),
        ("created_at", "{ts} NOT NULL"),
        ("updated_at", "{ts} NOT NULL"),
    ),
    key=("name",),
    added=((6, "max_duration_s", "{big}"),),
)
RUN_TABLE = LedgerTable(
    RUNS,
    columns=(
        ("run_id", "text"),
        ("logical_run_id", "text NOT NULL"),
        ("attempt", "integer NOT NULL"),
        ("parent_run_id", "text"),
        ("correlation_id", "text"),
        ("pipeline", "text NOT NULL"),
        ("trigger_type", "text NOT NULL"),
        ("triggered_by", "text"),
        ("environment", "text"),
        ("status", "text NOT NULL"),
        ("started_at", "{ts} NOT NULL"),
        ("ended_at", "{ts}"),
        ("duration_ms", "{big}"),
        ("rows_read", "{big}"),
        ("rows_inserted", "{big}"),
        ("rows_updated", "{big}"),
        ("rows_unchanged", "{big}"),
        ("rows_rejected", "{big}"),
        ("bytes_read", "{big}"),
        ("watermark_before", "text"),
        ("watermark_after", "text"),
        ("data_interval_start", "{ts}"),
        ("data_interval_end", "{ts}"),
        ("error_code", "text"),
        ("error_message", "text"),
        ("code_version", "text"),
        ("host", "text"),
        ("pid", "integer"),
        ("heartbeat_at", "{ts}"),
        ("lease_expires_at", "{ts}"),
        ("extra", "{json}"),
    ),
    key=("run_id",),
    unique=(("logical_run_id", "attempt"),),
    indexes=(
        ("pipeline_runs_pipeline_started", "pipeline, started_at DESC"),
        ("pipeline_runs_status", "status"),
        ("pipeline_runs_started", "started_at"),
    ),
    foreign_key=ForeignKey("pipeline", PIPELINES, "name"),
    added=((5, "idempotency_key", "text"), (7, "rows_deleted", "{big}")),
)
TASK_TABLE = LedgerTable(
    TASKS,
    columns=(
        ("task_run_id", "text"),
        ("run_id", "text NOT NULL"),
        ("name", "text NOT NULL"),
        ("seq", "integer NOT NULL"),
        ("status", "text NOT NULL"),
        ("started_at", "{ts} NOT NULL"),
        ("ended_at", "{ts}"),
        ("duration_ms", "{big}"),
        ("rows_in", "{big}"),
        ("rows_out", "{big}"),
        ("rows_rejected", "{big}"),
        ("bytes", "{big}"),
        ("error_message", "text"),
    ),
    key=("task_run_id",),
    indexes=(("task_runs_run", "run_id"), ("task_runs_started", "started_at")),
    foreign_key=_RUN_ID,
)
AUDIT_TABLE = LedgerTable(
    AUDIT,
    columns=(
        ("event_id", "text"),
        ("run_id", "text"),
        ("pipeline", "text"),
        ("event_type", "text NOT NULL"),
        ("target_table", "text"),
        ("record_count", "{big}"),
        ("old_values", "{json}"),
        ("new_values", "{json}"),
        ("metadata", "{json}"),
        ("created_at", "{ts} NOT NULL"),
    ),
    key=("event_id",),
    indexes=(("audit_events_target", "target_table, created_at"), ("audit_events_run", "run_id")),
    foreign_key=_RUN_ID,  # run_id may be NULL: an event about no run
)
SNAPSHOT_TABLE = LedgerTable(
    SNAPSHOTS,
    columns=(
        ("run_id", "text NOT NULL"),
        ("target_table", "text NOT NULL"),
        ("row_count", "{big} NOT NULL"),
        ("max_cursor", "text"),
        ("schema_fingerprint", "text NOT NULL"),
        ("columns", "{json} NOT NULL"),
        ("created_at", "{ts} NOT NULL"),
    ),
    key=("run_id", "target_table"),
    indexes=(("dataset_snapshots_target", "target_table, created_at"),),
    foreign_key=_RUN_ID,
)
DEPENDENCY_TABLE = LedgerTable(
    DEPENDENCIES,
    columns=(
        ("upstream", "text NOT NULL"),
        ("downstream", "text NOT NULL"),
        ("created_at", "{ts} NOT NULL"),
    ),
    key=("upstream", "downstream"),
)
QUALITY_TABLE = LedgerTable(
    QUALITY,
    columns=(
        ("result_id", "text"),
        ("run_id", "text NOT NULL"),
        ("pipeline", "text NOT NULL"),
        ("target_table", "text"),
        ("check_name", "text NOT NULL"),
        ("kind", "text NOT NULL"),
        ("level", "text NOT NULL"),
        ("status", "text NOT NULL"),
        ("observed", "text"),
        ("expected", "text"),
        ("failing_rows", "{big}"),
        ("sample_keys", "{json}"),
        ("created_at", "{ts} NOT NULL"),
    ),
    key=("result_id",),
    indexes=(
        ("quality_results_run", "run_id"),
        ("quality_results_pipeline", "pipeline, created_at"),
    ),
    foreign_key=_RUN_ID,
)

DAY_TABLE = LedgerTable(
    DAYS,
    columns=(
        ("pipeline", "text NOT NULL"),
        ("day", "text NOT NULL"),
        ("finished", "{big} NOT NULL"),
        ("succeeded", "{big} NOT NULL"),
        ("success_rows", "{big} NOT NULL"),
        ("samples", "{big} NOT NULL"),
        ("sample_rows", "{big} NOT NULL"),
        ("sample_squares", "numeric NOT NULL"),
    ),
    key=("pipeline", "day"),
)
TASK_DAY_TABLE = LedgerTable(
    TASK_DAYS,
    columns=(
        ("pipeline", "text NOT NULL"),
        ("task", "text NOT NULL"),
        ("day", "text NOT NULL"),
        ("runs", "{big} NOT NULL"),
        ("duration_n", "{big} NOT NULL"),
        ("duration_sum", "{big} NOT NULL"),
        ("duration_max", "{big}"),
        ("rows_out_n", "{big} NOT NULL"),
        ("rows_out_sum", "{big} NOT NULL"),
    ),
    key=("pipeline", "task", "day"),
    indexes=(("task_days_day", "day"),),
)
ALERT_TABLE = LedgerTable(
    ALERTS,
    columns=(
        ("alert_key", "text NOT NULL"),
        ("webhook", "text NOT NULL"),
        ("event", "text NOT NULL"),
        ("pipeline", "text"),
        ("run_id", "text"),
        ("reason", "text NOT NULL"),
        ("payload", "{json} NOT NULL"),
        ("status", "text NOT NULL"),
        ("attempts", "integer NOT NULL"),
        ("created_at", "{ts} NOT NULL"),
        ("next_attempt_at", "{ts} NOT NULL"),
        ("last_attempt_at", "{ts}"),
        ("delivered_at", "{ts}"),
        ("last_error", "text"),
    ),
    key=("alert_key", "webhook"),
    indexes=(("alerts_due", "status, next_attempt_at"), ("alerts_created", "created_at")),
)
BREACH_TABLE = LedgerTable(
    BREACHES,
    columns=(
        ("breach_id", "text"),
        ("pipeline", "text NOT NULL"),
        ("kind", "text NOT NULL"),
        ("run_id", "text"),
        ("due_at", "{ts} NOT NULL"),
        ("detected_at", "{ts} NOT NULL"),
        ("ended_at", "{ts}"),
        ("sla_s", "{big} NOT NULL"),
        ("reason", "text NOT NULL"),
    ),
    key=("breach_id",),
    indexes=(("sla_breaches_due", "due_at"),),
)
RECONCILIATION_TABLE = LedgerTable(
    RECONCILIATIONS,
    columns=(
        ("run_id", "text"),
        ("pipeline", "text NOT NULL"),
        ("target_table", "text NOT NULL"),
        ("status", "text NOT NULL"),
        ("range_start", "text"),
        ("range_end", "text"),
        ("window_by", "text NOT NULL"),
        ("windows_compared", "{big} NOT NULL"),
        ("windows_differing", "{big} NOT NULL"),
        ("source_rows", "{big} NOT NULL"),
        ("target_rows", "{big} NOT NULL"),
        ("missing_rows", "{big} NOT NULL"),
        ("extra_rows", "{big} NOT NULL"),
        ("changed_rows", "{big} NOT NULL"),
        ("windows", "{json} NOT NULL"),
        ("created_at", "{ts} NOT NULL"),
    ),
    key=("run_id",),
    indexes=(("reconciliations_pipeline", "pipeline, created_at"),),
    foreign_key=_RUN_ID,
)

CANCEL_TABLE = LedgerTable(
    CANCELLATIONS,
    columns=(
        ("run_id", "text"),
        ("requested_at", "{ts} NOT NULL"),
        ("requested_by", "text"),
        ("reason", "text"),
    ),
    key=("run_id",),
    foreign_key=ForeignKey("run_id", RUNS, "run_id", " ON DELETE CASCADE"),
)

# Migration 11 (:mod:`pipeledger.ledger.queue`): one row per tenant, which the transaction
# deciding a slot updates first (a row lock on PostgreSQL; SQLite's write lock anyway), and
# one row per run that took a slot or waits for one under max_concurrent_runs.
QUEUE_TABLE = LedgerTable(
    QUEUES,
    columns=(("tenant", "text"), ("decided_at", "{ts} NOT NULL")),
    key=("tenant",),
)
SLOT_TABLE = LedgerTable(
    SLOTS,
    columns=(
        ("run_id", "text"),
        ("tenant", "text NOT NULL"),
        ("pipeline", "text NOT NULL"),
        ("queued_at", "{ts} NOT NULL"),
    ),
    key=("run_id",),
    indexes=(("run_slots_tenant", "tenant, queued_at, run_id"),),
)

# Migration 14 (:mod:`pipeledger.ledger.access`): who read the ledger, one row per UTC
# minute and reader, with how many reads it made in that minute. Not an audit_events row:
# those belong to runs (and go with them when a run is pruned), while a read belongs to no
# run and arrives every few seconds from a polling dashboard. Every key column is NOT NULL
# ('' for "none": no pipeline, no database role, no client address) so that the primary
# key, which leads with the tenant and the minute, is the upsert's conflict target.
ACCESS_KEY = ("tenant", "minute", "via", "what", "pipeline", "db_role", "os_user", "client")
ACCESS_TABLE = LedgerTable(
    ACCESS,
    columns=(
        ("tenant", "text NOT NULL"),
        ("minute", "{ts} NOT NULL"),
        ("via", "text NOT NULL"),
        ("what", "text NOT NULL"),
        ("pipeline", "text NOT NULL"),
        ("db_role", "text NOT NULL"),
        ("os_user", "text NOT NULL"),
        ("client", "text NOT NULL"),
        ("reads", "{big} NOT NULL"),
        ("first_at", "{ts} NOT NULL"),
        ("last_at", "{ts} NOT NULL"),
    ),
    key=ACCESS_KEY,
)

# the tables with a foreign key, parents before children (migration 4 rebuilds them so)
CHILDREN = (RUN_TABLE, TASK_TABLE, AUDIT_TABLE, SNAPSHOT_TABLE, QUALITY_TABLE)


def _ledger(d: Dialect) -> list[str]:
    return [
        PIPELINE_TABLE.create(d, 1),
        RUN_TABLE.create(d, 1),
        *(RUN_TABLE.index(d, name) for name, _ in RUN_TABLE.indexes),
        TASK_TABLE.create(d, 1),
        TASK_TABLE.index(d, "task_runs_run"),
        AUDIT_TABLE.create(d, 1),
        *(AUDIT_TABLE.index(d, name) for name, _ in AUDIT_TABLE.indexes),
        SNAPSHOT_TABLE.create(d, 1),
        SNAPSHOT_TABLE.index(d, "dataset_snapshots_target"),
        DEPENDENCY_TABLE.create(d, 1),
    ]


def _quality(d: Dialect) -> list[str]:
    return [
        QUALITY_TABLE.create(d, 2),
        *(QUALITY_TABLE.index(d, n) for n, _ in QUALITY_TABLE.indexes),
    ]


def ledger_migrations(d: Dialect) -> list[Migration]:
    """The ledger's schema changes, applied in order, each once."""
    return [
        (
            1,
            "run ledger: pipelines, runs, tasks, audit, snapshots, dependencies",
            [*create_schema(d), *_ledger(d)],
        ),
        (2, "quality gate results per run and check", _quality(d)),
        (3, "task trends by time", [TASK_TABLE.index(d, "task_runs_started")]),
        (
            4,
            "foreign keys: runs to pipelines; tasks, events, snapshots and results to runs",
            foreign_keys(d),
        ),
        (5, "idempotency keys of runs; cancel requests", _operate(d)),
        (
            6,
            "daily rollups of the runs (kept by triggers), alerts, SLA breaches, max_duration",
            operating(d),
        ),
        (7, "rows deleted per run", RUN_TABLE.add_columns(d, 7)),
        (8, "reconciliations: what each reconcile run found", _reconciliations(d)),
        (9, "indexes for reading: runs by DAG run, runs by time with what windows sum", _reads(d)),
        (11, "run slots and queues per tenant (max_concurrent_runs)", _slots(d)),
        (12, "reads at scale: task rollup by day, runs' failures, histories, durations", _scale(d)),
        (13, "tenants: a tenant on every row and first in its indexes; row security", tenants(d)),
        (14, "access audit: reads of the ledger per minute and reader", _access(d)),
        (15, "reads at scale: each pipeline's latest scheduled run", _scheduled_reads(d)),
        (
            TENANT_KEYS,
            "tenant keys: every primary key, unique constraint and foreign key leads with it",
            tenant_keys(d),
        ),
        (17, "reads at scale: the runs' failures with what sla's recoveries read", _failures(d)),
    ]


def _failures(d: Dialect) -> list[str]:
    """Migration 17: the failures' partial index holds every column ``sla`` reads of them
    (:func:`pipeledger.ledger.reads.sla.transitions_sql`), so the read of a window's
    failures never visits the table; the probe of a pipeline's latest failure reads it
    as before (its leading columns)."""
    runs = d.table(RUNS)
    failed = ", ".join(f"'{s}'" for s in rollup.FAILURES)
    return [
        f"DROP INDEX IF EXISTS {_index_name(d, RUNS, 'pipeline_runs_failures')}",
        f"CREATE INDEX {quote('pipeline_runs_failures')} ON {runs} (tenant, {FAILURE_COLUMNS}) "
        f"WHERE status IN ({failed})",
    ]


def _slots(d: Dialect) -> list[str]:
    """Migration 11: slots and queues; the rollup's triggers no longer count queued and
    rejected runs as finished."""
    return [
        QUEUE_TABLE.create(d, 11),
        SLOT_TABLE.create(d, 11),
        SLOT_TABLE.index(d, "run_slots_tenant"),
        *rollup.recreate_triggers(d, SCHEMA, d.table(DAYS), d.table(RUNS)),
    ]


def _scale(d: Dialect) -> list[str]:
    """Migration 12: what the dashboard and ``sla``/``tasks`` read at 100k runs of 500
    pipelines without reading every run. Each pipeline's latest failure (``status``: a
    partial index, so the probe never walks the successes); its runs in start order with
    the columns the recovery episodes need (``sla``: an index-only scan, no sort); its
    successes by duration (``sla``'s p95: the top 5% read from the end of the index); and
    the daily rollup of the tasks (``tasks``), kept by a trigger like the runs' one."""
    runs, tasks, task_days = d.table(RUNS), d.table(TASKS), d.table(TASK_DAYS)
    failed = ", ".join(f"'{s}'" for s in rollup.FAILURES)
    return [
        f"CREATE INDEX IF NOT EXISTS {quote('pipeline_runs_failures')} ON {runs} "
        f"(pipeline, started_at, run_id) WHERE status IN ({failed})",
        f"CREATE INDEX IF NOT EXISTS {quote('pipeline_runs_history')} ON {runs} "
        "(pipeline, started_at, run_id, status, trigger_type, ended_at)",
        f"CREATE INDEX IF NOT EXISTS {quote('pipeline_runs_durations')} ON {runs} "
        "(pipeline, status, duration_ms, started_at, trigger_type)",
        TASK_DAY_TABLE.create(d, 12),
        *(TASK_DAY_TABLE.index(d, name) for name, _ in TASK_DAY_TABLE.indexes),
        rollup.fill_tasks(d, task_days, tasks, runs),
        *rollup.task_triggers(d, SCHEMA, task_days, tasks, runs),
    ]


def _reads(d: Dialect) -> list[str]:
    """Migration 9: what the dashboard's questions read without a scan of every run. The
    runs of one DAG run (its correlation id); and the runs of a time window (the 7- and
    30-day reliability, the runs per hour) read from an index that holds every column
    those sums need, so they never visit the table. Not among RUN_TABLE's indexes:
    migration 4 rebuilds those on SQLite, before this."""
    runs = d.table(RUNS)
    window = "started_at, pipeline, status, trigger_type, run_id, ended_at, duration_ms"
    return [
        f"CREATE INDEX IF NOT EXISTS {quote('pipeline_runs_correlation')} ON {runs} "
        "(correlation_id) WHERE correlation_id IS NOT NULL",
        f"CREATE INDEX IF NOT EXISTS {quote('pipeline_runs_window')} ON {runs} ({window})",
    ]


def operating(d: Dialect) -> list[str]:
    """Migration 6: what status, alerts and SLAs need. The rollup starts from the runs
    already recorded; at most one freshness breach per pipeline is open at a time."""
    days, runs = d.table(DAYS), d.table(RUNS)
    return [
        DAY_TABLE.create(d, 6),
        rollup.fill(d, days, runs),
        *rollup.triggers(d, SCHEMA, days, runs),
        # not among RUN_TABLE's indexes: migration 4 rebuilds those on SQLite, before this
        f"CREATE INDEX IF NOT EXISTS {quote('pipeline_runs_ended')} ON {runs} (ended_at)",
        ALERT_TABLE.create(d, 6),
        *(ALERT_TABLE.index(d, name) for name, _ in ALERT_TABLE.indexes),
        BREACH_TABLE.create(d, 6),
        BREACH_TABLE.index(d, "sla_breaches_due"),
        f"CREATE UNIQUE INDEX IF NOT EXISTS {quote('sla_breaches_open')} "
        f"ON {d.table(BREACHES)} (pipeline, kind) WHERE ended_at IS NULL",
        *PIPELINE_TABLE.add_columns(d, 6),
    ]


def _reconciliations(d: Dialect) -> list[str]:
    """Migration 8 (5 to 7 are other components' numbers, assigned ahead): one row per
    reconcile run, which is a run of its pipeline (``trigger_type = 'reconcile'``)."""
    t = RECONCILIATION_TABLE
    return [
        f"CREATE TABLE IF NOT EXISTS {d.table(t.name)} ({t.body(d, 8)}, {t.references(d, 8)})",
        *(t.index(d, name) for name, _ in t.indexes),
    ]


def _operate(d: Dialect) -> list[str]:
    """Migration 5. A cancel request goes with its run when ``ledger prune`` deletes it."""
    holds = ", ".join(f"'{status}'" for status in HOLDS_KEY)
    return [
        *RUN_TABLE.add_columns(d, 5),
        f"CREATE UNIQUE INDEX IF NOT EXISTS pipeline_runs_idempotency ON {d.table(RUNS)} "
        f"(pipeline, idempotency_key) WHERE idempotency_key IS NOT NULL AND status IN ({holds})",
        f"CREATE TABLE IF NOT EXISTS {d.table(CANCELLATIONS)} ({CANCEL_TABLE.body(d, 5)}, "
        f"{CANCEL_TABLE.references(d, 5)})",
    ]


def foreign_keys(d: Dialect) -> list[str]:
    """Migration 4. Rows older data leaves without a parent are settled first, so that the
    migration never fails on them: a run whose pipeline never registered gets a placeholder
    pipeline (nothing is lost); tasks, snapshots, check results and audit events of a run
    that no longer exists are deleted, as ``ledger prune`` deletes them with their run
    (``prune`` before this release left check results behind)."""
    statements = _settle_orphans(d)
    for child in CHILDREN:
        if d.alters_constraints:
            statements += _add_foreign_key(d, child)
        else:  # SQLite adds a constraint only by rebuilding the table
            statements += _rebuild_with_foreign_key(d, child)
    return statements


def _settle_orphans(d: Dialect) -> list[str]:
    runs, pipelines = d.table(RUNS), d.table(PIPELINES)
    statements = [
        f"INSERT INTO {pipelines} (name, version, created_at, updated_at) "
        f"SELECT pipeline, '{UNREGISTERED}', min(started_at), min(started_at) FROM {runs} "
        f"WHERE pipeline NOT IN (SELECT name FROM {pipelines}) GROUP BY pipeline"
    ]
    for child in CHILDREN[1:]:
        known = "run_id IS NOT NULL AND " if child is AUDIT_TABLE else ""
        statements.append(
            f"DELETE FROM {d.table(child.name)} "
            f"WHERE {known}run_id NOT IN (SELECT run_id FROM {runs})"
        )
    return statements


def _constraint(child: LedgerTable) -> str:
    assert child.foreign_key is not None
    return quote(f"{child.name.table}_{child.foreign_key.column}_fkey")


def _add_foreign_key(d: Dialect, child: LedgerTable) -> list[str]:
    """Added unchecked, then validated: the orphans are gone by then."""
    name, table = _constraint(child), d.table(child.name)
    return [
        f"ALTER TABLE {table} ADD CONSTRAINT {name} {child.references(d, 4)} NOT VALID",
        f"ALTER TABLE {table} VALIDATE CONSTRAINT {name}",
    ]


def _rebuild_with_foreign_key(d: Dialect, child: LedgerTable) -> list[str]:
    """SQLite: a new table with the constraint, the rows copied, the old one dropped, the
    new one renamed into place and the indexes made again. A parent is rebuilt before its
    children reference it, so dropping it never meets a constraint."""
    table = d.table(child.name)
    rebuilt = d.table(TableName(SCHEMA, f"{child.name.table}_rebuilt"))
    columns = ", ".join(name for name, _ in child.columns_at(4))
    return [
        f"CREATE TABLE {rebuilt} ({child.body(d, 4)}, {child.references(d, 4)})",
        f"INSERT INTO {rebuilt} ({columns}) SELECT {columns} FROM {table}",
        f"DROP TABLE {table}",
        f"ALTER TABLE {rebuilt} RENAME TO {table}",
        *(child.index(d, name) for name, _ in child.indexes),
    ]


# every ledger table: migration 13 gives each a tenant (grant-reader grants them to readers;
# tests/ledger/test_tenants.py fails if the ledger's database holds a table not listed)
TENANT_TABLES = (
    PIPELINE_TABLE,
    RUN_TABLE,
    TASK_TABLE,
    AUDIT_TABLE,
    SNAPSHOT_TABLE,
    DEPENDENCY_TABLE,
    QUALITY_TABLE,
    DAY_TABLE,
    TASK_DAY_TABLE,
    ALERT_TABLE,
    BREACH_TABLE,
    RECONCILIATION_TABLE,
    CANCEL_TABLE,
    QUEUE_TABLE,
    SLOT_TABLE,
    ACCESS_TABLE,  # migration 14 makes it per tenant (13 runs before it exists)
)
# the tables migration 11 made with a tenant of their own (the queue's, always given)
_TENANT_SINCE_11 = (QUEUE_TABLE, SLOT_TABLE)
TENANT_ROLE_PREFIX = "pipeledger_tenant_"
# what the writer's sessions declare (the PostgreSQL adapter's ``_tenant_setting``),
# evaluated once per query (an uncorrelated sub-select: the planner probes the tenant
# indexes with it instead of filtering every row)
_SETTING = "(SELECT current_setting('pipeledger.tenant', true))"
# the tenants whose reader role the current role is a member of: evaluated once per query
# (an uncorrelated sub-select), compared in the column's collation (a role name's is "C",
# which would keep the planner off the tenant indexes)
_READABLE = (
    "tenant = ANY (ARRAY(SELECT substr(r.rolname::text, "
    f'{len(TENANT_ROLE_PREFIX) + 1}) COLLATE "default" FROM pg_catalog.pg_roles AS r '
    f"WHERE r.rolname LIKE '{TENANT_ROLE_PREFIX.replace('_', chr(92) + '_')}%' "
    "AND pg_has_role(current_user, r.oid, 'MEMBER')))"
)
# the indexes of migrations 5, 6, 9 and 12, which the tables above do not list:
# (name, table, unique, columns after the tenant, predicate)
_LATER_INDEXES: tuple[tuple[str, TableName, bool, str, str], ...] = (
    (
        "pipeline_runs_idempotency",
        RUNS,
        True,
        "pipeline, idempotency_key",
        "idempotency_key IS NOT NULL AND status IN ({holds})",
    ),
    ("pipeline_runs_ended", RUNS, False, "ended_at", ""),
    ("sla_breaches_open", BREACHES, True, "pipeline, kind", "ended_at IS NULL"),
    ("pipeline_runs_correlation", RUNS, False, "correlation_id", "correlation_id IS NOT NULL"),
    (
        "pipeline_runs_window",
        RUNS,
        False,
        "started_at, pipeline, status, trigger_type, run_id, ended_at, duration_ms",
        "",
    ),
    ("pipeline_runs_failures", RUNS, False, "pipeline, started_at, run_id", "status IN ({failed})"),
    (
        "pipeline_runs_history",
        RUNS,
        False,
        "pipeline, started_at, run_id, status, trigger_type, ended_at",
        "",
    ),
    (
        "pipeline_runs_durations",
        RUNS,
        False,
        "pipeline, status, duration_ms, started_at, trigger_type",
        "",
    ),
)


def tenants(d: Dialect) -> list[str]:
    """Migration 13: every ledger row belongs to a tenant; the rows already recorded to
    'default' (the queue's tables of migration 11 had their tenant already). Every index
    is made again with the tenant first, so that one tenant's questions read only its part
    of each index; the rollups' triggers are made again to give each day's row its run's
    tenant. The primary keys stayed as they were until migration 16 (:func:`tenant_keys`)
    led them, and the foreign keys and the writers' ``ON CONFLICT``, with the tenant too.

    PostgreSQL: a new row's tenant is the one its writer's session declares; row-level
    security, enabled and forced (the owner too), lets a role that may write the ledger
    (the migrator, or the runner role it granted the tables to) see and write only the
    declared tenant's rows, and any other role only the rows of the tenants whose reader
    role (``pipeledger_tenant_<T>``, from ``pipeledger ledger grant-reader``) it is a
    member of: a reader's own settings count for nothing.
    SQLite has no roles: the adapter filters (``adapters.sqlite._scope_to_tenant``)."""
    statements: list[str] = []
    for t in TENANT_TABLES:
        if t is ACCESS_TABLE:
            continue  # made by migration 14, per tenant from the start
        name = d.table(t.name)
        if t not in _TENANT_SINCE_11:
            statements.append(
                f"ALTER TABLE {name} ADD COLUMN tenant text NOT NULL DEFAULT 'default'"
            )
        if d.row_security:
            statements += _row_security(name)
        for index, columns in t.indexes:
            if columns.startswith("tenant,"):
                continue  # led by the tenant already (run_slots_tenant)
            statements += [f"DROP INDEX IF EXISTS {_index_name(d, t.name, index)}"]
            statements.append(f"CREATE INDEX {quote(index)} ON {name} (tenant, {columns})")
    holds = ", ".join(f"'{status}'" for status in HOLDS_KEY)
    failed = ", ".join(f"'{status}'" for status in rollup.FAILURES)
    for index, on, unique, columns, where in _LATER_INDEXES:
        kind = "UNIQUE INDEX" if unique else "INDEX"
        predicate = f" WHERE {where.format(holds=holds, failed=failed)}" if where else ""
        statements += [
            f"DROP INDEX IF EXISTS {_index_name(d, on, index)}",
            f"CREATE {kind} {quote(index)} ON {d.table(on)} (tenant, {columns}){predicate}",
        ]
    days, runs, tasks, task_days = (d.table(n) for n in (DAYS, RUNS, TASKS, TASK_DAYS))
    statements += rollup.recreate_triggers(d, SCHEMA, days, runs, tenant=True)
    statements += rollup.recreate_task_triggers(d, SCHEMA, task_days, tasks, runs)
    if d.row_security:
        statements.append(SECURITY_INVOKER_VIEWS)
    return statements


def _index_name(d: Dialect, on: TableName, index: str) -> str:
    """An index as DROP INDEX names it: in the table's schema on PostgreSQL."""
    return f"{quote(on.schema)}.{quote(index)}" if d.has_schemas and on.schema else quote(index)


def _access(d: Dialect) -> list[str]:
    """Migration 14: the access audit's table (:mod:`pipeledger.ledger.access`), per tenant
    as every ledger table since 13. Its rows are written by readers too (a read records
    itself), so on PostgreSQL a writer is a role that may write the runs, not this table:
    a reader granted the audit's INSERT and UPDATE (README) records reads of the tenants
    whose reader role it is a member of, and sees only those, whatever it declares."""
    statements = [ACCESS_TABLE.create(d, 14)]
    if d.row_security:
        name = d.table(ACCESS)
        statements += _row_security(name, writer_of=d.table(RUNS))
        statements += [
            f"CREATE POLICY tenant_recorder ON {name} FOR INSERT WITH CHECK ({_READABLE})",
            f"CREATE POLICY tenant_recount ON {name} FOR UPDATE USING ({_READABLE}) "
            f"WITH CHECK ({_READABLE})",
        ]
    return statements


def _row_security(table: str, writer_of: str | None = None) -> list[str]:
    """The writer policy is for every role that may write the table (INSERT, the grant
    pipeledger's runs need): the migrator, and a runner role it granted the ledger's
    tables to (README, PostgreSQL notes). Such a role is trusted with the tenant it
    declares (it could write any tenant's rows as well); a role that may only read it,
    as ``grant-reader`` makes them, is held by the reader policy, which no setting moves.
    Both tests are uncorrelated sub-selects: evaluated once per query, the tenant probes
    the indexes."""
    writer = f"(SELECT has_table_privilege(current_user, '{writer_of or table}', 'INSERT'))"
    declared = f"tenant = {_SETTING} AND {writer}"
    return [
        # a row written by a session that declared nothing (another tool) is 'default''s
        f"ALTER TABLE {table} ALTER COLUMN tenant SET DEFAULT "
        "coalesce(nullif(current_setting('pipeledger.tenant', true), ''), 'default')",
        f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY",
        f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY",
        f"CREATE POLICY tenant_writer ON {table} USING ({declared}) WITH CHECK ({declared})",
        f"CREATE POLICY tenant_reader ON {table} FOR SELECT USING ({_READABLE})",
    ]


# a plain view reads with its owner's rights, so its owner's policies: every view in the
# ledger's schema reads with the rights of whoever queries it (PostgreSQL 15 and later)
SECURITY_INVOKER_VIEWS = (
    "DO $$ DECLARE v record; BEGIN "
    "FOR v IN SELECT c.oid::regclass AS name FROM pg_catalog.pg_class AS c "
    f"JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace "
    f"WHERE n.nspname = '{SCHEMA}' AND c.relkind = 'v' "
    # the regclass prints quoted and schema-qualified (no % here: it would read as a parameter)
    "LOOP EXECUTE 'ALTER VIEW ' || v.name::text || ' SET (security_invoker = true)'; "
    "END LOOP; END $$"
)


LEDGER = Component("ledger", ledger_migrations, RUNS)


def _scheduled_reads(d: Dialect) -> list[str]:
    """Migration 15: each pipeline's latest scheduled run (``pipeledger schedule``, the
    dashboard's schedule) read from the end of an index of its scheduled runs by interval,
    one probe per pipeline, not a walk of its every run. The tenant leads it, as it leads
    every index since migration 13 (row security adds the tenant to every read)."""
    name, columns, where = _SCHEDULED_INDEX
    return [f"CREATE INDEX IF NOT EXISTS {quote(name)} ON {d.table(RUNS)} ({columns}) {where}"]


_SCHEDULED_INDEX = (
    "pipeline_runs_scheduled",
    "tenant, pipeline, data_interval_end, started_at, run_id",
    "WHERE substr(idempotency_key, 1, 9) = 'schedule:'",
)
# the tables whose keys migration 16 leads with the tenant, parents before children (the
# queue's and the access audit's keys led with it from the start)
REKEYED = tuple(t for t in TENANT_TABLES if t is not QUEUE_TABLE and t is not ACCESS_TABLE)
# SQLite: the function every ledger connection defines (``adapters.sqlite``), the tenant
# the connection declares; from migration 16 on a tenant column's default
TENANT_FUNCTION = "pipeledger_tenant"


def declared_tenant(d: Dialect) -> str:
    """SQL for the tenant a writer's session declares, evaluated once per statement: the
    setting row security reads on PostgreSQL, the connection's function on SQLite."""
    return _SETTING if d.row_security else f"{TENANT_FUNCTION}()"


def tenant_keys(d: Dialect) -> list[str]:
    """Migration 16: every primary key, unique constraint and foreign key leads with the
    tenant, so that two tenants of one ledger may each have a pipeline ``orders`` (and
    its runs, DAG edges, rollups and alerts), and a run is found by (tenant, run_id).
    PostgreSQL alters the keys in place; SQLite, which cannot, makes each table again
    with a tenant column whose default is the connection's declared tenant (a writer
    need not name it), then its indexes and the rollups' triggers."""
    statements = _alter_keys(d) if d.alters_constraints else _rebuild_keyed(d)
    days, runs, tasks, task_days = (d.table(n) for n in (DAYS, RUNS, TASKS, TASK_DAYS))
    if d.triggers_call_functions:  # the functions name the rollups' keys
        statements += rollup.recreate_triggers(d, SCHEMA, days, runs, tenant=True, keyed=True)
        statements += rollup.recreate_task_triggers(d, SCHEMA, task_days, tasks, runs, keyed=True)
    else:  # dropped with their tables
        statements += rollup.triggers(d, SCHEMA, days, runs, tenant=True, keyed=True)
        statements += rollup.task_triggers(
            d, SCHEMA, task_days, tasks, runs, tenant=True, keyed=True
        )
    return statements


def _pkey(t: LedgerTable) -> str:
    return quote(f"{t.name.table}_pkey")


def _unique_name(t: LedgerTable, columns: tuple[str, ...]) -> str:
    """A unique constraint's name as PostgreSQL made it (migration 1 left it unnamed)."""
    return quote("_".join((t.name.table, *columns, "key")))


def _alter_keys(d: Dialect) -> list[str]:
    """PostgreSQL: the foreign keys dropped (they need the keys they reference), each
    table's keys dropped and made again with the tenant first, the foreign keys again."""
    referencing = [t for t in REKEYED if t.foreign_key is not None]
    statements = [
        f"ALTER TABLE {d.table(t.name)} DROP CONSTRAINT {_constraint(t)}" for t in referencing
    ]
    for t in REKEYED:
        changes = [f"DROP CONSTRAINT {_pkey(t)}"]
        changes += [f"DROP CONSTRAINT {_unique_name(t, columns)}" for columns in t.unique]
        changes.append(f"ADD CONSTRAINT {_pkey(t)} PRIMARY KEY ({t.conflict})")
        changes += [
            f"ADD CONSTRAINT {_unique_name(t, old)} UNIQUE ({', '.join(new)})"
            for old, new in zip(t.unique, t.uniques(), strict=True)
        ]
        statements.append(f"ALTER TABLE {d.table(t.name)} {', '.join(changes)}")
    statements += [
        f"ALTER TABLE {d.table(t.name)} ADD CONSTRAINT {_constraint(t)} {t.references(d)}"
        for t in referencing
    ]
    return statements


def _rebuild_keyed(d: Dialect) -> list[str]:
    """SQLite: each table renamed aside (children first: SQLite rewrites the references
    to a renamed parent, so the tables aside keep referring to each other), made again
    with its new keys and its rows copied (parents first: each copied row's parent is
    there), the tables aside dropped (children first), then the indexes. The tables are
    made again without triggers, so the copy rolls nothing up twice."""
    aside = {t.name: d.table(TableName(SCHEMA, f"{t.name.table}_before_keys")) for t in REKEYED}
    statements = [
        f"ALTER TABLE {d.table(t.name)} RENAME TO {aside[t.name]}" for t in reversed(REKEYED)
    ]
    default = f"text NOT NULL DEFAULT ({TENANT_FUNCTION}())"
    for t in REKEYED:
        added = "tenant" not in t.column_names
        names = (*(name for name, _ in t.columns_at(TENANT_KEYS)), *(("tenant",) if added else ()))
        body = t.body(d, TENANT_KEYS, tenant=default if added else "")
        references = f", {t.references(d)}" if t.foreign_key is not None else ""
        columns = ", ".join(names)
        statements += [
            f"CREATE TABLE {d.table(t.name)} ({body}{references})",
            f"INSERT INTO {d.table(t.name)} ({columns}) SELECT {columns} FROM {aside[t.name]}",
        ]
    statements += [f"DROP TABLE {aside[t.name]}" for t in reversed(REKEYED)]
    return statements + _tenant_indexes(d)


def _tenant_indexes(d: Dialect) -> list[str]:
    """Every index of the tables migration 16 makes again, as migrations 13 and 15 left
    them (the tenant first)."""
    statements = []
    for t in REKEYED:
        for index, columns in t.indexes:
            led = columns if columns.startswith("tenant,") else f"tenant, {columns}"
            statements.append(f"CREATE INDEX {quote(index)} ON {d.table(t.name)} ({led})")
    holds = ", ".join(f"'{status}'" for status in HOLDS_KEY)
    failed = ", ".join(f"'{status}'" for status in rollup.FAILURES)
    for index, on, unique, columns, where in _LATER_INDEXES:
        kind = "UNIQUE INDEX" if unique else "INDEX"
        predicate = f" WHERE {where.format(holds=holds, failed=failed)}" if where else ""
        statements.append(
            f"CREATE {kind} {quote(index)} ON {d.table(on)} (tenant, {columns}){predicate}"
        )
    name, columns, where = _SCHEDULED_INDEX
    statements.append(f"CREATE INDEX {quote(name)} ON {d.table(RUNS)} ({columns}) {where}")
    return statements


# -- reads name their tenant ----------------------------------------------------------------
#
# Row security (migration 13) isolates the tenants, but it does not help the planner: a
# superuser or a BYPASSRLS role ignores it, and an ordinary role gets the writer's and the
# reader's policies OR'd, which no index can take as a condition. So every ledger read names
# the session's tenant itself, on every table it reads (joins, correlated probes and
# sub-selects too), and each probe starts at the tenant that leads every index.


def tenant_is(d: Dialect, alias: str) -> str:
    """``alias.tenant = <the session's declared tenant>``: a condition on the tenant that
    leads the indexes of the table ``alias`` names. The tenant is the one the session
    declares (:func:`declared_tenant`: ``[ledger] tenant``, never a value from a client),
    evaluated once per statement, so a builder binds no parameter for it."""
    return f"{alias}.tenant = {declared_tenant(d)}"
