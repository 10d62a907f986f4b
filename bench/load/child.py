"""One measured step of the load benchmark, in a fresh process started by
:func:`bench.load.measure.run_step`: ``python -m bench.load.child --step STEP ...``: a
pipeledger run or backfill, or one of the :mod:`~bench.load.baselines`. It prints one JSON
object: its seconds (the operation alone: imports and interpreter start excluded), CPU
seconds, row counts, phases (pipeledger's) and peak RSS."""

from __future__ import annotations

import argparse
import importlib
import json
import time
from pathlib import Path
from typing import Any

import pipeledger
from bench.common.clock import Clock
from bench.common.orders import PIPELINE, TARGET, pipeline
from bench.common.process import own_peak_rss_mb
from bench.load import phases
from bench.load.baselines import hand_merge, raw_copy
from pipeledger import api
from pipeledger.common.buffers import prefer_system_allocator
from pipeledger.config.model import Config, parse_config
from pipeledger.runs.load.result import LoadResult
from pipeledger.warehouse.session import observe_statements

PIPELEDGER_STEPS = ("run", "backfill", "backfill-full")
RECONCILE_STEPS = ("reconcile", "reconcile-missing")
MISSING = 1_000  # target rows reconcile-missing deletes (spread over the key range) first
# what a step imports on first use (the library imports lazily so that the quick commands
# start fast): imported before the clock starts, as the step's other imports are, so that
# its seconds are its work and not a process's one-time imports; a reconcile's likewise,
# since its ratio is against the first load's seconds
_BOTH = (
    "pipeledger.ledger.ledger",
    "pipeledger.sources.csv",
    "pipeledger.warehouse.adapters.postgres",
    "pipeledger.warehouse.adapters.pg_binary",
)
LOAD_MODULES = (
    "pipeledger.runs.nodes",
    "pipeledger.runs.scaffold",
    "pipeledger.runs.load.job",
    "pipeledger.runs.load.loader",
    *_BOTH,
)
RECONCILE_MODULES = ("pipeledger.runs.reconcile.job", "pipeledger.runs.reconcile.compare", *_BOTH)


def orders_config(url: str, work: Path, source: str, modules: tuple[str, ...]) -> Config:
    """The orders pipeline over ``source`` into ``url``, parsed as a command parses its
    ``pipeledger.toml`` before it runs anything, with ``modules`` imported."""
    for module in modules:
        importlib.import_module(module)
    return parse_config(
        {"warehouse": {"url": url}, "pipelines": {PIPELINE: pipeline(source)}},
        work / "pipeledger.toml",
    )


def load(step: str, config: Config, window: tuple[str, str]) -> LoadResult:
    """pipeledger's run (``run``) or backfill over ``window`` of the orders pipeline."""
    if step == "run":
        return api.run_one(config, PIPELINE)
    start, end = window
    result = api.backfill(config, PIPELINE, start, end, full_compare=step == "backfill-full")
    assert isinstance(result, LoadResult), "the orders pipeline is a load, not a model"
    return result


def pipeledger_step(
    step: str, url: str, work: Path, source: str, window: tuple[str, str]
) -> dict[str, Any]:
    """One pipeledger load, timed from the parsed config (as the hand-written baseline is
    timed from its connection); its phases from its steps and its statements."""
    config = orders_config(url, work, source, LOAD_MODULES)
    clock = Clock()
    with observe_statements(clock.statements(phases.classify)):
        started, cpu = time.perf_counter(), time.process_time()
        result = load(step, config, window)
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    out = result.to_json()
    steps = {s.name: s.duration_ms / 1000.0 for s in result.steps}
    keys = ("rows_read", "rows_inserted", "rows_updated", "rows_unchanged", "rows_superseded")
    return {
        "seconds": seconds,
        "cpu_s": cpu,
        **{k: out[k] for k in keys},
        "watermark_after": out["watermark_after"],
        "breakdown": phases.breakdown(steps, clock.totals, seconds),
        "pipeledger_path": str(Path(pipeledger.__file__).parent),  # a snapshot's, or not
    }


def reconcile_step(step: str, url: str, work: Path, source: str) -> dict[str, Any]:
    """``pipeledger reconcile`` of the loaded target against its source, timed: as loaded
    (``reconcile``), or with ``MISSING`` target rows deleted first, spread over the keys
    and so over every window (``reconcile-missing``; put back afterwards, untimed, so the
    next step finds the target as it was). It checks what it found."""
    import psycopg

    config = orders_config(url, work, source, RECONCILE_MODULES)
    missing = MISSING if step == "reconcile-missing" else 0
    with psycopg.connect(url, autocommit=True) as conn:
        if missing:
            (rows,) = conn.execute(f"SELECT count(*) FROM {TARGET}").fetchone() or (0,)
            every = max(1, int(rows) // missing)
            taken = f"SELECT * FROM {TARGET} WHERE order_id % {every} = 0 LIMIT {missing}"
            conn.execute(f"CREATE TABLE bench_missing AS {taken}")
            conn.execute(
                f"DELETE FROM {TARGET} WHERE order_id IN (SELECT order_id FROM bench_missing)"
            )
        clock = Clock()
        with observe_statements(clock.statements(phases.classify)):
            started, cpu = time.perf_counter(), time.process_time()
            found = api.reconcile(config, PIPELINE).to_json()
            seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
        if missing:
            conn.execute(f"INSERT INTO {TARGET} SELECT * FROM bench_missing")
            conn.execute("DROP TABLE bench_missing")
    if found["missing_rows"] != missing or found["extra_rows"] or found["changed_rows"]:
        raise SystemExit(f"{step}: found {found} with {missing} rows deleted")
    return {
        "seconds": seconds,
        "cpu_s": cpu,
        "rows_read": found["source_rows"],
        "rows_inserted": 0,
        "rows_updated": 0,
        "missing_found": found["missing_rows"],
        "windows_differing": len(found["windows"]),
        "windows_compared": found["windows_compared"],
    }


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument(
        "--step",
        required=True,
        choices=["raw-copy", "hand-merge", *PIPELEDGER_STEPS, *RECONCILE_STEPS],
    )
    p.add_argument("--url", required=True)
    p.add_argument("--csv", type=Path, help="raw-copy, hand-merge: the file")
    p.add_argument("--rows", type=int, default=0, help="hand-merge: rows in its table before")
    p.add_argument("--work", type=Path, help="pipeledger steps: the config's folder")
    p.add_argument("--source", help="pipeledger steps: the source folder, under --work")
    p.add_argument("--start", default="", help="backfill: its range")
    p.add_argument("--end", default="")
    return p.parse_args()


def main() -> None:
    args = parse_args()
    if args.step == "raw-copy":
        out = raw_copy(args.url, args.csv)
    elif args.step == "hand-merge":
        out = hand_merge(args.url, args.csv, args.rows)
    elif args.step in RECONCILE_STEPS:
        prefer_system_allocator()
        out = reconcile_step(args.step, args.url, args.work, args.source)
    else:
        prefer_system_allocator()  # as the pipeledger command does
        out = pipeledger_step(args.step, args.url, args.work, args.source, (args.start, args.end))
    out["vmhwm_mb"] = own_peak_rss_mb()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
