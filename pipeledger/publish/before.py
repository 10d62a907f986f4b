"""Before-images: the versions of a target's rows that a run replaced or deleted, kept for
the models that read the target. A model that aggregates (or overwrites partitions) must
know where a changed row *was*: an order moved from one day to another changes both days'
totals, and only the replaced version still says which day it left.

Kept in ``pipeledger.before__<schema>__<table>`` (one table per target that a model
reads), one row per replaced version, with the id of the run that replaced it. Writing
them costs one INSERT ... SELECT of the replaced rows per run, only for such targets.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from pipeledger.common.columns import (
    LOADED_AT_COLUMN,
    ROW_HASH_COLUMN,
    RUN_ID_COLUMN,
    Column,
    TableName,
)
from pipeledger.warehouse.dialect import Dialect, quote
from pipeledger.warehouse.migrations import SCHEMA
from pipeledger.warehouse.session import Session
from pipeledger.warehouse.stage import add_column

REPLACED_BY = "_pipeledger_replaced_by"
META = (RUN_ID_COLUMN, LOADED_AT_COLUMN, ROW_HASH_COLUMN)


def side_table(kind: str, target: TableName) -> TableName:
    """A table pipeledger keeps about ``target`` in its own schema: ``<kind>__<schema>__<table>``
    (shortened with a digest past PostgreSQL's 63 characters)."""
    base = f"{kind}__{target.schema or 'public'}__{target.table}"
    if len(base) > 63:
        digest = hashlib.sha256(str(target).encode()).hexdigest()[:10]
        base = f"{base[:52]}_{digest}"
    return TableName(SCHEMA, base)


def before_table(target: TableName) -> TableName:
    """Where the versions a run replaces in ``target`` are kept for its models."""
    return side_table("before", target)


def create_before_table(d: Dialect, target: TableName, columns: Sequence[Column]) -> str:
    body = ", ".join(f"{quote(c.name)} {d.column_type(c.sql_type)}" for c in columns)
    return (
        f"CREATE TABLE IF NOT EXISTS {d.table(before_table(target))} ({body}, "
        f"{quote(RUN_ID_COLUMN)} text, {quote(LOADED_AT_COLUMN)} timestamptz, "
        f"{quote(ROW_HASH_COLUMN)} bigint, {quote(REPLACED_BY)} text NOT NULL)"
    )


def keep_before_images(
    d: Dialect, target: TableName, names: Sequence[str], where: str, meta: Sequence[str] = META
) -> str:
    """Copy the target's rows matching ``where`` (alias ``t``) before they are replaced or
    deleted (parameter: the replacing run's id, then ``where``'s). ``meta``: the
    pipeledger columns the target has."""
    columns = ", ".join(quote(c) for c in [*names, *meta])
    selected = ", ".join(f"t.{quote(c)}" for c in [*names, *meta])
    return (
        f"INSERT INTO {d.table(before_table(target))} ({columns}, {quote(REPLACED_BY)}) "
        f"SELECT {selected}, {d.param} FROM {d.table(target)} AS t WHERE {where}"
    )


def delete_keeping_before_images(
    d: Dialect, target: TableName, names: Sequence[str], where: str, meta: Sequence[str] = META
) -> str:
    """Delete the target's rows matching ``where`` (alias ``t``) and keep what they were,
    in one pass (parameter: the deleting run's id). Where a WITH cannot write
    (``Dialect.writes_in_with``): :func:`keep_before_images`, then the delete."""
    columns = ", ".join(quote(c) for c in [*names, *meta])
    returned = ", ".join(f"t.{quote(c)}" for c in [*names, *meta])
    return (
        f"WITH gone AS (DELETE FROM {d.table(target)} AS t WHERE {where} "
        f"RETURNING {returned}) INSERT INTO {d.table(before_table(target))} "
        f"({columns}, {quote(REPLACED_BY)}) SELECT {columns}, {d.param} FROM gone"
    )


def replaced_rows(d: Dialect, join: str, condition: str, source: str) -> str:
    """``where`` for :func:`keep_before_images`: target rows ``t`` that a staged row ``s``
    of ``source`` will replace."""
    return f"EXISTS (SELECT 1 FROM {source} AS s WHERE {join} AND ({condition}))"


def ensure_before_table(session: Session, target: TableName, columns: Sequence[Column]) -> None:
    """The target's before-image table, with every column the target has now."""
    d = session.dialect
    session.execute(create_before_table(d, target, columns))
    have = {name for name, _ in session.table_columns(before_table(target)) or []}
    for column in columns:
        if column.name not in have:  # the target gained a column since
            session.execute(add_column(d, before_table(target), column))


def keep_before(
    session: Session,
    target: TableName,
    columns: Sequence[Column],
    where: str,
    run_id: str,
    fingerprints: bool = True,
) -> None:
    """Keep the target's rows matching ``where`` (alias ``t``, no parameters of its own) as
    before-images of run ``run_id``; ``fingerprints``: the target stores them."""
    names, meta = _kept_columns(session, target, columns, fingerprints)
    session.execute(keep_before_images(session.dialect, target, names, where, meta), [run_id])


def delete_keeping_before(
    session: Session,
    target: TableName,
    columns: Sequence[Column],
    where: str,
    run_id: str,
    fingerprints: bool = True,
) -> int:
    """Delete the target's rows matching ``where`` (alias ``t``, no parameters of its own),
    kept as before-images of run ``run_id``, in one statement (``Dialect.writes_in_with``);
    how many went."""
    names, meta = _kept_columns(session, target, columns, fingerprints)
    statement = delete_keeping_before_images(session.dialect, target, names, where, meta)
    return session.execute(statement, [run_id])


def _kept_columns(
    session: Session, target: TableName, columns: Sequence[Column], fingerprints: bool
) -> tuple[list[str], tuple[str, ...]]:
    """The before-image table made sure of; the target's columns and pipeledger's that a
    before-image copies."""
    ensure_before_table(session, target, columns)
    meta = META if fingerprints else (RUN_ID_COLUMN, LOADED_AT_COLUMN)
    return [c.name for c in columns], meta
