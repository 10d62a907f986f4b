"""``python -m bench.web``: see :mod:`bench.web`."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from bench.common import postgres
from bench.web import measure, seed
from bench.web.measure import PAGE_TARGET_MS, QUESTION_TARGET_MS, Timing

HERE = Path(__file__).resolve().parent.parent
RESULTS = HERE / "RESULTS.md"
BEGIN, END = "<!-- BEGIN WEB -->", "<!-- END WEB -->"
T = TypeVar("T")


def table(timings: Sequence[Timing], what: str) -> list[str]:
    target = timings[0].target if timings else 0
    lines = [
        f"| {what} | median ms | p95 ms | max ms | KB | statements | median < {target:.0f} ms |",
        "| --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for t in timings:
        mark = "PASS" if t.ok else f"FAIL (HTTP {t.status})" if t.status != 200 else "FAIL"
        lines.append(
            f"| {t.label} | {t.median:.1f} | {t.p95:.1f} | {max(t.ms):.1f} | "
            f"{t.bytes / 1024:.0f} | {t.statements if t.statements is not None else '-'} | "
            f"{mark} |"
        )
    return lines


def report(
    args: argparse.Namespace,
    built: dict[str, float],
    results: dict[str, tuple[list[Timing], list[Timing], dict[str, float]]],
    scans: dict[str, Any],
    load: tuple[str, str],
) -> str:
    lines = [
        BEGIN,
        "## Web dashboard and ledger questions (`python -m bench.web`)",
        "",
        f"{args.runs:,} runs of {args.nodes} nodes over {seed.DAYS} days (3 tasks per finished "
        "run, 3 check results per run of every fourth load, one DAG run per round across all "
        f"nodes); each page fetched {args.calls} times after {args.warmup} warm-up(s) through "
        "a real HTTP request to the dashboard serving in the benchmark's process (the wall "
        "time of the whole request: queries, rendering, HTTP); each question asked "
        f"{args.questions} times after {args.warmup} warm-up(s), the api function and its "
        "CLI command in-process (click's runner: its work, not the interpreter's start-up). "
        f"Built in {built['postgres']:.0f} s (PostgreSQL) and copied to SQLite in "
        f"{built['sqlite']:.0f} s. Targets: every page < {PAGE_TARGET_MS:.0f} ms, `sla` and "
        f"`task_trends` < {QUESTION_TARGET_MS:.0f} ms (medians). Statements: how many one "
        "request or call ran (every session of the process; a figure the load leaves alone).",
        "",
        f"Load average (1, 5, 15 min) before measuring: {load[0]}; after: {load[1]}.",
        "",
    ]
    for backend, (page_times, question_times, whole) in results.items():
        lines += [f"**{backend}**", "", *table(page_times, "page"), ""]
        lines += [*table(question_times, "question"), ""]
        wholes = ", ".join(f"`pipeledger {k}` {v:.0f} ms" for k, v in whole.items())
        lines += [f"Whole processes (start-up included, median of 3): {wholes}.", ""]
    verdict = "none" if not scans["seq_scans"] else f"{len(scans['seq_scans'])}: FAIL"
    lines += [
        f"EXPLAIN on PostgreSQL of the {scans['explained']} distinct statements that name "
        f"runs, tasks or check results (of {scans['statements']} the pages and questions ran): "
        f"sequential scans of those tables: {verdict}.",
        *[f"- `{sql}`" for sql in scans["seq_scans"]],
        END,
    ]
    return "\n".join(lines)


def replace_block(path: Path, block: str) -> None:
    old = path.read_text() if path.exists() else ""
    if BEGIN in old and END in old:
        head, rest = old.split(BEGIN, 1)
        new = head + block + rest.split(END, 1)[1]
    else:
        new = old.rstrip() + "\n\n" + block + "\n"
    path.write_text(new)


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def timed(step: Callable[[], T]) -> tuple[T, float]:
    started = time.perf_counter()
    return step(), time.perf_counter() - started


@contextlib.contextmanager
def database(given: str | None, keep: bool) -> Iterator[str]:
    """A fresh database on the server at ``given`` (or a throwaway one); kept with
    ``keep``."""
    with postgres.server(given) as server:
        if keep:
            name = f"web_bench_{int(time.time())}"
            url = postgres.with_database(server.url, "postgres")
            import psycopg

            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(f'CREATE DATABASE "{name}"')
            yield postgres.with_database(server.url, name)
            return
        with postgres.fresh_database(server.url, "web_bench") as url:
            yield url


def _folder(keep: str | None) -> contextlib.AbstractContextManager[str]:
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        return contextlib.nullcontext(keep)
    return tempfile.TemporaryDirectory()


def measure_backend(
    ledger: seed.Ledger, args: argparse.Namespace
) -> tuple[list[Timing], list[Timing], dict[str, float]]:
    pipeline = seed.node_name(0, int(args.nodes * seed.LOAD_SHARE))
    page_times = measure.pages(ledger, args.calls, args.warmup)
    question_times = measure.questions(ledger, args.questions, args.warmup, pipeline)
    whole = {
        " ".join(a): measure.process_ms(ledger.config, a)
        for a in (("--help",), ("sla", "--json"), ("tasks", "--json"))
    }
    return page_times, question_times, whole


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.web", description=__doc__)
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--calls", type=int, default=7, help="requests per page")
    parser.add_argument("--questions", type=int, default=15, help="calls per question")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--postgres-url", help="a server to make the database on")
    parser.add_argument("--keep", metavar="DIR", help="build into DIR and keep it (and the db)")
    parser.add_argument("--no-write", action="store_true", help="leave bench/RESULTS.md alone")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    now = datetime.now(UTC)
    with database(args.postgres_url, bool(args.keep)) as url, _folder(args.keep) as work:
        folder = Path(work)
        (folder / "pg").mkdir(exist_ok=True)
        (folder / "sqlite").mkdir(exist_ok=True)
        pg, pg_s = timed(
            lambda: seed.build_postgres(url, folder / "pg", args.runs, args.nodes, now)
        )
        lite, lite_s = timed(lambda: seed.copy_to_sqlite(pg, folder / "sqlite", args.nodes))
        postgres.settle(url)
        before = load_average()
        with measure.statements() as seen:
            results = {"PostgreSQL": measure_backend(pg, args)}
        results["SQLite (embedded)"] = measure_backend(lite, args)
        after = load_average()
        scans = measure.sequential_scans(url, seen)
    block = report(args, {"postgres": pg_s, "sqlite": lite_s}, results, scans, (before, after))
    print(block)
    if not args.no_write:
        replace_block(RESULTS, block)
    failed = [t for p, q, _ in results.values() for t in (*p, *q) if not t.ok]
    return 1 if failed or scans["seq_scans"] else 0


if __name__ == "__main__":
    sys.exit(main())
