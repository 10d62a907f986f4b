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
"""

from __future__ import annotations

from dataclasses import dataclass

from pipeledger.schema import TableName
from pipeledger.warehouse.dialect import Dialect, quote
from pipeledger.warehouse.migrations import SCHEMA, Component, Migration, create_schema

UNREGISTERED = "unregistered"  # the version of a pipeline known only from its runs


def table(name: str) -> TableName:
    return TableName(SCHEMA, name)


PIPELINES = table("pipelines")
RUNS = table("pipeline_runs")
TASKS = table("task_runs")
AUDIT = table("audit_events")
SNAPSHOTS = table("dataset_snapshots")
DEPENDENCIES = table("pipeline_dependencies")
QUALITY = table("quality_results")
RECONCILIATIONS = table("reconciliations")


@dataclass(frozen=True)
class ForeignKey:
    column: str
    parent: TableName
    parent_column: str


@dataclass(frozen=True)
class LedgerTable:
    """One ledger table. Column types may name ``{ts}`` (an instant), ``{json}`` and
    ``{big}`` (a 64-bit integer): each dialect's own type of that kind."""

    name: TableName
    columns: tuple[tuple[str, str], ...]
    constraints: tuple[str, ...] = ()
    indexes: tuple[tuple[str, str], ...] = ()  # (index name, indexed columns)
    foreign_key: ForeignKey | None = None
    # columns later migrations add, with the migration's version: not in ``body``, which
    # is the table as migration 1 made it (and migration 4 rebuilds it)
    added: tuple[tuple[int, str, str], ...] = ()

    @property
    def column_names(self) -> tuple[str, ...]:
        """Every column, as the writers bind them."""
        return (*self.first_names, *(name for _, name, _ in self.added))

    @property
    def first_names(self) -> tuple[str, ...]:
        """The columns of migration 1."""
        return tuple(name for name, _ in self.columns)

    @property
    def json_columns(self) -> frozenset[str]:
        kinds = [*self.columns, *((name, kind) for _, name, kind in self.added)]
        return frozenset(name for name, kind in kinds if "{json}" in kind)

    def _types(self, d: Dialect) -> dict[str, str]:
        return {"ts": "timestamptz", "json": d.json_type, "big": d.int64_type}

    def body(self, d: Dialect) -> str:
        parts = [f"{name} {kind.format(**self._types(d))}" for name, kind in self.columns]
        return ", ".join([*parts, *self.constraints])

    def add_columns(self, d: Dialect, version: int) -> list[str]:
        """Migration ``version``: the columns it adds."""
        return [
            f"ALTER TABLE {d.table(self.name)} ADD COLUMN {name} {kind.format(**self._types(d))}"
            for at, name, kind in self.added
            if at == version
        ]

    def create(self, d: Dialect) -> str:
        return f"CREATE TABLE IF NOT EXISTS {d.table(self.name)} ({self.body(d)})"

    def index(self, d: Dialect, name: str) -> str:
        columns = dict(self.indexes)[name]
        return f"CREATE INDEX IF NOT EXISTS {quote(name)} ON {d.table(self.name)} ({columns})"


_RUN_ID = ForeignKey("run_id", RUNS, "run_id")

PIPELINE_TABLE = LedgerTable(
    PIPELINES,
    columns=(
        ("name", "text PRIMARY KEY"), ("version", "text NOT NULL"), ("description", "text"),
        ("owner", "text"), ("source_system", "text"), ("target_system", "text"),
        ("freshness_sla_s", "bigint"), ("created_at", "{ts} NOT NULL"),
        ("updated_at", "{ts} NOT NULL"),
    ),
)  # fmt: skip
RUN_TABLE = LedgerTable(
    RUNS,
    columns=(
        ("run_id", "text PRIMARY KEY"), ("logical_run_id", "text NOT NULL"),
        ("attempt", "integer NOT NULL"), ("parent_run_id", "text"), ("correlation_id", "text"),
        ("pipeline", "text NOT NULL"), ("trigger_type", "text NOT NULL"),
        ("triggered_by", "text"), ("environment", "text"), ("status", "text NOT NULL"),
        ("started_at", "{ts} NOT NULL"), ("ended_at", "{ts}"), ("duration_ms", "{big}"),
        ("rows_read", "{big}"), ("rows_inserted", "{big}"), ("rows_updated", "{big}"),
        ("rows_unchanged", "{big}"), ("rows_rejected", "{big}"), ("bytes_read", "{big}"),
        ("watermark_before", "text"), ("watermark_after", "text"),
        ("data_interval_start", "{ts}"), ("data_interval_end", "{ts}"),
        ("error_code", "text"), ("error_message", "text"), ("code_version", "text"),
        ("host", "text"), ("pid", "integer"), ("heartbeat_at", "{ts}"),
        ("lease_expires_at", "{ts}"), ("extra", "{json}"),
    ),
    constraints=("UNIQUE (logical_run_id, attempt)",),
    indexes=(
        ("pipeline_runs_pipeline_started", "pipeline, started_at DESC"),
        ("pipeline_runs_status", "status"),
        ("pipeline_runs_started", "started_at"),
    ),
    foreign_key=ForeignKey("pipeline", PIPELINES, "name"),
    added=((7, "rows_deleted", "{big}"),),
)  # fmt: skip
TASK_TABLE = LedgerTable(
    TASKS,
    columns=(
        ("task_run_id", "text PRIMARY KEY"), ("run_id", "text NOT NULL"),
        ("name", "text NOT NULL"), ("seq", "integer NOT NULL"), ("status", "text NOT NULL"),
        ("started_at", "{ts} NOT NULL"), ("ended_at", "{ts}"), ("duration_ms", "{big}"),
        ("rows_in", "{big}"), ("rows_out", "{big}"), ("rows_rejected", "{big}"),
        ("bytes", "{big}"), ("error_message", "text"),
    ),
    indexes=(("task_runs_run", "run_id"), ("task_runs_started", "started_at")),
    foreign_key=_RUN_ID,
)  # fmt: skip
AUDIT_TABLE = LedgerTable(
    AUDIT,
    columns=(
        ("event_id", "text PRIMARY KEY"), ("run_id", "text"), ("pipeline", "text"),
        ("event_type", "text NOT NULL"), ("target_table", "text"), ("record_count", "{big}"),
        ("old_values", "{json}"), ("new_values", "{json}"), ("metadata", "{json}"),
        ("created_at", "{ts} NOT NULL"),
    ),
    indexes=(("audit_events_target", "target_table, created_at"), ("audit_events_run", "run_id")),
    foreign_key=_RUN_ID,  # run_id may be NULL: an event about no run
)  # fmt: skip
SNAPSHOT_TABLE = LedgerTable(
    SNAPSHOTS,
    columns=(
        ("run_id", "text NOT NULL"), ("target_table", "text NOT NULL"),
        ("row_count", "{big} NOT NULL"), ("max_cursor", "text"),
        ("schema_fingerprint", "text NOT NULL"), ("columns", "{json} NOT NULL"),
        ("created_at", "{ts} NOT NULL"),
    ),
    constraints=("PRIMARY KEY (run_id, target_table)",),
    indexes=(("dataset_snapshots_target", "target_table, created_at"),),
    foreign_key=_RUN_ID,
)  # fmt: skip
DEPENDENCY_TABLE = LedgerTable(
    DEPENDENCIES,
    columns=(
        ("upstream", "text NOT NULL"), ("downstream", "text NOT NULL"),
        ("created_at", "{ts} NOT NULL"),
    ),
    constraints=("PRIMARY KEY (upstream, downstream)",),
)  # fmt: skip
QUALITY_TABLE = LedgerTable(
    QUALITY,
    columns=(
        ("result_id", "text PRIMARY KEY"), ("run_id", "text NOT NULL"),
        ("pipeline", "text NOT NULL"), ("target_table", "text"), ("check_name", "text NOT NULL"),
        ("kind", "text NOT NULL"), ("level", "text NOT NULL"), ("status", "text NOT NULL"),
        ("observed", "text"), ("expected", "text"), ("failing_rows", "{big}"),
        ("sample_keys", "{json}"), ("created_at", "{ts} NOT NULL"),
    ),
    indexes=(
        ("quality_results_run", "run_id"), ("quality_results_pipeline", "pipeline, created_at"),
    ),
    foreign_key=_RUN_ID,
)  # fmt: skip

RECONCILIATION_TABLE = LedgerTable(
    RECONCILIATIONS,
    columns=(
        ("run_id", "text PRIMARY KEY"), ("pipeline", "text NOT NULL"),
        ("target_table", "text NOT NULL"), ("status", "text NOT NULL"),
        ("range_start", "text"), ("range_end", "text"), ("window_by", "text NOT NULL"),
        ("windows_compared", "{big} NOT NULL"), ("windows_differing", "{big} NOT NULL"),
        ("source_rows", "{big} NOT NULL"), ("target_rows", "{big} NOT NULL"),
        ("missing_rows", "{big} NOT NULL"), ("extra_rows", "{big} NOT NULL"),
        ("changed_rows", "{big} NOT NULL"), ("windows", "{json} NOT NULL"),
        ("created_at", "{ts} NOT NULL"),
    ),
    indexes=(("reconciliations_pipeline", "pipeline, created_at"),),
    foreign_key=_RUN_ID,
)  # fmt: skip

# the tables with a foreign key, parents before children (migration 4 rebuilds them so)
CHILDREN = (RUN_TABLE, TASK_TABLE, AUDIT_TABLE, SNAPSHOT_TABLE, QUALITY_TABLE)


def _ledger(d: Dialect) -> list[str]:
    return [
        PIPELINE_TABLE.create(d),
        RUN_TABLE.create(d),
        *(RUN_TABLE.index(d, name) for name, _ in RUN_TABLE.indexes),
        TASK_TABLE.create(d),
        TASK_TABLE.index(d, "task_runs_run"),
        AUDIT_TABLE.create(d),
        *(AUDIT_TABLE.index(d, name) for name, _ in AUDIT_TABLE.indexes),
        SNAPSHOT_TABLE.create(d),
        SNAPSHOT_TABLE.index(d, "dataset_snapshots_target"),
        DEPENDENCY_TABLE.create(d),
    ]


def _quality(d: Dialect) -> list[str]:
    return [QUALITY_TABLE.create(d), *(QUALITY_TABLE.index(d, n) for n, _ in QUALITY_TABLE.indexes)]


def ledger_migrations(d: Dialect) -> list[Migration]:
    """The ledger's schema changes, applied in order, each once."""
    return [
        (1, "run ledger: pipelines, runs, tasks, audit, snapshots, dependencies",
         [*create_schema(d), *_ledger(d)]),
        (2, "quality gate results per run and check", _quality(d)),
        (3, "task trends by time", [TASK_TABLE.index(d, "task_runs_started")]),
        (4, "foreign keys: runs to pipelines; tasks, events, snapshots and results to runs",
         foreign_keys(d)),
        (7, "rows deleted per run", RUN_TABLE.add_columns(d, 7)),
        (8, "reconciliations: what each reconcile run found", _reconciliations(d)),
    ]  # fmt: skip


def _reconciliations(d: Dialect) -> list[str]:
    """Migration 8 (5 to 7 are other components' numbers, assigned ahead): one row per
    reconcile run, which is a run of its pipeline (``trigger_type = 'reconcile'``)."""
    t = RECONCILIATION_TABLE
    assert t.foreign_key is not None
    return [
        f"CREATE TABLE IF NOT EXISTS {d.table(t.name)} ({t.body(d)}, "
        f"{_references(d, t.foreign_key)})",
        *(t.index(d, name) for name, _ in t.indexes),
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


def _references(d: Dialect, key: ForeignKey) -> str:
    return f"FOREIGN KEY ({key.column}) REFERENCES {d.table(key.parent)} ({key.parent_column})"


def _add_foreign_key(d: Dialect, child: LedgerTable) -> list[str]:
    """Added unchecked, then validated: the orphans are gone by then."""
    assert child.foreign_key is not None
    name, table = _constraint(child), d.table(child.name)
    return [
        f"ALTER TABLE {table} ADD CONSTRAINT {name} {_references(d, child.foreign_key)} NOT VALID",
        f"ALTER TABLE {table} VALIDATE CONSTRAINT {name}",
    ]


def _rebuild_with_foreign_key(d: Dialect, child: LedgerTable) -> list[str]:
    """SQLite: a new table with the constraint, the rows copied, the old one dropped, the
    new one renamed into place and the indexes made again. A parent is rebuilt before its
    children reference it, so dropping it never meets a constraint."""
    assert child.foreign_key is not None
    table = d.table(child.name)
    rebuilt = d.table(TableName(SCHEMA, f"{child.name.table}_rebuilt"))
    columns = ", ".join(child.first_names)
    return [
        f"CREATE TABLE {rebuilt} ({child.body(d)}, {_references(d, child.foreign_key)})",
        f"INSERT INTO {rebuilt} ({columns}) SELECT {columns} FROM {table}",
        f"DROP TABLE {table}",
        f"ALTER TABLE {rebuilt} RENAME TO {table}",
        *(child.index(d, name) for name, _ in child.indexes),
    ]


LEDGER = Component("ledger", ledger_migrations, RUNS)
