"""Parquet and SQL sources push the window down; a glob of CSV files streams as one source."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta

import psycopg
import pyarrow as pa
import pyarrow.parquet as pq

from tests.helpers import Project, orders_pipeline


def _orders_table(start: int, count: int, day: int) -> pa.Table:
    base = datetime(2024, 1, day, tzinfo=UTC)
    return pa.table(
        {
            "order_id": pa.array(range(start, start + count), pa.int64()),
            "status": pa.array(["completed"] * count),
            "updated_at": pa.array(
                [base + timedelta(seconds=i) for i in range(count)], pa.timestamp("us", tz="UTC")
            ),
        }
    )


def test_parquet_source_prunes_row_groups_by_cursor(project: Project) -> None:
    path = project.root / "data" / "orders.parquet"
    pq.write_table(_orders_table(0, 10_000, 1), path, row_group_size=1_000)
    project.configure(
        orders=orders_pipeline(
            columns={}, source={"kind": "parquet", "path": "data/orders.parquet"}
        )
    )
    assert project.run()["rows_inserted"] == 10_000
    table = pa.concat_tables([_orders_table(0, 10_000, 1), _orders_table(10_000, 500, 2)])
    pq.write_table(table, path, row_group_size=1_000)
    second = project.run()
    assert second["rows_read"] == 1 + 500  # the boundary row and the new ones
    assert (second["rows_inserted"], second["rows_unchanged"]) == (500, 1)
    assert project.count() == 10_500


def test_parquet_directory_source(project: Project) -> None:
    folder = project.root / "data" / "pq"
    folder.mkdir()
    pq.write_table(_orders_table(0, 100, 1), folder / "part-0.parquet")
    pq.write_table(_orders_table(100, 100, 2), folder / "part-1.parquet")
    project.configure(
        orders=orders_pipeline(columns={}, source={"kind": "parquet", "path": "data/pq"})
    )
    assert project.run()["rows_inserted"] == 200


def _postgres_source(url: str) -> None:
    with psycopg.connect(url) as conn:
        conn.execute("CREATE SCHEMA shop")
        conn.execute(
            "CREATE TABLE shop.orders (order_id bigint PRIMARY KEY, status text, "
            "amount numeric(12,2), updated_at timestamptz NOT NULL)"
        )
        conn.execute("CREATE INDEX ON shop.orders (updated_at)")
        conn.execute(
            "INSERT INTO shop.orders SELECT g, 'completed', g / 100.0, "
            "timestamptz '2024-01-01 00:00+00' + g * interval '1 minute' "
            "FROM generate_series(1, 1000) g"
        )


def test_sql_table_source_pushes_the_window_down(project: Project, postgres_url: str) -> None:
    _postgres_source(postgres_url)
    project.configure(
        orders=orders_pipeline(
            columns={}, source={"kind": "sql", "url": postgres_url, "table": "shop.orders"}
        )
    )
    first = project.run()
    assert first["rows_inserted"] == 1000
    with psycopg.connect(postgres_url) as conn:
        conn.execute(
            "UPDATE shop.orders SET status = 'refunded', "
            "updated_at = updated_at + interval '1 day' "
            "WHERE order_id = 7"
        )
        conn.execute("INSERT INTO shop.orders VALUES (1001, 'new', 1.00, now())")
    second = project.run()
    assert second["rows_read"] == 3  # boundary row, the changed row, the new row
    assert (second["rows_inserted"], second["rows_updated"], second["rows_unchanged"]) == (1, 1, 1)
    assert ("7", "refunded", "0.07") in project.rows()


def test_sql_query_source_from_sqlite(project: Project) -> None:
    source = project.root / "data" / "shop.db"
    conn = sqlite3.connect(source)
    conn.execute("CREATE TABLE orders (order_id INTEGER, status TEXT, updated_at INTEGER)")
    conn.executemany(
        "INSERT INTO orders VALUES (?, ?, ?)", [(i, "completed", i * 10) for i in range(1, 51)]
    )
    conn.commit()
    query = "SELECT order_id, status, updated_at FROM orders WHERE status <> 'draft'"
    project.configure(
        orders=orders_pipeline(
            columns={}, source={"kind": "sql", "url": f"sqlite:///{source}", "query": query}
        )
    )
    assert project.run()["rows_inserted"] == 50
    conn.execute("INSERT INTO orders VALUES (51, 'completed', 510)")
    conn.commit()
    conn.close()
    second = project.run()
    assert (second["rows_read"], second["rows_inserted"]) == (2, 1)
    assert second["watermark_after"] == "510"


def test_a_parquet_decimal_beyond_its_precision_is_refused_naming_file_and_column(
    project: Project,
) -> None:
    """Arrow does not enforce a decimal's declared precision, so a Parquet file can carry
    decimal(4,0) values of five digits; they are refused before anything is written."""
    unscaled = b"".join(v.to_bytes(16, "little", signed=True) for v in (5, 1234, 12345))
    amounts = pa.Array.from_buffers(pa.decimal128(4, 0), 3, [None, pa.py_buffer(unscaled)])
    table = pa.table(
        {
            "order_id": pa.array([1, 2, 3], pa.int64()),
            "amount": amounts,
            "updated_at": pa.array([datetime(2024, 1, d, tzinfo=UTC) for d in (1, 2, 3)]),
        }
    )
    pq.write_table(table, project.root / "data" / "money.parquet")
    project.configure(
        money={
            "source": {"kind": "parquet", "path": "data/money.parquet"},
            "target": "analytics.money", "key": ["order_id"], "cursor": "updated_at",
            "on_conflict": "update",
        }
    )  # fmt: skip
    code, _, err = project.cli("run", "money")
    assert code == 1
    assert "money.parquet" in err and "'amount'" in err  # Parquet rows carry no number
    assert "12345 has more digits than numeric(4,0) holds" in err
    assert not project.exists("analytics.money")
