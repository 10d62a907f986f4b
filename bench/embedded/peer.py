"""The DuckDB peer: what a careful engineer writes with DuckDB for the same work, run as a
whole process (``python -m bench.embedded.peer``) like ``pipeledger run``.

- ``first``: ``CREATE TABLE orders AS SELECT * FROM read_csv(...)`` (or ``read_parquet``)
  with the same column types as pipeledger's pipeline (the amount an exact
  ``DECIMAL(12,2)``), then the primary key the upserts need, in one transaction;
- ``upsert``: ``INSERT INTO orders SELECT * FROM read_csv(...) ON CONFLICT (order_id) DO
  UPDATE SET ... WHERE excluded.updated_at > orders.updated_at``: newer wins, so batch 1
  again (the re-run) changes nothing and batch 2 (the incremental) updates and adds.

Each commits to the DuckDB file with DuckDB's default durability (its log is synced at
COMMIT). It prints one JSON line: the seconds of its statements and the rows they wrote.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

# the pipeline's declared types (bench.common.peers.CSV_COLUMNS) in DuckDB's words
CSV_TYPES = (
    "{'order_id': 'BIGINT', 'customer_id': 'INTEGER', 'order_date': 'DATE', "
    "'total_amount': 'DECIMAL(12,2)', 'status': 'VARCHAR', 'line_item_count': 'INTEGER', "
    "'updated_at': 'TIMESTAMPTZ'}"
)
VALUES = ["customer_id", "order_date", "total_amount", "status", "line_item_count", "updated_at"]


def _read(path: Path) -> str:
    """The table function reading the file (a path of the benchmark's own, quoted)."""
    name = "'" + str(path).replace("'", "''") + "'"
    if path.suffix == ".parquet":
        return f"read_parquet({name})"
    return f"read_csv({name}, header = true, types = {CSV_TYPES})"


def first(db: Path, path: Path) -> int:
    import duckdb

    conn = duckdb.connect(str(db))
    try:
        conn.execute("BEGIN")
        conn.execute(f"CREATE TABLE orders AS SELECT * FROM {_read(path)}")
        conn.execute("ALTER TABLE orders ADD PRIMARY KEY (order_id)")
        conn.execute("COMMIT")
        found = conn.execute("SELECT count(*) FROM orders").fetchone()
    finally:
        conn.close()
    return int(found[0]) if found else 0


def upsert(db: Path, path: Path) -> int:
    import duckdb

    sets = ", ".join(f"{c} = excluded.{c}" for c in VALUES)
    statement = (
        f"INSERT INTO orders SELECT * FROM {_read(path)} ON CONFLICT (order_id) "
        f"DO UPDATE SET {sets} WHERE excluded.updated_at > orders.updated_at"
    )
    conn = duckdb.connect(str(db))
    try:
        found = conn.execute(statement).fetchone()
    finally:
        conn.close()
    return int(found[0]) if found else 0


def main() -> None:
    p = argparse.ArgumentParser(description="the DuckDB peer (see the module's docstring)")
    p.add_argument("step", choices=["first", "upsert"])
    p.add_argument("--db", type=Path, required=True)
    p.add_argument("--file", type=Path, required=True)
    args = p.parse_args()
    started = time.perf_counter()
    written = first(args.db, args.file) if args.step == "first" else upsert(args.db, args.file)
    print(json.dumps({"seconds": time.perf_counter() - started, "rows_written": written}))


if __name__ == "__main__":
    main()
