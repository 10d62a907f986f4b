"""Access-audit benchmark (a script, not a test): what recording a read costs the read, as
a ratio of the same read with the record skipped, measured in the same process and round.

Two reads on each backend (the embedded SQLite file and a throwaway PostgreSQL), over a
ledger of one pipeline's 200 runs: a *question* (``api.recent_runs`` as the CLI and an API
call ask it: its own session on a warehouse of its own) and a *page* (five questions in one
``shared_reads`` block, as a dashboard page asks them), alone and as the dashboard serves
it (``api.hold_ledger``: its ledger's file kept open while it serves). "Skipped" is the
path a ledger that cannot be written takes (the process's memo of a refusal), so both
sides run the same code but the record. Calls alternate, ``--calls`` of each; figures are
medians. Targets: a served page at most 1.25x, a question at most 25 ms more (a SQLite
record costs a sync of the file when its last connection closes, whatever the question).

Usage, from the repository's root::

    .venv/bin/python -m bench.access                # 40 calls of each, both backends
    .venv/bin/python -m bench.access --calls 10 --backends sqlite
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pipeledger import api
from pipeledger.ledger import access
from pipeledger.ledger.ledger import Ledger

PAGE_RATIO = 1.25
QUESTION_MS = 25.0
RUNS = 200


def build(root: Path, url: str | None) -> Path:
    """A project whose ledger holds ``RUNS`` finished runs of ``orders``."""
    warehouse = url or f"sqlite:///{root / 'warehouse.db'}"
    config = root / "pipeledger.toml"
    config.write_text(f'[warehouse]\nurl = "{warehouse}"\n[ledger]\ntenant = "bench"\n')
    ledger = Ledger(warehouse)
    for _ in range(RUNS):
        with ledger.run("orders") as run:
            run.set_counts(rows_read=10, rows_inserted=10)
    return config


def question(config: Path) -> None:
    api.recent_runs(config, "orders", limit=20)


def page(config: Path) -> None:
    with api.accessing("/node/orders", via="web", pipeline="orders"), api.shared_reads():
        api.recent_runs(config, "orders", limit=20)
        api.count_runs(config, "orders")
        api.status(config, pipeline="orders")
        api.check_history(config, "orders")
        api.tasks(config, "orders")


@contextmanager
def skipped(url: str) -> Iterator[None]:
    """Reads of ``url`` skip their record, as after a refusal."""
    access._REFUSED[url] = time.monotonic() + 1e9
    try:
        yield
    finally:
        access._REFUSED.pop(url, None)


def timed(read: Callable[[Path], None], config: Path) -> float:
    began = time.perf_counter()
    read(config)
    return (time.perf_counter() - began) * 1000


def measure(config: Path, calls: int) -> dict[str, tuple[float, float]]:
    """Per read: median ms with the record, and with it skipped."""
    url = api.locate(config).ledger_url
    found = {}
    for name, read in (("question", question), ("page", page), ("served page", page)):
        release = api.hold_ledger(config) if name == "served page" else None
        read(config)  # warm: imports, the file's cache
        recorded, unrecorded = [], []
        for _ in range(calls):
            recorded.append(timed(read, config))
            with skipped(url):
                unrecorded.append(timed(read, config))
        if release is not None:
            release()
        found[name] = (statistics.median(recorded), statistics.median(unrecorded))
    return found


def verdicts(backend: str, figures: dict[str, tuple[float, float]]) -> list[str]:
    lines = [
        f"{backend:10s} {name:12s} {on:7.2f} ms recorded, {off:7.2f} ms skipped "
        f"(+{on - off:.2f} ms, {on / off:.2f}x)"
        for name, (on, off) in figures.items()
    ]
    (q_on, q_off), (p_on, p_off) = figures["question"], figures["served page"]
    ok_q, ok_p = q_on - q_off <= QUESTION_MS, p_on / p_off <= PAGE_RATIO
    lines.append(
        f"{'PASS' if ok_q else 'FAIL'}  {backend}: a question's record <= {QUESTION_MS} ms"
    )
    lines.append(
        f"{'PASS' if ok_p else 'FAIL'}  {backend}: a served page with its record <= {PAGE_RATIO}x"
    )
    return lines


def run_backend(backend: str, calls: int) -> list[str]:
    with tempfile.TemporaryDirectory(prefix="pipeledger-access-") as folder:
        if backend == "sqlite":
            return verdicts(backend, measure(build(Path(folder), None), calls))
        from bench.common.postgres import fresh_database, server

        with server(None) as pg, fresh_database(pg.url, "bench_access") as url:
            return verdicts(backend, measure(build(Path(folder), url), calls))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=40, help="calls of each read (default 40)")
    parser.add_argument("--backends", nargs="+", default=["sqlite", "postgres"])
    args = parser.parse_args()
    started = datetime.now(UTC)
    for backend in args.backends:
        for line in run_backend(backend, args.calls):
            print(line, flush=True)
    took = (datetime.now(UTC) - started) / timedelta(seconds=1)
    print(f"info  {args.calls} calls of each read per backend in {took:.0f} s")


if __name__ == "__main__":
    main()
