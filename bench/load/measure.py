"""A measured step of the load benchmark: run in a fresh subprocess
(:mod:`bench.load.child`), its figures as a :class:`Measurement`, and the median round."""

from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.common.postgres import (
    PIPELEDGER_SESSIONS,
    ServerCpu,
    log_offset,
    logged_statements,
    settle,
)
from bench.common.process import bench_command, bench_env, run_waited
from bench.load.phases import server_class

APP_NAME = "pipeledger-bench-step"  # the baselines' sessions, as the server's log names them
LOGGED = (APP_NAME, PIPELEDGER_SESSIONS)  # the sessions of a step, in the server's log


@dataclass
class Measurement:
    name: str
    family: str  # raw, load, baseline, cli, scale, startup
    rows_in_file: int
    table_rows: int  # the target's rows before the step
    seconds: float
    rows_read: int
    rows_inserted: int
    rows_updated: int
    peak_rss_mb: float
    process_seconds: float
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def rows_per_s(self) -> float:
        return self.rows_read / self.seconds if self.seconds > 0 else 0.0

    @property
    def us_per_row(self) -> float:
        return 1e6 * self.seconds / self.rows_read if self.rows_read else float("nan")


Rounds = list[dict[str, Measurement]]  # every step of each round, by name


@dataclass(frozen=True)
class Database:
    """Where a step runs: a database, and what its server can tell about the step."""

    url: str
    cpu: ServerCpu | None = None  # the throwaway server's CPU
    log: Path | None = None  # the throwaway server's log, with --server-log

    def at(self, url: str) -> Database:
        """Another database of the same server."""
        return Database(url, self.cpu, self.log)


def server_seconds(log: Path, offset: int) -> dict[str, float]:
    """Server-side seconds per statement class of the steps' sessions since ``offset``."""
    totals: dict[str, float] = defaultdict(float)
    for seconds, statement in logged_statements(log, offset, LOGGED):
        totals[server_class(statement)] += seconds
    return {k: round(v, 3) for k, v in sorted(totals.items(), key=lambda kv: -kv[1])}


def run_step(
    name: str,
    kind: str,
    family: str,
    sizes: tuple[int, int],
    db: Database,
    child_args: list[str],
) -> Measurement:
    """Run step ``kind`` of :mod:`bench.load.child` in a fresh subprocess; ``sizes``: the
    rows in its file and in its target before it."""
    settle(db.url)
    mark = log_offset(db.log) if db.log else 0
    print(f"  {name:<16} ...", end="", flush=True, file=sys.stderr)
    server_cpu = db.cpu.seconds() if db.cpu else None
    # the allocator as the pipeledger command sets it before it imports pyarrow (cli/app.py)
    env = bench_env(PGAPPNAME=APP_NAME, ARROW_DEFAULT_MEMORY_POOL="system")
    command = bench_command("bench.load.child", ["--step", kind, "--url", db.url, *child_args])
    done = run_waited(command, env)
    data = json.loads(done.output.strip().splitlines()[-1])
    data["wait4_maxrss_mb"] = round(done.maxrss_mb, 1)
    if db.cpu and server_cpu is not None:
        data["server_cpu_s"] = db.cpu.seconds() - server_cpu
    if db.log:
        data["server_log"] = server_seconds(db.log, mark)
    m = Measurement(
        name=name,
        family=family,
        rows_in_file=sizes[0],
        table_rows=sizes[1],
        seconds=float(data.pop("seconds")),
        rows_read=int(data.pop("rows_read")),
        rows_inserted=int(data.pop("rows_inserted")),
        rows_updated=int(data.pop("rows_updated")),
        peak_rss_mb=float(data.pop("vmhwm_mb")),
        process_seconds=done.wall,
        extra=data,
    )
    print(
        f" {m.seconds:8.2f} s  read {m.rows_read:>9,}  ins {m.rows_inserted:>9,}  "
        f"upd {m.rows_updated:>9,}  rss {m.peak_rss_mb:6.1f} MB",
        file=sys.stderr,
    )
    return m


def median_of(rounds: Rounds) -> dict[str, Measurement]:
    """Per step, the round with the median time (its phases and counts), but the highest
    peak RSS of all rounds; every round's time is kept in ``extra["rounds_s"]``."""
    out: dict[str, Measurement] = {}
    for name in rounds[0]:
        runs = sorted((r[name] for r in rounds), key=lambda m: m.seconds)
        chosen = runs[(len(runs) - 1) // 2]
        chosen.extra["rounds_s"] = [round(r[name].seconds, 2) for r in rounds]
        chosen.peak_rss_mb = max(m.peak_rss_mb for m in runs)
        chosen.extra["wait4_maxrss_mb"] = max(
            float(m.extra.get("wait4_maxrss_mb", 0.0)) for m in runs
        )
        if chosen.family == "startup":  # every call of every round
            calls = [c for r in rounds for c in r[name].extra["calls_s"]]
            chosen.seconds, chosen.extra["calls_s"] = statistics.median(calls), calls
            chosen.extra["calls_cpu_s"] = [c for r in rounds for c in r[name].extra["calls_cpu_s"]]
        out[name] = chosen
    return out


def paired(rounds: Rounds, a: str, b: str) -> list[float]:
    """Per round, step ``a``'s seconds over step ``b``'s (a ratio taken within a round is
    less moved by the machine's drift than a ratio of medians)."""
    return [r[a].seconds / r[b].seconds for r in rounds if a in r and b in r]


def cpu_seconds(m: Measurement) -> float | None:
    """The step's CPU seconds, client (every thread) and server, when both are known."""
    client, server = m.extra.get("cpu_s"), m.extra.get("server_cpu_s")
    return None if client is None or server is None else float(client) + float(server)
