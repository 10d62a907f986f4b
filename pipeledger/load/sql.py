"""SQL text for publishing staged rows: the target's DDL, the merge under each conflict
policy, and a backfill's restaging, built by pure functions.

Nothing here executes anything: adapters run these strings with bound parameters.
Identifiers have been validated by :mod:`pipeledger.schema` and are quoted again here;
what differs between warehouses is asked of the :class:`~pipeledger.warehouse.dialect.Dialect`.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from pipeledger.schema import (
    LOADED_AT_COLUMN,
    ROW_HASH_COLUMN,
    RUN_ID_COLUMN,
    Column,
    TableName,
)
from pipeledger.warehouse.dialect import POSTGRES, STAGE, STAGE_UNIQUE, Dialect, literal, quote
from pipeledger.warehouse.stage import STAGE_KEY_INDEX

# staged beside the data columns and stored with each target row (NULL: not known)
ROW_HASH = Column(ROW_HASH_COLUMN, "bigint")


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
    def updates(self) -> bool:
        """The policy may rewrite a stored row (see :func:`update_condition`)."""
        return self.policy in ("update", "newer_wins")

    @property
    def values(self) -> list[str]:
        """Non-key columns: the content compared to decide 'unchanged'."""
        return [c.name for c in self.columns if c.name not in self.key]


def create_target(d: Dialect, spec: MergeSpec, primary_key: bool = True) -> str:
    """The target table. ``primary_key=False`` defers the key to :func:`add_primary_key`:
    on PostgreSQL building it once after a bulk insert is cheaper than maintaining it. A
    policy that updates rows gets pages with room for their new versions."""
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
    options = d.room_for_updates if spec.updates else ""
    return f"CREATE TABLE {d.table(spec.target)} (\n  {body}\n){options}"


def add_primary_key(d: Dialect, spec: MergeSpec) -> str:
    keys = ", ".join(quote(k) for k in spec.key)
    return f"ALTER TABLE {d.table(spec.target)} ADD PRIMARY KEY ({keys})"


def add_column(d: Dialect, target: TableName, column: Column, if_missing: bool = False) -> str:
    """A new nullable column (schema_drift = "evolve"; the fingerprint of an old target,
    ``if_missing``: on PostgreSQL two processes may add it at once)."""
    kind = d.column_type(column.sql_type)
    exists = " IF NOT EXISTS" if if_missing and d.add_column_if_not_exists else ""
    return f"ALTER TABLE {d.table(target)} ADD COLUMN{exists} {quote(column.name)} {kind}"


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
    run_id: str, columns: Sequence[Column], cursor: str, updates: bool = False
) -> list[str]:
    """PostgreSQL, new target: stage into a regular table that becomes the target at
    publish (a rename instead of copying every row). It lives in a schema of the run's own
    (made and dropped in the run's transaction), which ``search_path`` puts first, so that
    the stage's usual name resolves to this table. ``updates``: its policy rewrites rows
    (:func:`create_target`)."""
    schema = stage_schema(run_id)
    body = ", ".join(
        f"{quote(c.name)} {c.sql_type}" + (" NOT NULL" if c.name == cursor else "") for c in columns
    )
    return [
        f"CREATE SCHEMA {schema}",
        f"SET LOCAL search_path = {schema}, public",
        f"CREATE TABLE {schema}.{quote(STAGE)} ({body})"
        + (POSTGRES.room_for_updates if updates else ""),
    ]


def promote_stage(spec: MergeSpec, run_id: str, loaded_at: datetime) -> list[str]:
    """The promotable stage becomes the target: the run's id and time are added as columns
    with constant defaults (PostgreSQL stores those once, not per row; DDL takes no bound
    parameters, and both values are made here: a UUID and an ISO timestamp), then the
    defaults are dropped, the table renamed, moved to the target's schema and keyed.
    ``spec.target`` must name its schema."""
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
        f"DROP INDEX IF EXISTS {schema}.{quote(STAGE_KEY_INDEX)}",
        f"ALTER TABLE {stage} RENAME TO {quote(spec.target.table)}",
        f"ALTER TABLE {schema}.{quote(spec.target.table)} SET SCHEMA {home}",
        *drop_promotable_stage(run_id, table=False),
        f"ALTER TABLE {POSTGRES.table(spec.target)} ADD PRIMARY KEY ({keys})",
    ]


def drop_promotable_stage(run_id: str, table: bool = True) -> list[str]:
    """The run's own schema (with the stage, unless it became the target), and the usual
    search path again."""
    schema = stage_schema(run_id)
    drop = [f"DROP TABLE {schema}.{quote(STAGE)}"] if table else []
    return [*drop, f"DROP SCHEMA {schema}", "SET LOCAL search_path TO DEFAULT"]


def stored_scope(d: Dialect, where: str, below: bool = False) -> str:
    """The target rows whose fingerprints a backfill trusts: those matching ``where`` (a
    cursor window) that hold a fingerprint written since the target's guard (a parameter
    after ``where``'s) and, with ``below``, lower than a bound (the next parameter)."""
    h, at = quote(ROW_HASH_COLUMN), quote(LOADED_AT_COLUMN)
    scope = f"{where} AND {h} IS NOT NULL AND {at} >= {d.param}"
    return f"{scope} AND {h} < {d.param}" if below else scope


def stored_hashes(d: Dialect, target: TableName, scope: str) -> str:
    """The fingerprints of the target rows in ``scope`` (:func:`stored_scope`), at most as
    many as the last parameter says."""
    h = quote(ROW_HASH_COLUMN)
    return f"SELECT {h} FROM {d.table(target)} WHERE {scope} LIMIT {d.param}"


def count_stored(d: Dialect, target: TableName, scope: str) -> str:
    return f"SELECT count(*) FROM {d.table(target)} WHERE {scope}"


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
    return (
        f"CREATE TEMP TABLE {quote(STAGE_UNIQUE)}{d.on_commit_drop} AS "
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


def _changed_rows(d: Dialect, spec: MergeSpec, source: str) -> str:
    """Staged rows that will change the target: new keys, or rows the policy accepts."""
    join = " AND ".join(f"cur.{quote(k)} = s.{quote(k)}" for k in spec.key)
    new_key = f"cur.{quote(spec.key[0])} IS NULL"
    condition = update_condition(d, spec, incoming="s", stored="cur")
    where = new_key if condition is None else f"{new_key} OR {condition}"
    return f"{source} AS s LEFT JOIN {d.table(spec.target)} AS cur ON {join} WHERE {where}"


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
        sets += f", {quote(RUN_ID_COLUMN)} = excluded.{quote(RUN_ID_COLUMN)}"
        sets += f", {quote(LOADED_AT_COLUMN)} = excluded.{quote(LOADED_AT_COLUMN)}"
        action = f"DO UPDATE SET {sets} WHERE {condition}"
    if not d.merge_returns_counts:
        return (
            f"INSERT INTO {d.table(spec.target)} AS t ({names}, {meta}) "
            f"SELECT {names}, {p}, {p} FROM {source} WHERE true ON CONFLICT ({keys}) {action}"
        )
    selected = ", ".join(f"s.{quote(c)}" for c in spec.stored)
    rows = _changed_rows(d, spec, source) if filtered else f"{source} AS s"
    insert = (
        f"INSERT INTO {d.table(spec.target)} AS t ({names}, {meta}) "
        f"SELECT {selected}, {p}, {p} FROM {rows} ON CONFLICT ({keys}) {action}"
    )
    return (
        f"WITH merged AS ({insert} RETURNING (xmax = 0) AS inserted) "
        "SELECT count(*) FILTER (WHERE inserted), count(*) FILTER (WHERE NOT inserted) FROM merged"
    )


# With unique keys on both sides a merge join (large batches) or index probes (small ones)
# beat hashing the whole batch. Left to its costs the planner merge-joins even a batch a
# seventh of the target's size, reading the target's whole key (150k rows into 1M: the
# join took 1.6 s, probes 1.1 s), so a batch up to PROBE_SHARE of the target probes.
PROBE_SHARE = 0.25
MERGE_PLANNER_RESET = ("RESET enable_hashjoin", "RESET enable_mergejoin")


def merge_planner(probe: bool) -> list[str]:
    """Settings for the merge's join of staged keys to the target's (PostgreSQL)."""
    settings = ["SET LOCAL enable_hashjoin = off"]
    return [*settings, "SET LOCAL enable_mergejoin = off"] if probe else settings


def estimated_rows(d: Dialect) -> str | None:
    """The catalog's row estimate of a table (parameter: its name), kept by VACUUM,
    ANALYZE and index builds; negative when unknown. None where there is no such thing."""
    if not d.catalog_oids:
        return None
    return "SELECT reltuples FROM pg_class WHERE oid = to_regclass(%s)"
