"""The staging table every run writes its rows into before they are checked and published:
its DDL, the statements adapters stage with, and the index that proves its keys unique.
The stage is temporary: private to the run's transaction, gone at its end."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from typing import TypeVar

from pipeledger.common.columns import Column, TableName
from pipeledger.errors import WarehouseError
from pipeledger.warehouse.dialect import STAGE, Dialect, quote
from pipeledger.warehouse.session import Session, Warehouse

T = TypeVar("T")


def qualified(session: Session, target: TableName) -> TableName:
    """``target`` with the schema an unqualified CREATE TABLE would put it in (a stage that
    becomes the target is moved into it by name)."""
    if target.schema is not None or not session.dialect.has_schemas:
        return target
    rows = session.query("SELECT current_schema()")
    return TableName(str(rows[0][0] or "public"), target.table)


def create_schema(d: Dialect, target: TableName) -> str | None:
    if not d.has_schemas or target.schema is None:
        return None
    return f"CREATE SCHEMA IF NOT EXISTS {quote(target.schema)}"


def create_stage(d: Dialect, columns: Sequence[Column]) -> str:
    body = ", ".join(f"{quote(c.name)} {d.column_type(c.sql_type)}" for c in columns)
    return f"CREATE TEMP TABLE {quote(STAGE)} ({body}){d.on_commit_drop}"


def drop_stage(d: Dialect) -> list[str]:
    """Where temporary tables outlive a transaction (SQLite), the last run's stage."""
    if d.on_commit_drop:
        return []
    return [f"DROP TABLE IF EXISTS {d.stage_unique()}", f"DROP TABLE IF EXISTS {d.temp(STAGE)}"]


def copy_stage(columns: Sequence[str], binary: bool = False) -> str:
    """PostgreSQL: stream rows into the stage with COPY."""
    names = ", ".join(quote(c) for c in columns)
    return f"COPY {quote(STAGE)} ({names}) FROM STDIN (FORMAT {'binary' if binary else 'csv'})"


def insert_stage(d: Dialect, columns: Sequence[str], rows: int = 1) -> str:
    """Where there is no COPY: ``rows`` rows per statement (SQLite: one statement of many
    rows binds the same values at a third less cost than as many one-row statements)."""
    names = ", ".join(quote(c) for c in columns)
    row = f"({d.marks(len(columns))})"
    return f"INSERT INTO {d.stage()} ({names}) VALUES " + ", ".join([row] * rows)


STAGE_KEY_INDEX = "_pipeledger_stage_key"


def key_index_name(key: Sequence[str]) -> str:
    """The stage's unique index on ``key``: named after its columns, so that the quality
    gate and the merge build it once between them when they prove the same key, and not
    when they prove different ones (a CDC feed's gate: the key at each cursor)."""
    digest = hashlib.sha256("\0".join(key).encode()).hexdigest()[:8]
    return f"{STAGE_KEY_INDEX}_{digest}"


def unique_key_index(d: Dialect, key: Sequence[str], source: str | None = None) -> str:
    """A unique index on the staged keys: proves there are no duplicates (cheaper than a
    GROUP BY) and lets the merge join the target by merge join or index probes."""
    keys = ", ".join(quote(k) for k in key)
    table = source or d.stage()
    name = key_index_name(key) + ("" if source in (None, d.stage()) else "_unique")
    # unqualified, the index goes where its table is: a temporary stage's is temporary,
    # a promotable stage's (SQLite: in main) goes with it
    return f"CREATE UNIQUE INDEX IF NOT EXISTS {quote(name)} ON {table} ({keys})"


def handed_on(items: list[T]) -> Iterator[T]:
    """The items of a list, each dropped from it as it is handed on to the stage (batches
    read ahead are not held until the whole stage is written)."""
    while items:
        yield items.pop(0)


def add_column(d: Dialect, target: TableName, column: Column, if_missing: bool = False) -> str:
    """A new nullable column (schema_drift = "evolve"; the fingerprint of an old target,
    ``if_missing``: on PostgreSQL two processes may add it at once)."""
    kind = d.column_type(column.sql_type)
    exists = " IF NOT EXISTS" if if_missing and d.add_column_if_not_exists else ""
    return f"ALTER TABLE {d.table(target)} ADD COLUMN{exists} {quote(column.name)} {kind}"


_SCHEMA_RACE = (WarehouseError.UNIQUE_VIOLATION, WarehouseError.DUPLICATE_SCHEMA)


def ensure_schema(warehouse: Warehouse, target: TableName) -> None:
    """Create the target's schema in a short transaction of its own, before the load
    stages: inside the long load transaction, two first loads into one new schema would
    race, and one would fail on the catalog's unique index. Every table a load makes
    there (the target, an SCD2 target, its quarantine table) then finds it; pipeledger's
    own tables (before-images, SCD2 repeats) live in its schema, made by the migrations."""
    statement = create_schema(warehouse.dialect, target)
    if statement is None:
        return
    for _ in range(2):  # a concurrent creator may win the race once; then it exists
        try:
            with warehouse.session() as session:
                session.execute(statement)
            return
        except WarehouseError as exc:
            if exc.sqlstate not in _SCHEMA_RACE:
                raise
