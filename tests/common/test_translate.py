"""The translation of a model's PostgreSQL SQL to SQLite, and PostgreSQL's types of its
expressions: every case runs on a real PostgreSQL as written and on SQLite as translated,
over the same rows stored as each warehouse stores them, and must give the same values."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from pipeledger.common.sqltext import ModelSql
from pipeledger.common.translate.pgtypes import Types
from pipeledger.errors import UntranslatableSql
from tests.common import translation_cases as cases


@pytest.fixture(scope="module")
def both(postgres_server: str) -> Iterator[tuple[psycopg.Connection[Any], sqlite3.Connection]]:
    """One PostgreSQL connection (its rows in a temporary table) and one SQLite database."""
    with psycopg.connect(postgres_server, autocommit=True) as pg:
        cases.create_postgres(pg)
        lite = cases.create_sqlite()
        yield pg, lite
        lite.close()


@pytest.mark.parametrize("expression", cases.CASES)
def test_an_expression_means_on_sqlite_what_it_means_on_postgres(
    both: tuple[psycopg.Connection[Any], sqlite3.Connection], expression: str
) -> None:
    pg, lite = both
    mismatch = cases.evaluate(pg, lite, expression)
    assert mismatch is None, (
        f"{expression}\n postgres {mismatch.postgres}\n sqlite   {mismatch.sqlite}\n"
        f" sql      {mismatch.sqlite_sql}"
    )


@pytest.mark.parametrize("query", cases.QUERIES)
def test_a_query_gives_the_same_rows_on_both(
    both: tuple[psycopg.Connection[Any], sqlite3.Connection], query: str
) -> None:
    pg, lite = both
    assert cases.compare_query(pg, lite, query) == ""


@pytest.mark.parametrize(("expression", "words"), cases.REFUSED)
def test_what_sqlite_cannot_compute_is_refused_naming_the_construct_and_line(
    expression: str, words: str
) -> None:
    query = ModelSql(f"select id,\n       {expression} as v\nfrom t", "models.m (models/m.sql)")
    with pytest.raises(UntranslatableSql) as raised:
        query.render(True, cases.catalog)
    message = str(raised.value)
    assert message.startswith("models.m (models/m.sql), line 2: ")
    assert words.lower() in message.lower()
    assert raised.value.line == 2
    assert raised.value.exit_code == 2


def test_constants_fold_exactly_where_sqlite_floats_would_not() -> None:
    sql = ModelSql(
        "select * from t where n between 0.06 - 0.01 and 0.06 + 0.01 "
        "and d <= date '1998-12-01' - interval '90' day",
        "m",
    ).render(True, cases.catalog)
    assert "BETWEEN 0.05 AND 0.07" in sql  # SQLite's 0.06 + 0.01 is 0.06999999999999999
    assert "d <= '1998-09-02'" in sql  # a date compared with a midnight constant: as dates
    assert "INTERVAL" not in sql


def test_a_line_is_the_line_in_the_models_file() -> None:
    text = "-- a comment\nselect id,\n  s,\n\n  reverse(s) as r\nfrom t"
    with pytest.raises(UntranslatableSql) as raised:
        ModelSql(text, "models.m").render(True, cases.catalog)
    assert raised.value.line == 5
    assert raised.value.construct == "REVERSE(s)"


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("n * (1 - m)", "numeric(38,6)"),  # a product adds scales: 2 + 4
        ("n * n", "numeric(38,4)"),
        ("n + m", "numeric(38,4)"),  # a sum keeps the larger
        ("sum(n)", "numeric(38,2)"),  # an aggregate sum keeps its operand's
        ("sum(n * (1 - m) * (1 + m))", "numeric(44,10)"),  # digits: 10 + 7 + 7 + 10
        ("avg(n)", "numeric(38,20)"),
        ("n / 3", "numeric(38,20)"),
        ("round(n, 1)", "numeric(38,1)"),
        ("n", "numeric(12,2)"),  # passed on: its own type
        ("n::numeric(8,3)", "numeric(8,3)"),
        ("i * 1.5", "numeric(38,1)"),
        ("i / 2", "integer"),
        ("count(*)", "bigint"),
        ("sum(i)", "bigint"),
        ("sum(b)", "numeric(38,0)"),
        ("avg(f)", "double precision"),
        ("extract(year from d)", "numeric(38,0)"),
        ("extract(epoch from ts)", "numeric(38,6)"),
        ("date_part('year', d)", "double precision"),
        ("d + interval '1 day'", "timestamp"),
        ("d + 1", "date"),
        ("d - d2", "integer"),
        ("ts - ts", "interval"),
        ("date_trunc('month', d)", "timestamptz"),
        ("date_trunc('month', ts)", "timestamp"),
        ("coalesce(n, 0)", "numeric(38,2)"),
        ("case when bo then n else m end", "numeric(38,4)"),
        ("s || n", "text"),
        ("'x'", "text"),
    ],
)
def test_computed_columns_get_postgres_types(expression: str, expected: str) -> None:
    tree = ModelSql(f"select {expression} as v from t", "m").tree
    (output,) = Types(tree, cases.catalog).outputs(tree)
    assert output.type is not None and output.type.column_type() == expected


def test_a_decimal_too_wide_keeps_its_integer_digits_and_gives_up_scale() -> None:
    wide = "n * n * n * n * n * n * n * n * n * n * n * n * n * n * n * n * n * n * n * n"
    tree = ModelSql(f"select {wide} as v from t", "m").tree
    (output,) = Types(tree, cases.catalog).outputs(tree)
    assert output.type is not None and output.type.column_type() == "numeric(76,0)"
    tree = ModelSql("select m * m * m * m * m * m * m * m * m * m as v from t", "m").tree
    (output,) = Types(tree, cases.catalog).outputs(tree)
    assert output.type is not None and output.type.column_type() == "numeric(76,16)"


def test_unaliased_outputs_are_named_as_postgres_names_them() -> None:
    tree = ModelSql("select count(*), sum(n), t.s, n::integer, upper(s), 1 + 1 from t", "m").tree
    names = [o.name for o in Types(tree, cases.catalog).outputs(tree)]
    assert names == ["count", "sum", "s", "n", "upper", None]
