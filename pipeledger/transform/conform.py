"""Transform: fix the target's columns once, then conform every batch to them.

The first load infers column types from the source (declared ``columns`` win); from then
on the target's types are fixed and every batch is cast to them. Key, cursor and
partition values must be present: a row without them cannot be loaded exactly once. A
pipeline without a cursor (``sync = "full"``, ``incremental = "files"``) has a shape
without one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta

import pyarrow as pa
import pyarrow.compute as pc

from pipeledger.common import values
from pipeledger.common.columns import (
    CURSOR_TYPES,
    LOADED_AT_COLUMN,
    NOT_KEY_TYPES,
    NOT_PARTITION_TYPES,
    ROW_HASH_COLUMN,
    RUN_ID_COLUMN,
    Column,
    UnmappedType,
    canonical_type,
    check_identifier,
    declare_hint,
    sql_type_for,
    target_schema,
    value_type,
)
from pipeledger.errors import ConfigError, SchemaError, SourceError
from pipeledger.sources.base import SourceBatch


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


def infer_shape(
    source: pa.Schema,
    declared: Mapping[str, str],
    key: Sequence[str],
    cursor: str | None,
    partition_by: str | None,
) -> Shape:
    """The columns of a new target: the source's, typed as declared or as inferred."""
    names = source.names
    unknown = [name for name in declared if name not in names]
    if unknown:
        raise SchemaError(f"columns declares {unknown} but the source has no such column")
    columns = []
    for field in source:
        try:
            check_identifier(field.name, "source column")
        except ValueError as exc:
            raise SchemaError(
                f"{exc}; rename it in the source or select it under another name"
            ) from None
        try:
            sql_type = declared.get(field.name) or sql_type_for(field.type)
        except UnmappedType as exc:
            raise SchemaError(f"column {field.name!r}: {exc}; {declare_hint(field.name)}") from None
        columns.append(Column(field.name, sql_type))
    shape = Shape(tuple(columns), tuple(key), cursor, partition_by)
    _check_roles(shape)
    return shape


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
    _check_roles(shape)
    return shape


def _catalog_column(table: str, name: str, kind: str) -> Column:
    try:
        return Column(check_identifier(name, "column"), canonical_type(kind))
    except ValueError as exc:
        raise SchemaError(
            f"target {table}: {exc}; pipeledger loads only tables whose columns it can name "
            "and type: rename or retype that column, or load into another target"
        ) from None


def _check_roles(shape: Shape) -> None:
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


def check_lateness(shape: Shape, lateness: timedelta | int) -> None:
    """Lateness is a duration for time cursors and a count for integer cursors."""
    if not shape.cursor:
        return
    integer_cursor = shape.cursor_type in ("smallint", "integer", "bigint")
    if integer_cursor and isinstance(lateness, timedelta) and lateness:
        raise ConfigError(f"cursor {shape.cursor!r} is an integer: lateness must be an integer")
    if not integer_cursor and isinstance(lateness, int) and lateness:
        raise ConfigError(
            f"cursor {shape.cursor!r} is a {shape.cursor_type}: lateness must be a "
            "duration such as '2h'"
        )


def conform(source: SourceBatch, shape: Shape, gated_keys: bool = False) -> pa.RecordBatch:
    """Cast ``source.batch`` to the target's columns; refuse missing key/cursor values.

    With ``gated_keys`` an empty key is left for the quality gate to report (and perhaps
    quarantine) instead of stopping the run here."""
    batch = source.batch
    names = set(batch.schema.names)
    expected = [c.name for c in shape.columns]
    missing = [n for n in expected if n not in names]
    added = [n for n in batch.schema.names if n not in set(expected)]
    if missing or added:
        raise SchemaError(_drift_message(source.origin, missing, added))
    arrays = [_cast(source, column) for column in shape.columns]
    out = pa.RecordBatch.from_arrays(arrays, schema=shape.schema)
    for name in shape.required:
        if not (gated_keys and name in shape.key):
            _refuse_nulls(source, out.column(name), name)
    return out


def _drift_message(origin: str, missing: list[str], added: list[str]) -> str:
    parts = []
    if added:
        parts.append(f"new column(s) {', '.join(map(repr, added))} not in the target")
    if missing:
        parts.append(f"target column(s) {', '.join(map(repr, missing))} missing from the source")
    return f"{origin}: the source schema changed: " + "; ".join(parts)


def _cast(source: SourceBatch, column: Column) -> pa.Array:
    array = source.batch.column(column.name)
    try:
        out = values.conform_array(array, column.sql_type, column.arrow)
    except values.Unfit as exc:
        where = source.origin if exc.index is None else source.where(exc.index)
        raise SourceError(
            f"{where}, column {column.name!r}: cannot store as {column.sql_type}: {exc.reason}"
        ) from None
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise SourceError(_cast_problem(source, array, column, exc)) from None
    if pa.types.is_decimal(out.type):  # Arrow does not enforce a decimal's precision
        _check_precision(source, out, column)
    return out


def _check_precision(source: SourceBatch, array: pa.Array, column: Column) -> None:
    """A Parquet decimal(4,0) may hold 12345: refuse it here, on every backend."""
    try:
        array.validate(full=True)
    except pa.ArrowInvalid:
        for index in range(len(array)):
            try:
                array.slice(index, 1).validate(full=True)
            except pa.ArrowInvalid:
                raise SourceError(
                    f"{source.where(index)}, column {column.name!r}: {array[index].as_py()} "
                    f"has more digits than {column.sql_type} holds"
                ) from None


def _cast_problem(source: SourceBatch, array: pa.Array, column: Column, exc: Exception) -> str:
    for index in range(len(array)):
        try:
            values.conform_array(values.single(array, index), column.sql_type, column.arrow)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, values.Unfit):
            return (
                f"{source.where(index)}, column {column.name!r}: cannot store "
                f"{_shown(array, index)} as {column.sql_type}{_why(array.type)}"
            )
    return f"{source.origin}, column {column.name!r}: cannot convert to {column.sql_type}: {exc}"


def _shown(array: pa.Array, index: int) -> str:
    """A value for a message (nanosecond values have no Python form without pandas)."""
    try:
        return repr(array[index].as_py())
    except (ValueError, OverflowError):
        return str(values.single(array, index).cast(pa.string())[0])


def _why(kind: pa.DataType) -> str:
    unit = getattr(value_type(kind), "unit", None)
    if unit == "ns":
        return " (it has nanoseconds; PostgreSQL keeps microseconds)"
    return ""


def _refuse_nulls(source: SourceBatch, array: pa.Array, name: str) -> None:
    empty = pc.is_null(array)
    if pa.types.is_string(array.type):
        empty = pc.or_kleene(empty, pc.equal(pc.utf8_trim_whitespace(array), ""))
    if not pc.any(empty).as_py():
        return
    index = pc.index(empty, True).as_py()
    raise SourceError(
        f"{source.where(index)}, column {name!r}: value is empty; key, cursor and partition "
        "columns must have a value in every row"
    )
