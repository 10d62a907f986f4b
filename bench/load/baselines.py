"""The yardsticks of the load benchmark, in plain psycopg: a raw ``COPY`` of the source CSV
into an empty table (the physical baseline), and a hand-written incremental (``COPY`` into
a temporary table, then one guarded upsert) into a keyed copy of the same rows."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from bench.common.orders import DDL

RAW_TABLE = "raw_orders"
HAND_TABLE = "hand_orders"
COPY_CHUNK = 1 << 20
# the hand-written incremental merge: new keys inserted, an existing key updated only when
# the incoming row is newer (pipeledger's newer_wins without its tie-break)
HAND_MERGE = (
    f"INSERT INTO {HAND_TABLE} AS t SELECT * FROM hand_stage ON CONFLICT (order_id) DO UPDATE "
    "SET qty = excluded.qty, order_date = excluded.order_date, amount = excluded.amount, "
    "status = excluded.status, customer_id = excluded.customer_id, "
    "updated_at = excluded.updated_at WHERE excluded.updated_at > t.updated_at"
)


def copy_file(cursor: psycopg.Cursor[Any], statement: sql.Composed | str, csv: Path) -> int:
    """``COPY ... FROM STDIN`` of the CSV file ``csv``; the rows it wrote."""
    with cursor.copy(statement) as copy, csv.open("rb") as f:
        while chunk := f.read(COPY_CHUNK):
            copy.write(chunk)
    return int(cursor.rowcount)


def copy_statement(table: str) -> sql.Composed:
    return sql.SQL("COPY {} FROM STDIN (FORMAT csv, HEADER)").format(sql.Identifier(table))


def raw_copy(url: str, csv: Path) -> dict[str, Any]:
    """The physical baseline: the CSV into an empty, unindexed table of matching types."""
    started, cpu = time.perf_counter(), time.process_time()
    with psycopg.connect(url) as conn:
        create = sql.SQL("CREATE TABLE {} ({})")
        conn.execute(create.format(sql.Identifier(RAW_TABLE), sql.SQL(DDL)))
        with conn.cursor() as cursor:
            rows = copy_file(cursor, copy_statement(RAW_TABLE), csv)
        conn.commit()
    return {
        "seconds": time.perf_counter() - started,
        "cpu_s": time.process_time() - cpu,
        "rows_read": rows,
        "rows_inserted": rows,
        "rows_updated": 0,
    }


def hand_merge(url: str, csv: Path, rows_before: int) -> dict[str, Any]:
    """The hand-written incremental: COPY the batch into a temporary table, then one guarded
    upsert, in one transaction; the session set up as pipeledger's are."""
    started, cpu = time.perf_counter(), time.process_time()
    with psycopg.connect(url) as conn:
        conn.execute("SET TIME ZONE 'UTC'")
        conn.execute("SET temp_buffers = '256MB'")
        conn.execute(f"CREATE TEMP TABLE hand_stage ({DDL}) ON COMMIT DROP")
        with conn.cursor() as cursor:
            rows = copy_file(cursor, "COPY hand_stage FROM STDIN (FORMAT csv, HEADER)", csv)
        written = conn.execute(HAND_MERGE).rowcount
        conn.commit()
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    with psycopg.connect(url) as conn:  # not timed: how many of the written rows were new
        row = conn.execute(f"SELECT count(*) FROM {HAND_TABLE}").fetchone()
    inserted = int(row[0]) - rows_before if row else 0
    return {
        "seconds": seconds,
        "cpu_s": cpu,
        "rows_read": rows,
        "rows_inserted": inserted,
        "rows_updated": written - inserted,
    }


def prepare_hand_target(url: str, base: Path) -> None:
    """The hand-written baseline's target: the base file in a keyed table, vacuumed and
    analyzed (a state at least as good as pipeledger's target has by its incremental)."""
    target = sql.Identifier(HAND_TABLE)
    with psycopg.connect(url, autocommit=True) as conn:
        ddl = sql.SQL("CREATE TABLE {} ({}, PRIMARY KEY (order_id))")
        conn.execute(ddl.format(target, sql.SQL(DDL)))
        copy_sql = sql.SQL("COPY {} FROM STDIN (FORMAT csv, HEADER)").format(target)
        with conn.cursor() as cursor, cursor.copy(copy_sql) as copy, base.open("rb") as f:
            while chunk := f.read(COPY_CHUNK):
                copy.write(chunk)
        conn.execute(sql.SQL("VACUUM ANALYZE {}").format(target))
