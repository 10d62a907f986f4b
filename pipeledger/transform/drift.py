"""Schema drift: how the source's columns differ from the target's, and what to do.

Detected on the first batch of a run against the target table's columns (which are the
columns of the last load's dataset snapshot). ``fail`` halts the run after every check
has been evaluated; ``evolve`` adds new columns to the target as nullable columns;
``ignore`` drops new columns. Columns that disappeared from the source load as NULL unless
they are the key, the cursor or the partition.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from pipeledger.common.columns import (
    Column,
    UnmappedType,
    check_identifier,
    declare_hint,
    sql_type_for,
)
from pipeledger.errors import SchemaError
from pipeledger.sources.base import SourceBatch
from pipeledger.transform.conform import Shape, conform
from pipeledger.transform.fingerprint import with_row_hash

_FAMILIES = (
    frozenset({"smallint", "integer", "bigint"}),
    frozenset({"real", "double precision"}),
    frozenset({"timestamp", "timestamptz"}),
)


@dataclass(frozen=True)
class Drift:
    added: tuple[Column, ...] = ()
    removed: tuple[str, ...] = ()
    retyped: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.added or self.removed or self.retyped)

    def changes(self) -> dict[str, list[str]]:
        out = {}
        if self.added:
            out["added"] = [f"{c.name} {c.sql_type}" for c in self.added]
        if self.removed:
            out["removed"] = list(self.removed)
        if self.retyped:
            out["retyped"] = list(self.retyped)
        return out


def _sql_type(field: pa.Field) -> str:
    try:
        return sql_type_for(field.type)
    except UnmappedType as exc:
        raise SchemaError(f"column {field.name!r}: {exc}; {declare_hint(field.name)}") from None


def _has_sql_type(field: pa.Field) -> bool:
    """A type without one, in a column the target has, is converted to the target's type
    (the pipeline declared it) or refused when it is conformed."""
    try:
        sql_type_for(field.type)
    except UnmappedType:
        return False
    return True


def _compatible(old: str, new: str) -> bool:
    return old == new or any(old in f and new in f for f in _FAMILIES)


def detect(source: pa.Schema, shape: Shape, typed_source: bool) -> Drift:
    """Compare a source batch's schema with the target's columns."""
    target = {c.name: c.sql_type for c in shape.columns}
    added = []
    for field in source:
        if field.name not in target:
            try:
                check_identifier(field.name, "source column")
            except ValueError as exc:
                raise SchemaError(str(exc)) from None
            added.append(Column(field.name, _sql_type(field)))
    removed = tuple(name for name in target if name not in source.names)
    lost = [name for name in removed if name in shape.required]
    if lost:
        raise SchemaError(
            f"the source lost column(s) {lost}: key, cursor and partition are required"
        )
    retyped: tuple[str, ...] = ()
    if typed_source:
        retyped = tuple(
            f"{f.name}: {target[f.name]} -> {_sql_type(f)}"
            for f in source
            if f.name in target
            and not pa.types.is_null(f.type)
            and _has_sql_type(f)
            and not _compatible(target[f.name], _sql_type(f))
        )
    return Drift(tuple(added), removed, retyped)


def evolved(shape: Shape, drift: Drift) -> Shape:
    """The target's columns after ``evolve`` added the new ones."""
    return Shape((*shape.columns, *drift.added), shape.key, shape.cursor, shape.partition_by)


def align(batch: pa.RecordBatch, shape: Shape) -> pa.RecordBatch:
    """Drop columns the target does not have and add missing ones as NULL."""
    arrays, names = [], []
    for column in shape.columns:
        names.append(column.name)
        if column.name in batch.schema.names:
            arrays.append(batch.column(column.name))
        else:
            arrays.append(pa.nulls(batch.num_rows, column.arrow))
    return pa.RecordBatch.from_arrays(arrays, names=names)


def as_stored(source: SourceBatch, shape: Shape) -> pa.RecordBatch:
    """Source rows as the target stores them, each with its fingerprint: aligned to the
    target's columns (as a load that tolerates drift aligns them: a column the target lacks
    is dropped, one the source lacks is null) and cast to their types. Rows without a key
    are left out, as no load stores them. For comparing a source with its target."""
    aligned = SourceBatch(
        batch=align(source.batch, shape), origin=source.origin, row_numbers=source.row_numbers
    )
    batch = conform(aligned, shape, gated_keys=True)
    if any(batch.column(name).null_count for name in shape.key):
        keyed = pc.is_valid(batch.column(shape.key[0]))
        for name in shape.key[1:]:
            keyed = pc.and_(keyed, pc.is_valid(batch.column(name)))
        batch = batch.filter(keyed)
    return with_row_hash(batch, shape.columns)


def detect_all(schemas: list[pa.Schema], shape: Shape, typed_source: bool) -> Drift:
    """Drift over every part of a source (each file may differ). A column counts as removed
    only when the newest part (the last file) lacks it: older files that predate a column
    are history, not drift, and would otherwise raise the alarm on every run."""
    added: dict[str, Column] = {}
    retyped: dict[str, None] = {}
    removed: tuple[str, ...] = ()
    for schema in schemas:
        drift = detect(schema, shape, typed_source)
        for column in drift.added:
            added.setdefault(column.name, column)
        retyped.update(dict.fromkeys(drift.retyped))
        removed = drift.removed
    return Drift(tuple(added.values()), removed, tuple(retyped))
