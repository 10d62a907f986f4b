"""``python -m bench.ledger``: its command line, and the parts it runs."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import bench.ledger
from bench.common.machine import machine
from bench.common.orders import SEED
from bench.common.postgres import LOG_PREFIX, SERVER_SETTINGS, URL_ENV, server
from bench.common.process import WORK, use_snapshot, wait_quiet
from bench.common.results import RESULTS
from bench.ledger.report import write_report
from bench.ledger.runs import Options, overhead, queries


def _options(args: argparse.Namespace, log: Path | None) -> Options:
    return Options(
        rows=args.rows,
        seed=args.seed,
        repeat=args.repeat,
        scale_factor=args.scale_factor if args.scale_check else None,
        server_log=log if args.server_log else None,
        calls=args.calls,
        warmup=args.warmup,
        cold=args.cold,
        runs=args.runs,
        quiet=not args.ignore_busy,
    )


def _dump(work: Path, ov: dict[str, Any] | None, qr: dict[str, Any] | None) -> None:
    """Every figure of the run, for a closer look (``bench/work/ledger_last_run.json``)."""
    plain = None
    if ov is not None:
        plain = {**ov, **{k: [asdict(r) for r in ov[k]] for k in ("runs", "logged", "scale")}}
    dump = {"overhead": plain, "queries": qr}
    (work / "ledger_last_run.json").write_text(json.dumps(dump, indent=2, default=str))


def main_parent(args: argparse.Namespace) -> None:
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    snapshot = use_snapshot(work, args.snapshot) if args.snapshot else None
    if not args.ignore_busy:
        wait_quiet()
    ov: dict[str, Any] | None = None
    qr: dict[str, Any] | None = None
    with server(args.postgres_url, {**SERVER_SETTINGS, **LOG_PREFIX}) as measured:
        options = _options(args, measured.log)
        if args.only in (None, "overhead"):
            ov = overhead(measured.url, work, options)
        if args.only in (None, "queries"):
            qr = queries(measured.url, work, options)
        info = machine(measured.url, snapshot)
    targets = write_report(args.results, ov, qr, info)
    for t in targets:
        print(f"{t.verdict}  {t.name}: {t.detail}")
    _dump(work, ov, qr)
    print(f"\nwrote {args.results}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m bench.ledger",
        description=bench.ledger.__doc__,
        formatter_class=argparse.RawTextHelpFormatter,
    )
    p.add_argument("--only", choices=["overhead", "queries"], help="run one part only")
    p.add_argument("--rows", type=int, default=1_000_000, help="rows in the load's source CSV")
    p.add_argument("--repeat", type=int, default=5, help="A/B rounds of the overhead part")
    p.add_argument(
        "--no-scale-check",
        dest="scale_check",
        action="store_false",
        help="skip the ledger-on runs against a --scale-factor x bigger target",
    )
    p.add_argument("--scale-factor", type=int, default=5)
    p.add_argument(
        "--no-server-log",
        dest="server_log",
        action="store_false",
        help="skip the extra pair of runs with server-side statement times",
    )
    p.add_argument("--runs", type=int, default=100_000, help="runs in the synthetic ledger")
    p.add_argument("--calls", type=int, default=30, help="timed calls per query function")
    p.add_argument("--warmup", type=int, default=3, help="untimed calls first")
    p.add_argument("--cold", type=int, default=10, help="calls with a new session each")
    p.add_argument("--work", type=Path, default=WORK, help="work folder (git-ignored)")
    p.add_argument("--postgres-url", default=None, help=f"existing server (or ${URL_ENV})")
    p.add_argument("--snapshot", metavar="REV", help="benchmark pipeledger/ as committed at REV")
    p.add_argument(
        "--ignore-busy", action="store_true", help="do not wait while tests or benchmarks run"
    )
    p.add_argument("--seed", type=int, default=SEED)
    p.add_argument("--results", type=Path, default=RESULTS)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    main_parent(parse_args(argv))
