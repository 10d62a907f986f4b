"""The ledger benchmark's two parts, as the parent runs them: the A/B rounds of loads with
the ledger on and off (plus the logged pair and the scale check), and the query latency
over a synthetic ledger on PostgreSQL and SQLite."""

from __future__ import annotations

import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.common.orders import generate_in_child, incremental_sizes, link_source
from bench.common.postgres import (
    PIPELEDGER_SESSIONS,
    fresh_database,
    log_offset,
    logged_statements,
    settle,
)
from bench.common.process import json_child, wait_quiet
from bench.ledger.phases import server_label
from bench.ledger.synthetic import build_ledger, copy_to_sqlite

VARIANTS = ("ledger", "no-ledger")
CHILD = "bench.ledger.child"


@dataclass
class LoadRun:
    variant: str
    step: str
    round: int
    seconds: float
    rows_read: int
    rows_inserted: int
    status: str
    phases: dict[str, float]
    connections: int
    statements: int
    rss_mb: float
    server: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Options:
    """What the parent was asked for (the command line, less the parts' choice)."""

    rows: int
    seed: int
    repeat: int
    scale_factor: int | None  # None: no scale check
    server_log: Path | None  # the throwaway server's log, when the logged pair runs
    calls: int
    warmup: int
    cold: int
    runs: int
    quiet: bool  # wait while other benchmarks or tests run


def load_step(
    url: str, work: Path, source: str, run: tuple[str, str, int], options: Options, logged: bool
) -> LoadRun:
    """Step ``run`` = (variant, step, round) in a fresh subprocess; ``logged``: its
    statements' server-side durations logged, into a database without pipeledger's tables."""
    variant, step, rnd = run
    if options.quiet:
        wait_quiet()
    settle(url)
    args = ["load", "--url", url, "--work", str(work), "--source", source]
    args += ["--ledger", "on" if variant == "ledger" else "off"]
    args += ["--fresh-schema"] if logged else []  # the logged pair shows the one-time DDL
    env = {"PGOPTIONS": "-c log_min_duration_statement=0"} if logged else {}
    label = f"{variant:<10} {step:<11}{' (logged)' if logged else ''}"
    print(f"  {label} ...", end="", flush=True, file=sys.stderr)
    data = json_child(CHILD, args, **env)
    result = LoadRun(
        variant=variant,
        step=step,
        round=rnd,
        seconds=float(data["seconds"]),
        rows_read=int(data["rows_read"]),
        rows_inserted=int(data["rows_inserted"]),
        status=str(data["status"]),
        phases=data["phases"],
        connections=int(data["connections"]),
        statements=int(data["statements"]),
        rss_mb=float(data["vmhwm_mb"]),
    )
    done = f"{result.seconds:7.3f} s  read {result.rows_read:>9,}  {result.status}"
    print(f" {done}", file=sys.stderr)
    return result


def server_times(log: Path, offset: int) -> dict[str, float]:
    totals: dict[str, float] = defaultdict(float)
    for seconds, statement in logged_statements(log, offset, (PIPELEDGER_SESSIONS,)):
        totals[server_label(statement)] += seconds
    return {k: round(v, 4) for k, v in sorted(totals.items(), key=lambda kv: -kv[1])}


def _source(work: Path, rows: int, base: Path) -> str:
    return link_source(work / f"ledger-source-{rows}", base).name


def _rounds(url: str, work: Path, source: str, options: Options) -> list[LoadRun]:
    runs: list[LoadRun] = []
    for rnd in range(options.repeat):
        order = VARIANTS if rnd % 2 == 0 else VARIANTS[::-1]
        print(f"round {rnd + 1} of {options.repeat}: {' then '.join(order)}", file=sys.stderr)
        for variant in order:
            with fresh_database(url, f"pipeledger_ledger_bench_{rnd}") as db:
                for step in ("first-load", "rerun"):
                    runs.append(load_step(db, work, source, (variant, step, rnd), options, False))
    return runs


def _logged(url: str, work: Path, source: str, options: Options, log: Path) -> list[LoadRun]:
    print("logged pair (server-side statement times, not in the medians)", file=sys.stderr)
    logged: list[LoadRun] = []
    for variant in VARIANTS:
        with fresh_database(url, "pipeledger_ledger_bench_logged") as db:
            for step in ("first-load", "rerun"):
                mark = log_offset(log)
                run = load_step(db, work, source, (variant, step, -1), options, True)
                run.server = server_times(log, mark)
                logged.append(run)
    return logged


def _scale(url: str, work: Path, options: Options, factor: int) -> list[LoadRun]:
    big_rows = options.rows * factor
    print(f"scale check: {big_rows:,} rows, ledger on", file=sys.stderr)
    changed, new = incremental_sizes(options.rows)
    big = generate_in_child(work, big_rows, options.seed, changed, new)
    source = _source(work, big_rows, big.base)
    with fresh_database(url, "pipeledger_ledger_bench_scale") as db:
        return [
            load_step(db, work, source, ("ledger", step, -1), options, False)
            for step in ("first-load", "rerun")
        ]


def overhead(url: str, work: Path, options: Options) -> dict[str, Any]:
    """The A/B rounds, the logged pair (with the server's log) and the scale check."""
    rows = options.rows
    changed, new = incremental_sizes(rows)
    print(f"data: {rows:,} rows under {work} ...", file=sys.stderr)
    data = generate_in_child(work, rows, options.seed, changed, new)
    source = _source(work, rows, data.base)
    factor = options.scale_factor
    log = options.server_log
    return {
        "rows": rows,
        "file_mb": data.base.stat().st_size / 1e6,
        "runs": _rounds(url, work, source, options),
        "logged": _logged(url, work, source, options, log) if log else [],
        "scale": _scale(url, work, options, factor) if factor else [],
        "big_rows": rows * factor if factor else 0,
    }


def _print_timings(result: dict[str, Any]) -> None:
    for name, t in result["timings"].items():
        print(
            f"    {name:<42} median {t['median_ms']:8.2f} ms  p95 {t['p95_ms']:8.2f}"
            f" ms  ({t['rows']} rows)",
            file=sys.stderr,
        )


def queries(url: str, work: Path, options: Options) -> dict[str, Any]:
    """The synthetic ledger on PostgreSQL and copied to SQLite; each timed in a child."""
    with fresh_database(url, "pipeledger_ledger_bench_queries") as db:
        print(f"building a ledger of {options.runs:,} runs ...", file=sys.stderr)
        built = build_ledger(db, options.runs)
        print(f"  done in {built['seconds']:.1f} s: {built['counts']}", file=sys.stderr)
        sqlite_path = work / "ledger-bench.sqlite"
        copy_s = copy_to_sqlite(db, sqlite_path)
        print(f"  copied to SQLite in {copy_s:.1f} s", file=sys.stderr)
        out: dict[str, Any] = {"built": built, "sqlite_copy_s": copy_s, "calls": options.calls}
        for name, target in (("postgres", db), ("sqlite", f"sqlite:///{sqlite_path}")):
            if options.quiet:
                wait_quiet()
            settle(db)
            print(f"  timing queries on {name} ...", file=sys.stderr)
            counts = ["--calls", str(options.calls), "--warmup", str(options.warmup)]
            result = json_child(
                CHILD, ["queries", "--url", target, *counts, "--cold", str(options.cold)]
            )
            _print_timings(result)
            out[name] = result
            plans = work / f"ledger_plans_{name}.txt"
            plans.write_text(
                "\n\n".join(f"-- {k}\n{v['plan']}" for k, v in result["plans"].items()) + "\n"
            )
        out["sqlite_mb"] = sqlite_path.stat().st_size / 1e6
    return out
