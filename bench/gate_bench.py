"""Quality-gate benchmark (a script, not a test): the cost of the gate as a ratio of the
same load without checks, on PostgreSQL.

Each round loads the same 1M-row orders CSV into a fresh database twice, once with the
pipeline's checks (row_count, not_null, range, accepted_values, matches, and the key's
non-null and unique checks that are always on) and once without, in fresh subprocesses,
alternating which goes first. The median round is reported; target: ratio <= 1.3.
The figures go to ``bench/RESULTS.md`` between ``<!-- BEGIN GATE -->`` markers.

Usage::

    .venv/bin/python bench/gate_bench.py                 # 1M rows, 3 rounds (~1 min)
    .venv/bin/python bench/gate_bench.py --rows 200000 --repeat 1
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import load_bench as lb  # the sibling script: data generator and database helpers
from results_block import replace_block

CHECKS: dict[str, Any] = {
    "row_count": {"min": 1, "max": 10_000_000},
    "not_null": ["customer_id", "order_date"],
    "range": {"amount": {"min": 0, "max": 1_000_000}, "qty": {"min": 0, "max": 1000}},
    "accepted_values": {"status": lb.STATUSES},
    "matches": {"status": "^[a-z]+$"},
    "on_fail": "halt",
}
BEGIN, END = "<!-- BEGIN GATE -->", "<!-- END GATE -->"
RESULTS = Path(__file__).resolve().parent / "RESULTS.md"


def child(url: str, work: Path, source: str, gated: bool) -> None:
    from pipeledger.config.model import parse_config
    from pipeledger.runs import runner

    runner.prefer_system_allocator()
    pipeline: dict[str, Any] = {
        "source": {"kind": "csv", "path": source}, "target": lb.TARGET,
        "key": ["order_id"], "cursor": "updated_at", "on_conflict": "newer_wins",
        "columns": {"amount": "numeric(12,2)"},
    }  # fmt: skip
    if gated:
        pipeline["checks"] = CHECKS
    config = parse_config(
        {"warehouse": {"url": url}, "pipelines": {lb.PIPELINE: pipeline}}, work / "x.toml"
    )
    started = time.perf_counter()
    result = runner.run_one(config, lb.PIPELINE)
    seconds = time.perf_counter() - started
    quality = next((s for s in result.steps if s.name == "quality"), None)
    print(json.dumps({
        "seconds": seconds, "rows": result.rows_read, "status": result.status,
        "gate_ms": quality.duration_ms if quality else 0, "rss_mb": lb.own_peak_rss_mb(),
        "decision": result.quality.decision if result.quality else None,
    }))  # fmt: skip


def measure(server: str, work: Path, source: Path, gated: bool, tag: str) -> dict[str, Any]:
    with lb.fresh_database(server, f"gate_{tag}") as url:
        lb.settle(url)
        command = [
            sys.executable,
            str(Path(__file__).resolve()),
            "--child",
            url,
            "--work",
            str(work),
            "--source",
            str(source),
        ] + (["--gated"] if gated else [])
        out = subprocess.run(command, stdout=subprocess.PIPE, text=True, check=True).stdout
        data: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
        label = "with checks" if gated else "without"
        print(f"  {label:<12} {data['seconds']:6.2f} s  gate {data['gate_ms']:>5} ms  "
              f"rss {data['rss_mb']:.0f} MB", file=sys.stderr)  # fmt: skip
        return data


def report(rounds: list[tuple[dict[str, Any], dict[str, Any]]], rows: int) -> list[str]:
    ratios = [g["seconds"] / p["seconds"] for g, p in rounds]
    ratio = statistics.median(ratios)
    gated = statistics.median(g["seconds"] for g, _ in rounds)
    plain = statistics.median(p["seconds"] for _, p in rounds)
    gate_ms = statistics.median(g["gate_ms"] for g, _ in rounds)
    verdict = "PASS" if ratio <= 1.3 else "FAIL"
    return [
        "## Quality gate", "",
        f"Run {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} by `bench/gate_bench.py "
        f"--rows {rows}`: the same first load of {rows:,} rows with and without checks "
        f"({', '.join(k for k in CHECKS if k != 'on_fail')}, plus the key's non-null and "
        "unique checks), each in a fresh database and subprocess, alternating order; medians "
        f"over {len(rounds)} rounds.", "",
        "| load | seconds | quality step (ms) |", "|---|---|---|",
        f"| without checks | {plain:.2f} | - |",
        f"| with checks | {gated:.2f} | {gate_ms:.0f} |", "",
        f"Per-round ratios: {', '.join(f'{r:.2f}' for r in ratios)}.", "",
        f"**{verdict}** gate cost <= 1.3x the load without checks: {ratio:.2f}x", "",
    ]  # fmt: skip


def write(lines: list[str]) -> None:
    replace_block(RESULTS, BEGIN, END, "\n".join([BEGIN, *lines, END]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--work", default=str(Path(__file__).resolve().parent / "work"))
    parser.add_argument("--child")
    parser.add_argument("--source")
    parser.add_argument("--gated", action="store_true")
    args = parser.parse_args()
    work = Path(args.work)
    if args.child:
        child(args.child, work, args.source, args.gated)
        return
    work.mkdir(parents=True, exist_ok=True)
    data = lb.generate_in_child(work, args.rows, 42, args.rows // 10, args.rows // 20)
    from pipeledger.testing.postgres import ThrowawayPostgres

    with ThrowawayPostgres(settings=lb.SERVER_SETTINGS) as server:
        rounds = []
        for index in range(args.repeat):
            order = (True, False) if index % 2 == 0 else (False, True)
            got = {g: measure(server.url, work, data.base, g, f"{index}_{int(g)}") for g in order}
            rounds.append((got[True], got[False]))
    lines = report(rounds, args.rows)
    print("\n".join(lines))
    write(lines)


if __name__ == "__main__":
    main()
