"""Transform: fix the target's columns once, then conform every batch to them.

The first load infers column types from the source (declared ``columns`` win); from then
on the target's types are fixed and every batch is cast to them. Key, cursor and
partition values must be present: a row without them cannot be loaded exactly once. A
pipeline without a cursor (``sync = "full"``, ``incremental = "files"``) has a shape
without one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta

import pyarrow as pa
import pyarrow.compute as pc

from pipeledger.common import values
from pipeledger.common.columns import (
    Column,
    UnmappedType,
    check_identifier,
    declare_hint,
    sql_type_for,
    value_type,
)
from pipeledger.errors import ConfigError, SchemaError, SourceError
from pipeledger.sources.base import SourceBatch
from pipeledger.transform.shape import Shape, check_roles, shape_from_table

__all__ = ["Shape", "shape_from_table"]  # where the load's modules have long found them


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
    check_roles(shape)
    return shape


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
