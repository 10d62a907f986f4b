"""A target's shape: its fixed columns and the roles they play (key, cursor, partition),
read from the config or the catalog. No Arrow here: a model's run, and a no-op run of any
node, uses shapes without importing it (:mod:`pipeledger.transform.conform` conforms
batches to them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pipeledger.common.columns import (
    CURSOR_TYPES,
    LOADED_AT_COLUMN,
    NOT_KEY_TYPES,
    NOT_PARTITION_TYPES,
    ROW_HASH_COLUMN,
    RUN_ID_COLUMN,
    Column,
    canonical_type,
    check_identifier,
)
from pipeledger.errors import SchemaError

if TYPE_CHECKING:
    from collections.abc import Sequence

    import pyarrow as pa


@dataclass(frozen=True)
class Shape:
    """The fixed columns of a target and which of them play which role. ``cursor`` is
    None (or, as models write it, empty) for a target without one."""

    columns: tuple[Column, ...]
    key: tuple[str, ...]
    cursor: str | None
    partition_by: str | None = None

    @property
    def schema(self) -> pa.Schema:
        from pipeledger.common.columns import target_schema

        return target_schema(self.columns)

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    @property
    def cursor_type(self) -> str:
        return next(c.sql_type for c in self.columns if c.name == self.cursor)

    @property
    def required(self) -> tuple[str, ...]:
        cursor = (self.cursor,) if self.cursor else ()
        extra = (self.partition_by,) if self.partition_by else ()
        return (*self.key, *cursor, *extra)

    @property
    def identity(self) -> tuple[Column, ...]:
        """The key, cursor and partition columns: what finds a version of a row."""
        names = dict.fromkeys(self.required)
        return tuple(c for name in names for c in self.columns if c.name == name)


def shape_from_table(
    rows: Sequence[tuple[str, str]],
    key: Sequence[str],
    cursor: str | None,
    partition_by: str | None,
    *,
    table: str,
) -> Shape:
    """The shape of an existing target ``table``, read from the database catalog. Its
    column names reach SQL text as the config's names do, so they pass the same check
    first: a column made by hand (``a"b``) is refused here, before any statement names it."""
    meta = {RUN_ID_COLUMN, LOADED_AT_COLUMN, ROW_HASH_COLUMN}
    columns = tuple(_catalog_column(table, name, kind) for name, kind in rows if name not in meta)
    shape = Shape(columns, tuple(key), cursor, partition_by)
    check_roles(shape)
    return shape


def _catalog_column(table: str, name: str, kind: str) -> Column:
    try:
        return Column(check_identifier(name, "column"), canonical_type(kind))
    except ValueError as exc:
        raise SchemaError(
            f"target {table}: {exc}; pipeledger loads only tables whose columns it can name "
            "and type: rename or retype that column, or load into another target"
        ) from None


def check_roles(shape: Shape) -> None:
    names = {c.name for c in shape.columns}
    missing = [name for name in shape.required if name not in names]
    if missing:
        raise SchemaError(f"the source has no column {', '.join(map(repr, missing))}")
    if shape.cursor and shape.cursor_type not in CURSOR_TYPES:
        raise SchemaError(
            f"cursor column {shape.cursor!r} is {shape.cursor_type}; it must be a date, "
            "a timestamp or an integer (declare its type under 'columns' if the source "
            "stores it as text)"
        )
    types = {c.name: c.sql_type for c in shape.columns}
    for name in shape.key:
        if types[name] in NOT_KEY_TYPES:
            raise SchemaError(
                f"key column {name!r} is {types[name]}: a nested (JSON) value cannot be a key; "
                "choose other key columns"
            )
    partition = shape.partition_by
    if partition is not None and types[partition] in NOT_PARTITION_TYPES:
        raise SchemaError(
            f"partition_by column {partition!r} is {types[partition]}; partition by a text, "
            f'integer, date or boolean column (e.g. declare {partition} = "text" under columns)'
        )
