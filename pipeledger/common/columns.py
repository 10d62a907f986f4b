"""Identifiers and column types: the vocabulary shared by config, sources and warehouses.

Every identifier that reaches SQL text passes :func:`check_identifier` first and is then
quoted by the warehouse dialect, so a table or column name can never carry SQL. Column
types are a closed set of canonical SQL names; each is carried by exactly one Arrow type
(:func:`arrow_type`), and every Arrow type a source may carry maps to one of them
(:func:`sql_type_for`) or is refused with a message saying how to declare it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where Arrow types are made: reading a config needs no pyarrow
    import pyarrow as pa

IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
RESERVED_PREFIX = "_pipeledger_"
RUN_ID_COLUMN = "_pipeledger_run_id"
LOADED_AT_COLUMN = "_pipeledger_loaded_at"
ROW_HASH_COLUMN = "_pipeledger_row_hash"  # see pipeledger.transform.fingerprint
DELETED_AT_COLUMN = "_pipeledger_deleted_at"  # soft_delete: when a run deleted the row

_SIMPLE_TYPES = (
    "smallint",
    "integer",
    "bigint",
    "real",
    "double precision",
    "boolean",
    "text",
    "date",
    "timestamp",
    "timestamptz",
    "bytea",
    "uuid",
    "jsonb",  # JSON text (pipeledger/common/values.py renders nested values as JSON)
    "time",
    "interval",  # a fixed length: no months (they have no fixed length)
)
_ALIASES = {
    "int": "integer",
    "int2": "smallint",
    "int4": "integer",
    "int8": "bigint",
    "float4": "real",
    "float8": "double precision",
    "double": "double precision",
    "bool": "boolean",
    "varchar": "text",
    "character varying": "text",
    "string": "text",
    "timestamp without time zone": "timestamp",
    "timestamp with time zone": "timestamptz",
    "decimal": "numeric",
    "blob": "bytea",
    "time without time zone": "time",
}
_NUMERIC = re.compile(r"^(?:numeric|decimal)\s*\(\s*(\d{1,2})\s*(?:,\s*(\d{1,2})\s*)?\)$")
MAX_PRECISION = 76  # Arrow's widest decimal (decimal256); up to 38 digits ride in a decimal128
_DECIMAL128_PRECISION = 38
_PRECISION = re.compile(r"\s*\(\s*\d+\s*\)$")  # varchar(40), timestamp(6): precision we drop

CURSOR_TYPES = frozenset({"smallint", "integer", "bigint", "date", "timestamp", "timestamptz"})
# types whose text differs between PostgreSQL and Arrow, or that hold no single value
# (nested JSON): not a partition (its watermarks are keyed by the value's text)
NOT_PARTITION_TYPES = frozenset({"bytea", "uuid", "jsonb", "time", "interval"})
NOT_KEY_TYPES = frozenset({"jsonb"})


def check_identifier(name: str, what: str = "identifier") -> str:
    """Return ``name`` if it is a plain SQL identifier, else raise ``ValueError``."""
    if not IDENTIFIER.match(name):
        raise ValueError(
            f"{what} {name!r} is not a valid identifier "
            "(letters, digits and _, starting with a letter or _, at most 63 characters)"
        )
    if name.lower().startswith(RESERVED_PREFIX):
        raise ValueError(f"{what} {name!r} uses the reserved prefix {RESERVED_PREFIX!r}")
    return name


@dataclass(frozen=True)
class TableName:
    """A validated ``[schema.]table`` target name."""

    schema: str | None
    table: str

    @classmethod
    def parse(cls, text: str) -> TableName:
        parts = text.split(".")
        if len(parts) > 2:
            raise ValueError(f"table name {text!r} must be 'table' or 'schema.table'")
        if len(parts) == 2:
            return cls(check_identifier(parts[0], "schema"), check_identifier(parts[1], "table"))
        return cls(None, check_identifier(parts[0], "table"))

    def __str__(self) -> str:
        return f"{self.schema}.{self.table}" if self.schema else self.table


def canonical_type(text: str) -> str:
    """Normalise a declared SQL type to its canonical name, or raise ``ValueError``."""
    cleaned = " ".join(text.strip().lower().split())
    numeric = _NUMERIC.match(cleaned)
    if numeric:
        precision, scale = int(numeric.group(1)), int(numeric.group(2) or 0)
        if not 1 <= precision <= MAX_PRECISION or scale > precision:
            raise ValueError(
                f"type {text!r}: precision must be 1..{MAX_PRECISION} and scale <= precision"
            )
        return f"numeric({precision},{scale})"
    cleaned = _PRECISION.sub("", cleaned)
    cleaned = _ALIASES.get(cleaned, cleaned)
    if cleaned not in _SIMPLE_TYPES:
        allowed = ", ".join([*_SIMPLE_TYPES, "numeric(p,s)"])
        raise ValueError(f"unsupported column type {text!r}; use one of: {allowed}")
    return cleaned


@cache
def _simple_arrow_types() -> dict[str, pa.DataType]:
    import pyarrow as pa

    kinds = [pa.int16(), pa.int32(), pa.int64(), pa.float32(), pa.float64(), pa.bool_()]
    kinds += [pa.string(), pa.date32(), pa.timestamp("us"), pa.timestamp("us", tz="UTC")]
    kinds += [pa.binary(), pa.uuid(), pa.json_(), pa.time64("us"), pa.duration("us")]
    return dict(zip(_SIMPLE_TYPES, kinds, strict=True))  # in the order of the names


def arrow_type(sql_type: str) -> pa.DataType:
    """The Arrow type a canonical SQL type is carried as."""
    numeric = _NUMERIC.match(sql_type)
    if numeric:
        import pyarrow as pa

        precision, scale = int(numeric.group(1)), int(numeric.group(2) or 0)
        if precision > _DECIMAL128_PRECISION:
            return pa.decimal256(precision, scale)
        return pa.decimal128(precision, scale)
    return _simple_arrow_types()[sql_type]


class UnmappedType(ValueError):
    """An Arrow type that no SQL type holds as it is (a union, say): declare the column."""


UUID_EXTENSION = "arrow.uuid"
JSON_EXTENSION = "arrow.json"
# canonical extensions that mean no more here than their storage (bool8: a boolean)
_STORAGE_EXTENSIONS = frozenset(
    {"arrow.bool8", "arrow.fixed_shape_tensor", "arrow.variable_shape_tensor"}
)


def is_nested(arrow: pa.DataType) -> bool:
    """Lists, structs and maps of any kind: they land as JSON."""
    import pyarrow as pa

    return bool(
        pa.types.is_list(arrow)
        or pa.types.is_large_list(arrow)
        or pa.types.is_fixed_size_list(arrow)
        or pa.types.is_list_view(arrow)
        or pa.types.is_large_list_view(arrow)
        or pa.types.is_struct(arrow)
        or pa.types.is_map(arrow)
    )


def value_type(arrow: pa.DataType) -> pa.DataType:
    """The type of a column's values once decoded: a dictionary's or a run-end encoded
    column's value type, a canonical extension's storage where it means nothing more."""
    import pyarrow as pa

    while True:
        if pa.types.is_dictionary(arrow) or pa.types.is_run_end_encoded(arrow):
            arrow = arrow.value_type
        elif (
            isinstance(arrow, pa.BaseExtensionType) and arrow.extension_name in _STORAGE_EXTENSIONS
        ):
            if arrow.extension_name == "arrow.bool8":
                return pa.bool_()
            arrow = arrow.storage_type
        else:
            return arrow


def sql_type_for(arrow: pa.DataType) -> str:
    """Infer the canonical SQL type for an Arrow type seen in a source, or raise
    :class:`UnmappedType`."""
    import pyarrow as pa

    arrow = value_type(arrow)
    if isinstance(arrow, pa.BaseExtensionType):
        if arrow.extension_name == UUID_EXTENSION:
            return "uuid"
        if arrow.extension_name == JSON_EXTENSION:
            return "jsonb"
        raise UnmappedType(f"Arrow type {arrow} has no SQL type")
    if pa.types.is_decimal(arrow):
        precision, scale = int(arrow.precision), int(arrow.scale)
        if scale < 0:  # decimal(5, -2) holds multiples of 100: whole numbers of p - s digits
            precision, scale = precision - scale, 0
        if precision > MAX_PRECISION:
            raise UnmappedType(f"Arrow type {arrow} has no SQL type")
        return f"numeric({precision},{min(scale, precision)})"
    if pa.types.is_timestamp(arrow):
        return "timestamptz" if arrow.tz else "timestamp"
    if pa.types.is_date(arrow):
        return "date"
    if pa.types.is_boolean(arrow):
        return "boolean"
    if pa.types.is_int8(arrow) or pa.types.is_int16(arrow) or pa.types.is_uint8(arrow):
        return "smallint"
    if pa.types.is_int32(arrow) or pa.types.is_uint16(arrow):
        return "integer"
    if pa.types.is_integer(arrow):
        return "bigint"
    if pa.types.is_float32(arrow) or pa.types.is_float16(arrow):
        return "real"
    if pa.types.is_floating(arrow):
        return "double precision"
    if (
        pa.types.is_string(arrow)
        or pa.types.is_large_string(arrow)
        or pa.types.is_string_view(arrow)
        or pa.types.is_null(arrow)
    ):
        return "text"
    if pa.types.is_fixed_size_binary(arrow) and arrow.byte_width == 16:
        return "uuid"  # what Parquet's UUID logical type is read as without the extension
    if (
        pa.types.is_binary(arrow)
        or pa.types.is_large_binary(arrow)
        or pa.types.is_binary_view(arrow)
        or pa.types.is_fixed_size_binary(arrow)
    ):
        return "bytea"
    if pa.types.is_time(arrow):
        return "time"
    if pa.types.is_duration(arrow):
        return "interval"
    if is_nested(arrow):
        return "jsonb"
    raise UnmappedType(f"Arrow type {arrow} has no SQL type")


def declare_hint(name: str, pipeline: str | None = None) -> str:
    """How to fix a column whose type has no mapping: declare it."""
    where = f"[pipelines.{pipeline}.columns]" if pipeline else "the pipeline's columns"
    return f'declare it under {where}, e.g. {name} = "text"'


@dataclass(frozen=True)
class Column:
    """One target column: its name and canonical SQL type."""

    name: str
    sql_type: str

    @property
    def arrow(self) -> pa.DataType:
        return arrow_type(self.sql_type)


def target_schema(columns: tuple[Column, ...]) -> pa.Schema:
    """The Arrow schema rows are conformed to before they are staged."""
    import pyarrow as pa

    return pa.schema([pa.field(c.name, c.arrow) for c in columns])


# The embedded SQLite warehouse declares each type by a name of its own (SQLite takes any
# name; the name sets the column's affinity and maps back to the canonical type). Exact
# decimals, uuids, times and JSON are text (TEXT affinity: stored as written), intervals
# integer microseconds (INTEGER affinity: "INT" is in the name), bytea a BLOB.
_SQLITE_DECLARED = {
    "bytea": "BLOB",
    "uuid": "UUID_TEXT",
    "jsonb": "JSON_TEXT",
    "time": "TIME_TEXT",
    "interval": "INTERVAL_MICROS",
}
_SQLITE_CANONICAL = {declared.lower(): kind for kind, declared in _SQLITE_DECLARED.items()}


def sqlite_declared_type(sql_type: str) -> str:
    """The type SQLite DDL declares for a canonical type."""
    if sql_type.startswith("numeric("):
        return "DECIMAL_TEXT" + sql_type.removeprefix("numeric")
    return _SQLITE_DECLARED.get(sql_type, sql_type)


def from_sqlite_declared(text: str) -> str:
    """The canonical type of a column SQLite declares as ``text`` (the inverse of
    :func:`sqlite_declared_type`)."""
    lowered = text.lower()
    if lowered.startswith("decimal_text"):
        return "numeric" + lowered.removeprefix("decimal_text")
    return _SQLITE_CANONICAL.get(lowered, lowered)


# staged beside the data columns and stored with each target row (NULL: not known)
ROW_HASH = Column(ROW_HASH_COLUMN, "bigint")
