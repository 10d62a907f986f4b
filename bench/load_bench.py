"""Load benchmark for pipeledger on PostgreSQL (a script, not a test).

One run measures, each step in a fresh subprocess so its peak RSS is its own:

* ``raw-copy``     raw ``COPY ... FROM STDIN (FORMAT csv, HEADER)`` of the source CSV into an
                   empty, unindexed table with matching types (the physical baseline);
* ``first-load``   pipeledger's first load of that CSV into an empty target;
* ``rerun``        the identical run again (the watermark should make it read ~0 rows);
* ``backfill``     a backfill over the whole cursor range (reprocesses everything, writes 0);
* ``incremental``  a second file with 10% of the keys changed and 5% new keys.

``--scale-check`` adds a first load of a 5x bigger file into a fresh database, to check
that peak RSS does not grow with the input. Results go to ``bench/RESULTS.md``; a block
between ``<!-- BEGIN NOTES -->`` and ``<!-- END NOTES -->`` in that file is kept.

Usage::

    .venv/bin/python bench/load_bench.py                     # 1M rows, throwaway PostgreSQL
    .venv/bin/python bench/load_bench.py --rows 200000       # quicker
    .venv/bin/python bench/load_bench.py --scale-check       # also 5M rows, first load only
    PIPELEDGER_BENCH_POSTGRES_URL=postgresql://... .venv/bin/python bench/load_bench.py
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import platform
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
from psycopg import sql as psql

HERE = Path(__file__).resolve().parent
DEFAULT_WORK = HERE / "work"
DEFAULT_RESULTS = HERE / "RESULTS.md"
URL_ENV = "PIPELEDGER_BENCH_POSTGRES_URL"
PIPELINE = "orders"
TARGET = "orders"
RAW_TABLE = "raw_orders"
COPY_CHUNK = 1 << 20
GEN_CHUNK = 1_000_000
SEED = 20240601
STATUSES = ["new", "paid", "packed", "shipped", "delivered", "cancelled", "returned"]
BASE_START = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
BASE_SPAN_S = 365 * 86_400
INCR_START = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
INCR_SPAN_S = 7 * 86_400
CHANGED_FRACTION = 0.10
NEW_FRACTION = 0.05
NOTES_BEGIN = "<!-- BEGIN NOTES -->"
NOTES_END = "<!-- END NOTES -->"
SCHEMA = pa.schema(
    [
        pa.field("order_id", pa.int64()),
        pa.field("qty", pa.int32()),
        pa.field("order_date", pa.date32()),
        pa.field("amount", pa.decimal128(12, 2)),
        pa.field("status", pa.string()),
        pa.field("customer_id", pa.int32()),
        pa.field("updated_at", pa.timestamp("s", tz="UTC")),
    ]
)
RAW_DDL = (
    "order_id bigint, qty integer, order_date date, amount numeric(12,2), status text, "
    "customer_id integer, updated_at timestamptz"
)

# Targets
MIN_COPY_RATIO = 0.5
MAX_INCREMENTAL_COST_RATIO = 2.0
MAX_RSS_MB = 200.0
MAX_RSS_GROWTH = 0.20


# --------------------------------------------------------------------------- data


def _uniform_ints(n: int, low: int, high: int, seed: int) -> pa.Array:
    """``n`` seeded uniform integers in ``[low, high)``, vectorised."""
    r = pc.random(n, initializer=seed)
    scaled = pc.floor(pc.multiply(r, float(high - low)))
    return pc.add(scaled.cast(pa.int64()), low)


def make_chunk(first_id: int, n: int, seed: int, start: dt.datetime, span_s: int) -> pa.Table:
    """Rows ``first_id .. first_id + n - 1`` of the orders source, deterministic for a seed."""
    epoch = int(start.timestamp())
    seconds = pc.add(_uniform_ints(n, 0, span_s, seed + 1), epoch)
    updated_at = seconds.cast(pa.timestamp("s", tz="UTC"))
    days_back = _uniform_ints(n, 0, 30, seed + 2)
    day = pc.subtract(pc.divide(seconds, 86_400), days_back).cast(pa.int32()).cast(pa.date32())
    cents = _uniform_ints(n, 100, 100_000_00, seed + 3)
    amount = pc.divide(cents.cast(pa.float64()), 100.0).cast(pa.decimal128(12, 2))
    status = pa.DictionaryArray.from_arrays(
        _uniform_ints(n, 0, len(STATUSES), seed + 4).cast(pa.int32()), pa.array(STATUSES)
    ).cast(pa.string())
    return pa.Table.from_arrays(
        [
            pa.array(range(first_id, first_id + n), pa.int64()),
            _uniform_ints(n, 1, 50, seed + 5).cast(pa.int32()),
            day,
            amount,
            status,
            _uniform_ints(n, 1, 200_000, seed + 6).cast(pa.int32()),
            updated_at,
        ],
        schema=SCHEMA,
    )


@dataclass(frozen=True)
class Dataset:
    base: Path
    incremental: Path | None
    rows: int
    incremental_rows: int
    cursor_min: str
    cursor_max: str
    seconds: float


def _write(path: Path, chunks: Iterator[pa.Table]) -> tuple[int, Any, Any]:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    rows, low, high = 0, None, None
    with pacsv.CSVWriter(str(tmp), SCHEMA) as writer:
        for chunk in chunks:
            writer.write_table(chunk)
            rows += chunk.num_rows
            bounds = pc.min_max(chunk.column("updated_at"))
            lo, hi = bounds["min"].as_py(), bounds["max"].as_py()
            low = lo if low is None or lo < low else low
            high = hi if high is None or hi > high else high
    tmp.replace(path)
    return rows, low, high


def _base_chunks(rows: int, seed: int) -> Iterator[pa.Table]:
    for index, first in enumerate(range(0, rows, GEN_CHUNK)):
        n = min(GEN_CHUNK, rows - first)
        yield make_chunk(first + 1, n, seed + 100 * index, BASE_START, BASE_SPAN_S)


def _incremental_table(rows: int, seed: int) -> pa.Table:
    """10% of the keys changed (newer cursor, other amount and status) and 5% new keys."""
    base = pa.concat_tables(list(_base_chunks(rows, seed)))
    changed_n = int(rows * CHANGED_FRACTION)
    permutation = pc.sort_indices(pc.random(rows, initializer=seed + 7))
    picked = base.take(permutation.slice(0, changed_n))
    status_index = pc.index_in(picked.column("status"), pa.array(STATUSES))
    shifted = pa.array(STATUSES[1:] + STATUSES[:1])
    wrapped = pc.take(shifted, status_index)
    bump = pc.divide(_uniform_ints(changed_n, 1, 10_000, seed + 8).cast(pa.float64()), 100.0)
    amount = pc.add(picked.column("amount").cast(pa.float64()), bump).cast(pa.decimal128(12, 2))
    epoch = int(INCR_START.timestamp())
    newer = pc.add(_uniform_ints(changed_n, 0, INCR_SPAN_S, seed + 9), epoch)
    changed = (
        picked.set_column(3, SCHEMA.field("amount"), amount)
        .set_column(4, SCHEMA.field("status"), wrapped)
        .set_column(6, SCHEMA.field("updated_at"), newer.cast(pa.timestamp("s", tz="UTC")))
    )
    new = make_chunk(rows + 1, int(rows * NEW_FRACTION), seed + 10, INCR_START, INCR_SPAN_S)
    return pa.concat_tables([changed, new]).sort_by("order_id")


def generate(work: Path, rows: int, seed: int, incremental: bool, tag: str) -> Dataset:
    """Write the source CSV(s) under ``work/data-<tag>/`` unless an identical set is there."""
    folder = work / f"data-{tag}"
    base = folder / "orders_000.csv"
    incr = folder / "orders_001.csv" if incremental else None
    manifest = folder / "manifest.json"
    wanted = {"rows": rows, "seed": seed, "incremental": incremental, "version": 1}
    if manifest.exists() and base.exists() and (incr is None or incr.exists()):
        saved = json.loads(manifest.read_text())
        if all(saved.get(k) == v for k, v in wanted.items()):
            return Dataset(
                base,
                incr,
                rows,
                int(saved["incremental_rows"]),
                saved["cursor_min"],
                saved["cursor_max"],
                0.0,
            )
    started = time.perf_counter()
    n, low, high = _write(base, _base_chunks(rows, seed))
    incr_rows = 0
    if incr is not None:
        incr_rows, _, _ = _write(incr, iter([_incremental_table(rows, seed)]))
    seconds = time.perf_counter() - started
    info = {
        **wanted,
        "incremental_rows": incr_rows,
        "cursor_min": low.isoformat(),
        "cursor_max": high.isoformat(),
    }
    manifest.write_text(json.dumps(info, indent=2))
    assert n == rows
    return Dataset(base, incr, rows, incr_rows, info["cursor_min"], info["cursor_max"], seconds)


# --------------------------------------------------------------------------- child steps


class Clock:
    """Accumulated seconds per phase, filled by the wrappers installed by ``instrument``."""

    def __init__(self) -> None:
        self.totals: dict[str, float] = defaultdict(float)
        self.counts: dict[str, int] = defaultdict(int)

    def add(self, phase: str, seconds: float) -> None:
        self.totals[phase] += seconds
        self.counts[phase] += 1


def _classify(statement: str) -> str:
    text = statement.lstrip()
    if text.startswith("WITH merged"):
        return "sql: merge (INSERT .. ON CONFLICT)"
    if text.startswith("SELECT 1 FROM") and "GROUP BY" in text:
        return "sql: duplicate-key check"
    if text.startswith("ANALYZE"):
        return "sql: ANALYZE staging"
    if text.startswith("CREATE TEMP TABLE") and "_unique" in text:
        return "sql: dedupe staging"
    return "sql: other (lock, state, DDL, migrate)"


def instrument(clock: Clock) -> None:
    """Wrap pipeledger's seams (in this process only) to time each phase of a load."""
    from pipeledger.adapters import postgres as pg_adapter
    from pipeledger.extract import csv as csv_source
    from pipeledger.load import loader

    session_cls: Any = pg_adapter.PostgresSession
    execute, query, stage = session_cls.execute, session_cls.query, session_cls.stage

    def timed_execute(self: Any, statement: str, params: Any = ()) -> int:
        t = time.perf_counter()
        try:
            return int(execute(self, statement, params))
        finally:
            clock.add(_classify(statement), time.perf_counter() - t)

    def timed_query(self: Any, statement: str, params: Any = ()) -> list[tuple[Any, ...]]:
        t = time.perf_counter()
        try:
            return list(query(self, statement, params))
        finally:
            clock.add(_classify(statement), time.perf_counter() - t)

    def timed_stage(self: Any, batch: pa.RecordBatch) -> None:
        t = time.perf_counter()
        try:
            stage(self, batch)
        finally:
            clock.add("stage: COPY to staging (incl. encode)", time.perf_counter() - t)

    session_cls.execute, session_cls.query, session_cls.stage = (
        timed_execute,
        timed_query,
        timed_stage,
    )

    write_csv = pacsv.write_csv

    def timed_write_csv(*args: Any, **kwargs: Any) -> None:
        t = time.perf_counter()
        try:
            write_csv(*args, **kwargs)
        finally:
            clock.add("stage: encode batch as CSV", time.perf_counter() - t)

    pacsv.write_csv = timed_write_csv  # type: ignore[assignment]

    source_cls: Any = csv_source.CsvSource
    batches = source_cls.batches

    def timed_batches(self: Any, spec: Any) -> Iterator[Any]:
        inner = batches(self, spec)
        while True:
            t = time.perf_counter()
            try:
                item = next(inner)
            except StopIteration:
                clock.add("extract: CSV parse + window filter", time.perf_counter() - t)
                return
            clock.add("extract: CSV parse + window filter", time.perf_counter() - t)
            yield item

    source_cls.batches = timed_batches

    conform = loader.conform

    def timed_conform(*args: Any, **kwargs: Any) -> pa.RecordBatch:
        t = time.perf_counter()
        try:
            return conform(*args, **kwargs)
        finally:
            clock.add("conform: cast to target types", time.perf_counter() - t)

    loader.conform = timed_conform  # type: ignore[assignment]

    commit = psycopg.Connection.commit

    def timed_commit(self: Any) -> None:
        t = time.perf_counter()
        try:
            commit(self)
        finally:
            clock.add("commit", time.perf_counter() - t)

    psycopg.Connection.commit = timed_commit  # type: ignore[method-assign]


def _config(url: str, work: Path, source: str) -> Any:
    from pipeledger.config import parse_config

    data = {
        "warehouse": {"url": url},
        "pipelines": {
            PIPELINE: {
                "source": {"kind": "csv", "path": source},
                "target": TARGET,
                "key": ["order_id"],
                "cursor": "updated_at",
                "on_conflict": "newer_wins",
                "columns": {"amount": "numeric(12,2)"},
            }
        },
    }
    return parse_config(data, work / "pipeledger.toml")


def _breakdown(clock: Clock, total: float) -> dict[str, float]:
    phases = dict(clock.totals)
    encode = phases.get("stage: encode batch as CSV", 0.0)
    if "stage: COPY to staging (incl. encode)" in phases:
        phases["stage: COPY to staging"] = phases.pop("stage: COPY to staging (incl. encode)") - (
            encode
        )
    phases["other (python, connect, watermark)"] = max(0.0, total - sum(phases.values()))
    return {k: round(v, 3) for k, v in sorted(phases.items(), key=lambda kv: -kv[1])}


def step_raw_copy(url: str, csv_path: Path) -> dict[str, Any]:
    started = time.perf_counter()
    with psycopg.connect(url) as conn:
        conn.execute(
            psql.SQL("CREATE TABLE {} ({})").format(psql.Identifier(RAW_TABLE), psql.SQL(RAW_DDL))
        )
        copy_sql = psql.SQL("COPY {} FROM STDIN (FORMAT csv, HEADER)").format(
            psql.Identifier(RAW_TABLE)
        )
        with conn.cursor() as cursor:
            with cursor.copy(copy_sql) as copy, csv_path.open("rb") as f:
                while chunk := f.read(COPY_CHUNK):
                    copy.write(chunk)
            rows = cursor.rowcount
        conn.commit()
    seconds = time.perf_counter() - started
    return {"seconds": seconds, "rows_read": rows, "rows_inserted": rows, "rows_updated": 0}


def step_pipeledger(
    step: str, url: str, work: Path, source: str, start: str | None, end: str | None
) -> dict[str, Any]:
    from pipeledger import runner

    clock = Clock()
    instrument(clock)
    config = _config(url, work, source)
    started = time.perf_counter()
    if step == "backfill":
        assert start is not None and end is not None
        result = runner.backfill(config, PIPELINE, start, end)
    else:
        result = runner.run_one(config, PIPELINE)
    seconds = time.perf_counter() - started
    out = result.to_json()
    return {
        "seconds": seconds,
        "rows_read": out["rows_read"],
        "rows_inserted": out["rows_inserted"],
        "rows_updated": out["rows_updated"],
        "rows_unchanged": out["rows_unchanged"],
        "rows_superseded": out["rows_superseded"],
        "watermark_after": out["watermark_after"],
        "breakdown": _breakdown(clock, seconds),
    }


def own_peak_rss_mb() -> float:
    """VmHWM of this process's own address space (unlike ``ru_maxrss`` as seen by ``wait4``,
    it does not inherit the parent's resident size at fork/exec time)."""
    for line in _read("/proc/self/status").splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024.0
    return float("nan")


def run_child(args: argparse.Namespace) -> None:
    if args.step == "generate":
        info = generate(Path(args.work), args.rows, args.seed, args.incremental, str(args.rows))
        print(json.dumps({k: str(v) for k, v in asdict(info).items()}))
        return
    if args.step == "raw-copy":
        out = step_raw_copy(args.url, Path(args.csv))
    else:
        out = step_pipeledger(
            args.step, args.url, Path(args.work), args.source, args.start, args.end
        )
    out["vmhwm_mb"] = own_peak_rss_mb()
    print(json.dumps(out))


# --------------------------------------------------------------------------- parent


@dataclass
class Measurement:
    name: str
    family: str
    rows_in_file: int
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


def with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + name))


@contextlib.contextmanager
def fresh_database(server_url: str, name: str) -> Iterator[str]:
    drop = psql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(psql.Identifier(name))
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(drop)
        conn.execute(psql.SQL("CREATE DATABASE {}").format(psql.Identifier(name)))
    try:
        yield with_database(server_url, name)
    finally:
        with psycopg.connect(server_url, autocommit=True) as conn:
            conn.execute(drop)


def settle(url: str, timeout_s: float = 120.0) -> None:
    """CHECKPOINT and wait for autovacuum workers to finish, so steps do not overlap them."""
    with psycopg.connect(url, autocommit=True) as conn:
        with contextlib.suppress(psycopg.Error):
            conn.execute("CHECKPOINT")
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'autovacuum worker'"
            ).fetchone()
            if not row or int(row[0]) == 0:
                return
            time.sleep(0.5)


def generate_in_child(work: Path, rows: int, seed: int, incremental: bool) -> Dataset:
    """Generate in a subprocess: keeps this process small, because a child's ``ru_maxrss``
    starts from the parent's resident size at fork/exec time."""
    command = [sys.executable, str(Path(__file__).resolve()), "--step", "generate"]
    command += ["--work", str(work), "--rows", str(rows), "--seed", str(seed)]
    command += ["--incremental"] if incremental else []
    out = subprocess.run(command, stdout=subprocess.PIPE, text=True, check=True).stdout
    raw = json.loads(out.strip().splitlines()[-1])
    return Dataset(
        base=Path(raw["base"]),
        incremental=None if raw["incremental"] == "None" else Path(raw["incremental"]),
        rows=int(raw["rows"]),
        incremental_rows=int(raw["incremental_rows"]),
        cursor_min=raw["cursor_min"],
        cursor_max=raw["cursor_max"],
        seconds=float(raw["seconds"]),
    )


def run_step(
    name: str, family: str, rows_in_file: int, url: str, child_args: list[str]
) -> Measurement:
    settle(url)
    command = [sys.executable, str(Path(__file__).resolve()), "--step", name, "--url", url]
    command += child_args
    print(f"  {name:<12} ...", end="", flush=True, file=sys.stderr)
    started = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    output = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"step {name} failed with exit code {proc.returncode}")
    data = json.loads(output.strip().splitlines()[-1])
    data["wait4_maxrss_mb"] = round(usage.ru_maxrss / 1024.0, 1)
    m = Measurement(
        name=name,
        family=family,
        rows_in_file=rows_in_file,
        seconds=float(data.pop("seconds")),
        rows_read=int(data.pop("rows_read")),
        rows_inserted=int(data.pop("rows_inserted")),
        rows_updated=int(data.pop("rows_updated")),
        peak_rss_mb=float(data.pop("vmhwm_mb")),
        process_seconds=wall,
        extra=data,
    )
    print(
        f" {m.seconds:8.2f} s  read {m.rows_read:>9,}  ins {m.rows_inserted:>9,}  "
        f"upd {m.rows_updated:>9,}  rss {m.peak_rss_mb:6.1f} MB",
        file=sys.stderr,
    )
    return m


@dataclass
class Target:
    name: str
    passed: bool | None
    detail: str

    @property
    def verdict(self) -> str:
        return "SKIP" if self.passed is None else ("PASS" if self.passed else "FAIL")


def evaluate(ms: dict[str, Measurement]) -> list[Target]:
    raw, first = ms["raw-copy"], ms["first-load"]
    back, incr, rerun = ms["backfill"], ms["incremental"], ms["rerun"]
    ratio = first.rows_per_s / raw.rows_per_s
    targets = [
        Target(
            f"first load >= {MIN_COPY_RATIO}x raw COPY throughput",
            ratio >= MIN_COPY_RATIO,
            f"{first.rows_per_s:,.0f} vs {raw.rows_per_s:,.0f} rows/s = {ratio:.2f}x",
        ),
        Target(
            "backfill writes 0 rows",
            back.rows_inserted + back.rows_updated == 0,
            f"inserted {back.rows_inserted:,}, updated {back.rows_updated:,} "
            f"of {back.rows_read:,} read",
        ),
        Target(
            "backfill time <= first load time",
            back.seconds <= first.seconds,
            f"{back.seconds:.2f} s vs {first.seconds:.2f} s",
        ),
    ]
    cost_ratio = incr.us_per_row / first.us_per_row
    net = (incr.seconds - rerun.seconds) / max(incr.rows_read, 1) * 1e6
    targets.append(
        Target(
            f"incremental per-row cost <= {MAX_INCREMENTAL_COST_RATIO}x first load's",
            cost_ratio <= MAX_INCREMENTAL_COST_RATIO,
            f"{incr.us_per_row:.2f} vs {first.us_per_row:.2f} us/row = {cost_ratio:.2f}x "
            f"(net of the re-scan of the old file, i.e. minus the re-run's time: "
            f"{net:.2f} us/row = {net / first.us_per_row:.2f}x)",
        )
    )
    pipeledger_steps = [m for m in ms.values() if m.name != "raw-copy"]
    worst = max(pipeledger_steps, key=lambda m: m.peak_rss_mb)
    targets.append(
        Target(
            f"peak RSS < {MAX_RSS_MB:.0f} MB (every pipeledger step)",
            worst.peak_rss_mb < MAX_RSS_MB,
            f"max {worst.peak_rss_mb:.1f} MB ({worst.name})",
        )
    )
    scale = ms.get("first-load-scale")
    if scale is None:
        targets.append(
            Target("peak RSS at 5x rows within 20% of 1x", None, "--scale-check not run")
        )
    else:
        growth = scale.peak_rss_mb / first.peak_rss_mb - 1
        targets.append(
            Target(
                f"peak RSS at {scale.rows_in_file:,} rows within {MAX_RSS_GROWTH:.0%} of "
                f"{first.rows_in_file:,}",
                abs(growth) <= MAX_RSS_GROWTH,
                f"{scale.peak_rss_mb:.1f} MB vs {first.peak_rss_mb:.1f} MB ({growth:+.1%}); "
                f"throughput {scale.rows_per_s:,.0f} rows/s",
            )
        )
    return targets


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def machine(url: str) -> dict[str, str]:
    cpuinfo = _read("/proc/cpuinfo")
    model = next(
        (line.split(":", 1)[1].strip() for line in cpuinfo.splitlines() if "model name" in line),
        platform.processor() or "unknown",
    )
    meminfo = _read("/proc/meminfo")
    mem_kb = next(
        (int(line.split()[1]) for line in meminfo.splitlines() if line.startswith("MemTotal")), 0
    )
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT version()").fetchone()
        pg_version = str(row[0]) if row else "?"
        settings = {
            name: str(value)
            for name, value in conn.execute(
                "SELECT name, setting || coalesce(unit, '') FROM pg_settings WHERE name = ANY(%s)",
                [
                    [
                        "shared_buffers",
                        "fsync",
                        "synchronous_commit",
                        "wal_level",
                        "work_mem",
                        "temp_buffers",
                        "maintenance_work_mem",
                    ]
                ],
            ).fetchall()
        }
    try:
        commit = subprocess.run(
            ["git", "-C", str(HERE.parent), "describe", "--always", "--dirty"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
    except OSError:
        commit = "?"
    return {
        "cpu": model,
        "cores": str(os.cpu_count()),
        "memory": f"{mem_kb / 1024 / 1024:.1f} GiB",
        "os": platform.platform(),
        "postgres": pg_version,
        "postgres settings": ", ".join(f"{k}={v}" for k, v in sorted(settings.items())),
        "python": platform.python_version(),
        "pyarrow": pa.__version__,
        "psycopg": psycopg.__version__,
        "pipeledger commit": commit,
    }


def _fmt_table(headers: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(row) + " |" for row in rows]
    return out


def report(
    ms: dict[str, Measurement],
    targets: list[Target],
    info: dict[str, str],
    data: Dataset,
    generated_s: float,
    path: Path,
) -> str:
    raw = ms["raw-copy"]
    lines = [
        "# pipeledger load benchmark (PostgreSQL)",
        "",
        f"Run {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC by `bench/load_bench.py "
        f"--rows {data.rows}`. Source: {data.rows:,}-row orders CSV "
        f"({data.base.stat().st_size / 1e6:.0f} MB, 7 columns); incremental file "
        f"{data.incremental_rows:,} rows (10% changed keys, 5% new keys)."
        + (f" Data generated in {generated_s:.1f} s." if generated_s else ""),
        "",
        "Seconds are the operation inside its own subprocess (imports and interpreter start "
        "excluded); peak RSS is that subprocess's own high-water mark (`VmHWM` from "
        "`/proc/self/status`, read at its end; the client only, not the PostgreSQL server), "
        "cross-checked with `ru_maxrss` from `os.wait4` (which also counts the launcher's "
        "resident size at fork time, so it is a ceiling). "
        "rows/s and us/row use rows read by the step.",
        "",
        "## Figures",
        "",
    ]
    rows = []
    for m in ms.values():
        rows.append(
            [
                m.name,
                f"{m.rows_in_file:,}",
                f"{m.seconds:.2f}",
                f"{m.rows_read:,}",
                f"{m.rows_inserted:,}",
                f"{m.rows_updated:,}",
                f"{m.rows_per_s:,.0f}" if m.rows_read > 10 else "-",
                f"{m.rows_per_s / raw.rows_per_s:.2f}" if m.rows_read > 10 else "-",
                f"{m.us_per_row:.2f}" if m.rows_read > 10 else "-",
                f"{m.peak_rss_mb:.1f}",
                f"{m.extra.get('wait4_maxrss_mb', float('nan')):.1f}",
            ]
        )
    lines += _fmt_table(
        [
            "step",
            "rows in source",
            "seconds",
            "rows read",
            "inserted",
            "updated",
            "rows/s",
            "x raw COPY",
            "us/row",
            "peak RSS MB",
            "wait4 maxrss MB",
        ],
        rows,
    )
    lines += ["", "## Targets", ""]
    lines += _fmt_table(
        ["target", "result", "detail"], [[t.name, t.verdict, t.detail] for t in targets]
    )
    lines += ["", "## Where the time goes (seconds per phase, instrumented in-process)", ""]
    for m in ms.values():
        breakdown = m.extra.get("breakdown")
        if not breakdown:
            continue
        parts = ", ".join(f"{k} {v:.2f}" for k, v in breakdown.items() if v >= 0.005)
        lines.append(f"- **{m.name}** ({m.seconds:.2f} s): {parts}")
    lines += ["", "## Machine", ""]
    lines += [f"- {k}: {v}" for k, v in info.items()]
    previous = _read(str(path))
    if NOTES_BEGIN in previous and NOTES_END in previous:
        notes = previous[previous.index(NOTES_BEGIN) : previous.index(NOTES_END) + len(NOTES_END)]
    else:
        notes = f"{NOTES_BEGIN}\n## Notes\n\n(none yet)\n{NOTES_END}"
    lines += ["", notes, ""]
    return "\n".join(lines)


def main_parent(args: argparse.Namespace) -> None:
    work = Path(args.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    print(f"generating {args.rows:,} rows under {work} ...", file=sys.stderr)
    data = generate_in_child(work, args.rows, args.seed, incremental=True)
    print(f"  done in {data.seconds:.1f} s (0 = reused)", file=sys.stderr)

    url = args.postgres_url or os.environ.get(URL_ENV)
    server = None
    if not url:
        from pipeledger.testing.postgres import ThrowawayPostgres

        server = ThrowawayPostgres()
        url = server.start()
        print(f"throwaway PostgreSQL at {url}", file=sys.stderr)
    try:
        ms: dict[str, Measurement] = {}
        with fresh_database(url, "pipeledger_bench_raw") as db:
            ms["raw-copy"] = run_step("raw-copy", "raw", data.rows, db, ["--csv", str(data.base)])
        source = work / f"source-{args.rows}"
        source.mkdir(exist_ok=True)
        for old in source.iterdir():
            old.unlink()
        os.link(data.base, source / data.base.name)
        common = ["--work", str(work), "--source", source.name]
        with fresh_database(url, "pipeledger_bench_load") as db:
            ms["first-load"] = run_step("first-load", "load", data.rows, db, common)
            ms["rerun"] = run_step("rerun", "load", data.rows, db, common)
            window = ["--start", data.cursor_min, "--end", data.cursor_max]
            ms["backfill"] = run_step("backfill", "load", data.rows, db, common + window)
            assert data.incremental is not None
            os.link(data.incremental, source / data.incremental.name)
            ms["incremental"] = run_step("incremental", "load", data.incremental_rows, db, common)
        if args.scale_check:
            rows = args.rows * args.scale_factor
            print(f"generating {rows:,} rows for the scale check ...", file=sys.stderr)
            big = generate_in_child(work, rows, args.seed, incremental=False)
            print(f"  done in {big.seconds:.1f} s (0 = reused)", file=sys.stderr)
            big_source = work / f"source-{rows}"
            big_source.mkdir(exist_ok=True)
            for old in big_source.iterdir():
                old.unlink()
            os.link(big.base, big_source / big.base.name)
            with fresh_database(url, "pipeledger_bench_scale") as db:
                ms["first-load-scale"] = run_step(
                    "first-load-scale",
                    "scale",
                    rows,
                    db,
                    ["--work", str(work), "--source", big_source.name],
                )
        targets = evaluate(ms)
        info = machine(url)
    finally:
        if server is not None:
            server.stop()

    raw = ms["raw-copy"]
    print("\nstep              seconds     rows read    rows/s  x COPY   us/row   RSS MB")
    for m in ms.values():
        print(
            f"{m.name:<16} {m.seconds:8.2f} {m.rows_read:>13,} {m.rows_per_s:>9,.0f} "
            f"{m.rows_per_s / raw.rows_per_s:6.2f} {m.us_per_row:8.2f} {m.peak_rss_mb:8.1f}"
        )
    for m in ms.values():
        if m.name in ("backfill", "incremental", "rerun"):
            print(
                f"{m.name}: inserted {m.rows_inserted:,} updated {m.rows_updated:,} "
                f"unchanged {m.extra.get('rows_unchanged', 0):,}"
            )
    print()
    for t in targets:
        print(f"{t.verdict}  {t.name}: {t.detail}")
    results = Path(args.results)
    results.write_text(report(ms, targets, info, data, data.seconds, results))
    (work / "last_run.json").write_text(
        json.dumps({k: asdict(v) for k, v in ms.items()}, indent=2, default=str)
    )
    print(f"\nwrote {results}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--rows", type=int, default=1_000_000, help="rows in the source CSV")
    p.add_argument("--work", default=str(DEFAULT_WORK), help="work folder (git-ignored)")
    p.add_argument("--postgres-url", default=None, help=f"existing server (or ${URL_ENV})")
    p.add_argument(
        "--scale-check", action="store_true", help="also first-load --scale-factor x rows"
    )
    p.add_argument("--scale-factor", type=int, default=5)
    p.add_argument("--seed", type=int, default=SEED)
    p.add_argument("--results", default=str(DEFAULT_RESULTS))
    # internal: one step in this (fresh) process
    p.add_argument(
        "--step",
        choices=[
            "generate",
            "raw-copy",
            "first-load",
            "rerun",
            "backfill",
            "incremental",
            "first-load-scale",
        ],
        help=argparse.SUPPRESS,
    )
    p.add_argument("--url", help=argparse.SUPPRESS)
    p.add_argument("--incremental", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--csv", help=argparse.SUPPRESS)
    p.add_argument("--source", help=argparse.SUPPRESS)
    p.add_argument("--start", help=argparse.SUPPRESS)
    p.add_argument("--end", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.step:
        run_child(args)
    else:
        main_parent(args)


if __name__ == "__main__":
    main()
