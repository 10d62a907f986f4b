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

Usage, from the repository's root::

    .venv/bin/python -m bench.history                # 1M rows (~2 min)
    .venv/bin/python -m bench.history --rows 200000
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from bench.common.postgres import fresh_database, server
from bench.common.process import WORK
from bench.common.results import RESULTS, run_line, write_block

if TYPE_CHECKING:
    from pipeledger.runs.load.result import LoadResult

MODULE = "bench.history"
BLOCK = "HISTORY"
START = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
Case = Callable[[str], dict[str, float]]


def orders(ids: range, day: int, status: str) -> pa.Table:
    n = len(ids)
    cursor = START + dt.timedelta(days=day)
    return pa.table(
        {
            "order_id": pa.array(ids, pa.int64()),
            "status": pa.array([status] * n),
            "amount": pa.array([f"{(i % 9000) / 100 + 1:.2f}" for i in ids]),
            "updated_at": pa.array([cursor] * n, pa.timestamp("us", tz="UTC")),
        }
    )


def write(path: Path, table: pa.Table) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)
    return path


def pipeline(source: Path, **more: Any) -> dict[str, Any]:
    return {
        "source": {"kind": "parquet", "path": str(source)},
        "target": "analytics.orders",
        "key": ["order_id"],
        "cursor": "updated_at",
        "on_conflict": "newer_wins",
        "columns": {"amount": "numeric(12,2)"},
        "lateness": "400d",
        **more,
    }


def timed(url: str, work: Path, body: dict[str, Any]) -> tuple[float, LoadResult]:
    """One run of the pipeline ``body`` into ``url``, in this process: seconds, result."""
    from pipeledger import api
    from pipeledger.config.model import parse_config

    data = {"warehouse": {"url": url}, "pipelines": {"orders": body}}
    config = parse_config(data, work / "pipeledger.toml")
    started = time.perf_counter()
    result = api.run_one(config, "orders")
    return time.perf_counter() - started, result


@contextlib.contextmanager
def database(kind: str, server_url: str | None, work: Path) -> Iterator[str]:
    """A fresh database: a new SQLite file, or a new database on the server."""
    if kind == "sqlite":
        path = work / f"{uuid.uuid4().hex[:8]}.db"
        yield f"sqlite:///{path}"
        path.unlink(missing_ok=True)
        return
    assert server_url is not None
    with fresh_database(server_url, f"history_{uuid.uuid4().hex[:8]}") as url:
        yield url


def snapshot(url: str, work: Path, rows: int, full: bool) -> dict[str, float]:
    source = write(work / "snapshot" / "orders.parquet", orders(range(rows), 0, "new"))
    timed(url, work, pipeline(source))
    write(source, orders(range(rows // 100, rows), 0, "new"))  # 1% of the keys left
    sync = "full" if full else "incremental"
    seconds, result = timed(url, work, pipeline(source, sync=sync, max_delete_fraction=0.5))
    return {"seconds": seconds, "deleted": result.counts.deleted}


def scd2(url: str, work: Path, rows: int, history: bool) -> dict[str, float]:
    first = write(work / "scd2" / "orders_1.parquet", orders(range(rows), 0, "new"))
    extra = {"history": "scd2"} if history else {}
    glob = Path(first.parent / "orders_*.parquet")
    timed(url, work, pipeline(glob, **extra))
    changed = write(first.parent / "orders_2.parquet", orders(range(0, rows, 10), 1, "paid"))
    first.unlink()  # the second run reads only the changes
    seconds, result = timed(url, work, pipeline(glob, **extra))
    again, repeat = timed(url, work, pipeline(glob, **extra))
    changed.unlink()
    written = repeat.counts.inserted + repeat.counts.updated
    return {
        "seconds": seconds,
        "again": again,
        "inserted": result.counts.inserted,
        "written_again": written,
    }


def measure(kind: str, server_url: str | None, work: Path, rows: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    cases: dict[str, Case] = {
        "snapshot_plain": lambda url: snapshot(url, work, rows, False),
        "snapshot_full": lambda url: snapshot(url, work, rows, True),
        "merge": lambda url: scd2(url, work, rows, False),
        "scd2": lambda url: scd2(url, work, rows, True),
    }
    for name, case in cases.items():
        with database(kind, server_url, work) as url:
            out[name] = case(url)
        print(f"  {kind} {name}: {out[name]}", file=sys.stderr, flush=True)
    return out


def report(found: dict[str, dict[str, Any]], rows: int) -> list[str]:
    lines = [
        "## Deletes and SCD2",
        "",
        f"{run_line(MODULE)} (one run each, fresh databases: indicative only). The SCD2 "
        "change batch closes N/10 versions and adds N/10 (rewritten by delete and insert, so "
        "that the fingerprint trigger sees no update from pipeledger); a batch read again "
        f"touches no key. N = {rows:,}.",
        "",
        '| backend | re-read N rows, merge | the same as `sync = "full"` (1% deleted) '
        "| N/10 changes, merge | N/10 changes, SCD2 | the same again, SCD2 |",
        "|---|---|---|---|---|---|",
    ]
    for kind, f in found.items():
        lines.append(
            f"| {kind} | {f['snapshot_plain']['seconds']:.2f} s | "
            f"{f['snapshot_full']['seconds']:.2f} s ({f['snapshot_full']['deleted']:,}) | "
            f"{f['merge']['seconds']:.2f} s | {f['scd2']['seconds']:.2f} s | "
            f"{f['scd2']['again']:.2f} s ({f['scd2']['written_again']} written) |"
        )
    return [*lines, ""]


def main() -> None:
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--work", type=Path, default=WORK / "history")
    parser.add_argument("--postgres", help="a server URL (default: a throwaway server)")
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    found = {"sqlite": measure("sqlite", None, args.work, args.rows)}
    with server(args.postgres, settings={}) as measured:
        found["postgresql"] = measure("postgres", measured.url, args.work, args.rows)
    lines = report(found, args.rows)
    print("\n".join(lines))
    write_block(args.results, BLOCK, lines)


if __name__ == "__main__":
    main()
