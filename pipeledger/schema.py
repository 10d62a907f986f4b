"""Identifiers and column types: the vocabulary shared by config, sources and warehouses.

Every identifier that reaches SQL text passes :func:`check_identifier` first and is then
quoted by the warehouse dialect, so a table or column name can never carry SQL. Column
types are a closed set of canonical SQL names; each maps to exactly one Arrow type.
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
}
_NUMERIC = re.compile(r"^(?:numeric|decimal)\s*\(\s*(\d{1,2})\s*(?:,\s*(\d{1,2})\s*)?\)$")
_PRECISION = re.compile(r"\s*\(\s*\d+\s*\)$")  # varchar(40), timestamp(6): precision we drop

CURSOR_TYPES = frozenset({"smallint", "integer", "bigint", "date", "timestamp", "timestamptz"})


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
        if not 1 <= precision <= 38 or scale > precision:
            raise ValueError(f"type {text!r}: precision must be 1..38 and scale <= precision")
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
    return dict(zip(_SIMPLE_TYPES, kinds, strict=True))  # in the order of the names


def arrow_type(sql_type: str) -> pa.DataType:
    """The Arrow type a canonical SQL type is carried as."""
    numeric = _NUMERIC.match(sql_type)
    if numeric:
        import pyarrow as pa

        return pa.decimal128(int(numeric.group(1)), int(numeric.group(2) or 0))
    return _simple_arrow_types()[sql_type]


def sql_type_for(arrow: pa.DataType) -> str:
    """Infer the canonical SQL type for an Arrow type seen in a source."""
    import pyarrow as pa

    if pa.types.is_decimal(arrow):
        precision = min(int(arrow.precision), 38)
        return f"numeric({precision},{min(int(arrow.scale), precision)})"
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
    if pa.types.is_string(arrow) or pa.types.is_large_string(arrow) or pa.types.is_null(arrow):
        return "text"
    raise ValueError(f"Arrow type {arrow} has no supported SQL type")


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
