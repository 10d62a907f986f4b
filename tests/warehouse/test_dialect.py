"""What a dialect makes of names and types."""

from __future__ import annotations

from pipeledger.common.columns import TableName
from pipeledger.warehouse.dialect import POSTGRES, SQLITE


def test_sqlite_has_no_schemas_so_the_name_is_one_identifier() -> None:
    assert SQLITE.table(TableName("analytics", "orders")) == '"analytics.orders"'
    assert POSTGRES.table(TableName(None, "orders")) == '"orders"'
    assert SQLITE.column_type("numeric(12,2)") == "DECIMAL_TEXT(12,2)"
