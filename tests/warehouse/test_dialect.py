"""What a dialect makes of names and types."""

from __future__ import annotations

import pytest

from pipeledger.common.columns import TableName
from pipeledger.warehouse.dialect import DUCKDB, POSTGRES, SQLITE, Dialect


def test_sqlite_has_no_schemas_so_the_name_is_one_identifier() -> None:
    assert SQLITE.table(TableName("analytics", "orders")) == '"analytics.orders"'
    assert POSTGRES.table(TableName(None, "orders")) == '"orders"'
    assert SQLITE.column_type("numeric(12,2)") == "DECIMAL_TEXT(12,2)"


@pytest.mark.parametrize("dialect", [POSTGRES, SQLITE, DUCKDB], ids=str)
def test_every_dialect_answers_every_capability(dialect: Dialect) -> None:
    """A capability added to the protocol is decided for each warehouse, not found missing
    by the first user of that warehouse (AttributeError in the middle of a run)."""
    declared = [n for c in type(dialect).__mro__ for n in getattr(c, "__annotations__", {})]
    missing = [n for n in declared if not hasattr(dialect, n)]
    assert missing == []
