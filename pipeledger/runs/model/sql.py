"""SQL text for models, built by pure functions: which upstream runs a model has not consumed
yet, the rows those runs wrote (and the versions they replaced), the model's stage, and the
publishing statements of ``partition_overwrite`` and ``replace``.

Run ids are inlined only after they parse as UUIDs (the model's SQL is rewritten as text
by sqlglot, which takes no bound parameters); every other value is a bound parameter.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from pipeledger.common.columns import (
    LOADED_AT_COLUMN,
    ROW_HASH_COLUMN,
    RUN_ID_COLUMN,
    Column,
    TableName,
)
from pipeledger.publish.before import REPLACED_BY, before_table
from pipeledger.state.watermark import Window, is_whole_day
from pipeledger.warehouse.dialect import Dialect, literal, quote

TOUCHED = "_pipeledger_touched"


def _run_list(run_ids: Sequence[str]) -> str:
    return ", ".join(literal(str(uuid.UUID(run_id))) for run_id in run_ids)


def written_by(table: TableName, columns: Sequence[str], run_ids: Sequence[str]) -> str:
    """PostgreSQL text (for the model's rewrite): the rows of ``table`` that these runs
    wrote, as they are now."""
    names = ", ".join(quote(c) for c in columns)
    return (
        f"SELECT {names} FROM {_pg_table(table)} "
        f"WHERE {quote(RUN_ID_COLUMN)} IN ({_run_list(run_ids)})"
    )


def replaced_by(
    table: TableName, columns: Sequence[str], kept: Sequence[str], run_ids: Sequence[str]
) -> str:
    """PostgreSQL text: the versions of ``table``'s rows that these runs replaced or
    deleted (its before-images), with ``columns`` in the table's order (``kept``: those the
    before-image table has; the others are NULL)."""
    values = ", ".join(quote(c) if c in kept else f"NULL AS {quote(c)}" for c in columns)
    return (
        f"SELECT {values} FROM {_pg_table(before_table(table))} "
        f"WHERE {quote(REPLACED_BY)} IN ({_run_list(run_ids)})"
    )


def _pg_table(name: TableName) -> str:
    return f"{quote(name.schema)}.{quote(name.table)}" if name.schema else quote(name.table)


def stage_model(
    d: Dialect, columns: Sequence[Column], query: str, where: str = "", *, binds: bool = False
) -> str:
    """Fill the stage from the model's query, each column cast to its type. ``binds``: the
    statement binds parameters (``where``'s), so the query's own text is kept from the
    driver's placeholders (a ``%`` in it stays a ``%``: :meth:`Dialect.verbatim`)."""
    names = ", ".join(quote(c.name) for c in columns)
    values = ", ".join(d.cast_to(f"q.{quote(c.name)}", c.sql_type) for c in columns)
    condition = f" WHERE {where}" if where else ""
    source = d.verbatim(query) if binds else query
    return f"INSERT INTO {d.stage()} ({names}) SELECT {values} FROM ({source}) AS q{condition}"


def touched(columns: Sequence[str], query: str) -> str:
    """The distinct values of ``columns`` (a partition, or a key) in ``query``'s rows."""
    names = ", ".join(f"q.{quote(c)}" for c in columns)
    return f"SELECT DISTINCT {names} FROM ({query}) AS q"


def create_touched(d: Dialect, columns: Sequence[Column], query: str) -> str:
    """A temporary table of the touched keys (too many to bind as parameters)."""
    names = ", ".join(f"q.{quote(c.name)}" for c in columns)
    return (
        f"CREATE TEMP TABLE {quote(TOUCHED)}{d.on_commit_drop} AS "
        f"SELECT DISTINCT {names} FROM ({query}) AS q"
    )


def in_touched(d: Dialect, alias: str, columns: Sequence[str]) -> str:
    lhs = ", ".join(f"{alias}.{quote(c)}" for c in columns)
    rhs = ", ".join(quote(c) for c in columns)
    lhs = lhs if len(columns) == 1 else f"({lhs})"
    return f"{lhs} IN (SELECT {rhs} FROM {d.temp(TOUCHED)})"


def in_values(d: Dialect, expression: str, count: int) -> str:
    """``expression`` among ``count`` bound values (PostgreSQL: one array parameter)."""
    if d.array_params:
        return f"{expression} = ANY({d.param})"
    return f"{expression} IN ({d.marks(count)})"


def insert_staged(d: Dialect, target: TableName, names: Sequence[str], where: str) -> str:
    """The staged rows ``s`` matching ``where`` into the target, with this run's id and time
    (the first two parameters)."""
    columns = ", ".join(quote(c) for c in names)
    selected = ", ".join(f"s.{quote(c)}" for c in names)
    meta = f"{quote(RUN_ID_COLUMN)}, {quote(LOADED_AT_COLUMN)}"
    return (
        f"INSERT INTO {d.table(target)} ({columns}, {meta}) "
        f"SELECT {selected}, {d.param}, {d.param} FROM {d.stage()} AS s WHERE {where}"
    )


def same_row(d: Dialect, names: Sequence[str], alias: str, table: str, other: str) -> str:
    """A subquery finding, in ``table`` (as ``alias``), a row equal to ``other``'s in every
    column of ``names`` (nulls equal; compared as the rows' text, which hashes)."""
    return (
        f"SELECT 1 FROM {table} AS {alias} "
        f"WHERE {d.row_text(alias, names)} = {d.row_text(other, names)}"
    )


def in_range(d: Dialect, expression: str, window: Window) -> tuple[str, list[Any]]:
    """``expression`` within a backfill's closed range (a date-only end: that whole day)."""
    conditions, params = [], []
    if window.lower is not None:
        conditions.append(f"{expression} >= {d.param}")
        params.append(window.lower)
    if window.upper is not None and is_whole_day(window.upper):
        conditions.append(f"{expression} < {d.param}")
        params.append(window.upper + timedelta(days=1))  # type: ignore[operator]
    elif window.upper is not None:
        conditions.append(f"{expression} <= {d.param}")
        params.append(window.upper)
    return " AND ".join(conditions) or "1 = 1", params


def create_model_target(
    d: Dialect, target: TableName, columns: Sequence[Column], key: Sequence[str]
) -> str:
    lines = [f"{quote(c.name)} {d.column_type(c.sql_type)}" for c in columns]
    lines.append(f"{quote(ROW_HASH_COLUMN)} bigint")
    lines.append(f"{quote(RUN_ID_COLUMN)} text NOT NULL")
    lines.append(f"{quote(LOADED_AT_COLUMN)} timestamptz NOT NULL")
    if key:
        lines.append("PRIMARY KEY (" + ", ".join(quote(k) for k in key) + ")")
    return f"CREATE TABLE {d.table(target)} ({', '.join(lines)})"


def run_index(d: Dialect, table: TableName) -> str:
    """An index on the run id of an upstream target, so that a model finds the rows of
    the runs it has not consumed without reading the whole table."""
    name = "pipeledger_run_" + hashlib.sha256(str(table).encode()).hexdigest()[:12]
    return f"CREATE INDEX IF NOT EXISTS {quote(name)} ON {d.table(table)} ({quote(RUN_ID_COLUMN)})"
