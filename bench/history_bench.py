"""Deletes and SCD2 benchmark (a script, not a test): what a full snapshot's delete detection
and an SCD2 history cost against the plain merge of the same rows, on PostgreSQL and the
embedded SQLite default.

Per backend, each in a fresh database:

* **snapshot**: a first load of N orders, then the same N rows again less 1% (the keys that
  left), once as a plain incremental run that re-reads everything (``sync = "incremental"``,
  lateness covering all) and once as ``sync = "full"``, which also finds and deletes the
  lacking keys;
* **scd2**: a first load of N orders, then a batch of N/10 changed rows at newer cursors,
  once merged (``newer_wins``) and once into an SCD2 history; then the same batch again
  (nothing changes).

The figures go to ``bench/RESULTS.md`` between ``<!-- BEGIN HISTORY -->`` markers.

Usage::

    .venv/bin/python bench/history_bench.py                # 1M rows (~2 min)
    .venv/bin/python bench/history_bench.py --rows 200000
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pyarrow as pa
import pyarrow.parquet as pq
from results_block import replace_block

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "RESULTS.md"
BEGIN, END = "<!-- BEGIN HISTORY -->", "<!-- END HISTORY -->"
START = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)


def orders(ids: range, day: int, status: str) -> pa.Table:
    n = len(ids)
    cursor = START + dt.timedelta(days=day)
    return pa.table({
        "order_id": pa.array(ids, pa.int64()),
        "status": pa.array([status] * n),
        "amount": pa.array([f"{(i % 9000) / 100 + 1:.2f}" for i in ids]),
        "updated_at": pa.array([cursor] * n, pa.timestamp("us", tz="UTC")),
    })  # fmt: skip


def write(path: Path, table: pa.Table) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)
    return path


def pipeline(source: Path, **more: Any) -> dict[str, Any]:
    return {
        "source": {"kind": "parquet", "path": str(source)}, "target": "analytics.orders",
        "key": ["order_id"], "cursor": "updated_at", "on_conflict": "newer_wins",
        "columns": {"amount": "numeric(12,2)"}, "lateness": "400d", **more,
    }  # fmt: skip


def timed(url: str, work: Path, body: dict[str, Any]) -> tuple[float, Any]:
    from pipeledger.config.model import parse_config
    from pipeledger.runs import runner

    config = parse_config({"warehouse": {"url": url}, "pipelines": {"orders": body}},
                          work / "pipeledger.toml")  # fmt: skip
    started = time.perf_counter()
    result = runner.run_one(config, "orders")
    return time.perf_counter() - started, result


@contextmanager
def database(kind: str, server: str | None, work: Path) -> Iterator[str]:
    if kind == "sqlite":
        path = work / f"{uuid.uuid4().hex[:8]}.db"
        yield f"sqlite:///{path}"
        path.unlink(missing_ok=True)
        return
    assert server is not None
    name = f"history_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield server.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def snapshot(url: str, work: Path, rows: int, full: bool) -> dict[str, float]:
    source = write(work / "snapshot" / "orders.parquet", orders(range(rows), 0, "new"))
    timed(url, work, pipeline(source))
    write(source, orders(range(rows // 100, rows), 0, "new"))  # 1% of the keys left
    seconds, result = timed(url, work, pipeline(source, sync="full" if full else "incremental",
                                                max_delete_fraction=0.5))  # fmt: skip
    return {"seconds": seconds, "deleted": result.counts.deleted}


def scd2(url: str, work: Path, rows: int, history: bool) -> dict[str, float]:
    first = write(work / "scd2" / "orders_1.parquet", orders(range(rows), 0, "new"))
    extra = {"history": "scd2"} if history else {}
    glob = str(first.parent / "orders_*.parquet")
    timed(url, work, pipeline(Path(glob), **extra))
    changed = write(first.parent / "orders_2.parquet", orders(range(0, rows, 10), 1, "paid"))
    first.unlink()  # the second run reads only the changes
    seconds, result = timed(url, work, pipeline(Path(glob), **extra))
    again, repeat = timed(url, work, pipeline(Path(glob), **extra))
    changed.unlink()
    written = repeat.counts.inserted + repeat.counts.updated
    return {"seconds": seconds, "again": again, "inserted": result.counts.inserted,
            "written_again": written}  # fmt: skip


def measure(kind: str, server: str | None, work: Path, rows: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    cases: dict[str, Callable[[str], dict[str, float]]] = {
        "snapshot_plain": lambda url: snapshot(url, work, rows, False),
        "snapshot_full": lambda url: snapshot(url, work, rows, True),
        "merge": lambda url: scd2(url, work, rows, False),
        "scd2": lambda url: scd2(url, work, rows, True),
    }
    for name, case in cases.items():
        with database(kind, server, work) as url:
            out[name] = case(url)
        print(f"  {kind} {name}: {out[name]}", file=sys.stderr, flush=True)
    return out


def report(found: dict[str, dict[str, Any]], rows: int) -> list[str]:
    lines = [
        "## Deletes and SCD2", "",
        f"Run {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} by `bench/history_bench.py "
        f"--rows {rows}` (one run each, fresh databases: indicative only). The SCD2 change "
        "batch closes N/10 versions and adds N/10 (rewritten by delete and insert, so that the "
        "fingerprint trigger sees no update from pipeledger); a batch read again touches no "
        "key.", "",
        "| backend | re-read N rows, merge | the same as `sync = \"full\"` (1% deleted) "
        "| N/10 changes, merge | N/10 changes, SCD2 | the same again, SCD2 |",
        "|---|---|---|---|---|---|",
    ]  # fmt: skip
    for kind, f in found.items():
        lines.append(
            f"| {kind} | {f['snapshot_plain']['seconds']:.2f} s | "
            f"{f['snapshot_full']['seconds']:.2f} s ({f['snapshot_full']['deleted']:,}) | "
            f"{f['merge']['seconds']:.2f} s | {f['scd2']['seconds']:.2f} s | "
            f"{f['scd2']['again']:.2f} s ({f['scd2']['written_again']} written) |"
        )
    return [*lines, ""]


def write_results(lines: list[str]) -> None:
    replace_block(RESULTS, BEGIN, END, "\n".join([BEGIN, *lines, END]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--work", default=str(HERE / "work" / "history"))
    parser.add_argument("--postgres", help="a server URL (default: a throwaway server)")
    args = parser.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    found = {"sqlite": measure("sqlite", None, work, args.rows)}
    if args.postgres:
        found["postgresql"] = measure("postgres", args.postgres, work, args.rows)
    else:
        from pipeledger.testing.postgres import ThrowawayPostgres

        with ThrowawayPostgres() as server:
            found["postgresql"] = measure("postgres", server.url, work, args.rows)
    lines = report(found, args.rows)
    print("\n".join(lines))
    write_results(lines)


if __name__ == "__main__":
    main()
