"""``python -m bench.models``: its command line, the rounds, and the overhead check."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import bench.models
from bench.common.machine import machine
from bench.common.orders import SEED, generate_in_child, incremental_sizes, link_source
from bench.common.postgres import PROFILES, fresh_database, server
from bench.common.process import WORK, compile_bytecode, drop_cached_libraries, use_snapshot
from bench.common.results import RESULTS
from bench.models import dbt as dbt_tool
from bench.models import overhead, report
from bench.models.steps import PHASES, Step, load_bronze, run_phase, write_projects

# PostgreSQL's own defaults (what a production server starts from): fsync on (bench.common)
DEFAULT_PROFILE = PROFILES["default"]
DATABASE = "models_bench"


def one_round(
    server_url: str, work: Path, data: tuple[Path, Path], dbt: dbt_tool.Dbt
) -> list[Step]:
    """A fresh database; bronze batch 1; first, noop; bronze batch 2; incr."""
    base, incremental = data
    steps: list[Step] = []
    with fresh_database(server_url, DATABASE) as url:
        project = write_projects(url, work)
        link_source(project.source, base)
        bronze = load_bronze(project)
        print(f"  bronze: {bronze['rows_inserted']:,} rows (not timed)", file=sys.stderr)
        for phase in PHASES:
            if phase == "incr":
                link_source(project.source, incremental)
                bronze = load_bronze(project)
                changed = bronze["rows_inserted"] + bronze["rows_updated"]
                print(f"  bronze: {changed:,} rows changed (not timed)", file=sys.stderr)
            steps += run_phase(project, phase, dbt)
    return steps


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m bench.models",
        description=bench.models.__doc__,
        formatter_class=argparse.RawTextHelpFormatter,
    )
    p.add_argument("--rows", type=int, default=1_000_000, help="bronze rows (batch 1)")
    p.add_argument("--repeat", type=int, default=3, help="rounds (medians are reported)")
    p.add_argument("--calls", type=int, default=7, help="no-op runs of the 20-node project")
    p.add_argument("--work", type=Path, default=WORK, help="work folder (git-ignored)")
    p.add_argument(
        "--postgres-url", default=None, help="existing server (its settings as they are)"
    )
    p.add_argument("--no-dbt", action="store_true", help="skip dbt (no venv is set up)")
    p.add_argument(
        "--only",
        choices=["overhead"],
        help="overhead: only the 20-node no-op runs (no bronze data, no rounds); rewrites "
        "only that block of the results",
    )
    p.add_argument("--snapshot", metavar="REV", help="benchmark pipeledger/ as committed at REV")
    p.add_argument("--results", type=Path, default=RESULTS)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    snapshot = use_snapshot(work, args.snapshot) if args.snapshot else None
    rounds: list[list[Step]] = []
    dbt = dbt_tool.Dbt(None, "", "dbt skipped (--no-dbt)")
    with server(args.postgres_url, DEFAULT_PROFILE) as measured:
        compile_bytecode()
        drop_cached_libraries()  # peak RSS as an installed tool's, not a fresh venv's
        if args.only is None:
            changed, new = incremental_sizes(args.rows)
            data = generate_in_child(work, args.rows, SEED, changed, new)
            assert data.incremental is not None
            if not args.no_dbt:
                dbt = dbt_tool.ensure(work)
            for index in range(args.repeat):
                print(f"round {index + 1} of {args.repeat}", file=sys.stderr)
                rounds.append(one_round(measured.url, work, (data.base, data.incremental), dbt))
        wide = overhead.measure(measured.url, work, args.calls)
        info = machine(measured.url, snapshot)
    if rounds:
        report.write(args.results, rounds, dbt, wide, info, args.rows)
    else:
        report.write_overhead(args.results, wide, info)
    print(f"\nwrote {args.results}")
