"""``python -m tests.drills``: the crash and concurrency drill (see bench/README.md).

    .venv/bin/python -m tests.drills --backend both --kills 140 --sqlite-kills 60 --results
    ./dev drill --backend sqlite --kills 10          # the same through ./dev

Prints a JSON summary per backend, writes it to bench/work/drill-summary.json, with
``--results`` also the drill's block of bench/RESULTS.md; exits 1 on any violation.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import Any

from tests.drills import report
from tests.drills.drill import DrillPlan, drill_backend

WORK = Path(__file__).resolve().parents[2] / "bench" / "work" / "drill"


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m tests.drills", description=__doc__.splitlines()[0])
    p.add_argument("--backend", choices=["pg", "sqlite", "both"], default="both")
    p.add_argument("--kills", type=int, default=20, help="SIGKILLs per backend, in all")
    p.add_argument("--first-kills", type=int, help="of which first loads (default: kills / 10)")
    p.add_argument("--sqlite-kills", type=int, help="kills on SQLite (default: --kills)")
    p.add_argument("--rows", type=int, default=50_000, help="rows of the initial files")
    p.add_argument("--sqlite-rows", type=int, help="rows on SQLite (default: --rows)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--triggers", type=int, default=8, help="concurrent triggers per round")
    p.add_argument("--rounds", type=int, default=3, help="rounds of concurrent triggers")
    p.add_argument("--outages", type=int, default=2, help="ledger outages (PostgreSQL)")
    p.add_argument(
        "--watchdog-first",
        action="store_true",
        help="run the watchdog before the spool is replayed after an outage",
    )
    p.add_argument("--postgres-url", help="an existing server (default: a throwaway one)")
    p.add_argument("--work", type=Path, default=WORK, help="scratch folder")
    p.add_argument("--results", action="store_true", help="write bench/RESULTS.md's block")
    return p.parse_args(argv)


def plan_for(args: argparse.Namespace, backend: str) -> DrillPlan:
    sqlite = backend == "sqlite"
    kills = args.sqlite_kills if sqlite and args.sqlite_kills is not None else args.kills
    rows = args.sqlite_rows if sqlite and args.sqlite_rows else args.rows
    first = args.first_kills if args.first_kills is not None else max(kills // 10, 1)
    return DrillPlan(kills - first, first, rows, args.seed, args.triggers, args.rounds,
                     args.outages, args.watchdog_first)  # fmt: skip


def main(argv: list[str]) -> int:
    args = parse(argv)
    start = report.Start("python -m tests.drills " + shlex.join(argv))
    backends = ["pg", "sqlite"] if args.backend == "both" else [args.backend]
    summaries: list[dict[str, Any]] = []
    for backend in backends:
        plan = plan_for(args, backend)
        summaries.append(drill_backend(backend, plan, args.work, args.postgres_url))
        print(json.dumps(summaries[-1], indent=2), flush=True)
    args.work.mkdir(parents=True, exist_ok=True)
    (args.work / "drill-summary.json").write_text(json.dumps(summaries, indent=2))
    if args.results:
        report.write(report.block(summaries, start))
    return 1 if any(s["violations"] for s in summaries) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
