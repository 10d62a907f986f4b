"""``python -m bench.load``: its command line, and the runs it makes of the rounds."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import bench.load
from bench.common.machine import machine
from bench.common.orders import SEED
from bench.common.postgres import LOG_EVERY_STATEMENT, LOG_PREFIX, PROFILES, URL_ENV, server
from bench.common.process import WORK, compile_bytecode, drop_cached_libraries, use_snapshot
from bench.common.results import RESULTS, markers, replace_block
from bench.load import report, startup
from bench.load.measure import Database, Measurement, median_of
from bench.load.series import generate_data, one_round
from bench.load.targets import evaluate, information


def _round_banner(index: int, repeat: int) -> None:
    if repeat > 1:
        print(f"round {index + 1} of {repeat}", file=sys.stderr)


def main_startup(args: argparse.Namespace, work: Path, snapshot: str | None) -> None:
    """``--only startup``: the start-up part alone (no load data generated, no load steps);
    only its block of ``RESULTS.md`` is rewritten."""
    csv = startup.source(work)
    rounds: list[dict[str, Measurement]] = []
    with server(args.postgres_url) as measured:
        compile_bytecode()
        for index in range(args.repeat):
            _round_banner(index, args.repeat)
            rounds.append(startup.measure(measured.url, work, csv, args.calls))
        ms = median_of(rounds)
        info = machine(measured.url, snapshot)
    startup.print_figures(ms)
    begin, end = markers(startup.BLOCK)
    replace_block(args.results, begin, end, startup.block(ms, info, report.MODULE))
    report.save(work / "last_startup.json", ms)
    print(f"\nwrote the start-up section of {args.results}")


def main_loads(args: argparse.Namespace, work: Path, snapshot: str | None) -> None:
    """Every round of every step; the whole of ``RESULTS.md`` but the blocks it keeps."""
    factor = args.scale_factor if args.scale_check else None
    data = generate_data(work, args.rows, args.seed, factor)
    if args.server_log and (args.postgres_url or os.environ.get(URL_ENV)):
        raise SystemExit("--server-log needs the throwaway server (no --postgres-url)")
    logged = LOG_PREFIX | LOG_EVERY_STATEMENT if args.server_log else {}
    settings = {**PROFILES[args.profile], **logged}
    with server(args.postgres_url, settings) as measured:
        db = Database(measured.url, measured.cpu, measured.log if args.server_log else None)
        compile_bytecode()
        drop_cached_libraries()  # peak RSS as an installed tool's, not a fresh venv's
        rounds = []
        for index in range(args.repeat):
            _round_banner(index, args.repeat)
            rounds.append(one_round(db, work, data, index, (args.calls, args.scale_factor)))
        ms = median_of(rounds)
        targets = evaluate(ms, rounds, args.scale_factor)
        info = machine(measured.url, snapshot)
    infos = information(ms, args.scale_factor)
    report.print_figures(ms, targets, infos)
    startup.print_figures(ms)
    block = startup.block(ms, info, report.MODULE)
    args.results.write_text(report.report(ms, targets, infos, info, data, args.results, block))
    report.save(work / "last_run.json", ms)
    print(f"\nwrote {args.results}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m bench.load",
        description=bench.load.__doc__,
        formatter_class=argparse.RawTextHelpFormatter,
    )
    p.add_argument("--rows", type=int, default=1_000_000, help="rows in the source CSV")
    p.add_argument("--work", type=Path, default=WORK, help="work folder (git-ignored)")
    p.add_argument("--postgres-url", default=None, help=f"existing server (or ${URL_ENV})")
    p.add_argument(
        "--no-scale-check",
        "--quick",
        dest="scale_check",
        action="store_false",
        help="skip the --scale-factor x rows check (first load, re-run, incremental)",
    )
    p.add_argument("--scale-factor", type=int, default=10)
    p.add_argument(
        "--profile",
        choices=sorted(PROFILES),
        default="tuned",
        help="the throwaway server's settings: tuned (durability off, 2 GB of shared "
        "buffers) or default (PostgreSQL's own: fsync, full-page writes, wal_level replica)",
    )
    p.add_argument(
        "--calls", type=int, default=7, help="runs of each quick command per round (start-up)"
    )
    p.add_argument(
        "--only",
        choices=["startup"],
        help="startup: only the start-up part (baselines, the quick commands on the embedded "
        "default and on PostgreSQL), no load data or steps; rewrites only its section of "
        "the results",
    )
    p.add_argument(
        "--server-log",
        action="store_true",
        help="log every statement's duration on the throwaway server and add server-side "
        "seconds per statement class to the report",
    )
    p.add_argument(
        "--repeat",
        type=int,
        default=None,
        help="rounds of every step (default 3; 1 with --only startup); the report shows the "
        "median time and the highest RSS",
    )
    p.add_argument(
        "--snapshot",
        metavar="REV",
        help="benchmark pipeledger/ as committed at git revision REV (e.g. HEAD) instead of "
        "the working tree, which others may be editing during the run",
    )
    p.add_argument("--seed", type=int, default=SEED)
    p.add_argument("--results", type=Path, default=RESULTS)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    snapshot = use_snapshot(work, args.snapshot) if args.snapshot else None
    if args.repeat is None:
        args.repeat = 1 if args.only == "startup" else 3
    if args.only == "startup":
        main_startup(args, work, snapshot)
    else:
        main_loads(args, work, snapshot)
