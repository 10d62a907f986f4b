"""Declared column types in their canonical spelling, and the types that are refused."""

from __future__ import annotations

import pytest

from pipeledger.common.columns import canonical_type


@pytest.mark.parametrize(
    ("declared", "canonical"),
    [
        ("NUMERIC(12, 2)", "numeric(12,2)"),
        ("int", "integer"),
        ("timestamp with time zone", "timestamptz"),
        ("character varying(40)", "text"),
        ("double", "double precision"),
        ("int8", "bigint"),
        ("UUID", "uuid"),
        ("blob", "bytea"),
        ("JSONB", "jsonb"),
        ("time without time zone", "time"),
        ("time(6)", "time"),
        ("interval", "interval"),
        ("numeric(50, 10)", "numeric(50,10)"),  # carried as decimal256
    ],
)
def test_canonical_types(declared: str, canonical: str) -> None:
    assert canonical_type(declared) == canonical


@pytest.mark.parametrize(
    "bad", ["numeric(12,2)); drop table x", "json", "text; --", "numeric(77,2)", "timetz"]
)
def test_unsupported_types_are_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        canonical_type(bad)
