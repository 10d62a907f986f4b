"""A SQL source reads its window through a predicate whose values are bound, never inlined."""

from __future__ import annotations

from pipeledger.sources.sql import window_predicate
from pipeledger.state.watermark import Window
from pipeledger.warehouse.dialect import POSTGRES, SQLITE


def test_window_predicate_for_sql_sources_binds_values() -> None:
    window = Window(partition_lower={"eu": 5})
    text, params = window_predicate(POSTGRES, window, "version", "region")
    assert text == (
        '(CAST("region" AS TEXT) IS NULL OR CAST("region" AS TEXT) NOT IN (%s) '
        'OR (CAST("region" AS TEXT) = %s AND "version" >= %s))'
    )
    assert params == ["eu", "eu", 5]
    text, params = window_predicate(SQLITE, Window(lower=1, upper=9), "v", None)
    assert (text, params) == ('"v" >= ? AND "v" <= ?', [1, 9])
