"""One measured step of the ledger benchmark, in a fresh process:
``python -m bench.ledger.child load ...`` (a load with the ledger on or off, its ledger
statements timed by class) or ``... queries ...`` (the ledger's read functions on one warm
session). Each prints one JSON object."""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg

import pipeledger
from bench.common.clock import Clock, percentile
from bench.common.orders import PIPELINE, pipeline
from bench.common.process import (
    compile_bytecode,
    own_peak_rss_mb,
    pipeledger_command,
    pipeledger_env,
)
from bench.ledger import phases
from bench.ledger.synthetic import ANCHOR
from pipeledger import api
from pipeledger.common.buffers import prefer_system_allocator
from pipeledger.config.model import Config, parse_config
from pipeledger.ledger.reads import queries as q
from pipeledger.ledger.reads import sla
from pipeledger.ledger.tables import LEDGER
from pipeledger.state.tables import STATE
from pipeledger.warehouse.adapters import open_warehouse
from pipeledger.warehouse.migrations import is_migrated, migrate
from pipeledger.warehouse.session import Session, observe_statements

Call = Callable[[Session], Sequence[Any]]
COUNTING = "pipeledger-bench-count"  # a session the server's log leaves out


def _config(url: str, work: Path, source: str, ledger: bool) -> Config:
    data: dict[str, Any] = {
        "warehouse": {"url": url},
        "pipelines": {PIPELINE: pipeline(source)},
    }
    if not ledger:
        data["ledger"] = {"enabled": False}
    return parse_config(data, work / "pipeledger.toml")


def _install_schema(url: str, ledger: bool) -> None:
    """Create pipeledger's tables before the timed run, as every run but a database's very
    first finds them: the target is what recording a run costs, not installing the ledger
    (its one-time DDL shows in the server-side times of the logged pair). Migrated here,
    not by the run's own check, so the timed run still pays its migrations check."""
    with open_warehouse(url).session() as session:
        for component in (STATE, LEDGER) if ledger else (STATE,):
            migrate(session, component)


def sessions(url: str) -> int:
    """Sessions the server has opened to ``url``'s database so far, this one included
    (PostgreSQL counts a session when it starts)."""
    with psycopg.connect(url, application_name=COUNTING) as conn:
        row = conn.execute(
            "SELECT sessions FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()
    return int(row[0]) if row else 0


def load(url: str, work: Path, source: str, ledger: bool, install: bool) -> dict[str, Any]:
    """One load of the orders pipeline, timed around ``api.run_one``, with the
    seconds and count of each class of its statements, and the connections it opened."""
    prefer_system_allocator()  # as the pipeledger command does
    config = _config(url, work, source, ledger)
    if install:
        _install_schema(url, ledger)
    clock = Clock()
    before = sessions(url)
    with observe_statements(clock.statements(phases.classify)):
        started = time.perf_counter()
        result = api.run_one(config, PIPELINE)
        seconds = time.perf_counter() - started
    connections = sessions(url) - before - 1  # less the second count's own session
    out = result.to_json()
    return {
        "seconds": seconds,
        "rows_read": out["rows_read"],
        "rows_inserted": out["rows_inserted"],
        "rows_updated": out["rows_updated"],
        "status": out["status"],
        "phases": {k: round(clock.get(k), 4) for k in phases.LABELS},
        "statements": sum(clock.counts.values()),
        "connections": connections,
        "pipeledger_path": str(Path(pipeledger.__file__).parent),
        "vmhwm_mb": own_peak_rss_mb(),
    }


def query_calls(now: datetime) -> dict[str, Call]:
    week = now - timedelta(days=7)
    return {
        "pipeline_status": lambda s: q.pipeline_status(s, now),
        "volume_anomalies": lambda s: q.volume_anomalies(s, now),
        "volume_anomalies (one pipeline)": lambda s: q.volume_anomalies(s, now, "pipe_07"),
        "list_runs (latest 50)": lambda s: q.list_runs(s),
        "list_runs (one pipeline, failed, 7 days)": lambda s: q.list_runs(
            s, "pipe_03", week, "failed"
        ),
        "task_trends (14 days)": lambda s: q.task_trends(s, now),
        "blocked_pipelines": lambda s: q.blocked_pipelines(s, now),
        "sla (breaches, reliability over 7 and 30 days)": lambda s: sla.reliability(s, now),
    }


def _explain(session: Session, now: datetime) -> dict[str, Any]:
    """Plans of the two target queries (saved by the parent), and PostgreSQL's own
    execution time for them."""
    d = session.dialect
    out: dict[str, Any] = {}
    for name, (statement, params) in {
        "pipeline_status": q.pipeline_status_sql(d, now),
        "volume_anomalies": q.volume_anomalies_sql(d, now, None),
    }.items():
        if d.name == "postgres":
            rows = session.query(f"EXPLAIN (ANALYZE, BUFFERS) {statement}", params)
            text = "\n".join(str(r[0]) for r in rows)
            found = re.search(r"Execution Time: ([0-9.]+) ms", text)
            out[name] = {"plan": text, "execution_ms": float(found.group(1)) if found else None}
        else:
            rows = session.query(f"EXPLAIN QUERY PLAN {statement}", params)
            out[name] = {"plan": "\n".join(str(r[-1]) for r in rows), "execution_ms": None}
    return out


def _timed(call: Call, session: Session, calls: int, warmup: int) -> dict[str, Any]:
    rows = 0
    for _ in range(warmup):
        rows = len(call(session))
    ms = []
    for _ in range(calls):
        began = time.perf_counter()
        call(session)
        ms.append((time.perf_counter() - began) * 1000)
    return {
        "rows": rows,
        "median_ms": statistics.median(ms),
        "p95_ms": percentile(ms, 95),
        "min_ms": min(ms),
        "max_ms": max(ms),
    }


def queries(url: str, calls: int, warmup: int, cold: int) -> dict[str, Any]:
    """Each query function on one warm session; the two targeted ones also as the CLI
    calls them (a new connection and the ``is_migrated`` probe per call)."""
    warehouse = open_warehouse(url)
    functions = query_calls(ANCHOR)
    with warehouse.session(write=False) as session:
        timings = {name: _timed(call, session, calls, warmup) for name, call in functions.items()}
        plans = _explain(session, ANCHOR)
    for name in ("pipeline_status", "volume_anomalies"):
        ms = []
        for _ in range(cold):
            began = time.perf_counter()
            with warehouse.session(write=False) as session:
                if is_migrated(session, LEDGER):
                    functions[name](session)
            ms.append((time.perf_counter() - began) * 1000)
        if ms:
            timings[name]["cold_median_ms"] = statistics.median(ms)
    dialect = warehouse.dialect.name
    return {"dialect": dialect, "timings": timings, "plans": plans, "cli": cli_times(url)}


def cli_times(url: str, calls: int = 5) -> dict[str, float]:
    """Wall time of ``pipeledger status --json`` as a user runs it (the installed command, a
    new process each time), and of ``pipeledger --help`` (starting Python and the command
    line: what every command pays before its own imports and work)."""
    compile_bytecode()  # as an installed package has it
    with tempfile.TemporaryDirectory() as folder:
        config = Path(folder) / "pipeledger.toml"
        config.write_text(f'[warehouse]\nurl = "{url}"\n')
        commands = {
            "status_ms": pipeledger_command(["-c", str(config), "status", "--json"]),
            "imports_ms": pipeledger_command(["--help"]),
        }
        found, env = {}, pipeledger_env()
        for name, command in commands.items():
            ms = []
            for _ in range(calls):
                began = time.perf_counter()
                subprocess.run(command, check=True, stdout=subprocess.DEVNULL, env=env)
                ms.append((time.perf_counter() - began) * 1000)
            found[name] = statistics.median(ms)
    return found


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__)
    sub = p.add_subparsers(dest="step", required=True)
    step = sub.add_parser("load")
    step.add_argument("--url", required=True)
    step.add_argument("--work", type=Path, required=True)
    step.add_argument("--source", required=True)
    step.add_argument("--ledger", choices=["on", "off"], default="on")
    step.add_argument("--fresh-schema", action="store_true")
    reads = sub.add_parser("queries")
    reads.add_argument("--url", required=True)
    reads.add_argument("--calls", type=int, required=True)
    reads.add_argument("--warmup", type=int, required=True)
    reads.add_argument("--cold", type=int, required=True)
    return p.parse_args()


def main() -> None:
    args = parse_args()
    if args.step == "load":
        ledger = args.ledger == "on"
        out = load(args.url, args.work, args.source, ledger, not args.fresh_schema)
    else:
        out = queries(args.url, args.calls, args.warmup, args.cold)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
