"""Quality-gate benchmark (a script, not a test): the cost of the gate as a ratio of the
same load without checks, on PostgreSQL.

Each round loads the same 1M-row orders CSV into a fresh database twice, once with the
pipeline's checks (row_count, not_null, range, accepted_values, matches, and the key's
non-null and unique checks that are always on) and once without, in fresh subprocesses,
alternating which goes first. The median round is reported; target: ratio <= 1.3. The
quality step's time is the run's own record of it (``LoadResult.steps``). The figures go
to ``bench/RESULTS.md`` between ``<!-- BEGIN GATE -->`` markers.

Usage, from the repository's root::

    .venv/bin/python -m bench.gate                 # 1M rows, 3 rounds (~1 min)
    .venv/bin/python -m bench.gate --rows 200000 --repeat 1
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from bench.common.orders import PIPELINE, STATUSES, generate_in_child, pipeline
from bench.common.postgres import fresh_database, server, settle
from bench.common.process import WORK, json_child, own_peak_rss_mb
from bench.common.results import RESULTS, run_line, write_block

CHECKS: dict[str, Any] = {
    "row_count": {"min": 1, "max": 10_000_000},
    "not_null": ["customer_id", "order_date"],
    "range": {"amount": {"min": 0, "max": 1_000_000}, "qty": {"min": 0, "max": 1000}},
    "accepted_values": {"status": STATUSES},
    "matches": {"status": "^[a-z]+$"},
    "on_fail": "halt",
}
MODULE = "bench.gate"  # this module, also when it runs as __main__
BLOCK = "GATE"
MAX_RATIO = 1.3
SEED = 42
Round = tuple[dict[str, Any], dict[str, Any]]  # with checks, without


def child(url: str, work: Path, source: str, gated: bool) -> dict[str, Any]:
    """One first load, timed, in this (fresh) process."""
    from pipeledger import api
    from pipeledger.common.buffers import prefer_system_allocator
    from pipeledger.config.model import parse_config

    prefer_system_allocator()
    body = pipeline(source) | ({"checks": CHECKS} if gated else {})
    config = parse_config(
        {"warehouse": {"url": url}, "pipelines": {PIPELINE: body}}, work / "x.toml"
    )
    started = time.perf_counter()
    result = api.run_one(config, PIPELINE)
    seconds = time.perf_counter() - started
    quality = next((s for s in result.steps if s.name == "quality"), None)
    return {
        "seconds": seconds,
        "rows": result.rows_read,
        "status": result.status,
        "gate_ms": quality.duration_ms if quality else 0,
        "rss_mb": own_peak_rss_mb(),
        "decision": result.quality.decision if result.quality else None,
    }


def measure(server_url: str, work: Path, source: Path, gated: bool, tag: str) -> dict[str, Any]:
    with fresh_database(server_url, f"gate_{tag}") as url:
        settle(url)
        args = ["--child", url, "--work", str(work), "--source", str(source)]
        data = json_child(MODULE, [*args, *(["--gated"] if gated else [])])
    label = "with checks" if gated else "without"
    print(
        f"  {label:<12} {data['seconds']:6.2f} s  gate {data['gate_ms']:>5} ms  "
        f"rss {data['rss_mb']:.0f} MB",
        file=sys.stderr,
    )
    return data


def report(rounds: list[Round], rows: int) -> list[str]:
    ratios = [g["seconds"] / p["seconds"] for g, p in rounds]
    ratio = statistics.median(ratios)
    gated = statistics.median(g["seconds"] for g, _ in rounds)
    plain = statistics.median(p["seconds"] for _, p in rounds)
    gate_ms = statistics.median(g["gate_ms"] for g, _ in rounds)
    verdict = "PASS" if ratio <= MAX_RATIO else "FAIL"
    checks = ", ".join(k for k in CHECKS if k != "on_fail")
    return [
        "## Quality gate",
        "",
        f"{run_line(MODULE)}: the same first load of "
        f"{rows:,} rows with and without checks ({checks}, plus the key's non-null and "
        "unique checks), each in a fresh database and subprocess, alternating order; medians "
        f"over {len(rounds)} rounds.",
        "",
        "| load | seconds | quality step (ms) |",
        "|---|---|---|",
        f"| without checks | {plain:.2f} | - |",
        f"| with checks | {gated:.2f} | {gate_ms:.0f} |",
        "",
        f"Per-round ratios: {', '.join(f'{r:.2f}' for r in ratios)}.",
        "",
        f"**{verdict}** gate cost <= {MAX_RATIO}x the load without checks: {ratio:.2f}x",
        "",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.gate", description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--work", type=Path, default=WORK)
    parser.add_argument("--postgres-url", default=None, help="an existing server")
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--source", help=argparse.SUPPRESS)
    parser.add_argument("--gated", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.work, args.source, args.gated)))
        return
    args.work.mkdir(parents=True, exist_ok=True)
    data = generate_in_child(args.work, args.rows, SEED, args.rows // 10, args.rows // 20)
    rounds: list[Round] = []
    with server(args.postgres_url) as measured:
        for index in range(args.repeat):
            order = (True, False) if index % 2 == 0 else (False, True)
            tags = {g: f"{index}_{int(g)}" for g in order}
            got = {g: measure(measured.url, args.work, data.base, g, tags[g]) for g in order}
            rounds.append((got[True], got[False]))
    lines = report(rounds, args.rows)
    print("\n".join(lines))
    write_block(args.results, BLOCK, lines)


if __name__ == "__main__":
    main()
