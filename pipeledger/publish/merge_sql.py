"""SQL text for publishing staged rows: the target's DDL, the merge under each conflict
policy, deletes (marked rows, keys a full snapshot lacks), and a backfill's restaging,
built by pure functions. An SCD2 target's statements are in :mod:`pipeledger.publish.scd2_sql`.

Nothing here executes anything: adapters run these strings with bound parameters.
Identifiers have been validated by :mod:`pipeledger.common.columns` and are quoted again here;
what differs between warehouses is asked of the :class:`~pipeledger.warehouse.dialect.Dialect`.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from pipeledger.common.columns import (
    DELETED_AT_COLUMN,
    LOADED_AT_COLUMN,
    ROW_HASH_COLUMN,
    RUN_ID_COLUMN,
    Column,
    TableName,
)
from pipeledger.config.model import HISTORY_COLUMNS
from pipeledger.warehouse.dialect import (
    POSTGRES,
    STAGE,
    STAGE_UNIQUE,
    Dialect,
    literal,
    quote,
    sqlite_instant,
)
from pipeledger.warehouse.stage import key_index_name

# staged beside the rows of a pipeline with a delete marker: true for a deleted row
DELETED_FLAG = "_pipeledger_deleted"
DELETED = Column(DELETED_FLAG, "boolean")
VALID_FROM, VALID_TO, IS_CURRENT = HISTORY_COLUMNS
VANISHED = "_pipeledger_vanished"  # the keys a full snapshot lacks (load.deletes)
UNSTAGED = "_pipeledger_unstaged"  # a model's touched keys no staged row carries


@dataclass(frozen=True, kw_only=True)
class MergeSpec:
    """Everything the merge needs to know about one target."""

    target: TableName
    columns: tuple[Column, ...]
    key: tuple[str, ...]
    cursor: str  # "": the target has none (a snapshot without one; a model's)
    policy: str
    fingerprints: bool = True  # the target has the fingerprint column
    before_images: bool = False  # keep the versions it replaces (a model reads the target)
    markers: bool = False  # the stage flags deleted rows (DELETED_FLAG): they delete their key
    soft_delete: bool = False  # a delete sets DELETED_AT_COLUMN and keeps the row
    history: bool = False  # SCD2: every version, with its validity (load.history)

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    @property
    def stored(self) -> list[str]:
        """What the stage carries into the target: the data columns and the fingerprint."""
        return [*self.names, ROW_HASH_COLUMN] if self.fingerprints else self.names

    @property
    def updates(self) -> bool:
        """The policy may rewrite a stored row (see :func:`update_condition`)."""
        return self.policy in ("update", "newer_wins")

    @property
    def staged(self) -> list[str]:
        """What the stage holds: :attr:`stored`, and the delete flag of marker pipelines."""
        return [*self.stored, DELETED_FLAG] if self.markers else self.stored

    @property
    def values(self) -> list[str]:
        """Non-key columns: the content compared to decide 'unchanged'."""
        return [c.name for c in self.columns if c.name not in self.key]

    @property
    def identity(self) -> tuple[str, ...]:
        """What one staged row stands for: its key, and for SCD2 its key at its cursor."""
        return (*self.key, self.cursor) if self.history else self.key

    @property
    def primary_key(self) -> tuple[str, ...]:
        """The target's primary key: SCD2 keeps a key's versions by ``valid_from``."""
        return (*self.key, VALID_FROM) if self.history else self.key

    @property
    def cursor_type(self) -> str:
        return next(c.sql_type for c in self.columns if c.name == self.cursor)

    def live(self, alias: str) -> str | None:
        """Staged rows that are not deletes (None: every row)."""
        return f"NOT {alias}.{quote(DELETED_FLAG)}" if self.markers else None

    def present(self, alias: str) -> str | None:
        """Target rows that hold their key's current state (None: every row): not soft
        deleted; for SCD2 the current version."""
        if self.history:
            return f"{alias}.{quote(IS_CURRENT)}"
        return f"{alias}.{quote(DELETED_AT_COLUMN)} IS NULL" if self.soft_delete else None


def _all(*conditions: str | None) -> str:
    """The conditions that apply, joined by AND (``true`` when none does)."""
    present = [c for c in conditions if c]
    return " AND ".join(f"({c})" if " OR " in c else c for c in present) or "true"


def _join(key: Sequence[str], left: str = "t", right: str = "s") -> str:
    return " AND ".join(f"{left}.{quote(k)} = {right}.{quote(k)}" for k in key)


def keys_in(alias: str, key: Sequence[str], table: str, where: str = "") -> str:
    """``alias``'s key is among the keys of ``table`` (its rows matching ``where``): the
    keys drive the lookup, by the other side's index."""
    lhs = ", ".join(f"{alias}.{quote(k)}" for k in key)
    lhs = lhs if len(key) == 1 else f"({lhs})"
    condition = f" WHERE {where}" if where else ""
    return f"{lhs} IN (SELECT {', '.join(quote(k) for k in key)} FROM {table}{condition})"


def temp_index(d: Dialect, table: str, columns: Sequence[str], unique: bool = False) -> str:
    """An index on a temporary table of the run's, named after it."""
    kind = "UNIQUE INDEX" if unique else "INDEX"
    names = ", ".join(quote(c) for c in columns)
    return f"CREATE {kind} {d.temp(table + '_key')} ON {quote(table)} ({names})"


def key_lookup(d: Dialect, spec: MergeSpec, table: str = STAGE) -> str | None:
    """Where joins loop, an index that lets a temporary table of staged rows (the stage, or
    its deduplicated copy) be probed by key; not a unique one: the stage may repeat a key."""
    if d.hash_joins:
        return None
    keys = ", ".join(quote(k) for k in spec.key)
    return f"CREATE INDEX IF NOT EXISTS {d.temp(table + '_lookup')} ON {quote(table)} ({keys})"


def create_temp(d: Dialect, name: str, columns: Sequence[Column]) -> list[str]:
    """A temporary table of the run's (made anew: SQLite keeps temporary tables past COMMIT)."""
    body = ", ".join(f"{quote(c.name)} {d.column_type(c.sql_type)}" for c in columns)
    return [
        f"DROP TABLE IF EXISTS {d.temp(name)}",
        f"CREATE TEMP TABLE {quote(name)} ({body}){d.on_commit_drop}",
    ]


def create_target(d: Dialect, spec: MergeSpec, primary_key: bool = True) -> str:
    """The target table. ``primary_key=False`` defers the key to :func:`add_primary_key`:
    on PostgreSQL building it once after a bulk insert is cheaper than maintaining it.
    An SCD2 target adds each version's validity; a soft-deleting one the deletion time. A
    policy that updates rows gets pages with room for their new versions."""
    required = {*spec.key, spec.cursor} - {""}
    lines = [
        f"{quote(c.name)} {d.column_type(c.sql_type)}" + (" NOT NULL" if c.name in required else "")
        for c in spec.columns
    ]
    if spec.history:
        cursor = d.column_type(spec.cursor_type)
        lines.append(f"{quote(VALID_FROM)} {cursor} NOT NULL")
        lines.append(f"{quote(VALID_TO)} {cursor}")
        lines.append(f"{quote(IS_CURRENT)} boolean NOT NULL")
    if spec.soft_delete:
        lines.append(f"{quote(DELETED_AT_COLUMN)} timestamptz")
    lines.append(f"{quote(ROW_HASH_COLUMN)} bigint")
    lines.append(f"{quote(RUN_ID_COLUMN)} text NOT NULL")
    lines.append(f"{quote(LOADED_AT_COLUMN)} timestamptz NOT NULL")
    if primary_key:
        lines.append("PRIMARY KEY (" + ", ".join(quote(k) for k in spec.primary_key) + ")")
    body = ",\n  ".join(lines)
    options = d.room_for_updates if spec.updates else ""
    return f"CREATE TABLE {d.table(spec.target)} (\n  {body}\n){options}"


def add_primary_key(d: Dialect, spec: MergeSpec) -> str:
    """The key of a target created without one. SQLite cannot add a primary key to a
    table: a unique index on the same columns (``<target>_pkey``, PostgreSQL's name for a
    primary key) is the key that ``ON CONFLICT`` and the merge's probes use."""
    keys = ", ".join(quote(k) for k in spec.primary_key)
    if not d.alters_constraints:
        name = quote(f"{spec.target}_pkey")
        return f"CREATE UNIQUE INDEX {name} ON {d.table(spec.target)} ({keys})"
    return f"ALTER TABLE {d.table(spec.target)} ADD PRIMARY KEY ({keys})"


def insert_new(d: Dialect, spec: MergeSpec, source: str) -> str:
    """A plain insert, for a target created by this very run (nothing to conflict with)."""
    names = ", ".join(quote(c) for c in spec.stored)
    meta = f"{quote(RUN_ID_COLUMN)}, {quote(LOADED_AT_COLUMN)}"
    return (
        f"INSERT INTO {d.table(spec.target)} ({names}, {meta}) "
        f"SELECT {names}, {d.param}, {d.param} FROM {source}"
    )


def stage_schema(run_id: str) -> str:
    """The schema of a run's own: a first load stages there, so that concurrent first loads
    into one schema share no name (refuses anything but a UUID: it is inlined)."""
    return quote(f"_pipeledger_{uuid.UUID(run_id).hex[:20]}")


def create_promotable_stage(
    d: Dialect,
    run_id: str,
    columns: Sequence[Column],
    cursor: str,
    *,
    loaded_at: datetime,
    updates: bool = False,
) -> list[str]:
    """A new target: stage into a regular table that becomes the target at publish (a
    rename instead of copying every row), reached by the stage's usual name.

    PostgreSQL: it lives in a schema of the run's own (made and dropped in the run's
    transaction), which ``search_path`` puts first. ``updates``: its policy rewrites rows
    (:func:`create_target`).

    SQLite: it is ``main."_pipeledger_stage"``, found by the stage's unqualified name once
    the temporary one is dropped; no other run can see or make it (the run's transaction
    holds the database's write lock, and a crash leaves nothing of it). The run's id and
    time are column defaults, which SQLite writes into each row as it is inserted, at no
    cost per row (DDL takes no bound parameters, and both values are made here: a UUID and
    an ISO timestamp); :func:`promote_stage` removes them from the definition."""
    if d.has_schemas:
        return _create_schema_stage(run_id, columns, cursor, updates)
    return [
        f"DROP TABLE IF EXISTS {d.stage_unique()}",
        f"DROP TABLE IF EXISTS {d.temp(STAGE)}",
        _promoted_table(d, columns, cursor, _sqlite_defaults(run_id, loaded_at)),
    ]


def _create_schema_stage(
    run_id: str, columns: Sequence[Column], cursor: str, updates: bool
) -> list[str]:
    schema = stage_schema(run_id)
    body = ", ".join(
        f"{quote(c.name)} {c.sql_type}" + (" NOT NULL" if c.name == cursor else "") for c in columns
    )
    return [
        f"CREATE SCHEMA {schema}",
        # first on the search path, before the session's own (a model's SQL may name its
        # tables as that path finds them)
        f"SELECT set_config('search_path', concat_ws(', ', {literal(schema)}, "
        "nullif(current_setting('search_path'), '')), true)",
        f"CREATE TABLE {schema}.{quote(STAGE)} ({body})"
        + (POSTGRES.room_for_updates if updates else ""),
    ]


def _sqlite_defaults(run_id: str, loaded_at: datetime) -> tuple[str, str]:
    """The DEFAULT clauses of a promotable SQLite stage's run id and time."""
    return f" DEFAULT {literal(run_id)}", f" DEFAULT {literal(sqlite_instant(loaded_at))}"


def _promoted_table(
    d: Dialect, columns: Sequence[Column], cursor: str, defaults: tuple[str, str]
) -> str:
    """SQLite: the promotable stage, ``main."_pipeledger_stage"``. Only the cursor is
    declared ``NOT NULL``, as in the temporary stage (a key's emptiness is the quality
    gate's to judge); the key is a unique index made at promotion."""
    lines = [
        f"{quote(c.name)} {d.column_type(c.sql_type)}" + (" NOT NULL" if c.name == cursor else "")
        for c in columns
    ]
    run, at = defaults
    lines.append(f"{quote(RUN_ID_COLUMN)} text NOT NULL{run}")
    lines.append(f"{quote(LOADED_AT_COLUMN)} timestamptz NOT NULL{at}")
    return f"CREATE TABLE main.{quote(STAGE)} (" + ", ".join(lines) + ")"


def promote_stage(d: Dialect, spec: MergeSpec, run_id: str, loaded_at: datetime) -> list[str]:
    """The promotable stage becomes the target, renamed into place and keyed.

    PostgreSQL: the run's id and time are added as columns with constant defaults
    (PostgreSQL stores those once, not per row; DDL takes no bound parameters, and both
    values are made here: a UUID and an ISO timestamp), then the defaults are dropped, the
    table renamed, moved to the target's schema and keyed. ``spec.target`` must name its
    schema.

    SQLite: every row already holds the run's id and time (the stage's column defaults).
    SQLite cannot drop a default, so the table's definition is written without them the
    way SQLite documents for removing a default (ALTER TABLE, "making other kinds of table
    schema changes": a change to ``sqlite_master`` inside the transaction that alters
    nothing stored; ``writable_schema = RESET`` reloads this connection's schema, and the
    key's index, built after it, moves the schema version, so every other connection
    reloads it too). The key's index proves the staged keys unique, as PostgreSQL's
    primary key does."""
    if not d.has_schemas:
        return _promote_sqlite_stage(d, spec, run_id, loaded_at)
    schema = stage_schema(run_id)
    stage = f"{schema}.{quote(STAGE)}"
    keys = ", ".join(quote(k) for k in spec.key)
    home = quote(spec.target.schema or "public")
    return [
        f"ALTER TABLE {stage} ADD COLUMN {quote(RUN_ID_COLUMN)} text NOT NULL "
        f"DEFAULT {literal(run_id)}, ADD COLUMN {quote(LOADED_AT_COLUMN)} timestamptz "
        f"NOT NULL DEFAULT {literal(loaded_at.isoformat())}",
        f"ALTER TABLE {stage} ALTER COLUMN {quote(RUN_ID_COLUMN)} DROP DEFAULT, "
        f"ALTER COLUMN {quote(LOADED_AT_COLUMN)} DROP DEFAULT",
        f"DROP INDEX IF EXISTS {schema}.{quote(key_index_name(spec.key))}",
        f"ALTER TABLE {stage} RENAME TO {quote(spec.target.table)}",
        f"ALTER TABLE {schema}.{quote(spec.target.table)} SET SCHEMA {home}",
        *drop_promotable_stage(d, run_id, table=False),
        f"ALTER TABLE {POSTGRES.table(spec.target)} ADD PRIMARY KEY ({keys})",
    ]


def _promote_sqlite_stage(
    d: Dialect, spec: MergeSpec, run_id: str, loaded_at: datetime
) -> list[str]:
    # the definition loses exactly the two DEFAULT clauses the stage was made with
    # (nothing else in it is a quoted string)
    definition = "sql"
    for clause in _sqlite_defaults(run_id, loaded_at):
        definition = f"replace({definition}, {literal(clause)}, '')"
    target = d.table(spec.target)
    return [
        f"DROP INDEX IF EXISTS main.{quote(key_index_name(spec.key))}",  # the gate's, if any
        f"ALTER TABLE main.{quote(STAGE)} RENAME TO {target}",
        "PRAGMA writable_schema = ON",
        f"UPDATE sqlite_master SET sql = {definition} "
        f"WHERE type = 'table' AND name = {literal(str(spec.target))}",
        "PRAGMA writable_schema = RESET",
        add_primary_key(d, spec),
    ]


def drop_promotable_stage(d: Dialect, run_id: str, table: bool = True) -> list[str]:
    """The promotable stage when it did not become the target (with PostgreSQL's, the
    run's own schema and the usual search path again)."""
    if not d.has_schemas:
        return [f"DROP TABLE main.{quote(STAGE)}"] if table else []
    schema = stage_schema(run_id)
    drop = [f"DROP TABLE {schema}.{quote(STAGE)}"] if table else []
    return [*drop, f"DROP SCHEMA {schema}", "SET LOCAL search_path TO DEFAULT"]


def stored_scope(d: Dialect, where: str) -> str:
    """The target rows whose fingerprints a backfill trusts: those matching ``where`` (a
    cursor window) that hold a fingerprint written since the target's guard (a parameter
    after ``where``'s)."""
    h, at = quote(ROW_HASH_COLUMN), quote(LOADED_AT_COLUMN)
    return f"{where} AND {h} IS NOT NULL AND {at} >= {d.param}"


def table_extent(d: Dialect, target: TableName) -> str:
    """What a read of ``target`` in ranges of its storage covers, as one row ``(first,
    end, most)``: PostgreSQL its heap pages ``[0, pages)`` and the most rows a page can
    hold (a page's header is 24 bytes, a row's header and line pointer 28: the table's
    name is the parameter); SQLite its rowids ``[least, greatest + 1)``, one row each."""
    if d.reads_page_ranges:
        block = "current_setting('block_size')::int"
        pages = f"pg_relation_size({d.param}::regclass) / {block}"
        return f"SELECT 0, {pages}, ({block} - 24) / 28"
    return f"SELECT coalesce(min(rowid), 0), coalesce(max(rowid), -1) + 1, 1 FROM {d.table(target)}"


def stored_hashes_within(d: Dialect, target: TableName, scope: str) -> str:
    """The fingerprints of the target rows in ``scope`` (:func:`stored_scope`) within one
    range of its storage (:func:`table_extent`), the last two parameters: a TID range scan
    of pages ``[p, q)`` (PostgreSQL), rowids ``[p, q)`` of the table's b-tree (SQLite)."""
    h = quote(ROW_HASH_COLUMN)
    if d.reads_page_ranges:
        bound = f"('(' || {d.param}::text || ',0)')::tid"
        within = f"ctid >= {bound} AND ctid < {bound}"
    else:
        within = f"rowid >= {d.param} AND rowid < {d.param}"
    return f"SELECT {h} FROM {d.table(target)} WHERE {scope} AND {within}"


def staged_key_hashes(d: Dialect, spec: MergeSpec, scope: str) -> str:
    """The fingerprints the target holds in ``scope`` for the keys that were staged."""
    join = " AND ".join(f"t.{quote(k)} = s.{quote(k)}" for k in spec.key)
    h = quote(ROW_HASH_COLUMN)
    return (
        f"SELECT t.{h} FROM (SELECT * FROM {d.table(spec.target)} WHERE {scope}) AS t "
        f"JOIN {d.stage()} AS s ON {join}"
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
    wanted = f"{h} = ANY({d.param})" if d.array_params else f"{h} IN ({d.marks(count)})"
    return (
        f"INSERT INTO {d.stage()} ({stored}) SELECT {selected} "
        f"FROM (SELECT DISTINCT {keys} FROM {d.stage()}) AS s "
        f"JOIN {d.table(spec.target)} AS t ON {join} WHERE {wanted}"
    )


def duplicate_keys(d: Dialect, spec: MergeSpec) -> str:
    keys = ", ".join(quote(k) for k in spec.identity)
    return f"SELECT 1 FROM {d.stage()} GROUP BY {keys} HAVING count(*) > 1 LIMIT 1"


def dedupe_stage(d: Dialect, spec: MergeSpec) -> str:
    """One row per key (SCD2: per key and cursor): greatest cursor wins, at an equal cursor a
    delete, then the greatest row text (deterministic; without a cursor, it alone)."""
    names = ", ".join(quote(c) for c in spec.staged)
    keys = ", ".join(quote(k) for k in spec.identity)
    cursor = f"{quote(spec.cursor)} DESC, " if spec.cursor else ""
    deleted = f"{quote(DELETED_FLAG)} DESC, " if spec.markers else ""
    order = f"{cursor}{deleted}{d.row_text('s', spec.values)} DESC"
    ranked = (
        f"SELECT {names}, row_number() OVER (PARTITION BY {keys} ORDER BY {order}) AS rn "
        f"FROM {d.stage()} AS s"
    )
    return (
        f"CREATE TEMP TABLE {quote(STAGE_UNIQUE)}{d.on_commit_drop} AS "
        f"SELECT {names} FROM ({ranked}) AS ranked WHERE rn = 1"
    )


def conflicting_rows(d: Dialect, spec: MergeSpec, source: str) -> str:
    """Re-seen keys whose content differs: what ``on_conflict = "error"`` refuses (a delete
    is not a new content, and a soft-deleted row is not there to conflict with)."""
    keys = ", ".join(f"s.{quote(k)}" for k in spec.identity)
    deleted = f"t.{quote(DELETED_AT_COLUMN)} IS NULL" if spec.soft_delete else None
    where = _all(d.differs("t", "s", spec.values), spec.live("s"), deleted)
    return (
        f"SELECT {keys}, count(*) OVER () FROM {source} AS s "
        f"JOIN {d.table(spec.target)} AS t ON {_join(spec.identity)} WHERE {where} LIMIT 5"
    )


def conflicting_duplicates(d: Dialect, spec: MergeSpec) -> str:
    """Keys staged more than once with different content (refused under "error")."""
    keys = ", ".join(quote(k) for k in spec.identity)
    live = spec.live("s")
    where = f" WHERE {live}" if live else ""
    return (
        f"SELECT {keys}, count(*) OVER () FROM {d.stage()} AS s{where} GROUP BY {keys} "
        f"HAVING count(DISTINCT {d.row_text('s', spec.values)}) > 1 LIMIT 5"
    )


def count_new_keys(d: Dialect, spec: MergeSpec, source: str) -> str:
    new = f"NOT EXISTS (SELECT 1 FROM {d.table(spec.target)} AS t WHERE {_join(spec.key)})"
    return f"SELECT count(*) FROM {source} AS s WHERE {_all(spec.live('s'), new)}"


def update_condition(
    d: Dialect, spec: MergeSpec, incoming: str = "excluded", stored: str = "t"
) -> str | None:
    """When an incoming row may replace the stored one; ``None`` means never. A soft-deleted
    row is replaced by any incoming row (the key comes back, as after a hard delete)."""
    condition = _accepted(d, spec, incoming, stored)
    if not spec.soft_delete:
        return condition
    undelete = f"{stored}.{quote(DELETED_AT_COLUMN)} IS NOT NULL"
    return undelete if condition is None else f"{condition} OR {undelete}"


def _accepted(d: Dialect, spec: MergeSpec, incoming: str, stored: str) -> str | None:
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


def _changed_rows(d: Dialect, spec: MergeSpec, source: str) -> str:
    """Staged rows that will change the target: new keys, or rows the policy accepts."""
    new_key = f"cur.{quote(spec.key[0])} IS NULL"
    condition = update_condition(d, spec, incoming="s", stored="cur")
    where = _all(new_key if condition is None else f"{new_key} OR {condition}", spec.live("s"))
    return (
        f"{source} AS s LEFT JOIN {d.table(spec.target)} AS cur ON {_join(spec.key, 'cur')} "
        f"WHERE {where}"
    )


def merge(d: Dialect, spec: MergeSpec, source: str, filtered: bool = True) -> str:
    """One set-based upsert from ``source`` into the target, never rewriting identical rows.

    PostgreSQL returns (inserted, updated) from the statement itself. ``filtered`` (for
    batches of mostly unchanged rows: backfills) first joins the (unique) staged keys to the
    target and sends on only the rows that change something, so re-seen rows are not even
    locked; unfiltered (an incremental batch: mostly new or changed rows) each staged row
    goes straight to ``ON CONFLICT``, which probes the key once instead of twice and locks
    a re-seen row without rewriting it. SQLite's row count is inserted + updated, and the
    caller counts new keys beforehand.
    """
    names = ", ".join(quote(c) for c in spec.stored)
    meta = f"{quote(RUN_ID_COLUMN)}, {quote(LOADED_AT_COLUMN)}"
    keys = ", ".join(quote(k) for k in spec.key)
    condition = update_condition(d, spec)
    p = d.param
    if condition is None:
        action = "DO NOTHING"
    else:
        sets = ", ".join(f"{quote(c)} = excluded.{quote(c)}" for c in [*spec.values])
        if spec.fingerprints:
            sets += f", {quote(ROW_HASH_COLUMN)} = excluded.{quote(ROW_HASH_COLUMN)}"
        if spec.soft_delete:
            sets += f", {quote(DELETED_AT_COLUMN)} = NULL"
        sets += f", {quote(RUN_ID_COLUMN)} = excluded.{quote(RUN_ID_COLUMN)}"
        sets += f", {quote(LOADED_AT_COLUMN)} = excluded.{quote(LOADED_AT_COLUMN)}"
        action = f"DO UPDATE SET {sets} WHERE {condition}"
    if not d.merge_returns_counts:
        return (
            f"INSERT INTO {d.table(spec.target)} AS t ({names}, {meta}) "
            f"SELECT {names}, {p}, {p} FROM {source} AS s WHERE {_all(spec.live('s'))} "
            f"ON CONFLICT ({keys}) {action}"
        )
    selected = ", ".join(f"s.{quote(c)}" for c in spec.stored)
    live = spec.live("s")
    rows = f"{source} AS s" + (f" WHERE {live}" if live else "")
    if filtered:
        rows = _changed_rows(d, spec, source)
    insert = (
        f"INSERT INTO {d.table(spec.target)} AS t ({names}, {meta}) "
        f"SELECT {selected}, {p}, {p} FROM {rows} ON CONFLICT ({keys}) {action}"
    )
    return (
        f"WITH merged AS ({insert} RETURNING (xmax = 0) AS inserted) "
        "SELECT count(*) FILTER (WHERE inserted), count(*) FILTER (WHERE NOT inserted) FROM merged"
    )


def delete_where(d: Dialect, target: TableName, where: str) -> str:
    """Delete the target's rows matching ``where`` (alias ``t``). SQLite chooses the rows
    before deleting any (a statement of its sees its own changes so far)."""
    if d.statement_snapshot:
        return f"DELETE FROM {d.table(target)} AS t WHERE {where}"
    chosen = f"SELECT rowid FROM {d.table(target)} AS t WHERE {where}"
    return f"DELETE FROM {d.table(target)} WHERE rowid IN ({chosen})"


def soft_delete_where(d: Dialect, target: TableName, where: str) -> str:
    """Mark the target's rows matching ``where`` (alias ``t``) deleted, by this run (the
    parameters: the run's id, its time twice), ahead of ``where``'s own."""
    p = d.param
    return (
        f"UPDATE {d.table(target)} AS t SET {quote(RUN_ID_COLUMN)} = {p}, "
        f"{quote(LOADED_AT_COLUMN)} = {p}, {quote(DELETED_AT_COLUMN)} = {p} WHERE {where}"
    )


def marked_rows(d: Dialect, spec: MergeSpec, source: str) -> str:
    """Target rows ``t`` that a staged delete of ``source`` deletes: those of its key that
    are still there; under ``newer_wins`` only if the delete is not older than the row."""
    flag = quote(DELETED_FLAG)
    marked = keys_in("t", spec.key, source, flag)
    if spec.policy != "newer_wins":
        return _all(spec.present("t"), marked)
    cursor = quote(spec.cursor)
    newer = _all(_join(spec.key), f"s.{flag}", f"s.{cursor} >= t.{cursor}")
    return _all(spec.present("t"), marked, f"EXISTS (SELECT 1 FROM {source} AS s WHERE {newer})")


def vanished_rows(d: Dialect, spec: MergeSpec) -> str:
    """Target rows ``t`` of the keys a full snapshot lacks (:data:`VANISHED`), still there."""
    return _all(spec.present("t"), keys_in("t", spec.key, d.temp(VANISHED)))


def find_vanished(d: Dialect, spec: MergeSpec, scope: str) -> str:
    """Fill :data:`VANISHED` with the keys of the target rows in ``scope`` (alias ``t``, its
    parameters) that are still there and that no staged row carries."""
    keys = ", ".join(quote(k) for k in spec.key)
    selected = ", ".join(f"t.{quote(k)}" for k in spec.key)
    missing = f"NOT EXISTS (SELECT 1 FROM {d.stage()} AS s WHERE {_join(spec.key)})"
    return (
        f"INSERT INTO {d.temp(VANISHED)} ({keys}) SELECT {selected} "
        f"FROM {d.table(spec.target)} AS t WHERE {_all(scope, spec.present('t'), missing)}"
    )


def unstaged_keys(d: Dialect, spec: MergeSpec, candidates: str) -> str:
    """Fill :data:`UNSTAGED` with the keys of table ``candidates`` (each once: the keys a
    model's run touched) that no staged row carries."""
    keys = ", ".join(quote(k) for k in spec.key)
    selected = ", ".join(f"k.{quote(k)}" for k in spec.key)
    unstaged = f"NOT EXISTS (SELECT 1 FROM {d.stage()} AS s WHERE {_join(spec.key, 's', 'k')})"
    return (
        f"INSERT INTO {d.temp(UNSTAGED)} ({keys}) SELECT {selected} FROM {candidates} AS k "
        f"WHERE {unstaged}"
    )


def find_vanished_among(d: Dialect, spec: MergeSpec) -> str:
    """:func:`find_vanished` for the :data:`UNSTAGED` keys: those the target still holds,
    each looked up in it by key."""
    keys = ", ".join(quote(k) for k in spec.key)
    selected = ", ".join(f"u.{quote(k)}" for k in spec.key)
    held = _all(_join(spec.key, "t", "u"), spec.present("t"))
    return (
        f"INSERT INTO {d.temp(VANISHED)} ({keys}) SELECT {selected} FROM {d.temp(UNSTAGED)} "
        f"AS u WHERE EXISTS (SELECT 1 FROM {d.table(spec.target)} AS t WHERE {held})"
    )


def count_in_scope(d: Dialect, spec: MergeSpec, scope: str) -> str:
    """The target rows in ``scope`` (alias ``t``) that are still there, and the vanished."""
    present = _all(scope, spec.present("t"))
    return (
        f"SELECT (SELECT count(*) FROM {d.table(spec.target)} AS t WHERE {present}), "
        f"(SELECT count(*) FROM {d.temp(VANISHED)})"
    )


def count_vanished(d: Dialect) -> str:
    return f"SELECT count(*) FROM {d.temp(VANISHED)}"


def sample_vanished(d: Dialect, spec: MergeSpec) -> str:
    keys = ", ".join(quote(k) for k in spec.key)
    return f"SELECT {keys} FROM {d.temp(VANISHED)} ORDER BY {keys} LIMIT 5"


# With unique keys on both sides a merge join (large batches) or index probes (small ones)
# beat hashing the whole batch. Left to its costs the planner merge-joins even a batch a
# seventh of the target's size, reading the target's whole key (150k rows into 1M: the
# join took 1.6 s, probes 1.1 s), so a batch up to PROBE_SHARE of the target probes.
PROBE_SHARE = 0.25
MERGE_PLANNER_RESET = ("RESET enable_hashjoin", "RESET enable_mergejoin")


def merge_planner(d: Dialect, probe: bool) -> list[str]:
    """Settings for the merge's join of staged keys to the target's (none where the
    planner cannot be steered)."""
    if not d.steers_joins:
        return []
    settings = ["SET LOCAL enable_hashjoin = off"]
    return [*settings, "SET LOCAL enable_mergejoin = off"] if probe else settings


def estimated_rows(d: Dialect) -> str | None:
    """The catalog's row estimate of a table (parameter: its name), kept by VACUUM,
    ANALYZE and index builds; negative when unknown. None where there is no such thing."""
    if not d.catalog_oids:
        return None
    return "SELECT reltuples FROM pg_class WHERE oid = to_regclass(%s)"
