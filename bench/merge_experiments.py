"""Where does pipeledger's PostgreSQL load spend its time? Hand experiments, not a test.

Replays the phases of a first load and a backfill by hand on a throwaway server (or
``--postgres-url``), using pipeledger's own SQL builders, and times alternatives:

* client side: pyarrow CSV parse, and re-encoding each column as CSV for COPY;
* server side: COPY into the temporary staging table, the duplicate-key check, ANALYZE,
  and the merge (pipeledger's statement vs. simpler statements that write the same rows);
* the backfill merge (every key conflicts, nothing changes) with and without the
  ``ROW(...)::text`` tie-break, plus its ``EXPLAIN ANALYZE``.

These are the experiments that led to the current loader (plain INSERT + primary key
build for a new target, unique index on the staged keys and a filtered upsert for later
runs, naive-UTC timestamp encoding); the "pipeledger merge" lines use today's
``sql.merge``, which already filters unchanged rows, so its figures are no longer the old
ON CONFLICT-for-every-row statement the notes' history paragraph refers to. For phase
times of the current loader use ``load_bench.py --server-log``.

Usage::

    .venv/bin/python bench/merge_experiments.py [--csv bench/work/data-1000000/orders_000.csv]
"""

from __future__ import annotations

import argparse
import io
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import psycopg
import pyarrow as pa
import pyarrow.csv as pacsv

from pipeledger.load import sql
from pipeledger.schema import Column, TableName

HERE = Path(__file__).resolve().parent
COLUMNS = (
    Column("order_id", "bigint"),
    Column("qty", "bigint"),
    Column("order_date", "date"),
    Column("amount", "numeric(12,2)"),
    Column("status", "text"),
    Column("customer_id", "bigint"),
    Column("updated_at", "timestamptz"),
)
NAMES = [c.name for c in COLUMNS]
STAGE = sql.POSTGRES.stage()


def timed(label: str, fn: Callable[[], Any]) -> Any:
    t = time.perf_counter()
    out = fn()
    print(f"  {label:<66} {time.perf_counter() - t:7.2f} s")
    return out


def client_side(csv_path: Path) -> None:
    print("client side (pyarrow), whole file:")
    types = {"amount": pa.decimal128(12, 2)}
    table = timed(
        "read_csv (parse, typed like a first load)",
        lambda: pacsv.read_csv(csv_path, convert_options=pacsv.ConvertOptions(column_types=types)),
    )
    options = pacsv.WriteOptions(include_header=False, batch_size=65_536)
    timed("write_csv all columns (what stage() does per batch)", lambda: _encode(table, options))
    for name in table.column_names:
        single = table.select([name])
        timed(
            f"write_csv column {name} ({single.schema.field(name).type})",
            partial(_encode, single, options),
        )
    ts = table.select(["updated_at"])
    timed(
        "cast updated_at tz-aware -> string (ISO, 'Z') then write_csv",
        lambda: _encode(ts.set_column(0, "updated_at", ts.column(0).cast(pa.string())), options),
    )
    timed(
        "cast updated_at -> naive -> string then write_csv (+00 implied)",
        lambda: _encode(
            ts.set_column(0, "updated_at", ts.column(0).cast(pa.timestamp("s")).cast(pa.string())),
            options,
        ),
    )


def _encode(table: pa.Table, options: pacsv.WriteOptions) -> int:
    buffer = io.BytesIO()
    pacsv.write_csv(table, buffer, options)
    return buffer.tell()


def spec(target: str) -> sql.MergeSpec:
    return sql.MergeSpec(
        TableName(None, target), COLUMNS, ("order_id",), "updated_at", "newer_wins"
    )


def copy_file(conn: psycopg.Connection[Any], statement: str, csv_path: Path) -> None:
    with conn.cursor() as cursor, cursor.copy(statement) as copy, csv_path.open("rb") as f:
        next(f)  # header
        while chunk := f.read(1 << 20):
            copy.write(chunk)


def server_side(url: str, csv_path: Path) -> None:
    d = sql.POSTGRES
    params = ["run-1", datetime.now(UTC)]
    with psycopg.connect(url) as conn:
        print("server side, first load (empty target with PRIMARY KEY):")
        conn.execute(sql.create_stage(d, COLUMNS))  # ON COMMIT DROP: one transaction
        timed(
            "COPY file -> temp staging table",
            lambda: copy_file(conn, sql.copy_stage(NAMES), csv_path),
        )
        timed(
            "duplicate-key check (GROUP BY key HAVING count > 1)",
            lambda: conn.execute(sql.duplicate_keys(d, spec("t"))).fetchall(),
        )
        timed("ANALYZE staging", lambda: conn.execute(f"ANALYZE {STAGE}"))

        def fresh(name: str, pk: bool = True) -> None:
            conn.execute(f"DROP TABLE IF EXISTS {name}")
            ddl = sql.create_target(d, spec(name))
            if not pk:
                ddl = ddl.replace(',\n  PRIMARY KEY ("order_id")', "")
            conn.execute(ddl)
            conn.execute(
                f"ALTER TABLE {name} ALTER _pipeledger_run_id SET DEFAULT 'run-1', "
                "ALTER _pipeledger_loaded_at SET DEFAULT now()"
            )
            conn.execute("CHECKPOINT")

        names = ", ".join(NAMES)
        meta = "_pipeledger_run_id, _pipeledger_loaded_at"
        fresh("t1")
        timed(
            "pipeledger merge: WITH .. INSERT ON CONFLICT .. RETURNING, count",
            lambda: conn.execute(sql.merge(d, spec("t1"), STAGE), params).fetchall(),
        )
        fresh("t2")
        plain_upsert = sql.merge(d, spec("t2"), STAGE)
        plain_upsert = plain_upsert[plain_upsert.index("(") + 1 : plain_upsert.rindex(" RETURNING")]
        timed(
            "same INSERT .. ON CONFLICT without RETURNING/CTE",
            lambda: conn.execute(plain_upsert, params),
        )
        fresh("t3")
        timed(
            "plain INSERT .. SELECT (PK, no ON CONFLICT)",
            lambda: conn.execute(
                f"INSERT INTO t3 ({names}, {meta}) SELECT {names}, %s, %s FROM {STAGE}",  # noqa: S608
                params,
            ),
        )
        fresh("t4", pk=False)
        timed(
            "INSERT .. SELECT into table without PK",
            lambda: conn.execute(
                f"INSERT INTO t4 ({names}, {meta}) SELECT {names}, %s, %s FROM {STAGE}",  # noqa: S608
                params,
            ),
        )
        timed(
            "  then ALTER TABLE ADD PRIMARY KEY (index build)",
            lambda: conn.execute("ALTER TABLE t4 ADD PRIMARY KEY (order_id)"),
        )
        fresh("t5")
        timed(
            "COPY file straight into the target with PK (no staging)",
            lambda: copy_file(conn, f"COPY t5 ({names}) FROM STDIN (FORMAT csv)", csv_path),
        )
        fresh("t6", pk=False)
        timed(
            "COPY file straight into the target without PK",
            lambda: copy_file(conn, f"COPY t6 ({names}) FROM STDIN (FORMAT csv)", csv_path),
        )

        print("server side, backfill (target t1 holds the same rows; nothing may change):")
        conn.execute("ANALYZE t1")
        timed(
            "pipeledger merge (newer_wins, cursor tie -> ROW()::text compare)",
            lambda: conn.execute(sql.merge(d, spec("t1"), STAGE), params).fetchall(),
        )
        cheap = sql.merge(d, spec("t1"), STAGE)
        tie = cheap[cheap.index(" OR (excluded") : cheap.index(" RETURNING")]
        cheap = cheap.replace(tie, "")
        timed(
            "same merge, tie-break removed (cursor > only)",
            lambda: conn.execute(cheap, params).fetchall(),
        )
        distinct = sql.merge(d, spec("t1"), STAGE)
        timed(
            "anti-join count only: stage rows whose key is new or cursor is newer",
            lambda: conn.execute(
                f"SELECT count(*) FROM {STAGE} s LEFT JOIN t1 t USING (order_id) "  # noqa: S608
                "WHERE t.order_id IS NULL OR s.updated_at > t.updated_at"
            ).fetchall(),
        )
        plan = conn.execute("EXPLAIN (ANALYZE, BUFFERS, TIMING OFF) " + distinct, params)
        print("  EXPLAIN ANALYZE of pipeledger's backfill merge:")
        for (line,) in plan.fetchall():
            print("    " + line)
        conn.rollback()


@contextmanager
def server(url: str | None) -> Iterator[str]:
    if url:
        yield url
        return
    from pipeledger.testing.postgres import ThrowawayPostgres

    with ThrowawayPostgres() as pg:
        yield pg.url


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--csv", default=str(HERE / "work" / "data-1000000" / "orders_000.csv"))
    p.add_argument("--postgres-url", default=os.environ.get("PIPELEDGER_BENCH_POSTGRES_URL"))
    p.add_argument("--skip-client", action="store_true")
    args = p.parse_args()
    csv_path = Path(args.csv)
    if not args.skip_client:
        client_side(csv_path)
    with server(args.postgres_url) as url:
        server_side(url, csv_path)


if __name__ == "__main__":
    main()
