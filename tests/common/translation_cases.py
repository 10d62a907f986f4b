"""PostgreSQL expressions run on PostgreSQL as written and on SQLite as translated, over the
same rows stored as each warehouse stores them: each result must be the same value.

Each expression's result is staged as a model's is (cast to the column type pipeledger
infers for it), so the comparison also covers the inferred types. Used by
tests/common/test_translate.py.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

import psycopg

from pipeledger.common.columns import TableName
from pipeledger.common.sqltext import ModelSql
from pipeledger.common.translate.pgtypes import Types
from pipeledger.warehouse.dialect import POSTGRES, SQLITE, quote

COLUMNS = [
    ("id", "integer"),
    ("i", "integer"),
    ("b", "bigint"),
    ("n", "numeric(12,2)"),
    ("m", "numeric(10,4)"),
    ("f", "double precision"),
    ("s", "text"),
    ("p", "text"),
    ("d", "date"),
    ("d2", "date"),
    ("ts", "timestamp"),
    ("tz", "timestamptz"),
    ("bo", "boolean"),
    ("iv", "interval"),
    ("tm", "time"),
]
ROWS: list[tuple[Any, ...]] = [
    (
        1,
        7,
        10**12,
        Decimal("1148.05"),
        Decimal("0.0400"),
        2.5,
        "Return%Flag",
        "a_b",
        date(2024, 1, 31),
        date(2023, 12, 25),
        datetime(2024, 1, 31, 10, 11, 12, 123456),
        datetime(2024, 2, 29, 23, 59, 59, 999999, tzinfo=UTC),
        True,
        timedelta(hours=26, microseconds=5),
        time(10, 11, 12, 500000),
    ),
    (
        2,
        -3,
        -5,
        Decimal("-0.50"),
        Decimal("1.2345"),
        -0.1,
        "hello World",
        "HELLO",
        date(2000, 2, 29),
        date(1969, 7, 20),
        datetime(1969, 12, 31, 23, 59, 59, 500000),
        datetime(2000, 1, 1, tzinfo=UTC),
        False,
        timedelta(seconds=-90),
        time(0, 0),
    ),
    (
        3,
        0,
        0,
        Decimal("0.00"),
        Decimal("0.0000"),
        0.0,
        "",
        "x,y,,z",
        date(2021, 1, 1),
        date(2021, 1, 3),
        datetime(2021, 1, 3, 0, 0),
        datetime(2021, 1, 1, 12, tzinfo=UTC),
        None,
        timedelta(0),
        time(23, 59, 59, 999999),
    ),
    (
        4,
        12,
        3,
        Decimal("99.99"),
        Decimal("-2.5000"),
        1e-7,
        "Ünïcode ß",
        "a.b.c",
        date(2024, 12, 31),
        date(2024, 3, 31),
        datetime(2024, 12, 30, 23, 0, 0, 1),
        datetime(2023, 3, 26, 1, 30, tzinfo=UTC),
        True,
        timedelta(days=3),
        time(12, 0),
    ),
    (5, *([None] * 14)),
]

# expressions over the columns of t (one output column each)
CASES: list[str] = [
    # numbers and exact decimals
    "n * (1 - m)",
    "n + m",
    "n - 0.06 + 0.01",
    "n * 2",
    "i * n",
    "n / 3",
    "i / 2",
    "(i + 1) / 3",  # integer division truncates on both (an odd i divides to a whole number)
    "7 / 2",
    "i % 3",
    "-7 / 2",
    "extract(year from d) / 10",
    "i::numeric / 2",
    "(d - d2) / 7",
    "(d - d2) / 7.0",
    "i % 5",
    "mod(n, 0.3)",
    "-n",
    "abs(n)",
    "round(n, 1)",
    "round(n)",
    "trunc(m, 2)",
    "ceil(n)",
    "floor(m)",
    "n < 24",
    "n between 0.06 - 0.01 and 0.06 + 0.01",
    "m = 0.04",
    "greatest(n, m, 1)",
    "least(i, b)",
    "coalesce(n, 0)",
    "case when n > 10 then n else 0 end",
    "n::integer",
    "f::integer",
    "n::numeric(8,1)",
    "i::numeric(10,2)",
    "n::text",
    "i::text",
    "f::text",
    "bo::text",
    "'12'::integer + i",
    "'1.5'::numeric * 2",
    "sqrt(abs(f))",
    "power(i, 2)",
    "sign(n)",
    "b + 1",
    # text
    "s || p",
    "s || n",
    "concat(s, '-', n, bo, d)",
    "concat_ws(',', s, p, i)",
    "length(s)",
    "char_length(s)",
    "lower(p)",
    "upper(p)",
    "substring(s from 2 for 3)",
    "substring(s from 0 for 3)",
    "substring(s from i for 2)",
    "substr(s, 3)",
    "left(s, 3)",
    "left(s, -2)",
    "right(s, 3)",
    "right(s, -2)",
    "lpad(p, 6, '*')",
    "rpad(p, 2)",
    "lpad(p, 7, 'ab')",
    "repeat(p, 2)",
    "trim(both 'x' from p)",
    "trim(s)",
    "ltrim(p, 'ax')",
    "rtrim(p, 'z')",
    "btrim(p, 'a')",
    "position('l' in s)",
    "strpos(s, 'o')",
    "replace(s, 'l', 'L')",
    "split_part(p, ',', 1)",
    "split_part(p, ',', 2)",
    "split_part(p, ',', 4)",
    "split_part(p, '.', 3)",
    "s like 'Return%'",
    "s like 'return%'",
    "s ilike 'return%'",
    "s not like '%o%'",
    "p like 'a\\_b'",
    "p like 'a_b'",
    "s like 'Return\\%Flag'",
    "s like 'R*%' escape '*'",
    "s ilike p || '%'",
    "ascii(s)",
    "chr(65 + i)",
    "md5(s)",
    "s::varchar(3)",
    # dates and times
    "d + 1",
    "d - 1",
    "d - d2",
    "d + interval '1 month'",
    "d + interval '1' month",
    "d - interval '1' year",
    "d + interval '3 months 2 days'",
    "d + i",
    "ts + interval '1 month'",
    "ts + interval '90' day",
    "ts - interval '1 hour 30 minutes'",
    "ts + interval '0.5 seconds'",
    "tz + interval '1 day'",
    "tz - interval '1 mon'",
    "ts + iv",
    "tz - iv",
    "ts - ts",
    "tz - ts",
    "iv + interval '1 hour'",
    "iv * 2",
    "i * interval '1 day'",
    "d + i * interval '1 month'",
    "date '1998-12-01' - interval '90' day",
    "date '2024-01-31' + interval '1 month'",
    "timestamp '2024-01-31 10:00' + interval '1 month 1 day'",
    "d <= date '1998-12-01' - interval '90' day",
    "d < date '2024-01-01' + interval '1' year",
    "d > '2021-01-01'",
    "d = ts",
    "d < tz",
    "ts < tz",
    "ts >= '2021-01-03'",
    "d between date '2000-01-01' and date '2021-12-31'",
    "iv > interval '1 day'",
    "extract(year from d)",
    "extract(month from ts)",
    "extract(day from tz)",
    "extract(hour from ts)",
    "extract(minute from ts)",
    "extract(second from ts)",
    "extract(milliseconds from ts)",
    "extract(microseconds from ts)",
    "extract(dow from d)",
    "extract(isodow from d)",
    "extract(doy from d)",
    "extract(quarter from d)",
    "extract(week from d)",
    "extract(isoyear from d)",
    "extract(epoch from d)",
    "extract(epoch from ts)",
    "extract(epoch from tz)",
    "extract(epoch from iv)",
    "extract(decade from d)",
    "extract(century from d)",
    "extract(millennium from d)",
    "extract(hour from tm)",
    "date_part('year', d)",
    "date_part('dow', ts)",
    "date_trunc('month', d)",
    "date_trunc('month', ts)",
    "date_trunc('year', tz)",
    "date_trunc('week', d)",
    "date_trunc('quarter', ts)",
    "date_trunc('day', ts)",
    "date_trunc('hour', ts)",
    "date_trunc('minute', tz)",
    "date_trunc('second', ts)",
    "date_trunc('milliseconds', ts)",
    "date_trunc('decade', d)",
    "date_trunc('century', d)",
    "date_trunc('millennium', d)",
    "date_trunc('month', d) + interval '1 month' - interval '1 day'",
    "date_trunc('month', ts, 'UTC')",
    "d::timestamp",
    "d::timestamptz",
    "ts::date",
    "tz::date",
    "ts::timestamptz",
    "tz::timestamp",
    "ts::time",
    "ts::text",
    "tz::text",
    "d::text",
    "tm::text",
    "'2024-03-05'::date",
    "'2024-03-05 10:00:00'::timestamp",
    "'2024-03-05 10:00:00+02'::timestamptz",
    "'10:30'::time",
    "to_char(d, 'YYYY-MM-DD')",
    "to_char(ts, 'YYYY-MM-DD HH24:MI:SS.US')",
    "to_char(ts, 'DD Mon YYYY, HH12:MI AM')",
    "to_char(d, 'FMMonth FMDD, YYYY')",
    "to_char(d, 'Day Dy D ID IW Q DDD')",
    "to_char(tz, 'YYYY\"T\"HH24:MI')",
    "to_char(d, 'Month')",
    "make_date(2024, 2, 29)",
    "to_date('2024-03-05', 'YYYY-MM-DD')",
    "to_timestamp('2024-03-05 10:11:12', 'YYYY-MM-DD HH24:MI:SS')",
    "to_timestamp(1700000000.5)",
    "to_timestamp(i)",
    "coalesce(ts, d)",
    "case when bo then d else ts end",
    "greatest(d, d2)",
    "bo and i > 0",
    "not bo",
    "bo is true",
    "bo = 'true'",
    "bo <> 'f'",
    "i = '7'",
    "n = '1148.05'",
    "i is distinct from 7",
]


@dataclass(frozen=True)
class Mismatch:
    expression: str
    postgres: list[Any]
    sqlite: list[Any]
    sqlite_sql: str


def catalog(table: TableName) -> list[tuple[str, str]] | None:
    return COLUMNS if table.table == "t" else None


def _sqlite_row(row: tuple[Any, ...]) -> list[Any]:
    out: list[Any] = []
    for (_, kind), value in zip(COLUMNS, row, strict=True):
        if value is None:
            out.append(None)
        elif kind == "interval":
            out.append(value // timedelta(microseconds=1))
        elif kind == "time":
            out.append(value.strftime("%H:%M:%S.%f"))
        elif kind == "timestamptz":
            out.append(value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f") + "+00:00")
        elif kind == "timestamp":
            out.append(value.strftime("%Y-%m-%dT%H:%M:%S.%f"))
        elif isinstance(value, date | Decimal):
            out.append(str(value))
        else:
            out.append(value)
    return out


def create_sqlite() -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    columns = ", ".join(f"{quote(n)} {SQLITE.column_type(k)}" for n, k in COLUMNS)
    conn.execute(f"CREATE TABLE t ({columns})")
    conn.executemany(f"INSERT INTO t VALUES ({SQLITE.marks(len(COLUMNS))})", map(_sqlite_row, ROWS))
    conn.create_function("md5", 1, _md5)
    return conn


def _md5(text: str | None) -> str | None:
    import hashlib

    return None if text is None else hashlib.md5(text.encode()).hexdigest()


def create_postgres(conn: psycopg.Connection[Any]) -> None:
    columns = ", ".join(f"{quote(n)} {POSTGRES.column_type(k)}" for n, k in COLUMNS)
    conn.execute("SET TimeZone = 'UTC'")
    conn.execute(f"CREATE TEMP TABLE t ({columns})")
    with conn.cursor() as cursor:
        cursor.executemany(f"INSERT INTO t VALUES ({POSTGRES.marks(len(COLUMNS))})", ROWS)


def _query(expression: str) -> str:
    return f"select {expression} as v from t order by id"


def column_type(expression: str) -> str:
    tree = ModelSql(_query(expression), expression).tree
    found = Types(tree, catalog).outputs(tree)[0].type
    kind = found.column_type() if found is not None else None
    return kind or "text"


def _normal(value: Any, kind: str) -> Any:
    if value is None:
        return None
    if kind == "boolean":
        return bool(value)
    if kind.startswith("numeric") or kind in ("real", "double precision"):
        return float(value)
    if kind == "interval":
        return value // timedelta(microseconds=1) if isinstance(value, timedelta) else int(value)
    if kind == "timestamptz" and isinstance(value, datetime):
        return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f") + "+00:00"
    if kind == "timestamp" and isinstance(value, datetime):
        return value.strftime("%Y-%m-%dT%H:%M:%S.%f")
    if kind == "time" and isinstance(value, time):
        return value.strftime("%H:%M:%S.%f")
    if isinstance(value, date):
        return value.isoformat()
    return value


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-12)
    return bool(a == b)


def evaluate(
    pg: psycopg.Connection[Any], lite: sqlite3.Connection, expression: str
) -> Mismatch | None:
    """The expression's values on both warehouses, staged as a model stages them; a
    :class:`Mismatch` when they differ."""
    kind = column_type(expression)
    query = ModelSql(_query(expression), expression)
    translated = query.render(True, catalog)
    staged_pg = f"SELECT {POSTGRES.cast_to('q.v', kind)} FROM ({query.render(False)}) AS q"
    staged_lite = f"SELECT {SQLITE.cast_to('q.v', kind)} FROM ({translated}) AS q"
    on_pg = [_normal(v, kind) for (v,) in pg.execute(staged_pg).fetchall()]
    on_lite = [_normal(v, kind) for (v,) in lite.execute(staged_lite).fetchall()]
    if len(on_pg) == len(on_lite) and all(map(_same, on_pg, on_lite)):
        return None
    return Mismatch(expression=expression, postgres=on_pg, sqlite=on_lite, sqlite_sql=translated)


def run_cases(
    url: str, only: Sequence[str] | None = None, verbose: bool = False
) -> list[Mismatch | str]:
    """Every case (or ``only``); the mismatches and the errors, as found."""
    found: list[Mismatch | str] = []
    lite = create_sqlite()
    with psycopg.connect(url, autocommit=True) as pg:
        create_postgres(pg)
        for expression in only or CASES:
            try:
                mismatch = evaluate(pg, lite, expression)
            except Exception as exc:  # reported with the case that raised it
                found.append(f"{expression}: {type(exc).__name__}: {exc}")
                if verbose:
                    print(found[-1])
                continue
            if mismatch is not None:
                found.append(mismatch)
                if verbose:
                    print(mismatch.expression, column_type(expression))
                    print("   pg    ", mismatch.postgres)
                    print("   sqlite", mismatch.sqlite)
                    print("   sql   ", mismatch.sqlite_sql[:400])
    return found


# whole queries over t (compared row by row, in their ORDER BY)
QUERIES: list[str] = [
    "select bo, count(*), sum(n), avg(n), min(m), max(d), count(distinct s) from t "
    "group by bo order by bo nulls first",
    "select sum(n * (1 - m)) as revenue, sum(i) as si, avg(i) as ai, count(n) from t",
    "select sum(b) / 2 as half, count(*) / 2 as pairs, sum(i) / count(i) as mean from t",
    "select i, row_number() over (order by n desc nulls last) as r, "
    "rank() over (partition by bo order by i) as k, lag(n) over (order by id) as prev, "
    "sum(n) over (order by id rows between 1 preceding and current row) as running "
    "from t order by id",
    "select string_agg(p, '|') as ps, bool_and(bo) as every, bool_or(bo) as anyone from t",
    "select count(*) filter (where n > 0) as positive, sum(i) filter (where bo) as s from t",
    "select c_count, count(*) as custdist from (select id, count(s) from t group by id) "
    "as c_orders (c_id, c_count) group by c_count order by custdist desc, c_count desc",
    "with w (k, total) as (select bo, sum(n) from t group by bo) "
    "select k, total from w where total = (select max(total) from w) order by k",
    "select x.name, x.id from (values (1, 'one'), (2, 'two')) as x (id, name) "
    "join t on t.id = x.id order by x.id",
    "select id from t where n > (select avg(n) from t) order by id",
    "select id from t a where exists (select 1 from t b where b.i > a.i) order by id",
    "select id from t where i in (select i from t where bo) order by id",
    "select id from t where i not in (select i from t where i is not null and i > 5) order by id",
    "select distinct on (bo) bo, id from t order by bo nulls first, id desc",
    "select n from t union select m from t order by 1 nulls first",
    "select d from t intersect select d from t where bo order by 1",
    "select d from t except select d from t where bo order by 1 nulls first",
    "with recursive r (k) as (select 1 union all select k + 1 from r where k < 5) "
    "select k, k * interval '1 day' as span from r order by k",
    "select id, n from t order by n desc nulls last limit 2",
    "select date_trunc('month', d) as month, sum(n) as total from t where d is not null "
    "group by 1 order by 1",
    "select extract(year from d) as y, count(*) from t group by extract(year from d) "
    "order by y nulls first",
    "select count(*) from t where s like '%o%' and d < date '2030-01-01' - interval '1 year'",
    "select i, case i when 7 then 'seven' when 0 then 'zero' else 'other' end as word "
    "from t order by id",
    "select sum(iv) as total, max(ts - coalesce(tz, ts)) as widest from t",
    "select id, count(*) over () as n from t order by id",
    "select t1.id, t2.id from t t1 left join t t2 on t2.i = t1.i * -1 and t2.id <> t1.id "
    "order by t1.id, t2.id nulls first",
    "select id from t where n in (select n from t where bo) order by id",
    "select a.id, b.id from t a join t b on a.n = b.n * 1 order by 1, 2",
    "select n, count(*) from t group by n having n > 1 or n is null order by n nulls first",
    "select max(n) as top, min(n) as bottom, max(s) as last_name from t",
    "select id from t where n > 24 or m < -1 order by n desc nulls last",
    "select sum(n) over (partition by bo order by n) as s from t order by id",
]

# constructs SQLite cannot compute as PostgreSQL does: each is refused, naming them
REFUSED: list[tuple[str, str]] = [
    ("s ~ 'a+'", "regular expression"),
    ("s similar to 'a%'", "SIMILAR TO"),
    ("initcap(s)", "INITCAP"),
    ("reverse(s)", "REVERSE"),
    ("extract(timezone from tz)", "timezone"),
    ("extract(hour from iv)", "interval"),
    ("to_char(n, '999.99')", "number"),
    ("to_char(d, 'YYYY-WW')", "WW"),
    ("date_trunc('month', ts, 'Europe/Paris')", "time zone"),
    ("interval '1 month' > iv", "no fixed length"),
    ("iv * 1.5", "fraction"),
    ("array_agg(s) over ()", "array"),
    ("s::jsonb", "jsonb"),
    ("5 # 3", "xor"),
    ("age(ts)", "age"),
    ("s like p", "not a literal"),
    ("split_part(s, ',', i)", "split_part"),
    ("s::char(3)", "char"),
    ("to_date(s, 'DD/MM/YYYY')", "template"),
    ("interval '1 month'", "no fixed length"),
    ("(n || ' days')::interval", "interval"),
]


def run_queries(url: str, verbose: bool = False) -> list[str]:
    """Every query of :data:`QUERIES`; the ones whose rows differ, with both results."""
    found: list[str] = []
    lite = create_sqlite()
    with psycopg.connect(url, autocommit=True) as pg:
        create_postgres(pg)
        for text in QUERIES:
            try:
                problem = compare_query(pg, lite, text)
            except Exception as exc:  # reported with the query that raised it
                problem = f"{type(exc).__name__}: {exc}"
            if problem:
                found.append(f"{text}\n    {problem}")
                if verbose:
                    print(found[-1])
    return found


def compare_query(pg: psycopg.Connection[Any], lite: sqlite3.Connection, text: str) -> str:
    query = ModelSql(text, "query")
    outputs = Types(query.tree, catalog).outputs(query.tree)
    kinds = [(o.type.column_type() if o.type else None) or "text" for o in outputs]
    translated = query.render(True, catalog)
    rows_pg = pg.execute(_staged(POSTGRES, query.render(False), kinds)).fetchall()
    rows_lite = lite.execute(_staged(SQLITE, translated, kinds)).fetchall()
    a = [[_normal(v, k) for v, k in zip(row, kinds, strict=True)] for row in rows_pg]
    b = [[_normal(v, k) for v, k in zip(row, kinds, strict=True)] for row in rows_lite]
    same = len(a) == len(b) and all(all(map(_same, x, y)) for x, y in zip(a, b, strict=True))
    return "" if same else f"postgres {a}\n    sqlite   {b}\n    sql      {translated}"


def _staged(d: Any, query: str, kinds: list[str]) -> str:
    """The query's rows as a model stages them: each column (by position) cast to its type."""
    aliases = ", ".join(f"c{i}" for i in range(len(kinds)))
    values = ", ".join(d.cast_to(f"q.c{i}", k) for i, k in enumerate(kinds))
    return f"WITH q ({aliases}) AS ({query}) SELECT {values} FROM q"
