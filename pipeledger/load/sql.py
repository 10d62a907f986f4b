"""SQL text for staging, merging and state, built by pure functions.

Nothing here executes anything: adapters run these strings with bound parameters.
Identifiers have been validated by :mod:`pipeledger.schema` and are quoted again here.
Two dialects: PostgreSQL (``%s`` parameters) and SQLite (``?`` parameters). In SQLite,
which has no schemas, ``schema.table`` is one quoted table name ``"schema.table"``.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from pipeledger.schema import (
    LOADED_AT_COLUMN,
    ROW_HASH_COLUMN,
    RUN_ID_COLUMN,
    Column,
    TableName,
    sqlite_declared_type,
)

DialectName = Literal["postgres", "sqlite"]
STAGE = "_pipeledger_stage"
STAGE_UNIQUE = "_pipeledger_stage_unique"
STATE_TABLE = TableName("pipeledger", "pipeline_state")
# staged beside the data columns and stored with each target row (NULL: not known)
ROW_HASH = Column(ROW_HASH_COLUMN, "bigint")


def quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


@dataclass(frozen=True)
class Dialect:
    name: DialectName

    @property
    def param(self) -> str:
        return "%s" if self.name == "postgres" else "?"

    def table(self, name: TableName) -> str:
        if name.schema is None:
            return quote(name.table)
        if self.name == "postgres":
            return f"{quote(name.schema)}.{quote(name.table)}"
        return quote(f"{name.schema}.{name.table}")

    def column_type(self, sql_type: str) -> str:
        """The DDL type; SQLite keeps exact decimals as text (its NUMERIC would round them)
        and declares other types by names of its own (``schema.sqlite_declared_type``)."""
        return sqlite_declared_type(sql_type) if self.name == "sqlite" else sql_type

    def stage(self) -> str:
        return quote(STAGE) if self.name == "postgres" else f"temp.{quote(STAGE)}"

    def stage_unique(self) -> str:
        return quote(STAGE_UNIQUE) if self.name == "postgres" else f"temp.{quote(STAGE_UNIQUE)}"

    def row_text(self, alias: str, columns: Sequence[str]) -> str:
        """A text rendering of a row's values: a total order used to break cursor ties."""
        if self.name == "postgres":
            values = ", ".join(f"{alias}.{quote(c)}" for c in columns)
            return f'(ROW({values})::text COLLATE "C")'
        return "(" + " || ',' || ".join(f"quote({alias}.{quote(c)})" for c in columns) + ")"

    def differs(self, left: str, right: str, columns: Sequence[str]) -> str:
        lhs = ", ".join(f"{left}.{quote(c)}" for c in columns)
        rhs = ", ".join(f"{right}.{quote(c)}" for c in columns)
        operator = "IS DISTINCT FROM" if self.name == "postgres" else "IS NOT"
        if len(columns) == 1:
            return f"{lhs} {operator} {rhs}"
        return f"({lhs}) {operator} ({rhs})"


POSTGRES = Dialect("postgres")
SQLITE = Dialect("sqlite")


@dataclass(frozen=True)
class MergeSpec:
    """Everything the merge needs to know about one target."""

    target: TableName
    columns: tuple[Column, ...]
    key: tuple[str, ...]
    cursor: str
    policy: str
    fingerprints: bool = True  # the target has the fingerprint column

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    @property
    def stored(self) -> list[str]:
        """What the stage carries into the target: the data columns and the fingerprint."""
        return [*self.names, ROW_HASH_COLUMN] if self.fingerprints else self.names

    @property
    def values(self) -> list[str]:
        """Non-key columns: the content compared to decide 'unchanged'."""
        return [c.name for c in self.columns if c.name not in self.key]


def create_schema(d: Dialect, target: TableName) -> str | None:
    if d.name != "postgres" or target.schema is None:
        return None
    return f"CREATE SCHEMA IF NOT EXISTS {quote(target.schema)}"


def create_target(d: Dialect, spec: MergeSpec, primary_key: bool = True) -> str:
    """The target table. ``primary_key=False`` defers the key to :func:`add_primary_key`:
    on PostgreSQL building it once after a bulk insert is cheaper than maintaining it."""
    required = {*spec.key, spec.cursor}
    lines = [
        f"{quote(c.name)} {d.column_type(c.sql_type)}" + (" NOT NULL" if c.name in required else "")
        for c in spec.columns
    ]
    lines.append(f"{quote(ROW_HASH_COLUMN)} bigint")
    lines.append(f"{quote(RUN_ID_COLUMN)} text NOT NULL")
    lines.append(f"{quote(LOADED_AT_COLUMN)} timestamptz NOT NULL")
    if primary_key:
        lines.append("PRIMARY KEY (" + ", ".join(quote(k) for k in spec.key) + ")")
    body = ",\n  ".join(lines)
    return f"CREATE TABLE {d.table(spec.target)} (\n  {body}\n)"


def add_primary_key(d: Dialect, spec: MergeSpec) -> str:
    keys = ", ".join(quote(k) for k in spec.key)
    return f"ALTER TABLE {d.table(spec.target)} ADD PRIMARY KEY ({keys})"


def add_column(d: Dialect, target: TableName, column: Column, if_missing: bool = False) -> str:
    """A new nullable column (schema_drift = "evolve"; the fingerprint of an old target,
    ``if_missing``: on PostgreSQL two processes may add it at once)."""
    kind = d.column_type(column.sql_type)
    exists = " IF NOT EXISTS" if if_missing and d.name == "postgres" else ""
    return f"ALTER TABLE {d.table(target)} ADD COLUMN{exists} {quote(column.name)} {kind}"


def insert_new(d: Dialect, spec: MergeSpec, source: str) -> str:
    """A plain insert, for a target created by this very run (nothing to conflict with)."""
    names = ", ".join(quote(c) for c in spec.stored)
    meta = f"{quote(RUN_ID_COLUMN)}, {quote(LOADED_AT_COLUMN)}"
    return (
        f"INSERT INTO {d.table(spec.target)} ({names}, {meta}) "
        f"SELECT {names}, {d.param}, {d.param} FROM {source}"
    )


def create_stage(d: Dialect, columns: Sequence[Column]) -> str:
    body = ", ".join(f"{quote(c.name)} {d.column_type(c.sql_type)}" for c in columns)
    suffix = " ON COMMIT DROP" if d.name == "postgres" else ""
    name = quote(STAGE)
    return f"CREATE TEMP TABLE {name} ({body}){suffix}"


def _stage_in(target: TableName) -> str:
    return f"{quote(target.schema)}.{quote(STAGE)}" if target.schema else quote(STAGE)


def create_promotable_stage(target: TableName, columns: Sequence[Column], cursor: str) -> list[str]:
    """PostgreSQL, new target: stage into a regular table beside the target that becomes
    the target at publish (a rename instead of copying every row). ``search_path`` puts
    the target's schema first so that the stage's name resolves to this table."""
    body = ", ".join(
        f"{quote(c.name)} {c.sql_type}" + (" NOT NULL" if c.name == cursor else "") for c in columns
    )
    path = [f"SET LOCAL search_path = {quote(target.schema)}, public"] if target.schema else []
    return [*path, f"CREATE TABLE {_stage_in(target)} ({body})"]


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def promote_stage(spec: MergeSpec, run_id: str, loaded_at: datetime) -> list[str]:
    """The promotable stage becomes the target: the run's id and time are added as columns
    with constant defaults (PostgreSQL stores those once, not per row; DDL takes no bound
    parameters, and both values are made here: a UUID and an ISO timestamp), then the
    defaults are dropped, the table renamed and keyed."""
    uuid.UUID(run_id)  # refuse anything but a UUID before it is inlined
    target = POSTGRES.table(spec.target)
    keys = ", ".join(quote(k) for k in spec.key)
    stage = _stage_in(spec.target)
    return [
        f"ALTER TABLE {stage} ADD COLUMN {quote(RUN_ID_COLUMN)} text NOT NULL "
        f"DEFAULT {_literal(run_id)}, ADD COLUMN {quote(LOADED_AT_COLUMN)} timestamptz "
        f"NOT NULL DEFAULT {_literal(loaded_at.isoformat())}",
        f"ALTER TABLE {stage} ALTER COLUMN {quote(RUN_ID_COLUMN)} DROP DEFAULT, "
        f"ALTER COLUMN {quote(LOADED_AT_COLUMN)} DROP DEFAULT",
        f"ALTER TABLE {stage} RENAME TO {quote(spec.target.table)}",
        f"ALTER TABLE {target} ADD PRIMARY KEY ({keys})",
    ]


def drop_stage(d: Dialect) -> list[str]:
    return [f"DROP TABLE IF EXISTS {d.stage_unique()}", f"DROP TABLE IF EXISTS {d.stage()}"]


def copy_stage(columns: Sequence[str], binary: bool = False) -> str:
    names = ", ".join(quote(c) for c in columns)
    return f"COPY {quote(STAGE)} ({names}) FROM STDIN (FORMAT {'binary' if binary else 'csv'})"


FORGET_TRIGGER = "_pipeledger_forget_row_hash"
FORGET_FUNCTION = f"{quote(STATE_TABLE.schema or '')}.{quote('forget_row_hash')}"
# per target: since when its trigger has guarded its fingerprints (load.known)
GUARDS_TABLE = TableName("pipeledger", "fingerprint_guards")


def forget_hash_function() -> str:
    """PostgreSQL: the function of :func:`forget_hash_trigger` (state migrations 2 and 3)."""
    return (
        f"CREATE OR REPLACE FUNCTION {FORGET_FUNCTION}() RETURNS trigger LANGUAGE plpgsql "
        f"AS $$ BEGIN NEW.{quote(ROW_HASH_COLUMN)} := NULL; RETURN NEW; END $$"
    )


def _guards_columns(d: Dialect) -> str:
    timestamp = "timestamptz" if d.name == "postgres" else "text"
    return f"(target text PRIMARY KEY, trigger_version text NOT NULL, since {timestamp} NOT NULL)"


def fingerprint_guard_table(d: Dialect) -> str:
    """State migration 3 (as first committed): per target (its oid on PostgreSQL), which
    trigger guards it and since when."""
    return f"CREATE TABLE IF NOT EXISTS {d.table(GUARDS_TABLE)} {_guards_columns(d)}"


def renewed_guard_table(d: Dialect) -> list[str]:
    """State migration 4: the guards table again, replacing one of an earlier shape that
    migration 3 kept (guards are rebuilt by the next runs; until then backfills compare
    every row)."""
    table = d.table(GUARDS_TABLE)
    return [f"DROP TABLE IF EXISTS {table}", f"CREATE TABLE {table} {_guards_columns(d)}"]


def _trigger_name(d: Dialect, target: TableName) -> str:
    """PostgreSQL names triggers per table; SQLite per database."""
    return FORGET_TRIGGER if d.name == "postgres" else f"{FORGET_TRIGGER}:{target}"


def forget_hash_trigger(d: Dialect, target: TableName) -> str:
    """An UPDATE that leaves a row's fingerprint as it was did not come from pipeledger
    (whose writes carry the new row's fingerprint): the stored fingerprint may no longer
    describe the row, so it is cleared, and the next backfill compares that row in full."""
    h, name = quote(ROW_HASH_COLUMN), quote(_trigger_name(d, target))
    if d.name == "postgres":
        kept = f"NEW.{h} IS NOT NULL AND NEW.{h} IS NOT DISTINCT FROM OLD.{h}"
        return (
            f"CREATE TRIGGER {name} BEFORE UPDATE ON {d.table(target)} "
            f"FOR EACH ROW WHEN ({kept}) EXECUTE PROCEDURE {FORGET_FUNCTION}(); "
            f"{always_fire(target)}"
        )
    kept = f"NEW.{h} IS NOT NULL AND NEW.{h} IS OLD.{h}"
    return (
        f"CREATE TRIGGER IF NOT EXISTS {name} AFTER UPDATE ON {d.table(target)} FOR EACH ROW "
        f"WHEN {kept} BEGIN UPDATE {d.table(target)} SET {h} = NULL WHERE rowid = NEW.rowid; END"
    )


def always_fire(target: TableName) -> str:
    """PostgreSQL: fire also in replica mode (logical replication's apply workers and
    ``session_replication_role = replica`` skip triggers that are merely enabled)."""
    return f"ALTER TABLE {POSTGRES.table(target)} ENABLE ALWAYS TRIGGER {quote(FORGET_TRIGGER)}"


def trigger_version(d: Dialect) -> str:
    """The target's fingerprint trigger if it fires on every write: on PostgreSQL the
    trigger's oid and row version and its function's row version (any change to either,
    re-created, disabled, re-enabled or replaced, gives another version)."""
    if d.name == "postgres":
        return (
            "SELECT t.oid::text || ':' || t.xmin::text || ':' || p.xmin::text "
            "FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid "
            "WHERE t.tgrelid = to_regclass(%s) AND t.tgname = %s AND t.tgenabled = 'A'"
        )
    return "SELECT 'sqlite' FROM sqlite_master WHERE type = 'trigger' AND name = ? COLLATE NOCASE"


def trigger_params(d: Dialect, target: TableName) -> list[str]:
    return [d.table(target), FORGET_TRIGGER] if d.name == "postgres" else [_trigger_name(d, target)]


def trigger_exists(d: Dialect) -> str:
    """PostgreSQL: whether the target has the trigger at all (enabled or not)."""
    return "SELECT count(*) FROM pg_trigger WHERE tgrelid = to_regclass(%s) AND tgname = %s"


def may_upgrade(d: Dialect) -> str:
    """PostgreSQL: whether this role owns the target and may upsert guards (parameters:
    the target, the guards table twice)."""
    return (
        "SELECT coalesce((SELECT pg_has_role(relowner, 'USAGE') FROM pg_class "
        "WHERE oid = to_regclass(%s)), false) "
        "AND has_table_privilege(%s, 'INSERT') AND has_table_privilege(%s, 'UPDATE')"
    )


def without_rowid() -> str:
    """SQLite: a row if the table has no rowid (parameter: its name)."""
    return "SELECT 1 FROM pragma_table_list WHERE name = ? COLLATE NOCASE AND wr = 1"


def guard_key(d: Dialect) -> str | None:
    """PostgreSQL: the target's oid, whatever name reaches it (SQLite: its lower-case name)."""
    return "SELECT to_regclass(%s)::oid::text" if d.name == "postgres" else None


def read_guard_row(d: Dialect) -> str:
    table = d.table(GUARDS_TABLE)
    return f"SELECT trigger_version, since FROM {table} WHERE target = {d.param}"


def record_guard(d: Dialect) -> str:
    """Parameters: target key, trigger version, since."""
    p = d.param
    return (
        f"INSERT INTO {d.table(GUARDS_TABLE)} (target, trigger_version, since) "
        f"VALUES ({p}, {p}, {p}) ON CONFLICT (target) DO UPDATE SET "
        "trigger_version = excluded.trigger_version, since = excluded.since"
    )


def newest_load(d: Dialect, target: TableName) -> str:
    return f"SELECT max({quote(LOADED_AT_COLUMN)}) FROM {d.table(target)}"


def lock_against_writers(d: Dialect, target: TableName) -> str | None:
    """PostgreSQL: hold off other writers of the target until this transaction ends
    (self-exclusive, so two such transactions queue instead of deadlocking)."""
    if d.name != "postgres":
        return None  # SQLite's write transaction already excludes every other writer
    return f"LOCK TABLE {d.table(target)} IN SHARE ROW EXCLUSIVE MODE"


def stored_hashes(d: Dialect, target: TableName, where: str) -> str:
    """Fingerprints of the target rows matching ``where`` (a cursor window) written since
    the target's trigger guards them (a parameter before the limit), at most as many as
    the last parameter says."""
    h, at = quote(ROW_HASH_COLUMN), quote(LOADED_AT_COLUMN)
    return (
        f"SELECT {h} FROM {d.table(target)} WHERE {h} IS NOT NULL AND {where} "
        f"AND {at} >= {d.param} LIMIT {d.param}"
    )


def staged_key_hashes(d: Dialect, spec: MergeSpec) -> str:
    """The fingerprints the target holds for the keys that were staged."""
    join = " AND ".join(f"t.{quote(k)} = s.{quote(k)}" for k in spec.key)
    h = quote(ROW_HASH_COLUMN)
    return (
        f"SELECT t.{h} FROM {d.table(spec.target)} AS t JOIN {d.stage()} AS s ON {join} "
        f"WHERE t.{h} IS NOT NULL"
    )


def restage_from_target(d: Dialect, spec: MergeSpec, count: int = 0) -> str:
    """Stage again, from the target, the rows of staged keys with these fingerprints: the
    staged keys drive the join to the target's key (the fingerprint has no index).
    PostgreSQL takes the fingerprints as one array parameter, SQLite as ``count``."""
    stored = ", ".join(quote(c) for c in spec.stored)
    selected = ", ".join(f"t.{quote(c)}" for c in spec.stored)
    keys = ", ".join(quote(k) for k in spec.key)
    join = " AND ".join(f"t.{quote(k)} = s.{quote(k)}" for k in spec.key)
    h = f"t.{quote(ROW_HASH_COLUMN)}"
    wanted = f"{h} = ANY(%s)" if d.name == "postgres" else f"{h} IN ({', '.join('?' * count)})"
    return (
        f"INSERT INTO {d.stage()} ({stored}) SELECT {selected} "
        f"FROM (SELECT DISTINCT {keys} FROM {d.stage()}) AS s "
        f"JOIN {d.table(spec.target)} AS t ON {join} WHERE {wanted}"
    )


def insert_stage(d: Dialect, columns: Sequence[str]) -> str:
    names = ", ".join(quote(c) for c in columns)
    marks = ", ".join([d.param] * len(columns))
    return f"INSERT INTO {d.stage()} ({names}) VALUES ({marks})"


def duplicate_keys(d: Dialect, spec: MergeSpec) -> str:
    keys = ", ".join(quote(k) for k in spec.key)
    return f"SELECT 1 FROM {d.stage()} GROUP BY {keys} HAVING count(*) > 1 LIMIT 1"


def dedupe_stage(d: Dialect, spec: MergeSpec) -> str:
    """One row per key: greatest cursor wins, then the greatest row text (deterministic)."""
    names = ", ".join(quote(c) for c in spec.stored)
    keys = ", ".join(quote(k) for k in spec.key)
    order = f"{quote(spec.cursor)} DESC, {d.row_text('s', spec.values)} DESC"
    ranked = (
        f"SELECT {names}, row_number() OVER (PARTITION BY {keys} ORDER BY {order}) AS rn "
        f"FROM {d.stage()} AS s"
    )
    on_commit = " ON COMMIT DROP" if d.name == "postgres" else ""
    return (
        f"CREATE TEMP TABLE {quote(STAGE_UNIQUE)}{on_commit} AS "
        f"SELECT {names} FROM ({ranked}) AS ranked WHERE rn = 1"
    )


def conflicting_rows(d: Dialect, spec: MergeSpec, source: str) -> str:
    """Re-seen keys whose content differs: what ``on_conflict = "error"`` refuses."""
    keys = ", ".join(f"s.{quote(k)}" for k in spec.key)
    join = " AND ".join(f"t.{quote(k)} = s.{quote(k)}" for k in spec.key)
    return (
        f"SELECT {keys}, count(*) OVER () FROM {source} AS s "
        f"JOIN {d.table(spec.target)} AS t ON {join} "
        f"WHERE {d.differs('t', 's', spec.values)} LIMIT 5"
    )


def conflicting_duplicates(d: Dialect, spec: MergeSpec) -> str:
    """Keys staged more than once with different content (refused under "error")."""
    keys = ", ".join(quote(k) for k in spec.key)
    return (
        f"SELECT {keys}, count(*) OVER () FROM {d.stage()} AS s GROUP BY {keys} "
        f"HAVING count(DISTINCT {d.row_text('s', spec.values)}) > 1 LIMIT 5"
    )


def count_new_keys(d: Dialect, spec: MergeSpec, source: str) -> str:
    join = " AND ".join(f"t.{quote(k)} = s.{quote(k)}" for k in spec.key)
    return (
        f"SELECT count(*) FROM {source} AS s WHERE NOT EXISTS "
        f"(SELECT 1 FROM {d.table(spec.target)} AS t WHERE {join})"
    )


def update_condition(
    d: Dialect, spec: MergeSpec, incoming: str = "excluded", stored: str = "t"
) -> str | None:
    """When an incoming row may replace the stored one; ``None`` means never."""
    if spec.policy == "update":
        return d.differs(stored, incoming, spec.values)
    if spec.policy == "newer_wins":
        # the cheap "differs" test comes before the row-text tie-break, so that re-seen
        # identical rows (re-runs, backfills) never pay for rendering rows as text
        cursor = quote(spec.cursor)
        differs = d.differs(stored, incoming, spec.values)
        tie = f"{d.row_text(incoming, spec.values)} > {d.row_text(stored, spec.values)}"
        return (
            f"{incoming}.{cursor} > {stored}.{cursor} OR "
            f"({incoming}.{cursor} = {stored}.{cursor} AND {differs} AND {tie})"
        )
    return None


STAGE_KEY_INDEX = "_pipeledger_stage_key"


def unique_key_index(d: Dialect, key: Sequence[str], source: str | None = None) -> str:
    """A unique index on the staged keys: proves there are no duplicates (cheaper than a
    GROUP BY) and lets the merge join the target by merge join or index probes. Named, so
    that the quality gate and the merge build it once between them."""
    keys = ", ".join(quote(k) for k in key)
    table = source or quote(STAGE)
    name = STAGE_KEY_INDEX if source in (None, d.stage()) else STAGE_KEY_INDEX + "_unique"
    qualified = quote(name) if d.name == "postgres" else f"temp.{quote(name)}"
    return f"CREATE UNIQUE INDEX IF NOT EXISTS {qualified} ON {table} ({keys})"


def _changed_rows(d: Dialect, spec: MergeSpec, source: str) -> str:
    """Staged rows that will change the target: new keys, or rows the policy accepts."""
    join = " AND ".join(f"cur.{quote(k)} = s.{quote(k)}" for k in spec.key)
    new_key = f"cur.{quote(spec.key[0])} IS NULL"
    condition = update_condition(d, spec, incoming="s", stored="cur")
    where = new_key if condition is None else f"{new_key} OR {condition}"
    return f"{source} AS s LEFT JOIN {d.table(spec.target)} AS cur ON {join} WHERE {where}"


def merge(d: Dialect, spec: MergeSpec, source: str) -> str:
    """One set-based upsert from ``source`` into the target, never rewriting identical rows.

    PostgreSQL first joins the (unique) staged keys to the target and sends on only the rows
    that change something, so re-seen rows are neither rewritten nor even locked; it
    returns (inserted, updated) from the statement itself. SQLite's row count is inserted +
    updated, and the caller counts new keys beforehand.
    """
    names = ", ".join(quote(c) for c in spec.stored)
    meta = f"{quote(RUN_ID_COLUMN)}, {quote(LOADED_AT_COLUMN)}"
    keys = ", ".join(quote(k) for k in spec.key)
    condition = update_condition(d, spec)
    if condition is None:
        action = "DO NOTHING"
    else:
        sets = ", ".join(f"{quote(c)} = excluded.{quote(c)}" for c in [*spec.values])
        if spec.fingerprints:
            sets += f", {quote(ROW_HASH_COLUMN)} = excluded.{quote(ROW_HASH_COLUMN)}"
        sets += f", {quote(RUN_ID_COLUMN)} = excluded.{quote(RUN_ID_COLUMN)}"
        sets += f", {quote(LOADED_AT_COLUMN)} = excluded.{quote(LOADED_AT_COLUMN)}"
        action = f"DO UPDATE SET {sets} WHERE {condition}"
    if d.name == "sqlite":
        return (
            f"INSERT INTO {d.table(spec.target)} AS t ({names}, {meta}) "
            f"SELECT {names}, ?, ? FROM {source} WHERE true ON CONFLICT ({keys}) {action}"
        )
    selected = ", ".join(f"s.{quote(c)}" for c in spec.stored)
    insert = (
        f"INSERT INTO {d.table(spec.target)} AS t ({names}, {meta}) "
        f"SELECT {selected}, %s, %s FROM {_changed_rows(d, spec, source)} "
        f"ON CONFLICT ({keys}) {action}"
    )
    return (
        f"WITH merged AS ({insert} RETURNING (xmax = 0) AS inserted) "
        "SELECT count(*) FILTER (WHERE inserted), count(*) FILTER (WHERE NOT inserted) FROM merged"
    )


# With unique keys on both sides a merge join (large batches) or index probes (small ones)
# beat hashing the whole batch; the planner picks between those two by cost.
MERGE_PLANNER_SETTINGS = ("SET LOCAL enable_hashjoin = off",)
MERGE_PLANNER_RESET = ("RESET enable_hashjoin",)


def read_state(d: Dialect) -> str:
    p = d.param
    return (
        "SELECT partition_key, watermark, cursor_type "
        f"FROM {d.table(STATE_TABLE)} WHERE pipeline = {p}"
    )


def read_all_state(d: Dialect) -> str:
    return (
        "SELECT pipeline, partition_key, cursor_column, cursor_type, watermark, run_id, "
        f"updated_at FROM {d.table(STATE_TABLE)} ORDER BY pipeline, partition_key"
    )


def write_state(d: Dialect) -> str:
    p = d.param
    return (
        f"INSERT INTO {d.table(STATE_TABLE)} "
        "(pipeline, partition_key, cursor_column, cursor_type, watermark, run_id, updated_at) "
        f"VALUES ({p}, {p}, {p}, {p}, {p}, {p}, {p}) "
        "ON CONFLICT (pipeline, partition_key) DO UPDATE SET "
        "cursor_column = excluded.cursor_column, cursor_type = excluded.cursor_type, "
        "watermark = excluded.watermark, run_id = excluded.run_id, updated_at = excluded.updated_at"
    )
