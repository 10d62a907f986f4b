"""The input side of the golden SQL tests: every pure SQL builder, called with fixed inputs,
one :class:`Case` per call, with what must exist for its output to be executed.

The expected text lives in ``tests/golden/<dialect>/<module>.sql``, one section per case
(``-- case: NAME``). After a deliberate change to a builder, rewrite those files with
``.venv/bin/python -m pytest tests/golden --update-golden`` and review the diff.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from functools import partial
from typing import Any

from pipeledger.alerts import events as alert_events
from pipeledger.alerts import outbox
from pipeledger.common.columns import ROW_HASH, Column, TableName
from pipeledger.config.model import ChecksConfig, RangeBound
from pipeledger.ledger import access, queue
from pipeledger.ledger import sql as lsql
from pipeledger.ledger.reads import access as access_reads
from pipeledger.ledger.reads import activity, health, queries, runs, sla
from pipeledger.ledger.reads import checks as ledger_checks
from pipeledger.ledger.tables import ledger_migrations
from pipeledger.publish import before
from pipeledger.publish import indexes as indexes_sql
from pipeledger.publish import merge_sql as load_sql
from pipeledger.publish import scd2_sql as hsql
from pipeledger.quality import checks
from pipeledger.quality import quarantine as quarantine_sql
from pipeledger.runs import replay
from pipeledger.runs.load import late_sql
from pipeledger.runs.model import sql as models_sql
from pipeledger.runs.reconcile import sql as reconcile_sql
from pipeledger.runs.reconcile.windows import Grain
from pipeledger.sources import sql as extract_sql
from pipeledger.state import files as files_state
from pipeledger.state import guard_sql
from pipeledger.state import snapshots as snapshots_state
from pipeledger.state import tables as state
from pipeledger.state.watermark import Window
from pipeledger.transform.conform import Shape
from pipeledger.warehouse import stage
from pipeledger.warehouse.dialect import Dialect
from pipeledger.warehouse.migrations import Migration

# -- the fixed inputs -------------------------------------------------------------------

TARGET = TableName("analytics", "orders")
COLUMNS = (
    Column("order_id", "bigint"),
    Column("region", "text"),
    Column("amount", "numeric(12,2)"),
    Column("status", "text"),
    Column("updated_at", "timestamptz"),
)
KEY = ("order_id",)
COMPOSITE_KEY = ("order_id", "region")
SHAPE = Shape(COLUMNS, KEY, "updated_at", "region")
RUN_ID = "6f1c7f0e-3c55-4b7e-9a55-0c6f1b0d2a11"
AT = datetime(2024, 6, 15, 12, 0, tzinfo=UTC)
LOWER = datetime(2024, 1, 1, 10, 0, tzinfo=UTC)
UPPER = datetime(2024, 1, 7, 18, 30, tzinfo=UTC)
STAGED_ROW = (1, "eu", Decimal("10.00"), "completed", LOWER, 123456789)
CHECKS = ChecksConfig(
    not_null=["status"],
    range={"amount": RangeBound(min=0, max=1000), "order_id": RangeBound(min=1)},
    accepted_values={"status": ["completed", "shipped"]},
    matches={"region": "^[a-z]{2}$"},
    warn=["matches"],
)
POLICIES = ("update", "newer_wins", "ignore", "error")


def spec(
    policy: str = "update", key: tuple[str, ...] = KEY, fingerprints: bool = True
) -> load_sql.MergeSpec:
    return load_sql.MergeSpec(
        target=TARGET,
        columns=COLUMNS,
        key=key,
        cursor="updated_at",
        policy=policy,
        fingerprints=fingerprints,
    )


# -- what a builder produced ------------------------------------------------------------


@dataclass(frozen=True)
class Golden:
    """A builder's output: statements (each with an optional note), and the parameters the
    builder itself says it binds (None: it leaves them to the caller)."""

    statements: tuple[tuple[str | None, str], ...]
    params: tuple[Any, ...] | None = None

    def render(self) -> str:
        if not self.statements:
            return "-- (no statement on this dialect)"
        lines = []
        for note, statement in self.statements:
            if note:
                lines.append(f"-- {note}")
            lines.append(statement + ";")
        if self.params is not None:
            lines.append(f"-- params: {list(self.params)!r}")
        return "\n".join(lines)


def text(statement: str | None) -> Golden:
    return Golden(() if statement is None else ((None, statement),))


def texts(statements: Sequence[str]) -> Golden:
    return Golden(tuple((None, s) for s in statements))


def bound(statement: str, params: Sequence[Any]) -> Golden:
    return Golden(((None, statement),), tuple(params))


def migrations(steps: Sequence[Migration]) -> Golden:
    out: list[tuple[str | None, str]] = []
    for version, description, statements in steps:
        out += [(f"migration {version}: {description}" if i == 0 else None, s)
                for i, s in enumerate(statements)]  # fmt: skip
    return Golden(tuple(out))


# -- one case per builder call ----------------------------------------------------------

BOTH = ("postgres", "sqlite")
POSTGRES_ONLY = ("postgres",)
SQLITE_ONLY = ("sqlite",)


@dataclass(frozen=True)
class Case:
    """``world``: what must exist before the output runs (tests/golden/test_sql_golden.py
    builds it: ledger, state, schema, target, stage, stage_unique, replay_stage,
    quarantine, trigger). ``setup``: statements run before it, not pinned here. ``bind``:
    values to run it with when the builder binds none itself (else each statement with
    parameters is EXPLAINed with NULLs). ``runs``: False for what needs more than a
    statement (COPY)."""

    module: str
    name: str
    build: Callable[[Dialect], Golden]
    dialects: tuple[str, ...] = BOTH
    world: frozenset[str] = frozenset()
    setup: Callable[[Dialect], list[str]] = field(default=lambda d: [])
    bind: Callable[[Dialect], list[Any]] | None = None
    runs: bool = True


def _w(*parts: str) -> frozenset[str]:
    return frozenset(parts)


def _scope(d: Dialect) -> str:
    """The target rows a backfill over ``updated_at >= ?`` trusts (``load_sql.stored_scope``)."""
    return load_sql.stored_scope(d, f'"updated_at" >= {d.param}')


def _merge(d: Dialect, policy: str) -> Golden:
    return text(load_sql.merge(d, spec(policy), d.stage()))


def _load_sql() -> list[Case]:
    m = "load_sql"
    merges = [
        Case(m, f"merge under on_conflict={policy}", partial(_merge, policy=policy),
             world=_w("target", "stage"), bind=lambda d: [RUN_ID, AT])
        for policy in POLICIES
    ]  # fmt: skip
    return [
        Case(m, "create_target with its primary key",
             lambda d: text(load_sql.create_target(d, spec())), world=_w("schema")),
        Case(m, "create_target with the primary key deferred",
             lambda d: text(load_sql.create_target(d, spec(), primary_key=False)),
             world=_w("schema")),
        Case(m, "add_primary_key after a bulk insert",
             lambda d: text(load_sql.add_primary_key(d, spec())),
             world=_w("schema"),
             setup=lambda d: [load_sql.create_target(d, spec(), primary_key=False)]),
        Case(m, "add_column for schema drift",
             lambda d: text(stage.add_column(d, TARGET, Column("discount", "numeric(5,2)"))),
             world=_w("target")),
        Case(m, "add_column if missing",
             lambda d: text(stage.add_column(d, TARGET, Column("note", "text"), True)),
             world=_w("target")),
        Case(m, "insert_new into a target this run created",
             lambda d: text(load_sql.insert_new(d, spec(), d.stage())),
             world=_w("target", "stage"), bind=lambda d: [RUN_ID, AT]),
        Case(m, "stage_schema of a run", lambda d: text(load_sql.stage_schema(RUN_ID)),
             POSTGRES_ONLY, runs=False),
        Case(m, "create_promotable_stage",
             lambda d: texts(load_sql.create_promotable_stage(
                 d, RUN_ID, COLUMNS, "updated_at", loaded_at=AT)),
             world=_w("schema")),
        Case(m, "create_promotable_stage of a policy that updates rows",
             lambda d: texts(load_sql.create_promotable_stage(
                 d, RUN_ID, COLUMNS, "updated_at", loaded_at=AT, updates=True)),
             world=_w("schema")),
        Case(m, "promote_stage into the target",
             lambda d: texts(load_sql.promote_stage(d, spec(), RUN_ID, AT)),
             world=_w("schema"),
             setup=lambda d: load_sql.create_promotable_stage(
                 d, RUN_ID, COLUMNS, "updated_at", loaded_at=AT)),
        Case(m, "drop_promotable_stage",
             lambda d: texts(load_sql.drop_promotable_stage(d, RUN_ID)),
             world=_w("schema"),
             setup=lambda d: load_sql.create_promotable_stage(
                 d, RUN_ID, COLUMNS, "updated_at", loaded_at=AT)),
        Case(m, "table_extent of a target",
             lambda d: text(load_sql.table_extent(d, TARGET)), world=_w("target"),
             bind=lambda d: [d.table(TARGET)] if d.reads_page_ranges else []),
        Case(m, "stored_hashes_within a range of the target's storage",
             lambda d: text(load_sql.stored_hashes_within(d, TARGET, _scope(d))),
             world=_w("target"), bind=lambda d: [LOWER, AT, 0, 100]),
        Case(m, "staged_key_hashes",
             lambda d: text(load_sql.staged_key_hashes(d, spec(), _scope(d))),
             world=_w("target", "stage"), bind=lambda d: [LOWER, AT]),
        Case(m, "restage_from_target of three fingerprints",
             lambda d: text(load_sql.restage_from_target(d, spec(), 3)),
             world=_w("target", "stage"),
             bind=lambda d: [[1, 2, 3]] if d.array_params else [1, 2, 3]),
        Case(m, "duplicate_keys", lambda d: text(load_sql.duplicate_keys(d, spec())),
             world=_w("stage")),
        Case(m, "duplicate_keys of a composite key",
             lambda d: text(load_sql.duplicate_keys(d, spec(key=COMPOSITE_KEY))),
             world=_w("stage")),
        Case(m, "dedupe_stage", lambda d: text(load_sql.dedupe_stage(d, spec())),
             world=_w("stage")),
        Case(m, "dedupe_stage of a snapshot without a cursor",
             lambda d: text(load_sql.dedupe_stage(d, replace(spec(), cursor=""))),
             world=_w("stage")),
        Case(m, "create_target without a cursor",
             lambda d: text(load_sql.create_target(d, replace(spec(), cursor=""))),
             world=_w("schema")),
        Case(m, "conflicting_rows under on_conflict=error",
             lambda d: text(load_sql.conflicting_rows(d, spec("error"), d.stage())),
             world=_w("target", "stage")),
        Case(m, "conflicting_duplicates under on_conflict=error",
             lambda d: text(load_sql.conflicting_duplicates(d, spec("error"))),
             world=_w("stage")),
        Case(m, "count_new_keys", lambda d: text(load_sql.count_new_keys(d, spec(), d.stage())),
             world=_w("target", "stage")),
        *merges,
        Case(m, "merge of a composite key into a target without fingerprints",
             lambda d: text(load_sql.merge(d, spec("newer_wins", COMPOSITE_KEY, False),
                                           d.stage())),
             world=_w("schema", "stage"),
             setup=lambda d: [load_sql.create_target(d, spec(key=COMPOSITE_KEY))],
             bind=lambda d: [RUN_ID, AT]),
        Case(m, "merge unfiltered (an incremental batch) under on_conflict=newer_wins",
             lambda d: text(load_sql.merge(d, spec("newer_wins"), d.stage(), filtered=False)),
             world=_w("target", "stage"), bind=lambda d: [RUN_ID, AT]),
        Case(m, "merge planner settings of a merge join",
             lambda d: texts([*load_sql.merge_planner(d, False), *load_sql.MERGE_PLANNER_RESET]),
             POSTGRES_ONLY),
        Case(m, "merge planner settings of index probes",
             lambda d: texts([*load_sql.merge_planner(d, True), *load_sql.MERGE_PLANNER_RESET]),
             POSTGRES_ONLY),
        Case(m, "estimated_rows of the target",
             lambda d: text(load_sql.estimated_rows(d) or ""), POSTGRES_ONLY,
             world=_w("target"), bind=lambda d: [d.table(TARGET)]),
    ]  # fmt: skip


def _warehouse_stage() -> list[Case]:
    m = "warehouse_stage"
    columns = [*COLUMNS, ROW_HASH]
    names = [c.name for c in columns]
    return [
        Case(m, "create_schema of the target", lambda d: text(stage.create_schema(d, TARGET))),
        Case(m, "create_stage", lambda d: text(stage.create_stage(d, columns))),
        Case(m, "drop_stage", lambda d: texts(stage.drop_stage(d)), world=_w("stage")),
        Case(m, "copy_stage as CSV", lambda d: text(stage.copy_stage(names)), POSTGRES_ONLY,
             runs=False),
        Case(m, "copy_stage as binary", lambda d: text(stage.copy_stage(names, binary=True)),
             POSTGRES_ONLY, runs=False),
        Case(m, "insert_stage", lambda d: text(stage.insert_stage(d, names)), world=_w("stage"),
             bind=lambda d: list(STAGED_ROW)),
        Case(m, "unique_key_index on the stage", lambda d: text(stage.unique_key_index(d, KEY)),
             world=_w("stage")),
        Case(m, "unique_key_index on the deduplicated stage",  # proves_keys_by_index only
             lambda d: text(stage.unique_key_index(d, KEY, d.stage_unique())), POSTGRES_ONLY,
             world=_w("stage", "stage_unique")),
    ]  # fmt: skip


def _load_guard_sql() -> list[Case]:
    m = "load_guard_sql"
    return [
        Case(m, "forget_hash_function", lambda d: text(guard_sql.forget_hash_function()),
             POSTGRES_ONLY, world=_w("state")),
        Case(m, "fingerprint_guard_table", lambda d: text(guard_sql.fingerprint_guard_table(d)),
             world=_w("state")),
        Case(m, "renewed_guard_table", lambda d: texts(guard_sql.renewed_guard_table(d)),
             world=_w("state")),
        Case(m, "forget_hash_trigger", lambda d: text(guard_sql.forget_hash_trigger(d, TARGET)),
             world=_w("state", "target")),
        Case(m, "always_fire", lambda d: text(guard_sql.always_fire(TARGET)), POSTGRES_ONLY,
             world=_w("state", "target", "trigger")),
        Case(m, "trigger_version",
             lambda d: bound(guard_sql.trigger_version(d), guard_sql.trigger_params(d, TARGET)),
             world=_w("state", "target", "trigger")),
        Case(m, "trigger_exists", lambda d: text(guard_sql.trigger_exists(d)), POSTGRES_ONLY,
             world=_w("target"), bind=lambda d: [d.table(TARGET), guard_sql.FORGET_TRIGGER]),
        Case(m, "may_upgrade", lambda d: text(guard_sql.may_upgrade(d)), POSTGRES_ONLY,
             world=_w("state", "target"),
             bind=lambda d: [d.table(TARGET), *[d.table(guard_sql.GUARDS_TABLE)] * 2]),
        Case(m, "without_rowid", lambda d: text(guard_sql.without_rowid()), SQLITE_ONLY,
             world=_w("target"), bind=lambda d: [str(TARGET)]),
        Case(m, "guard_key", lambda d: text(guard_sql.guard_key(d)), world=_w("target"),
             bind=lambda d: [d.table(TARGET)]),
        Case(m, "read_guard_row", lambda d: text(guard_sql.read_guard_row(d)),
             world=_w("state"), bind=lambda d: ["16384"]),
        Case(m, "record_guard", lambda d: text(guard_sql.record_guard(d)), world=_w("state"),
             bind=lambda d: ["16384", "1:2:3", AT]),
        Case(m, "newest_load", lambda d: text(guard_sql.newest_load(d, TARGET)),
             world=_w("target")),
        Case(m, "lock_against_writers",
             lambda d: text(guard_sql.lock_against_writers(d, TARGET)), world=_w("target")),
    ]  # fmt: skip


def _load_state() -> list[Case]:
    m = "load_state"
    return [
        Case(m, "state_migrations", lambda d: migrations(state.state_migrations(d))),
        Case(m, "read_state", lambda d: text(state.read_state(d)), world=_w("state"),
             bind=lambda d: ["orders"]),
        Case(m, "read_all_state", lambda d: text(state.read_all_state(d)), world=_w("state")),
        Case(m, "watermark_moved_at", lambda d: text(state.watermark_moved_at(d)),
             world=_w("state"), bind=lambda d: ["orders"]),
        Case(m, "write_state", lambda d: text(state.write_state(d)), world=_w("state"),
             bind=lambda d: ["orders", "eu", "updated_at", "timestamptz",
                             "2024-01-01T10:00:00.000000+00:00", RUN_ID, AT]),
        Case(m, "insert_commit", lambda d: text(state.insert_commit(d)), world=_w("state"),
             bind=lambda d: [RUN_ID, "orders", str(TARGET), AT, None]),
        Case(m, "select_commits of two runs", lambda d: text(state.select_commits(d, 2)),
             world=_w("state"), bind=lambda d: [RUN_ID, "other"]),
        Case(m, "pending_runs of one upstream", lambda d: text(state.pending_runs(d, 1)),
             world=_w("state"), bind=lambda d: [str(TARGET), "gold_daily"]),
        Case(m, "record_input", lambda d: text(state.record_input(d)), world=_w("state"),
             bind=lambda d: ["gold_daily", RUN_ID, str(TARGET), RUN_ID, AT]),
        Case(m, "snapshots_table", lambda d: text(snapshots_state.snapshots_table(d)),
             world=_w("state")),
        Case(m, "write_snapshot", lambda d: text(snapshots_state.write_snapshot(d)),
             world=_w("state"),
             bind=lambda d: ["customers", 3, "00000000075bcd15", RUN_ID, AT, AT, RUN_ID]),
        Case(m, "read_snapshot", lambda d: text(snapshots_state.read_snapshot(d)),
             world=_w("state"), bind=lambda d: ["customers"]),
        Case(m, "read_snapshots", lambda d: text(snapshots_state.read_snapshots(d)),
             world=_w("state")),
        Case(m, "files_taken_table", lambda d: text(files_state.files_taken_table(d)),
             world=_w("state")),
        Case(m, "read_taken", lambda d: text(files_state.read_taken(d)), world=_w("state"),
             bind=lambda d: ["lineitem"]),
        Case(m, "take_files of a file read and one touched",
             lambda d: text(files_state.take_files(d, 2)), world=_w("state"),
             bind=lambda d: ["lineitem", "data/a.parquet", 100, 1, "9f86d081", 10, RUN_ID, AT,
                             "lineitem", "data/b.parquet", 200, 2, "60303ae2", None, RUN_ID, AT]),
        Case(m, "summarize_taken", lambda d: text(files_state.summarize_taken(d)),
             world=_w("state")),
    ]  # fmt: skip


NAMES = [c.name for c in COLUMNS]
OTHER_RUN = "0b8e6a2c-1d5f-4c3a-8e7d-2f4a6b8c0d1e"


def _create_before(d: Dialect) -> list[str]:
    return [before.create_before_table(d, TARGET, COLUMNS)]


def _replaced(d: Dialect) -> str:
    newer = 's."updated_at" > t."updated_at"'
    return before.replaced_rows(d, POSTGRES_JOIN, newer, d.stage())


def _load_before() -> list[Case]:
    m = "load_before"
    return [
        Case(m, "create_before_table", lambda d: text(before.create_before_table(d, TARGET,
             COLUMNS)), world=_w("state")),
        Case(m, "keep_before_images of rows a newer staged row replaces",
             lambda d: bound(before.keep_before_images(d, TARGET, NAMES, _replaced(d)),
                             [RUN_ID]),
             world=_w("state", "target", "stage"), setup=_create_before),
        Case(m, "delete_keeping_before_images of the rows a staged key names, in one pass",
             lambda d: bound(before.delete_keeping_before_images(
                 d, TARGET, NAMES, f'EXISTS (SELECT 1 FROM {d.stage()} AS s '
                 'WHERE s."order_id" = t."order_id")'), [RUN_ID]),
             POSTGRES_ONLY, world=_w("state", "target", "stage"), setup=_create_before),
    ]  # fmt: skip


# -- deletes (load.deletes) and SCD2 history (load.history) ----------------------------


def marked(policy: str = "newer_wins", soft: bool = False) -> load_sql.MergeSpec:
    """A pipeline with a delete marker (and soft deletes)."""
    return replace(spec(policy), markers=True, soft_delete=soft)


def scd2(policy: str = "newer_wins", markers: bool = True) -> load_sql.MergeSpec:
    return replace(spec(policy), markers=markers, history=True)


def _flagged(d: Dialect) -> list[str]:
    """The stage of a marker pipeline: the delete flag beside the row."""
    return [f"ALTER TABLE {d.stage()} ADD COLUMN {load_sql.DELETED_FLAG} boolean"]


def _soft_target(d: Dialect) -> list[str]:
    return [load_sql.create_target(d, marked(soft=True)), *_flagged(d)]


def _vanished(d: Dialect) -> list[str]:
    keys = [c for c in COLUMNS if c.name in KEY]
    return load_sql.create_temp(d, load_sql.VANISHED, keys)


def _unstaged(d: Dialect) -> list[str]:
    keys = [c for c in COLUMNS if c.name in KEY]
    return load_sql.create_temp(d, load_sql.UNSTAGED, keys)


def _history_world(d: Dialect) -> list[str]:
    """An SCD2 target, its repeats, and the run's temporary tables."""
    h = scd2()
    statements = [load_sql.create_target(d, h), hsql.create_repeats(d, h), *_flagged(d),
                  *_vanished(d)]  # fmt: skip
    tables = (
        (hsql.AFFECTED, hsql.affected_columns(h)),
        (hsql.ITEMS, hsql.item_columns(h)),
        (hsql.ORDERED, hsql.ordered_columns(h)),
        (hsql.HISTORY, hsql.history_columns(h)),
    )
    for name, columns in tables:
        statements += load_sql.create_temp(d, name, columns)
    return statements


def _deletes() -> list[Case]:
    m = "load_sql"
    soft = marked(soft=True)
    return [
        Case(m, "create_target of an SCD2 history",
             lambda d: text(load_sql.create_target(d, scd2())), world=_w("schema")),
        Case(m, "create_target of a soft-deleting pipeline",
             lambda d: text(load_sql.create_target(d, soft)), world=_w("schema")),
        Case(m, "create_temp of the keys a snapshot lacks",
             lambda d: texts(_vanished(d))),
        Case(m, "dedupe_stage of a delete marker pipeline",
             lambda d: text(load_sql.dedupe_stage(d, marked())), world=_w("stage"),
             setup=_flagged),
        Case(m, "dedupe_stage of an SCD2 history (one row per key and cursor)",
             lambda d: text(load_sql.dedupe_stage(d, scd2(markers=False))), world=_w("stage")),
        Case(m, "merge of a delete marker pipeline that soft-deletes",
             lambda d: text(load_sql.merge(d, soft, d.stage())), world=_w("schema", "stage"),
             setup=_soft_target, bind=lambda d: [RUN_ID, AT]),
        Case(m, "merge under on_conflict=ignore of a soft-deleting pipeline",
             lambda d: text(load_sql.merge(d, marked("ignore", soft=True), d.stage())),
             world=_w("schema", "stage"), setup=_soft_target, bind=lambda d: [RUN_ID, AT]),
        Case(m, "count_new_keys of a delete marker pipeline",
             lambda d: text(load_sql.count_new_keys(d, marked(), d.stage())),
             world=_w("target", "stage"), setup=_flagged),
        Case(m, "conflicting_rows of a soft-deleting marker pipeline",
             lambda d: text(load_sql.conflicting_rows(d, marked("error", soft=True),
                                                      d.stage())),
             world=_w("schema", "stage"), setup=_soft_target),
        Case(m, "conflicting_duplicates of a delete marker pipeline",
             lambda d: text(load_sql.conflicting_duplicates(d, marked("error"))),
             world=_w("stage"), setup=_flagged),
        Case(m, "delete_where of the rows staged deletes mark",
             lambda d: text(load_sql.delete_where(d, TARGET, load_sql.marked_rows(
                 d, marked(), d.stage()))), world=_w("target", "stage"), setup=_flagged),
        Case(m, "delete_where under on_conflict=update",
             lambda d: text(load_sql.delete_where(d, TARGET, load_sql.marked_rows(
                 d, marked("update"), d.stage()))), world=_w("target", "stage"),
             setup=_flagged),
        Case(m, "soft_delete_where of the keys a snapshot lacks",
             lambda d: text(load_sql.soft_delete_where(d, TARGET, load_sql.vanished_rows(
                 d, soft))), world=_w("schema"),
             setup=lambda d: [*_soft_target(d)[:1], *_vanished(d)],
             bind=lambda d: [RUN_ID, AT, AT]),
        Case(m, "find_vanished in a backfill's range",
             lambda d: text(load_sql.find_vanished(d, spec(), f'"updated_at" >= {d.param}')),
             world=_w("target", "stage"), setup=_vanished, bind=lambda d: [LOWER]),
        Case(m, "find_vanished of an SCD2 history",
             lambda d: text(load_sql.find_vanished(d, scd2(), "1=1")),
             world=_w("schema", "stage", "state"), setup=_history_world),
        Case(m, "unstaged_keys of a table of candidate keys",
             lambda d: text(load_sql.unstaged_keys(d, spec(), "candidate_keys")),
             world=_w("stage"),
             setup=lambda d: [*_unstaged(d), 'CREATE TEMP TABLE candidate_keys ("order_id" '
                              'bigint)']),
        Case(m, "find_vanished_among the unstaged keys, looked up in the target",
             lambda d: text(load_sql.find_vanished_among(d, spec())),
             world=_w("target"), setup=lambda d: [*_vanished(d), *_unstaged(d)]),
        Case(m, "count_in_scope of a soft-deleting pipeline",
             lambda d: text(load_sql.count_in_scope(d, soft, "1=1")), world=_w("schema"),
             setup=lambda d: [*_soft_target(d)[:1], *_vanished(d)]),
        Case(m, "count_vanished", lambda d: text(load_sql.count_vanished(d)), setup=_vanished),
        Case(m, "sample_vanished", lambda d: text(load_sql.sample_vanished(d, spec())),
             setup=_vanished),
    ]  # fmt: skip


def _history(name: str, build: Callable[[Dialect], Golden], **more: Any) -> Case:
    return Case(
        "load_history_sql",
        name,
        build,
        world=_w("schema", "stage", "state"),
        setup=_history_world,
        **more,
    )


def _load_history_sql() -> list[Case]:
    h = scd2()

    def source(d: Dialect) -> str:
        return d.stage()

    def order_items(d: Dialect, policy: str) -> Golden:
        return text(hsql.order_items(d, scd2(policy)))

    return [
        _history("create_repeats", lambda d: text(hsql.create_repeats(d, h))),
        _history("clear_repeats", lambda d: text(hsql.clear_repeats(d, h))),
        _history("fill_affected", lambda d: text(hsql.fill_affected(d, h, False))),
        _history("fill_affected with the keys a snapshot lacks",
                 lambda d: text(hsql.fill_affected(d, h, True)),
                 bind=lambda d: [AT]),
        _history("stored_versions", lambda d: text(hsql.stored_versions(d, h))),
        _history("stored_deletions", lambda d: text(hsql.stored_deletions(d, h))),
        _history("stored_repeats", lambda d: text(hsql.stored_repeats(d, h))),
        _history("staged_items of a delete marker pipeline",
                 lambda d: text(hsql.staged_items(d, h, source(d)))),
        _history("staged_items without markers",
                 lambda d: text(hsql.staged_items(d, scd2(markers=False), source(d)))),
        _history("snapshot_deletions", lambda d: text(hsql.snapshot_deletions(d, h)),
                 bind=lambda d: [AT]),
        _history("withdraw_deletions", lambda d: text(hsql.withdraw_deletions(d, h))),
        *(_history(f"order_items under on_conflict={policy}",
                   partial(order_items, policy=policy))
          for policy in ("update", "newer_wins", "ignore")),
        _history("resolve_history", lambda d: text(hsql.resolve_history(d, h))),
        _history("history_index", lambda d: text(hsql.history_index(d, h))),
        _history("count_changes", lambda d: text(hsql.count_changes(d, h))),
        _history("delete_where of the rewritten versions",
                 lambda d: text(load_sql.delete_where(d, TARGET, hsql.rewritten(d, h)))),
        _history("insert_versions", lambda d: text(hsql.insert_versions(d, h)),
                 bind=lambda d: [RUN_ID, AT]),
        _history("forget_repeats", lambda d: text(hsql.forget_repeats(d, h))),
        _history("keep_repeats", lambda d: text(hsql.keep_repeats(d, h))),
        _history("broken_history", lambda d: text(hsql.broken_history(d, h))),
    ]  # fmt: skip


POSTGRES_JOIN = 't."order_id" = s."order_id"'
REGION = 'q."region"'
MODEL_QUERY = 'SELECT "updated_at", "amount" FROM "analytics"."orders"'


def _models_sql() -> list[Case]:
    m = "models_sql"
    typed = (Column("day", "date"), Column("revenue", "numeric(38,2)"))
    return [
        Case(m, "written_by two runs (PostgreSQL text, rewritten into the model's query)",
             lambda d: text(models_sql.written_by(TARGET, NAMES, [RUN_ID, OTHER_RUN])),
             dialects=POSTGRES_ONLY, world=_w("target")),
        Case(m, "written_by one run, its rows whose key is not NULL",
             lambda d: text(models_sql.written_by(TARGET, NAMES, [RUN_ID], NAMES[:1])),
             dialects=POSTGRES_ONLY, world=_w("target")),
        Case(m, "unique_columns of the target (its unique indexes' columns)",
             lambda d: text(models_sql.unique_columns(d) or ""), POSTGRES_ONLY,
             world=_w("target"), bind=lambda d: [d.table(TARGET)]),
        Case(m, "replaced_by two runs, one column not kept",
             lambda d: text(models_sql.replaced_by(TARGET, NAMES, NAMES[:-1], [RUN_ID])),
             dialects=POSTGRES_ONLY, world=_w("state"), setup=_create_before),
        Case(m, "stage_model with a condition", lambda d: text(models_sql.stage_model(
             d, COLUMNS, f"SELECT * FROM {d.table(TARGET)}", 'q."region" = \'eu\'')),
             world=_w("target", "stage")),
        Case(m, "stage_model binding a parameter: the query's % is passed on as it is",
             lambda d: text(models_sql.stage_model(d, COLUMNS,
             f"SELECT * FROM {d.table(TARGET)} WHERE \"status\" LIKE 'ship%' /* 5% */",
             f'q."region" = {d.param}', binds=True)),
             world=_w("target", "stage"), bind=lambda d: ["eu"]),
        Case(m, "touched partitions", lambda d: text(models_sql.touched(
             ["region"], f"SELECT * FROM {d.table(TARGET)}")), world=_w("target")),
        Case(m, "create_touched keys", lambda d: text(models_sql.create_touched(
             d, COLUMNS[:2], f"SELECT * FROM {d.table(TARGET)}")), world=_w("target")),
        Case(m, "in_touched", lambda d: texts([f"SELECT 1 FROM {d.table(TARGET)} AS q WHERE "
             + models_sql.in_touched(d, "q", ["order_id", "region"])]), world=_w("target"),
             setup=lambda d: [models_sql.create_touched(d, COLUMNS[:2],
                              f"SELECT * FROM {d.table(TARGET)}")]),
        Case(m, "in_touched_unstaged", lambda d: texts([f"SELECT 1 FROM {d.table(TARGET)} "
             "AS t WHERE " + models_sql.in_touched_unstaged(d, "t", ["order_id", "region"])]),
             world=_w("target", "stage"), setup=lambda d: [models_sql.create_touched(
             d, COLUMNS[:2], f"SELECT * FROM {d.table(TARGET)}")]),
        Case(m, "in_values of three", lambda d: text(f"SELECT 1 FROM {d.table(TARGET)} AS q "
             "WHERE " + models_sql.in_values(d, REGION, 3)), world=_w("target"),
             bind=lambda d: [["eu", "us", "ap"]] if d.array_params else ["eu", "us", "ap"]),
        Case(m, "in_range of a date-only end", lambda d: bound(*_in_range(d)),
             world=_w("target")),
        Case(m, "insert_staged where the target lacks the row",
             lambda d: text(models_sql.insert_staged(d, TARGET, NAMES, "NOT EXISTS ("
             + models_sql.same_row(d, NAMES, "t", d.table(TARGET), "s") + ")")),
             world=_w("target", "stage"), bind=lambda d: [RUN_ID, AT]),
        Case(m, "create_model_target keyed by its partition",
             lambda d: text(models_sql.create_model_target(d, TARGET, typed, ["day"])),
             world=_w("schema")),
        Case(m, "run_index", lambda d: text(models_sql.run_index(d, TARGET)),
             world=_w("target")),
        Case(m, "create_dropped: target keys in scope that no staged row repeats",
             lambda d: text(models_sql.create_dropped(d, TARGET, ["order_id"], NAMES[1:],
             'q."region" = \'eu\''.replace("q.", "t."))), world=_w("target", "stage"),
             setup=lambda d: [models_sql.drop_temp(d, models_sql.DROPPED)]),
        Case(m, "delete the dropped keys", lambda d: text(load_sql.delete_where(
             d, TARGET, models_sql.in_dropped(d, ["order_id"]))), world=_w("target", "stage"),
             setup=_dropped),
        Case(m, "count_dropped", lambda d: text(models_sql.count_dropped(d)),
             world=_w("target", "stage"), setup=_dropped),
        Case(m, "insert_staged whose key the target lacks in scope",
             lambda d: text(models_sql.insert_staged(d, TARGET, NAMES,
             models_sql.key_not_in_target(d, TARGET, ["order_id"], "1 = 1"))),
             world=_w("target", "stage"), bind=lambda d: [RUN_ID, AT]),
        Case(m, "repeated_keys", lambda d: text(models_sql.repeated_keys(d, ["order_id"])),
             world=_w("stage")),
        Case(m, "null_cursor", lambda d: text(models_sql.null_cursor(
             d, "updated_at", ["order_id"])), world=_w("stage")),
        Case(m, "pair_rows_setup", lambda d: texts(models_sql.pair_rows_setup(d, NAMES)),
             dialects=SQLITE_ONLY, world=_w("stage")),
        Case(m, "pair_rows: each target row in scope with an equal staged row",
             lambda d: text(models_sql.pair_rows(d, TARGET, NAMES, "1 = 1")),
             dialects=SQLITE_ONLY, world=_w("target", "stage"),
             setup=lambda d: models_sql.pair_rows_setup(d, NAMES)),
        Case(m, "delete the unpaired target rows", lambda d: text(load_sql.delete_where(
             d, TARGET, models_sql.unpaired_target(d))), dialects=SQLITE_ONLY,
             world=_w("target", "stage"), setup=_paired),
        Case(m, "count_restaged: unpaired target rows whose key is staged",
             lambda d: text(models_sql.count_restaged(d, TARGET, ["order_id"])),
             dialects=SQLITE_ONLY, world=_w("target", "stage"), setup=_paired),
        Case(m, "insert the unpaired staged rows", lambda d: text(models_sql.insert_staged(
             d, TARGET, NAMES, models_sql.unpaired_stage(d))), dialects=SQLITE_ONLY,
             world=_w("target", "stage"), setup=_paired, bind=lambda d: [RUN_ID, AT]),
        Case(m, "prune_before_images that two models consumed",
             lambda d: bound(models_sql.prune_before_images(d, TARGET, 2),
             ["silver", "gold"]), world=_w("state"), setup=_create_before),
        Case(m, "relation_kind of a target", lambda d: bound(models_sql.relation_kind(d),
             models_sql.relation_kind_params(d, TARGET)), world=_w("target")),
        Case(m, "create_view", lambda d: texts(models_sql.create_view(
             d, TableName("analytics", "orders_view"), f"SELECT * FROM {d.table(TARGET)}")),
             world=_w("target")),
    ]  # fmt: skip


def _paired(d: Dialect) -> list[str]:
    return [
        *models_sql.pair_rows_setup(d, NAMES),
        models_sql.pair_rows(d, TARGET, NAMES, "1 = 1"),
    ]


def _dropped(d: Dialect) -> list[str]:
    return [
        models_sql.drop_temp(d, models_sql.DROPPED),
        models_sql.create_dropped(d, TARGET, ["order_id"], NAMES[1:], "1 = 1"),
    ]


def _publish_indexes() -> list[Case]:
    m = "publish_indexes"
    return [
        Case(
            m,
            "create_index of two columns",
            lambda d: text(indexes_sql.create_index(d, TARGET, ["region", "updated_at"])),
            world=_w("target"),
        ),
        Case(
            m,
            "index_exists",
            lambda d: bound(*indexes_sql.index_exists(d, TARGET, ["region"])),
            world=_w("target"),
        ),
    ]


def _in_range(d: Dialect) -> tuple[str, list[Any]]:
    where, params = models_sql.in_range(d, 'q."updated_at"', Window(LOWER, date(2024, 1, 7)))
    return f"SELECT 1 FROM {d.table(TARGET)} AS q WHERE {where}", params


def _row_checks(d: Dialect) -> list[checks.RowCheck]:
    return checks.row_checks(d, CHECKS, SHAPE)


def _check(d: Dialect, name: str) -> checks.RowCheck:
    return next(c for c in _row_checks(d) if c.name == name)


CHECK_NAMES = ("key_not_null:order_id", "not_null:status", "range:amount", "range:order_id",
               "accepted_values:status", "matches:region")  # fmt: skip


def _sample(d: Dialect, name: str) -> Golden:
    check = _check(d, name)
    return bound(checks.sample_keys(d, KEY, check.predicate), check.params)


def _quarantine_rows(d: Dialect) -> Golden:
    check = _check(d, "accepted_values:status")
    statement = checks.quarantine_rows(d, TARGET, SHAPE, check, check.predicate)
    reason = "accepted_values:status: expected one of completed, shipped"
    return bound(statement, [RUN_ID, "orders", check.name, reason, AT, RUN_ID, check.name,
                             *check.params])  # fmt: skip


def _delete_failing(d: Dialect) -> Golden:
    failing = [_check(d, "range:amount"), _check(d, "accepted_values:status")]
    statement = checks.delete_failing(d, [c.predicate for c in failing])
    return bound(statement, [p for c in failing for p in c.params])


def _quality_checks() -> list[Case]:
    m = "quality_checks"
    samples = [
        Case(m, f"sample_keys failing {name}", partial(_sample, name=name), world=_w("stage"))
        for name in CHECK_NAMES
    ]
    return [
        Case(m, "count_failures of every kind of row check",
             lambda d: bound(*checks.count_failures(d, _row_checks(d))), world=_w("stage")),
        *samples,
        Case(m, "sample_keys of duplicated keys",
             lambda d: text(checks.sample_keys(d, KEY, checks.duplicate_predicate(d, KEY))),
             world=_w("stage")),
        Case(m, "sample_keys of duplicated composite keys",
             lambda d: text(checks.sample_keys(d, COMPOSITE_KEY,
                                               checks.duplicate_predicate(d, COMPOSITE_KEY))),
             world=_w("stage")),
        Case(m, "create_quarantine", lambda d: text(checks.create_quarantine(d, TARGET)),
             world=_w("schema")),
        Case(m, "quarantine_rows failing accepted_values", _quarantine_rows,
             world=_w("stage", "quarantine")),
        Case(m, "delete_failing of two checks", _delete_failing, world=_w("stage")),
    ]  # fmt: skip


def _replay_check(d: Dialect) -> checks.RowCheck:
    return _check(d, "accepted_values:status")


def _load_replay() -> list[Case]:
    m = "load_replay"
    return [
        Case(m, "failing_ids",
             lambda d: bound(replay.failing_ids(d, _replay_check(d)), _replay_check(d).params),
             world=_w("replay_stage")),
        Case(m, "keep_entries of two entries",
             lambda d: text(replay.keep_entries(d, TARGET, 2)), world=_w("quarantine"),
             bind=lambda d: ["range:amount: expected >= 0", RUN_ID, "q1", "q2"]),
        Case(m, "resolve_entries of two entries",
             lambda d: text(replay.resolve_entries(d, TARGET, 2)), world=_w("quarantine"),
             bind=lambda d: [AT, RUN_ID, RUN_ID, "q1", "q2"]),
    ]  # fmt: skip


def _quality_quarantine() -> list[Case]:
    m = "quality_quarantine"
    return [
        Case(m, "select_entries unresolved",
             lambda d: text(quarantine_sql.select_entries(d, TARGET, resolved=False, run=None)),
             world=_w("quarantine"), bind=lambda d: ["orders"]),
        Case(m, "select_entries with resolved ones, of one run",
             lambda d: text(quarantine_sql.select_entries(d, TARGET, resolved=True,
                                                          run=RUN_ID[:8])),
             world=_w("quarantine"), bind=lambda d: ["orders", RUN_ID[:8]]),
        Case(m, "existing_tables of two tables", lambda d: text(d.existing_tables(2)),
             world=_w("quarantine"),
             bind=lambda d: [d.table(checks.quarantine_table(TARGET)), d.table(TARGET)]),
        Case(m, "open_counts_sql of two targets",
             lambda d: text(quarantine_sql.open_counts_sql(d, [TARGET, TARGET])),
             world=_w("quarantine"), bind=lambda d: ["orders", "orders_copy"]),
    ]  # fmt: skip


def _built(d: Dialect, build: Callable[[Dialect], str]) -> Golden:
    return text(build(d))


def _ledger_sql() -> list[Case]:
    m = "ledger_sql"
    builders = {
        "upsert_run": lsql.upsert_run, "finish_run": lsql.finish_run,
        "heartbeat": lsql.heartbeat, "insert_task": lsql.insert_task,
        "insert_event": lsql.insert_event, "insert_snapshot": lsql.insert_snapshot,
        "insert_quality": lsql.insert_quality, "ensure_pipeline": lsql.ensure_pipeline,
        "upsert_pipeline": lsql.upsert_pipeline,
        "delete_dependencies": lsql.delete_dependencies,
        "insert_dependency": lsql.insert_dependency, "running_runs": lsql.running_runs,
        "abandon_run": lsql.abandon_run,
        "insert_reconciliation": lsql.insert_reconciliation,
    }  # fmt: skip
    return [
        Case(m, name, partial(_built, build=build), world=_w("ledger"))
        for name, build in builders.items()
    ]


def _ledger_queue() -> list[Case]:
    m = "ledger_queue"
    builders: dict[str, Callable[[Dialect], str]] = {
        "lock_tenant": queue.lock_tenant,
        "abandon_dead_waiters": queue.abandon_dead_waiters,
        "free_ended": queue.free_ended,
        "occupancy": queue.occupancy,
        "first_waiter": queue.first_waiter,
        "take_slot": queue.take_slot,
        "start_waiter": queue.start_waiter,
        "renew_waiter": lambda d: lsql.heartbeat(d, "queued"),
        "end_waiter": queue.end_waiter,
        "status_of": queue.status_of,
        "set_apart_sql (status: rejected and queued runs)": health.set_apart_sql,
    }
    return [
        Case(m, name, partial(_built, build=build), world=_w("ledger"))
        for name, build in builders.items()
    ]


def _ledger_schedule() -> list[Case]:
    """What ``pipeledger schedule`` and ``run --due`` ask of every scheduled pipeline at
    once: two pipelines, two keys (one array each where arrays bind)."""
    m = "ledger_schedule"
    names, keys = ["orders", "customers"], ["schedule:2024-06-15T11:00:00+00:00", "manual:x"]

    def names_of(d: Dialect) -> list[Any]:
        return [names] if d.array_params else list(names)

    def both(d: Dialect) -> list[Any]:
        return [*names_of(d), *([keys] if d.array_params else keys)]

    return [
        Case(
            m,
            "scheduled_spans of two pipelines",
            lambda d: text(lsql.scheduled_spans(d, 2)),
            world=_w("ledger"),
            bind=names_of,
        ),
        Case(
            m,
            "held_keys of two pipelines and two keys",
            lambda d: text(lsql.held_keys(d, 2, 2)),
            world=_w("ledger"),
            bind=both,
        ),
        Case(
            m,
            "latest_scheduled of two pipelines",
            lambda d: text(lsql.latest_scheduled(d, 2)),
            world=_w("ledger"),
            bind=names_of,
        ),
    ]


def _ledger_access() -> list[Case]:
    m = "ledger_access"
    read = ["team_a", AT, "cli", "runs", "orders", "ana@host", "", AT, AT]
    return [
        Case(
            m,
            "record_sql",
            lambda d: text(access.record_sql(d)),
            world=_w("ledger"),
            bind=lambda d: read,
        ),
        Case(
            m,
            "access_rows_sql",
            lambda d: text(access_reads.access_rows_sql(d, pipeline=False)),
            world=_w("ledger"),
            bind=lambda d: ["team_a", AT, 1000],
        ),
        Case(
            m,
            "access_rows_sql of one pipeline",
            lambda d: text(access_reads.access_rows_sql(d, pipeline=True)),
            world=_w("ledger"),
            bind=lambda d: ["team_a", AT, "orders", 1000],
        ),
        # retention: beside ``prune``'s other statements
        Case(
            "ledger_queries",
            "prune_access_sql",
            lambda d: text(queries.prune_access_sql(d)),
            world=_w("ledger"),
            bind=lambda d: [AT - timedelta(days=90)],
        ),
    ]


def _ledger_schema() -> list[Case]:
    return [Case("ledger_schema", "ledger_migrations", lambda d: migrations(ledger_migrations(d)))]


def _extract_sql() -> list[Case]:
    m = "extract_sql"
    windows = {
        "a full read": (Window(), "updated_at", None),
        "an incremental window": (Window(lower=LOWER), "updated_at", None),
        "a backfill to a date-only end": (
            Window(lower=date(2024, 1, 1), upper=date(2024, 1, 7), backfill=True),
            "updated_at", None,
        ),
        "a backfill to a timestamp": (Window(LOWER, UPPER, backfill=True), "updated_at", None),
        "a window per partition": (
            Window(partition_lower={"eu": LOWER, "us": LOWER - timedelta(hours=2)}),
            "updated_at", "region",
        ),
        "an integer cursor": (Window(lower=100), "order_id", None),
    }  # fmt: skip

    def select(d: Dialect, window: Window, cursor: str, partition_by: str | None) -> Golden:
        where, params = extract_sql.window_predicate(d, window, cursor, partition_by)
        return bound(extract_sql.select_statement(d, str(TARGET), None, where), params)

    cases = [
        Case(m, f"select with window_predicate of {name}",
             partial(select, window=window, cursor=cursor, partition_by=partition_by),
             world=_w("target"))
        for name, (window, cursor, partition_by) in windows.items()
    ]  # fmt: skip
    query = "SELECT order_id, updated_at FROM {table}"
    cases.append(
        Case(m, "select_statement of a query",
             lambda d: text(extract_sql.select_statement(
                 d, None, query.format(table=d.table(TARGET)), "1=1")),
             world=_w("target"))
    )  # fmt: skip
    cases.append(
        Case(
            m,
            "select_statement of a query with a % in it, binding the window",
            lambda d: text(
                extract_sql.select_statement(
                    d,
                    None,
                    f"SELECT * FROM {d.table(TARGET)} WHERE \"status\" LIKE 'ship%'",
                    f'"updated_at" >= {d.param}',
                    binds=True,
                )
            ),
            world=_w("target"),
            bind=lambda d: [LOWER],
        )
    )
    return cases


def _ledger_queries() -> list[Case]:
    m = "ledger_queries"
    since = AT - timedelta(days=7)
    return [
        Case(m, "list_runs_sql", lambda d: bound(*queries.list_runs_sql(d)), world=_w("ledger")),
        Case(m, "list_runs_sql of one pipeline, status and start",
             lambda d: bound(*queries.list_runs_sql(d, "orders", since, "failed", 10)),
             world=_w("ledger")),
        Case(m, "volume_anomalies_sql", lambda d: bound(*queries.volume_anomalies_sql(d, AT, None)),
             world=_w("ledger")),
        Case(m, "volume_anomalies_sql of one pipeline",
             lambda d: bound(*queries.volume_anomalies_sql(d, AT, "orders")), world=_w("ledger")),
        Case(m, "pipeline_status_sql", lambda d: bound(*queries.pipeline_status_sql(d, AT)),
             world=_w("ledger")),
        Case(m, "pipeline_status_sql of one pipeline",
             lambda d: bound(*queries.pipeline_status_sql(d, AT, "orders")), world=_w("ledger")),
        Case(m, "task_trends_sql", lambda d: bound(*queries.task_trends_sql(d, AT, None, 14)),
             world=_w("ledger")),
        Case(m, "task_trends_sql of one pipeline",
             lambda d: bound(*queries.task_trends_sql(d, AT, "orders", 14)), world=_w("ledger")),
        Case(m, "task_trends_sql of the 100 slowest tasks",
             lambda d: bound(*queries.task_trends_sql(d, AT, None, 14, 100)), world=_w("ledger")),
        Case(m, "task_trends_sql of one pipeline's slowest task",
             lambda d: bound(*queries.task_trends_sql(d, AT, "orders", 14, 1)), world=_w("ledger")),
        Case(m, "dependencies_sql", lambda d: text(queries.dependencies_sql(d)),
             world=_w("ledger")),
        Case(m, "prunable_runs_sql", lambda d: text(queries.prunable_runs_sql(d)),
             world=_w("ledger"), bind=lambda d: [AT - timedelta(days=90)]),
        Case(m, "last_success_sql", lambda d: text(queries.last_success_sql(d)),
             world=_w("ledger"), bind=lambda d: ["orders"]),
        Case(m, "recent_counts_sql", lambda d: text(queries.recent_counts_sql(d)),
             world=_w("ledger"), bind=lambda d: queries.status_window(AT, timedelta(days=30))),
        Case(m, "lateness_sql", lambda d: text(queries.lateness_sql(d)),
             world=_w("ledger"), bind=lambda d: ["orders"]),
    ]  # fmt: skip


EVERY_FILTER = runs.RunFilter(
    pipeline="orders",
    since=LOWER,
    until=UPPER,
    status="failed",
    trigger_type="retry",
    logical_run_id=RUN_ID,
    correlation_id="dag-1",
    before=(UPPER, RUN_ID),
)


def _ledger_reads() -> list[Case]:
    m = "ledger_reads"
    return [
        Case(
            m,
            "list_runs_sql of every filter and a page",
            lambda d: bound(*runs.list_runs_sql(d, limit=20, where=EVERY_FILTER)),
            world=_w("ledger"),
        ),
        Case(
            m,
            "count_runs_sql of one pipeline, state and trigger",
            lambda d: bound(
                *runs.count_runs_sql(
                    d, runs.RunFilter(pipeline="orders", status="failed", trigger_type="manual")
                )
            ),
            world=_w("ledger"),
        ),
        Case(
            m,
            "run_start_sql",
            lambda d: text(runs.run_start_sql(d)),
            world=_w("ledger"),
            bind=lambda d: [RUN_ID],
        ),
        Case(
            m,
            "run_checks_sql",
            lambda d: text(ledger_checks.run_checks_sql(d)),
            world=_w("ledger"),
            bind=lambda d: [RUN_ID],
        ),
        Case(
            m,
            "check_history_sql since a time",
            lambda d: text(ledger_checks.check_history_sql(d, LOWER)),
            world=_w("ledger"),
            bind=lambda d: ["orders", LOWER, 500],
        ),
        Case(
            m,
            "check_history_sql",
            lambda d: text(ledger_checks.check_history_sql(d, None)),
            world=_w("ledger"),
            bind=lambda d: ["orders", 500],
        ),
        Case(
            m,
            "work_by_state_sql",
            lambda d: text(activity.work_by_state_sql(d)),
            world=_w("ledger"),
            bind=lambda d: [activity.hour_start(AT, 24)],
        ),
        Case(
            m,
            "volume_days_sql",
            lambda d: text(activity.volume_days_sql(d, pipeline=False)),
            world=_w("ledger"),
            bind=lambda d: ["2024-05-17"],
        ),
        Case(
            m,
            "volume_days_sql of one pipeline",
            lambda d: text(activity.volume_days_sql(d, pipeline=True)),
            world=_w("ledger"),
            bind=lambda d: ["2024-05-17", "orders"],
        ),
        Case(
            m,
            "volume_days_sql of two pipelines (a page of the overview)",
            lambda d: text(activity.volume_days_sql(d, pipeline=False, among=2)),
            world=_w("ledger"),
            bind=lambda d: ["2024-05-17", "orders", "customers"],
        ),
    ]


def _ledger_sla() -> list[Case]:
    m = "ledger_sla"
    breach = ["b1", "orders", "freshness", RUN_ID, LOWER, AT, None, 3600, "late"]
    return [
        Case(m, "insert_breach_sql", lambda d: text(sla.insert_breach_sql(d)),
             world=_w("ledger"), bind=lambda d: breach),
        Case(m, "open_breaches_sql", lambda d: text(sla.open_breaches_sql(d)), world=_w("ledger")),
        Case(m, "end_breach_sql", lambda d: text(sla.end_breach_sql(d)), world=_w("ledger"),
             bind=lambda d: [AT, "b1"]),
        Case(m, "slow_runs_sql", lambda d: text(sla.slow_runs_sql(d)), world=_w("ledger"),
             bind=lambda d: [LOWER]),
        Case(m, "breaches_sql", lambda d: text(sla.breaches_sql(d)), world=_w("ledger"),
             bind=lambda d: [LOWER, LOWER]),
        Case(m, "timed_successes_sql", lambda d: text(sla.timed_successes_sql(d)),
             world=_w("ledger"),
             bind=lambda d: [*queries.status_window(AT, timedelta(days=30)), LOWER]),
        Case(m, "p95_sql", lambda d: text(sla.p95_sql(d, 2)), world=_w("ledger"),
             bind=lambda d: [LOWER, ["orders", "customers"], [0, 1]] if d.correlated_limit
             else ["orders", "orders", LOWER, 0, "customers", "customers", LOWER, 1]),
        Case(m, "transitions_sql", lambda d: text(sla.transitions_sql(d)), world=_w("ledger"),
             bind=lambda d: [LOWER]),
    ]  # fmt: skip


def _alerts() -> list[Case]:
    m = "alerts"
    row = ["failed:orders:r1", "slack", "failed", "orders", RUN_ID, "boom", '{"event": "failed"}',
           "pending", 0, AT, AT, None, None, None]  # fmt: skip
    return [
        Case(m, "ended_runs_sql", lambda d: text(alert_events.ended_runs_sql(d)),
             world=_w("ledger"), bind=lambda d: [LOWER]),
        Case(m, "mismatches_sql", lambda d: text(alert_events.mismatches_sql(d)),
             world=_w("ledger"), bind=lambda d: [LOWER]),
        Case(m, "insert_sql", lambda d: text(outbox.insert_sql(d)), world=_w("ledger"),
             bind=lambda d: row),
        Case(m, "due_sql of two webhooks", lambda d: text(outbox.due_sql(d, 2)),
             world=_w("ledger"), bind=lambda d: [AT, "slack", "pager", 20]),
        Case(m, "claim_sql", lambda d: text(outbox.claim_sql(d)), world=_w("ledger"),
             bind=lambda d: [AT, AT, "failed:orders:r1", "slack", AT]),
        Case(m, "outcome_sql", lambda d: text(outbox.outcome_sql(d)), world=_w("ledger"),
             bind=lambda d: ["delivered", AT, AT, None, "failed:orders:r1", "slack"]),
        Case(m, "list_sql", lambda d: text(outbox.list_sql(d)), world=_w("ledger"),
             bind=lambda d: [LOWER]),
        Case(m, "list_sql of one run", lambda d: text(outbox.list_sql(d, run=True)),
             world=_w("ledger"), bind=lambda d: [LOWER, RUN_ID]),
    ]  # fmt: skip


def _load_late_sql() -> list[Case]:
    m = "load_late_sql"
    below = f'"updated_at" < {"%s"}'
    return [
        Case(m, "files_read_table", lambda d: text(state.files_read_table(d)),
             world=_w("state")),
        Case(m, "late_rows_table", lambda d: text(state.late_rows_table(d)),
             world=_w("state")),
        Case(m, "read_files", lambda d: text(late_sql.read_files(d)), world=_w("state"),
             bind=lambda d: ["orders"]),
        Case(m, "record_file", lambda d: text(late_sql.record_file(d)), world=_w("state"),
             bind=lambda d: ["orders", "/data/orders_1.csv", 1024, 1718452800000000000, RUN_ID,
                             AT]),
        Case(m, "counted_late of two fingerprints", lambda d: text(late_sql.counted_late(d, 2)),
             world=_w("state"), bind=lambda d: ["orders", 11, 12]),
        Case(m, "count_late of two rows", lambda d: text(late_sql.count_late(d, 2)),
             world=_w("state"),
             bind=lambda d: ["orders", 11, 600, RUN_ID, AT, "orders", 12, 5400, RUN_ID, AT]),
        Case(m, "held_fingerprints below a cursor",
             lambda d: text(late_sql.held_fingerprints(d, TARGET, KEY, "updated_at")),
             world=_w("target", "stage"), bind=lambda d: [AT]),
        Case(m, "unheld_rows of the stage below a cursor",
             lambda d: text(late_sql.unheld_rows(
                 d, TARGET, KEY, "updated_at", d.stage(), ["_pipeledger_row_hash", "updated_at"],
                 below.replace("%s", d.param))),
             world=_w("target", "stage"), bind=lambda d: [AT]),
        Case(m, "keep_stage_as", lambda d: text(late_sql.keep_stage_as(d, late_sql.CANDIDATES)),
             world=_w("stage")),
        Case(m, "drop_stage_table", lambda d: text(late_sql.drop_stage_table(d)),
             world=_w("stage")),
        Case(m, "restore_stage set aside",
             lambda d: text(late_sql.restore_stage(d, late_sql.STAGE_ASIDE)),
             world=_w("stage"), setup=lambda d: [late_sql.keep_stage_as(d, late_sql.STAGE_ASIDE)]),
    ]  # fmt: skip


IDENTITY = ["order_id", "updated_at", "region"]
DAYS = ["2024-01-01", "2024-01-02"]


def _reconcile_stage(d: Dialect) -> list[str]:
    columns = [
        COLUMNS[0],
        COLUMNS[4],
        COLUMNS[1],
        ROW_HASH,
        Column("_pipeledger_side", "text"),
    ]
    return [stage.create_stage(d, columns)]


def _source_label(d: Dialect) -> str:
    return d.time_label('v."updated_at"', "day")


def _target_rows(d: Dialect, filled: bool = False, where: str = "1=1") -> str:
    label = d.time_label('t."updated_at"', "day")
    return reconcile_sql.target_rows(d, TARGET, IDENTITY, KEY, where, label, filled)


def _bucketed_target_rows(d: Dialect) -> str:
    bucket = d.time_bucket('t."updated_at"', "day")
    return reconcile_sql.target_rows(d, TARGET, IDENTITY, KEY, "1=1", bucket, False)


def _bare_target_rows(d: Dialect) -> str:
    return reconcile_sql.target_rows(d, TARGET, IDENTITY, KEY, "1=1", None, False)


def _join_labels(d: Dialect) -> tuple[str, str]:
    return d.time_label('s."updated_at"', "day"), d.time_label('t."updated_at"', "day")


def _current_source(d: Dialect) -> list[str]:
    return [
        *_reconcile_stage(d),
        *reconcile_sql.current_source(d, IDENTITY, KEY, "updated_at", _source_label(d)),
    ]


def _differing_windows(d: Dialect) -> list[str]:
    return [
        *_current_source(d),
        reconcile_sql.create_windows(d),
        *reconcile_sql.keep_target_rows(d, _target_rows(d), KEY),
    ]


def _differences(d: Dialect) -> list[str]:
    return [*_differing_windows(d), reconcile_sql.differences(d, IDENTITY, KEY)]


def _hour(d: Dialect, column: str) -> str:
    return d.time_bucket(column, "hour")


def _fine_buckets(d: Dialect) -> list[str]:
    return [reconcile_sql.create_fine_buckets(d, TARGET, _hour(d, 't."updated_at"'))]


def _capped(d: Dialect, partitions: int) -> str:
    cap = reconcile_sql.cap_predicate(d, "updated_at", "region" if partitions else None, partitions)
    return f"SELECT 1 FROM {d.table(TARGET)} WHERE {cap}"


def _reconcile_sql() -> list[Case]:
    m = "reconcile_sql"
    upto = '"updated_at" <= %s'
    return [
        Case(m, "current_source by day",
             lambda d: texts(reconcile_sql.current_source(d, IDENTITY, KEY, "updated_at",
                                                          _source_label(d))),
             setup=_reconcile_stage),
        Case(m, "current_source of a whole snapshot (no cursor)",
             lambda d: texts(reconcile_sql.current_source(d, KEY, KEY, None,
                                                          Grain.whole().label(d, ""))),
             setup=_reconcile_stage),
        Case(m, "source_windows", lambda d: text(reconcile_sql.source_windows(d)),
             setup=_current_source),
        Case(m, "unique_source_keys", lambda d: text(reconcile_sql.unique_source_keys(d, KEY)),
             setup=_reconcile_stage),
        Case(m, "staged_source_windows",
             lambda d: text(reconcile_sql.staged_source_windows(d, _source_label(d))),
             setup=_reconcile_stage),
        Case(m, "staged_source_windows of a whole snapshot (no cursor)",
             lambda d: text(reconcile_sql.staged_source_windows(d, Grain.whole().label(d, ""))),
             setup=_reconcile_stage),
        Case(m, "target_rows with stored fingerprints, up to the watermark",
             lambda d: text(_target_rows(d, where=upto.replace("%s", d.param))),
             world=_w("target"), bind=lambda d: [AT]),
        Case(m, "target_rows with fingerprints made for rows without",
             lambda d: text(_target_rows(d, filled=True)), world=_w("target"),
             setup=_reconcile_stage),
        Case(m, "target_windows",
             lambda d: text(reconcile_sql.target_windows(d, _bucketed_target_rows(d),
                                                         d.time_label("b.b", "day"))),
             world=_w("target")),
        Case(m, "create_fine_buckets of hours",
             lambda d: text(reconcile_sql.create_fine_buckets(
                 d, TARGET, _hour(d, 't."updated_at"'))), world=_w("target")),
        Case(m, "insert_fine_buckets of two",
             lambda d: text(reconcile_sql.insert_fine_buckets(d, 2)), world=_w("target"),
             setup=_fine_buckets, bind=lambda d: [AT, AT]),
        Case(m, "in_fine_buckets",
             lambda d: text(f"SELECT 1 FROM {d.table(TARGET)} WHERE "
                            + reconcile_sql.in_fine_buckets(d, _hour(d, '"updated_at"'))),
             world=_w("target"), setup=_fine_buckets),
        Case(m, "missing_held_elsewhere",
             lambda d: text(reconcile_sql.missing_held_elsewhere(
                 d, TARGET, KEY, upto.replace("%s", d.param),
                 reconcile_sql.in_fine_buckets(d, _hour(d, '"updated_at"')))),
             world=_w("target"), setup=lambda d: [*_fine_buckets(d), *_differences(d)],
             bind=lambda d: [AT]),
        Case(m, "create_windows", lambda d: text(reconcile_sql.create_windows(d))),
        Case(m, "insert_windows of two", lambda d: text(reconcile_sql.insert_windows(d, 2)),
             setup=lambda d: [reconcile_sql.create_windows(d)], bind=lambda d: DAYS),
        Case(m, "keep_target_rows of the windows that differ",
             lambda d: texts(reconcile_sql.keep_target_rows(d, _target_rows(d), KEY)),
             world=_w("target"), setup=lambda d: [reconcile_sql.create_windows(d)]),
        Case(m, "differences", lambda d: text(reconcile_sql.differences(d, IDENTITY, KEY)),
             world=_w("target"), setup=_differing_windows),
        Case(m, "differences_once: one join of the stage with the target",
             lambda d: text(reconcile_sql.differences_once(d, IDENTITY, KEY, _join_labels(d),
                                                           _bare_target_rows(d))),
             world=_w("target"),
             setup=lambda d: [*_reconcile_stage(d), reconcile_sql.create_windows(d)]),
        Case(m, "count_differences", lambda d: text(reconcile_sql.count_differences(d)),
             world=_w("target"), setup=_differences),
        Case(m, "sample_keys, ten a window",
             lambda d: text(reconcile_sql.sample_keys(d, KEY, 10)), world=_w("target"),
             setup=_differences),
        Case(m, "unhashed_count up to the watermark",
             lambda d: text(reconcile_sql.unhashed_count(d, TARGET, upto.replace("%s", d.param))),
             world=_w("target"), bind=lambda d: [AT]),
        Case(m, "unhashed_rows, the first page",
             lambda d: text(reconcile_sql.unhashed_rows(d, TARGET, NAMES, KEY, "1=1", False,
                                                        50000)), world=_w("target")),
        Case(m, "unhashed_rows, the page after a composite key",
             lambda d: text(reconcile_sql.unhashed_rows(d, TARGET, NAMES, COMPOSITE_KEY, "1=1",
                                                        True, 50000)),
             world=_w("target"), bind=lambda d: [5, "eu"]),
        Case(m, "cap_predicate of an unpartitioned pipeline", lambda d: text(_capped(d, 0)),
             world=_w("target"), bind=lambda d: [AT]),
        Case(m, "cap_predicate of two partitions", lambda d: text(_capped(d, 2)),
             world=_w("target"), bind=lambda d: ["eu", AT, "us", AT]),
    ]  # fmt: skip


def _reconcile_windows() -> list[Case]:
    m = "reconcile_windows"

    def labels(d: Dialect) -> str:
        grains = [Grain("timestamptz", unit="hour"), Grain("timestamptz", unit="day"),
                  Grain("timestamptz", unit="month")]  # fmt: skip
        shown = ", ".join(g.label(d, 't."updated_at"') for g in grains)
        return f"SELECT {shown} FROM {d.table(TARGET)} AS t"

    def width(d: Dialect) -> str:
        label = Grain("bigint", width=1000).label(d, 't."order_id"')
        return f"SELECT {label} FROM {d.table(TARGET)} AS t"

    return [
        Case(m, "label by hour, day and month", lambda d: text(labels(d)), world=_w("target")),
        Case(m, "label of integer windows 1000 wide", lambda d: text(width(d)),
             world=_w("target")),
    ]  # fmt: skip


CASES: tuple[Case, ...] = (
    *_load_sql(),
    *_deletes(),
    *_load_history_sql(),
    *_warehouse_stage(),
    *_load_guard_sql(),
    *_load_state(),
    *_load_before(),
    *_models_sql(),
    *_publish_indexes(),
    *_quality_checks(),
    *_load_replay(),
    *_quality_quarantine(),
    *_ledger_sql(),
    *_ledger_schema(),
    *_ledger_queue(),
    *_ledger_schedule(),
    *_ledger_access(),
    *_extract_sql(),
    *_ledger_queries(),
    *_ledger_reads(),
    *_ledger_sla(),
    *_alerts(),
    *_load_late_sql(),
    *_reconcile_sql(),
    *_reconcile_windows(),
)
MODULES = {
    "load_sql": "pipeledger.publish.merge_sql",
    "load_history_sql": "pipeledger.publish.scd2_sql",
    "warehouse_stage": "pipeledger.warehouse.stage",
    "load_guard_sql": "pipeledger.state.guard_sql",
    "load_state": "pipeledger.state.tables",
    "load_before": "pipeledger.publish.before",
    "models_sql": "pipeledger.runs.model.sql",
    "publish_indexes": "pipeledger.publish.indexes",
    "quality_checks": "pipeledger.quality.checks",
    "load_replay": "pipeledger.runs.replay (quarantine replay)",
    "quality_quarantine": "pipeledger.quality.quarantine",
    "ledger_sql": "pipeledger.ledger.sql",
    "ledger_schema": "pipeledger.ledger.tables (migrations)",
    "ledger_queue": "pipeledger.ledger.queue",
    "ledger_schedule": "pipeledger.ledger.sql (scheduled runs of every pipeline at once)",
    "ledger_access": "pipeledger.ledger.access, pipeledger.ledger.reads.access",
    "extract_sql": "pipeledger.sources.sql",
    "ledger_queries": "pipeledger.ledger.reads.queries",
    "ledger_reads": "pipeledger.ledger.reads (runs, checks, activity)",
    "ledger_sla": "pipeledger.ledger.reads.sla",
    "alerts": "pipeledger.alerts (events, outbox)",
    "load_late_sql": "pipeledger.runs.load.late_sql",
    "reconcile_sql": "pipeledger.runs.reconcile.sql",
    "reconcile_windows": "pipeledger.runs.reconcile.windows",
}
