"""Timing the dashboard's pages over HTTP and the ledger's questions in this process, and
EXPLAINing on PostgreSQL every statement they ran."""

from __future__ import annotations

import functools
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from click.testing import CliRunner

from bench.web.seed import Ledger
from pipeledger import api

PAGE_TARGET_MS = 200.0
QUESTION_TARGET_MS = 50.0


@dataclass(frozen=True)
class Timing:
    """One page or question, ``ms`` of each call; ``ok``: its median under ``target``."""

    label: str
    status: int
    bytes: int
    ms: list[float]
    target: float
    statements: int | None = None  # statements one call ran (a figure the load leaves alone)

    @property
    def median(self) -> float:
        return statistics.median(self.ms)

    @property
    def p95(self) -> float:
        ordered = sorted(self.ms)
        return ordered[max(0, min(len(ordered) - 1, -(-95 * len(ordered) // 100) - 1))]

    @property
    def ok(self) -> bool:
        return self.status == 200 and self.median < self.target


def fetch(url: str) -> tuple[int, int, float]:
    """(HTTP status, bytes, wall ms) of one request."""
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=120) as response:
        body = response.read()
        status = int(response.status)
    return status, len(body), (time.perf_counter() - started) * 1000


def pages(ledger: Ledger, calls: int, warmup: int) -> list[Timing]:
    """Each page through a real request to the dashboard serving on a free port."""
    from pipeledger.web import server

    running = server.start(ledger.config, port=0)
    try:
        found = []
        for label, path in ledger.pages.items():
            for _ in range(warmup):
                fetch(running.url + path)
            results = [fetch(running.url + path) for _ in range(calls)]
            status, size = results[-1][0], results[-1][1]
            ms = [ms for _, _, ms in results]
            ran = count_statements(functools.partial(fetch, running.url + path))
            found.append(Timing(label, status, size, ms, PAGE_TARGET_MS, ran))
        return found
    finally:
        running.stop()


def count_statements(call: Callable[[], object]) -> int:
    """How many statements the sessions of this process ran during one ``call`` (the
    dashboard serves on a thread of it)."""
    from pipeledger.warehouse.session import observe_statements

    seen: list[str] = []
    with observe_statements(lambda kind, sql, seconds: seen.append(sql)):
        call()
    return len(seen)


def _timed(label: str, ask: Callable[[], int], calls: int, warmup: int) -> Timing:
    for _ in range(warmup):
        ask()
    ms, size = [], 0
    for _ in range(calls):
        started = time.perf_counter()
        size = ask()
        ms.append((time.perf_counter() - started) * 1000)
    return Timing(label, 200, size, ms, QUESTION_TARGET_MS, count_statements(ask))


def _cli(config: Path, *args: str) -> Callable[[], int]:
    """The CLI command in this process (click's runner): its work, not the interpreter's
    start-up (``bench.load --only startup`` measures that)."""
    import pipeledger.cli.app  # noqa: F401  (it adds the commands to the group)
    from pipeledger.cli.common import app

    runner = CliRunner()

    def ask() -> int:
        result = runner.invoke(app, ["-c", str(config), *args])
        assert result.exit_code == 0, result.output
        return len(result.output)

    return ask


def questions(ledger: Ledger, calls: int, warmup: int, pipeline: str) -> list[Timing]:
    """``sla`` and ``task_trends``: the api functions, then their CLI with ``--json``."""
    config = ledger.config
    asks: dict[str, Callable[[], int]] = {
        "api.sla": lambda: len(api.sla(config).reliability),
        "api.tasks (task_trends)": lambda: len(api.tasks(config)),
        f"api.tasks({pipeline})": lambda: len(api.tasks(config, pipeline)),
        "pipeledger sla --json": _cli(config, "sla", "--json"),
        "pipeledger tasks --json": _cli(config, "tasks", "--json"),
        f"pipeledger tasks {pipeline} --json": _cli(config, "tasks", pipeline, "--json"),
    }
    return [_timed(label, ask, calls, warmup) for label, ask in asks.items()]


def process_ms(config: Path, args: Sequence[str], calls: int = 3) -> float:
    """Median wall ms of the installed command as a whole process (start-up included)."""
    command = [str(Path(sys.executable).with_name("pipeledger")), "-c", str(config), *args]
    ms = []
    for _ in range(calls):
        started = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True)
        ms.append((time.perf_counter() - started) * 1000)
    return statistics.median(ms)


@contextmanager
def statements() -> Iterator[list[tuple[str, tuple[Any, ...]]]]:
    """Every statement PostgreSQL sessions of this process query while the block runs."""
    from pipeledger.warehouse.adapters.postgres import PostgresSession

    seen: list[tuple[str, tuple[Any, ...]]] = []
    original = PostgresSession.query

    def query(self: PostgresSession, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        seen.append((sql, tuple(params)))
        return original(self, sql, params)

    PostgresSession.query = query  # type: ignore[assignment,method-assign]
    try:
        yield seen
    finally:
        PostgresSession.query = original  # type: ignore[method-assign]


def _scans(plan: dict[str, Any]) -> Iterator[tuple[str, str]]:
    yield str(plan.get("Node Type")), str(plan.get("Relation Name", ""))
    for child in plan.get("Plans", []):
        yield from _scans(child)


BIG_TABLES = ("pipeline_runs", "task_runs", "quality_results")


def sequential_scans(url: str, seen: Sequence[tuple[str, tuple[Any, ...]]]) -> dict[str, Any]:
    """EXPLAIN each distinct statement that names a big ledger table: which read one
    whole."""
    distinct = {sql: params for sql, params in seen if any(t in sql for t in BIG_TABLES)}
    found: list[str] = []
    with psycopg.connect(url) as conn:
        for sql, params in distinct.items():
            row = conn.execute(f"EXPLAIN (FORMAT JSON) {sql}", list(params)).fetchone()
            assert row is not None
            scanned = {t for kind, t in _scans(row[0][0]["Plan"]) if kind == "Seq Scan"}
            if scanned & set(BIG_TABLES):
                found.append(f"{', '.join(sorted(scanned & set(BIG_TABLES)))}: {sql[:160]}")
    return {"explained": len(distinct), "statements": len(seen), "seq_scans": found}
