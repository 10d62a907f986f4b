"""Load benchmark for pipeledger on PostgreSQL (a script, not a test).

One run measures, each step in a fresh subprocess so its peak RSS is its own:

* ``raw-copy``     raw ``COPY ... FROM STDIN (FORMAT csv, HEADER)`` of the source CSV into an
                   empty, unindexed table with matching types (the physical baseline);
* ``first-load``   pipeledger's first load of that CSV into an empty target;
* ``rerun``        the identical run again (the watermark should make it read ~0 rows);
* ``backfill``     a backfill over the whole cursor range (reprocesses everything, writes 0;
                   rows whose stored fingerprint matches are not staged: runs/load/known.py);
* ``backfill-full`` the same with ``--full-compare``: every row staged and compared (info);
* ``incremental``  a second file (10% of the keys changed, 5% new keys) alone in the
                   source folder;
* ``first-load-cli`` the first load as a whole ``pipeledger run`` process.

The start-up part times ``pipeledger --help``, ``state``, ``runs`` and ``status`` as whole
processes (``--calls`` runs each), on the embedded default (a config without a
``[warehouse]`` url: the SQLite file) and on PostgreSQL, beside two baselines measured in
the same run: ``python -c pass`` and ``python -c "import psycopg"``. ``--only startup``
runs that part alone (no load data, no load steps) and rewrites only its block of
``bench/RESULTS.md`` (between ``<!-- BEGIN STARTUP -->`` and ``<!-- END STARTUP -->``).

The scale check (on by default; ``--no-scale-check`` / ``--quick`` skips it) repeats
the load steps with a ``--scale-factor`` (10x) bigger file into a fresh database, with the
*same-size* incremental batch (same absolute number of changed and new keys): its time
must not grow with the table, and peak RSS must not grow with the input. Every step runs
``--repeat`` (3) times in fresh databases and the median round is reported (single runs on
a small shared VM vary by +-30%). Results go to ``bench/RESULTS.md``;
a block between ``<!-- BEGIN NOTES -->`` and ``<!-- END NOTES -->`` in that file is kept,
and so are the blocks of ``bench/ledger_bench.py``, ``bench/gate_bench.py``,
``bench/history_bench.py`` and the drill (``python -m tests.drills``).

Usage::

    .venv/bin/python bench/load_bench.py                     # 1M + 10M, 3 rounds (~8 min)
    .venv/bin/python bench/load_bench.py --quick --repeat 1  # 1M rows, one round
    .venv/bin/python bench/load_bench.py --only startup      # the start-up part (20-40 s)
    .venv/bin/python bench/load_bench.py --server-log        # + server-side statement times
    .venv/bin/python bench/load_bench.py --rows 200000       # smaller
    PIPELEDGER_BENCH_POSTGRES_URL=postgresql://... .venv/bin/python bench/load_bench.py
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import io
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
from psycopg import sql as psql
from results_block import replace_block

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
LEDGER_BEGIN = "<!-- BEGIN LEDGER -->"  # kept as is: written by bench/ledger_bench.py
LEDGER_END = "<!-- END LEDGER -->"
GATE_BEGIN = "<!-- BEGIN GATE -->"  # kept as is: written by bench/gate_bench.py
GATE_END = "<!-- END GATE -->"
DRILL_BEGIN = "<!-- BEGIN DRILL -->"  # kept as is: written by python -m tests.drills
DRILL_END = "<!-- END DRILL -->"
HISTORY_BEGIN = "<!-- BEGIN HISTORY -->"  # kept as is: written by bench/history_bench.py
HISTORY_END = "<!-- END HISTORY -->"
STARTUP_BEGIN = "<!-- BEGIN STARTUP -->"  # written by the full run and by --only startup
STARTUP_END = "<!-- END STARTUP -->"
STARTUP_ROWS = 10_000  # the small load the quick commands of the start-up part look at
QUICK = ("state", "runs", "status")
EMBEDDED = "embedded SQLite"
IMPORT_PSYCOPG = 'python -c "import psycopg"'
POSTGRES = "PostgreSQL"
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
HAND_TABLE = "hand_orders"
# the hand-written incremental merge: new keys inserted, an existing key updated only when
# the incoming row is newer (pipeledger's newer_wins without its tie-break)
HAND_MERGE = (
    f"INSERT INTO {HAND_TABLE} AS t SELECT * FROM hand_stage ON CONFLICT (order_id) DO UPDATE "  # noqa: S608
    "SET qty = excluded.qty, order_date = excluded.order_date, amount = excluded.amount, "
    "status = excluded.status, customer_id = excluded.customer_id, "
    "updated_at = excluded.updated_at WHERE excluded.updated_at > t.updated_at"
)

# Targets
MIN_COPY_RATIO = 0.75  # first load in process, rows/s against raw COPY's
MIN_CLI_COPY_RATIO = 0.6  # the same for a whole `pipeledger run` process (start-up included)
MAX_BASELINE_RATIO = 1.1  # incremental against the hand-written COPY + guarded upsert
MAX_INCREMENTAL_GROWTH = 1.5  # the same batch against the bigger table
MAX_RSS_MB = 150.0
MAX_RSS_GROWTH = 0.10  # a step's peak RSS at the bigger scale against at 1x
MAX_HELP_S = 0.2  # `pipeledger --help`, median wall time
MAX_QUICK_S = 0.2  # `pipeledger state`, `runs`, `status` on the embedded default, the same
MAX_UNCHANGED_S = 0.2  # `pipeledger run` of an unchanged folder, beyond `--help` (medians)
UNCHANGED_FILES = 8  # the folder of the incremental = "files" pipeline of the start-up part
UNCHANGED = f"pipeledger run, {UNCHANGED_FILES} files unchanged"


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


def _incremental_table(rows: int, changed_n: int, new_n: int, seed: int) -> pa.Table:
    """``changed_n`` existing keys, picked at random over the whole base, changed (newer
    cursor, other amount and status) and ``new_n`` new keys after the base's last one."""
    base = pa.concat_tables(list(_base_chunks(rows, seed)))
    permutation = pc.sort_indices(pc.random(rows, initializer=seed + 7))
    picked = base.take(permutation.slice(0, changed_n))
    del base
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
    new = make_chunk(rows + 1, new_n, seed + 10, INCR_START, INCR_SPAN_S)
    return pa.concat_tables([changed, new]).sort_by("order_id")


def generate(work: Path, rows: int, seed: int, changed: int, new: int, tag: str) -> Dataset:
    """Write the source CSV(s) under ``work/data-<tag>/`` unless an identical set is there:
    the base file, and (when ``changed + new > 0``) an incremental file with ``changed``
    existing keys changed and ``new`` new keys."""
    folder = work / f"data-{tag}"
    base = folder / "orders_000.csv"
    incremental = changed + new > 0
    incr = folder / "orders_001.csv" if incremental else None
    manifest = folder / "manifest.json"
    wanted = {"rows": rows, "seed": seed, "changed": changed, "new": new, "version": 2}
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
        incr_rows, _, _ = _write(incr, iter([_incremental_table(rows, changed, new, seed)]))
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

    def add(self, phase: str, seconds: float) -> None:
        self.totals[phase] += seconds

    def get(self, phase: str) -> float:
        return self.totals.get(phase, 0.0)


PRODUCE = "extract + conform (CSV parse, window filter, cast)"
ENCODE = "stage: encode batches (binary COPY, or CSV)"
COPY = "stage: COPY to staging (waiting on the server)"
SQL_OTHER = "sql: other (lock, state, DDL, settings, migrate)"


def _classify(statement: str) -> str:
    text = statement.lstrip()
    if text.startswith("WITH merged"):
        return "sql: upsert (INSERT .. ON CONFLICT, counted)"
    if text.startswith("INSERT INTO") and "_pipeledger_stage" in text:
        return "sql: plain INSERT into the new target"
    if text.startswith("ALTER TABLE") and "ADD PRIMARY KEY" in text:
        return "sql: build primary key"
    if text.startswith("CREATE UNIQUE INDEX"):
        return "sql: unique index on staged keys"
    if text.startswith("ANALYZE"):
        return "sql: ANALYZE staging"
    if text.startswith("CREATE TEMP TABLE") and "_unique" in text:
        return "sql: dedupe staging"
    if text.startswith("SELECT 1 FROM") and "GROUP BY" in text:
        return "sql: duplicate-key check"
    return SQL_OTHER


def instrument(clock: Clock) -> None:
    """Wrap pipeledger's seams (in this process only) to time each phase of a load.

    Four wrappers: the session's ``execute``/``query`` (SQL, classified by statement),
    ``stage`` (one COPY fed by a lazy iterable of batches), the CSV encoder it calls per
    batch, and the loader's generator of conformed batches. Because ``stage`` pulls the
    batches itself, extraction and encoding happen *inside* it; the COPY phase is what is
    left of ``stage`` once the time spent producing and encoding batches in it is
    subtracted, i.e. the client writing to and waiting on the server.
    """
    from pipeledger.runs.load import loader
    from pipeledger.warehouse.adapters import pg_binary
    from pipeledger.warehouse.adapters import postgres as pg_adapter

    session_cls: Any = pg_adapter.PostgresSession
    adapter: Any = pg_adapter
    run_cls: Any = loader.Load
    execute, query, stage = session_cls.execute, session_cls.query, session_cls.stage
    csv_bytes, conformed = adapter._csv_bytes, run_cls._conformed
    binary: Any = pg_binary
    encode = binary.encode

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

    def timed_stage(self: Any, batches: Iterable[pa.RecordBatch]) -> None:
        inside = clock.get(PRODUCE) + clock.get(ENCODE)
        t = time.perf_counter()
        try:
            stage(self, batches)
        finally:
            nested = clock.get(PRODUCE) + clock.get(ENCODE) - inside
            clock.add(COPY, time.perf_counter() - t - nested)

    def timed_encoder(encoder: Callable[[pa.RecordBatch], Any]) -> Callable[..., Any]:
        def timed(batch: pa.RecordBatch) -> Any:
            t = time.perf_counter()
            try:
                return encoder(batch)
            finally:
                clock.add(ENCODE, time.perf_counter() - t)

        return timed

    def timed_conformed(self: Any, *args: Any, **kwargs: Any) -> Iterator[pa.RecordBatch]:
        inner = conformed(self, *args, **kwargs)
        while True:
            t = time.perf_counter()
            batch = next(inner, None)
            clock.add(PRODUCE, time.perf_counter() - t)
            if batch is None:
                return
            yield batch

    session_cls.execute, session_cls.query = timed_execute, timed_query
    session_cls.stage = timed_stage
    adapter._csv_bytes = timed_encoder(csv_bytes)
    binary.encode = timed_encoder(encode)
    run_cls._conformed = timed_conformed


def _config(url: str, work: Path, source: str) -> Any:
    from pipeledger.config.model import parse_config

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
    phases["other (connect, commit, python)"] = max(0.0, total - sum(phases.values()))
    return {k: round(v, 3) for k, v in sorted(phases.items(), key=lambda kv: -kv[1])}


def step_raw_copy(url: str, csv_path: Path) -> dict[str, Any]:
    started, cpu = time.perf_counter(), time.process_time()
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
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    return {
        "seconds": seconds,
        "cpu_s": cpu,
        "rows_read": rows,
        "rows_inserted": rows,
        "rows_updated": 0,
    }


def step_hand_merge(url: str, csv_path: Path, rows_before: int) -> dict[str, Any]:
    """The hand-written incremental: COPY the batch into a temporary table, then one guarded
    upsert, in one transaction; the session set up as pipeledger's are."""
    started, cpu = time.perf_counter(), time.process_time()
    with psycopg.connect(url) as conn:
        conn.execute("SET TIME ZONE 'UTC'")
        conn.execute("SET temp_buffers = '256MB'")
        conn.execute(f"CREATE TEMP TABLE hand_stage ({RAW_DDL}) ON COMMIT DROP")
        with conn.cursor() as cursor:
            copy_sql = "COPY hand_stage FROM STDIN (FORMAT csv, HEADER)"
            with cursor.copy(copy_sql) as copy, csv_path.open("rb") as f:
                while chunk := f.read(COPY_CHUNK):
                    copy.write(chunk)
            rows = cursor.rowcount
        written = conn.execute(HAND_MERGE).rowcount
        conn.commit()
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    with psycopg.connect(url) as conn:  # not timed: how many of the written rows were new
        row = conn.execute(f"SELECT count(*) FROM {HAND_TABLE}").fetchone()  # noqa: S608
    inserted = int(row[0]) - rows_before if row else 0
    return {
        "seconds": seconds,
        "cpu_s": cpu,
        "rows_read": rows,
        "rows_inserted": inserted,
        "rows_updated": written - inserted,
    }


def step_pipeledger(
    step: str, url: str, work: Path, source: str, start: str | None, end: str | None
) -> dict[str, Any]:
    from pipeledger.runs import runner

    clock = Clock()
    instrument(clock)
    config = _config(url, work, source)
    started, cpu = time.perf_counter(), time.process_time()
    if step in ("backfill", "backfill-full"):
        assert start is not None and end is not None
        full = step == "backfill-full"
        result = runner.backfill(config, PIPELINE, start, end, full_compare=full)
    else:
        result = runner.run_one(config, PIPELINE)
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    out = result.to_json()
    return {
        "seconds": seconds,
        "cpu_s": cpu,
        "rows_read": out["rows_read"],
        "rows_inserted": out["rows_inserted"],
        "rows_updated": out["rows_updated"],
        "rows_unchanged": out["rows_unchanged"],
        "rows_superseded": out["rows_superseded"],
        "watermark_after": out["watermark_after"],
        "breakdown": _breakdown(clock, seconds),
        "pipeledger_path": str(Path(runner.__file__).parent),
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
        info = generate(
            Path(args.work), args.rows, args.seed, args.changed, args.new, str(args.rows)
        )
        print(json.dumps({k: str(v) for k, v in asdict(info).items()}))
        return
    if args.step == "raw-copy":
        out = step_raw_copy(args.url, Path(args.csv))
    elif args.step == "hand-merge":
        out = step_hand_merge(args.url, Path(args.csv), args.rows)
    else:
        from pipeledger.runs.runner import prefer_system_allocator

        prefer_system_allocator()  # as the pipeledger command does
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
    table_rows: int
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


APP_NAME = "pipeledger-bench-step"
LOG_SETTINGS = {"log_min_duration_statement": "0", "log_line_prefix": "'%m [%p] %a '"}
# The throwaway server is tuned like a small production server on this 24 GiB machine, so
# the 5M-row table fits in shared buffers as it would in production (the test-suite
# default of 256MB made the 5x steps measure cache misses, not pipeledger).
SERVER_SETTINGS = {"shared_buffers": "'2GB'"}
_LOG_DURATION = re.compile(r"LOG:  duration: ([0-9.]+) ms  (?:statement|execute [^:]*): (.*)")


class ServerLog:
    """The throwaway server's log with every statement's duration (``--server-log``):
    server-side seconds per statement class, for the statements of the step subprocesses
    only (they connect with ``application_name`` = ``APP_NAME``)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def offset(self) -> int:
        return self.path.stat().st_size

    def since(self, offset: int) -> dict[str, float]:
        with self.path.open("rb") as f:
            f.seek(offset)
            text = f.read().decode("utf-8", "replace")
        totals: dict[str, float] = defaultdict(float)
        for line in text.splitlines():
            if f" {APP_NAME} LOG:" not in line:
                continue
            match = _LOG_DURATION.search(line)
            if match:
                label = _classify(match.group(2)).removeprefix("sql: ")
                if match.group(2).lstrip().startswith("COPY"):
                    label = "COPY into staging (until the client's last batch)"
                totals[label] += float(match.group(1)) / 1000.0
        return {k: round(v, 3) for k, v in sorted(totals.items(), key=lambda kv: -kv[1])}


class ServerCpu:
    """CPU seconds used so far by a local PostgreSQL: the postmaster, its live processes,
    and the processes it has reaped (a step's backends end before it is read again)."""

    def __init__(self, postmaster: int) -> None:
        self.postmaster = postmaster
        self.tick = os.sysconf("SC_CLK_TCK")

    @staticmethod
    def _stat(pid: int) -> list[str]:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()

    def seconds(self) -> float:
        fields = self._stat(self.postmaster)  # utime, stime, cutime, cstime: 11..14
        total = sum(int(f) for f in fields[11:15])
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError, IndexError):
                child = self._stat(int(entry.name))
                if int(child[1]) == self.postmaster:
                    total += int(child[11]) + int(child[12])
        return total / self.tick


SERVER_CPU: ServerCpu | None = None  # set for the throwaway server


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


def generate_in_child(work: Path, rows: int, seed: int, changed: int, new: int) -> Dataset:
    """Generate in a subprocess: keeps this process small, because a child's ``ru_maxrss``
    starts from the parent's resident size at fork/exec time."""
    command = [sys.executable, str(Path(__file__).resolve()), "--step", "generate"]
    command += ["--work", str(work), "--rows", str(rows), "--seed", str(seed)]
    command += ["--changed", str(changed), "--new", str(new)]
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
    name: str,
    kind: str,
    family: str,
    rows_in_file: int,
    table_rows: int,
    url: str,
    child_args: list[str],
    log: ServerLog | None = None,
) -> Measurement:
    """Run one step (``kind`` is what the child does) in a fresh subprocess."""
    settle(url)
    mark = log.offset() if log else 0
    command = [sys.executable, str(Path(__file__).resolve()), "--step", kind, "--url", url]
    command += child_args
    print(f"  {name:<16} ...", end="", flush=True, file=sys.stderr)
    server_cpu = SERVER_CPU.seconds() if SERVER_CPU else None
    started = time.perf_counter()
    # as the pipeledger command does before it imports pyarrow (cli/app.py)
    env = {**os.environ, "PGAPPNAME": APP_NAME, "ARROW_DEFAULT_MEMORY_POOL": "system"}
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    output = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"step {name} failed with exit code {proc.returncode}")
    data = json.loads(output.strip().splitlines()[-1])
    data["wait4_maxrss_mb"] = round(usage.ru_maxrss / 1024.0, 1)
    if SERVER_CPU and server_cpu is not None:
        data["server_cpu_s"] = SERVER_CPU.seconds() - server_cpu
    if log:
        data["server_log"] = log.since(mark)
    m = Measurement(
        name=name,
        family=family,
        rows_in_file=rows_in_file,
        table_rows=table_rows,
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


def paired(rounds: list[dict[str, Measurement]], a: str, b: str) -> list[float]:
    """Per round, step ``a``'s seconds over step ``b``'s (a ratio taken within a round is
    less moved by the machine's drift than a ratio of medians)."""
    return [r[a].seconds / r[b].seconds for r in rounds if a in r and b in r]


def spread(values: list[float], digits: int = 2) -> str:
    if not values:
        return "-"
    low, mid, high = min(values), statistics.median(values), max(values)
    return f"median {mid:.{digits}f} (min {low:.{digits}f}, max {high:.{digits}f})"


def evaluate(
    ms: dict[str, Measurement], rounds: list[dict[str, Measurement]], factor: int
) -> list[Target]:
    raw, first, back, incr = ms["raw-copy"], ms["first-load"], ms["backfill"], ms["incremental"]
    ratio = raw.seconds / first.seconds
    per_round = [1 / x for x in paired(rounds, "first-load", "raw-copy")]
    targets = [
        Target(
            f"first load >= {MIN_COPY_RATIO}x raw COPY throughput (in process)",
            ratio >= MIN_COPY_RATIO,
            f"{first.rows_per_s:,.0f} vs {raw.rows_per_s:,.0f} rows/s = {ratio:.2f}x; "
            f"per round {spread(per_round)}",
        )
    ]
    cli = ms.get("first-load-cli")
    if cli is not None:
        per_round = [1 / x for x in paired(rounds, "first-load-cli", "raw-copy")]
        targets.append(
            Target(
                f"first load as a whole `pipeledger run` process >= {MIN_CLI_COPY_RATIO}x "
                "raw COPY throughput",
                raw.seconds / cli.seconds >= MIN_CLI_COPY_RATIO,
                f"{cli.seconds:.2f} s (start-up included) vs raw COPY {raw.seconds:.2f} s = "
                f"{raw.seconds / cli.seconds:.2f}x; per round {spread(per_round)}",
            )
        )
    hand = ms.get("hand-merge")
    if hand is not None:
        per_round = paired(rounds, "incremental", "hand-merge")
        by_cpu = [
            a / b
            for r in rounds
            if "hand-merge" in r
            and (a := cpu_seconds(r["incremental"])) is not None
            and (b := cpu_seconds(r["hand-merge"]))
        ]
        targets.append(
            Target(
                f"incremental <= {MAX_BASELINE_RATIO}x the hand-written COPY + guarded upsert",
                incr.seconds / hand.seconds <= MAX_BASELINE_RATIO,
                f"{incr.seconds:.2f} s vs {hand.seconds:.2f} s = "
                f"{incr.seconds / hand.seconds:.2f}x; per round {spread(per_round)}; by CPU "
                f"(client + server: less moved by a busy machine) per round {spread(by_cpu)}",
            )
        )
    targets += [
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
    targets += scale_targets(ms, factor)
    steps = [m for m in ms.values() if m.family in ("load", "scale", "cli")]
    worst = max(steps, key=lambda m: m.peak_rss_mb)
    targets.append(
        Target(
            f"peak RSS < {MAX_RSS_MB:.0f} MB (every pipeledger step)",
            worst.peak_rss_mb < MAX_RSS_MB,
            f"max {worst.peak_rss_mb:.1f} MB ({worst.name})",
        )
    )
    return targets


def _quick_target(m: Measurement, limit: float, where: str) -> Target:
    calls = m.extra["calls_s"]
    return Target(
        f"`{m.extra['command']}` < {limit} s{where} (median wall time)",
        m.seconds < limit,
        f"{spread(calls, 3)} s over {len(calls)} runs",
    )


def startup_targets(ms: dict[str, Measurement]) -> list[Target]:
    """The quick commands answer at once: ``--help`` anywhere, ``state``, ``runs`` and
    ``status`` on the embedded default (PostgreSQL's driver import alone exceeds the limit)."""
    targets = [_quick_target(ms["pipeledger --help"], MAX_HELP_S, "")]
    for command in QUICK:
        m = ms[f"pipeledger {command} ({EMBEDDED})"]
        targets.append(_quick_target(m, MAX_QUICK_S, " on the embedded default"))
    return [*targets, _unchanged_target(ms)]


def _unchanged_target(ms: dict[str, Measurement]) -> Target:
    """An unchanged folder (``incremental = "files"``) is passed by at once: the whole
    ``pipeledger run`` process, beyond ``--help``'s."""
    run, help_ = ms[f"{UNCHANGED} ({EMBEDDED})"], ms["pipeledger --help"]
    beyond = run.seconds - help_.seconds
    return Target(
        f"`{UNCHANGED}` < {MAX_UNCHANGED_S} s beyond `pipeledger --help` on the embedded "
        "default (medians)",
        beyond < MAX_UNCHANGED_S,
        f"{beyond:.3f} s beyond ({run.seconds:.3f} s against {help_.seconds:.3f} s); runs "
        f"{spread(run.extra['calls_s'], 3)} s",
    )


def startup_information(ms: dict[str, Measurement]) -> list[str]:
    """The baselines, and how much of PostgreSQL's quick commands the driver import is."""
    bare, driver = ms["python -c pass"].seconds, ms[IMPORT_PSYCOPG].seconds
    driver_cost = driver - bare
    pg = {c: ms[f"pipeledger {c} ({POSTGRES})"].seconds for c in QUICK}
    embedded = {c: ms[f"pipeledger {c} ({EMBEDDED})"].seconds for c in QUICK}
    times = ", ".join(f"`{c}` {t:.3f} s (embedded {embedded[c]:.3f} s)" for c, t in pg.items())
    shares = ", ".join(f"{driver_cost / t:.0%} of `{c}`" for c, t in pg.items())
    added = ", ".join(f"{pg[c] - embedded[c]:.3f} s to `{c}`" for c in QUICK)
    return [
        f"baselines: the interpreter's own start (`python -c pass`, the venv's site) "
        f"{bare:.3f} s; `{IMPORT_PSYCOPG}` {driver:.3f} s, so importing the PostgreSQL "
        f"driver costs {driver_cost:.3f} s",
        f"PostgreSQL (information, not targets): {times}. The driver's import alone "
        f"({driver_cost:.3f} s) is {shares}; against the embedded default PostgreSQL adds "
        f"{added} (the driver's import, connecting and the server's round trips, less "
        "what the SQLite file costs)",
    ]


def scale_targets(ms: dict[str, Measurement], factor: int) -> list[Target]:
    """The same batch costs about the same against the bigger table, and no step's memory
    grows with the input."""
    suffix = f"-{factor}x"
    name = f"incremental against the {factor}x table within {MAX_INCREMENTAL_GROWTH}x of 1x"
    rss = f"peak RSS of every step at {factor}x within {MAX_RSS_GROWTH:.0%} of at 1x"
    incr1, incr_n = ms["incremental"], ms.get("incremental" + suffix)
    if incr_n is None:
        return [Target(name, None, "scale check not run"), Target(rss, None, "not run")]
    growth = incr_n.seconds / incr1.seconds
    steps = [n for n in ms if n + suffix in ms]
    grown = {n: ms[n + suffix].peak_rss_mb / ms[n].peak_rss_mb - 1 for n in steps}
    worst = max(grown, key=lambda n: abs(grown[n]))
    return [
        Target(
            name,
            growth <= MAX_INCREMENTAL_GROWTH,
            f"{incr_n.rows_read:,} rows into {incr_n.table_rows:,}: {incr_n.seconds:.2f} s; "
            f"into {incr1.table_rows:,}: {incr1.seconds:.2f} s; {growth:.2f}x",
        ),
        Target(
            rss,
            abs(grown[worst]) <= MAX_RSS_GROWTH,
            f"largest change {worst}: {ms[worst + suffix].peak_rss_mb:.1f} MB at "
            f"{ms[worst + suffix].rows_in_file:,} rows vs {ms[worst].peak_rss_mb:.1f} MB "
            f"at {ms[worst].rows_in_file:,} ({grown[worst]:+.1%})",
        ),
    ]


def information(ms: dict[str, Measurement], factor: int) -> list[str]:
    """Figures printed for information only (not targets)."""
    first, out = ms["first-load"], []
    for suffix, label in (("", "1x"), (f"-{factor}x", f"{factor}x")):
        incr, rerun = ms.get("incremental" + suffix), ms.get("rerun" + suffix)
        if incr is None or rerun is None:
            continue
        out.append(
            f"incremental ({label} table): {incr.us_per_row:.2f} us/row (first load "
            f"{first.us_per_row:.2f}); a source folder that still held the old file would "
            f"add its re-scan, the re-run's {rerun.seconds:.2f} s"
        )
    for suffix in ("", f"-{factor}x"):
        back, full = ms.get("backfill" + suffix), ms.get("backfill-full" + suffix)
        load = ms.get("first-load" + suffix)
        if back is not None and full is not None and load is not None:
            out.append(
                f"backfill of {full.rows_read:,} unchanged rows: {back.seconds:.2f} s with "
                f"the fingerprint shortcut, {full.seconds:.2f} s with --full-compare "
                f"(every row staged), first load {load.seconds:.2f} s"
            )
    scale = ms.get(f"first-load-{factor}x")
    if scale is not None:
        out.append(
            f"first load at {scale.rows_in_file:,} rows: {scale.rows_per_s:,.0f} rows/s "
            f"({scale.rows_per_s / first.rows_per_s:.2f}x the 1x first load's throughput)"
        )
    return out


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def machine(url: str, snapshot: str | None) -> dict[str, str]:
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
                "SELECT name, current_setting(name) FROM pg_settings WHERE name = ANY(%s)",
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
    import pipeledger

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
        "load average at the end (1/5/15 min)": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "memory": f"{mem_kb / 1024 / 1024:.1f} GiB",
        "os": platform.platform(),
        "postgres": pg_version,
        "postgres settings": ", ".join(f"{k}={v}" for k, v in sorted(settings.items())),
        "python": platform.python_version(),
        "pyarrow": pa.__version__,
        "psycopg": psycopg.__version__,
        "pipeledger commit": (
            f"{snapshot} (clean snapshot via --snapshot; bench/ itself at {commit})"
            if snapshot
            else commit
        ),
        "pipeledger imported from": str(Path(pipeledger.__file__).parent),
    }


def _cpu(m: Measurement) -> str:
    client, server = m.extra.get("cpu_s"), m.extra.get("server_cpu_s")
    if client is None or server is None:
        return "-"
    return f"{client:.2f} + {server:.2f}"


def cpu_seconds(m: Measurement) -> float | None:
    """The step's CPU seconds, client (every thread) and server, when both are known."""
    client, server = m.extra.get("cpu_s"), m.extra.get("server_cpu_s")
    return None if client is None or server is None else float(client) + float(server)


def _fmt_table(headers: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(row) + " |" for row in rows]
    return out


def report(
    ms: dict[str, Measurement],
    targets: list[Target],
    infos: list[str],
    info: dict[str, str],
    data: Dataset,
    big: Dataset | None,
    path: Path,
    startup: str,
) -> str:
    """The whole of ``RESULTS.md``: the load section, ``startup`` (the start-up block, its
    markers included), the notes and the other scripts' blocks as they were."""
    raw = ms["raw-copy"]
    incr = data.incremental_rows
    changed, new = int(data.rows * CHANGED_FRACTION), int(data.rows * NEW_FRACTION)
    command = " ".join(["bench/load_bench.py", *sys.argv[1:]])
    scale = (
        f" Scale check: a {big.rows:,}-row file ({big.base.stat().st_size / 1e6:.0f} MB) "
        f"and the same-size incremental batch ({big.incremental_rows:,} rows: {changed:,} "
        f"existing keys changed, picked over the whole table, and {new:,} new keys) "
        "against the bigger table; steps suffixed with the factor."
        if big
        else " Scale check not run (`--no-scale-check`)."
    )
    lines = [
        "# pipeledger load benchmark (PostgreSQL)",
        "",
        f"Run {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC by `{command}`. "
        f"Source: {data.rows:,}-row orders CSV ({data.base.stat().st_size / 1e6:.0f} MB, "
        f"7 columns). The incremental step reads a file of {incr:,} rows ({changed:,} "
        f"changed keys = 10%, {new:,} new keys = 5%) alone; `hand-merge` loads the same "
        "file into a keyed copy of the same 1x table by hand: COPY into a temporary table, "
        "then one `INSERT .. ON CONFLICT DO UPDATE .. WHERE excluded.updated_at > "
        f"t.updated_at` (bench/load_bench.py, `HAND_MERGE`).{scale}",
        "",
        f"Every step ran {len(next(iter(ms.values())).extra.get('rounds_s', [0]))} time(s), "
        "each round in fresh databases (`hand-merge` just before the incremental in odd "
        "rounds, just after it in even ones); a step's figures and phases are those of its "
        "median round, its peak RSS the highest of all rounds. "
        "Seconds are the operation inside its own subprocess (imports and interpreter start "
        "excluded), except `first-load-cli`: a whole `python -m pipeledger run` process, "
        "timed from its start to its exit. Peak RSS is the subprocess's own high-water mark "
        "(`VmHWM` from `/proc/self/status`, read at its end; for `first-load-cli` GNU "
        "time's maximum resident size; the client only, not the PostgreSQL server), "
        "cross-checked with `ru_maxrss` from `os.wait4` (which also counts the launcher's "
        "resident size at fork time, so it is a ceiling). "
        "rows/s and us/row use rows read by the step; `x raw COPY` compares with the "
        "1x raw COPY's rows/s; `rows in target` is the target's size before the step.",
        "",
        "## Figures",
        "",
    ]
    rows = []
    for m in ms.values():
        if m.family == "startup":
            continue
        rows.append(
            [
                m.name,
                f"{m.rows_in_file:,}",
                f"{m.table_rows:,}",
                f"{m.seconds:.2f}",
                " / ".join(f"{x:.2f}" for x in m.extra.get("rounds_s", [m.seconds])),
                f"{m.rows_read:,}",
                f"{m.rows_inserted:,}",
                f"{m.rows_updated:,}",
                f"{m.rows_per_s:,.0f}" if m.rows_read > 10 else "-",
                f"{m.rows_per_s / raw.rows_per_s:.2f}" if m.rows_read > 10 else "-",
                f"{m.us_per_row:.2f}" if m.rows_read > 10 else "-",
                _cpu(m),
                f"{m.peak_rss_mb:.1f}",
                f"{m.extra.get('wait4_maxrss_mb', float('nan')):.1f}",
            ]
        )
    lines += _fmt_table(
        [
            "step",
            "rows in source",
            "rows in target",
            "seconds (median)",
            "each round",
            "rows read",
            "inserted",
            "updated",
            "rows/s",
            "x raw COPY",
            "us/row",
            "CPU s client + server",
            "peak RSS MB",
            "wait4 maxrss MB",
        ],
        rows,
    )
    lines += ["", "## Targets", ""]
    lines += _fmt_table(
        ["target", "result", "detail"], [[t.name, t.verdict, t.detail] for t in targets]
    )
    lines += ["", "The quick commands' start-up targets are in the next section."]
    if infos:
        lines += ["", "For information (not targets):", ""]
        lines += [f"- {line}" for line in infos]
    lines += ["", startup]
    lines += ["", "## Where the time goes (seconds per phase, instrumented in-process)", ""]
    lines += [
        "The source is pulled lazily by the single COPY, so extraction and CSV encoding run "
        "inside staging; the COPY phase is staging minus those, i.e. the client writing to "
        "and waiting on the server. SQL phases are client-side round trips per statement "
        "class; `other` is the rest (connect, migrate check, commit, Python).",
        "",
    ]
    lines += ["Phases of each step's median round.", ""]
    for m in ms.values():
        breakdown = m.extra.get("breakdown")
        if not breakdown:
            continue
        parts = ", ".join(f"{k} {v:.2f}" for k, v in breakdown.items() if v >= 0.005)
        lines.append(f"- **{m.name}** ({m.seconds:.2f} s): {parts}")
        server_log = m.extra.get("server_log")
        parts = ", ".join(f"{k} {v:.2f}" for k, v in (server_log or {}).items() if v >= 0.005)
        if parts:
            lines.append(f"  - server log (`--server-log`): {parts}")
    lines += ["", "## Machine", ""]
    lines += [f"- {k}: {v}" for k, v in info.items()]
    previous = _read(str(path))
    if NOTES_BEGIN in previous and NOTES_END in previous:
        notes = previous[previous.index(NOTES_BEGIN) : previous.index(NOTES_END) + len(NOTES_END)]
    else:
        notes = f"{NOTES_BEGIN}\n## Notes\n\n(none yet)\n{NOTES_END}"
    lines += ["", notes, ""]
    others = (
        (LEDGER_BEGIN, LEDGER_END),
        (GATE_BEGIN, GATE_END),
        (DRILL_BEGIN, DRILL_END),
        (HISTORY_BEGIN, HISTORY_END),
    )
    for begin, end_marker in others:
        if begin in previous and end_marker in previous:  # the other scripts' sections
            start, end = previous.index(begin), previous.index(end_marker) + len(end_marker)
            lines += [previous[start:end], ""]
    return "\n".join(lines)


def _link_source(work: Path, rows: int, *files: Path) -> Path:
    """A source folder ``work/source-<rows>/`` holding hard links to exactly ``files``."""
    source = work / f"source-{rows}"
    source.mkdir(exist_ok=True)
    for old in source.iterdir():
        old.unlink()
    for f in files:
        os.link(f, source / f.name)
    return source


def median_of(rounds: list[dict[str, Measurement]]) -> dict[str, Measurement]:
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


def prepare_hand_target(url: str, base: Path) -> None:
    """The hand-written baseline's target: the base file in a keyed table, vacuumed and
    analyzed (a state at least as good as pipeledger's target has by its incremental)."""
    table = psql.Identifier(HAND_TABLE)
    with psycopg.connect(url, autocommit=True) as conn:
        ddl = psql.SQL("CREATE TABLE {} ({}, PRIMARY KEY (order_id))")
        conn.execute(ddl.format(table, psql.SQL(RAW_DDL)))
        copy_sql = psql.SQL("COPY {} FROM STDIN (FORMAT csv, HEADER)").format(table)
        with conn.cursor() as cursor, cursor.copy(copy_sql) as copy, base.open("rb") as f:
            while chunk := f.read(COPY_CHUNK):
                copy.write(chunk)
        conn.execute(psql.SQL("VACUUM ANALYZE {}").format(table))


def load_series(
    url: str,
    work: Path,
    data: Dataset,
    suffix: str,
    family: str,
    log: ServerLog | None,
    baseline: Callable[[], Measurement] | None = None,
    baseline_first: bool = False,
) -> dict[str, Measurement]:
    """First load, identical re-run, backfill (shortcut and full compare), then the
    incremental file alone, in one fresh database; each step in its own subprocess. The
    hand-written ``baseline`` (its own database) runs just before or after the incremental."""
    ms: dict[str, Measurement] = {}
    source = _link_source(work, data.rows, data.base)
    common = ["--work", str(work), "--source", source.name]
    rows = data.rows
    with fresh_database(url, f"pipeledger_bench_{family}") as db:
        ms["first-load" + suffix] = run_step(
            "first-load" + suffix, "run", family, rows, 0, db, common, log
        )
        ms["rerun" + suffix] = run_step(
            "rerun" + suffix, "run", family, rows, rows, db, common, log
        )
        window = ["--start", data.cursor_min, "--end", data.cursor_max]
        ms["backfill" + suffix] = run_step(
            "backfill" + suffix, "backfill", family, rows, rows, db, common + window, log
        )
        ms["backfill-full" + suffix] = run_step(
            "backfill-full" + suffix, "backfill-full", family, rows, rows, db,
            common + window, log,
        )  # fmt: skip
        assert data.incremental is not None
        _link_source(work, data.rows, data.incremental)  # the new file alone (see README)
        if baseline is not None and baseline_first:
            ms["hand-merge"] = baseline()
        ms["incremental" + suffix] = run_step(
            "incremental" + suffix, "run", family, data.incremental_rows, rows, db, common, log
        )
        if baseline is not None and not baseline_first:
            ms["hand-merge"] = baseline()
    return ms


def _pipeline_toml(source: str) -> str:
    """The pipeline of the command-line steps in TOML (the same pipeline as ``_config``)."""
    return (
        f"[pipelines.{PIPELINE}]\n"
        f'source = {{ kind = "csv", path = "{source}" }}\ntarget = "{TARGET}"\n'
        'key = ["order_id"]\ncursor = "updated_at"\non_conflict = "newer_wins"\n'
        'columns = { amount = "numeric(12,2)" }\n'
    )


def _cli_config(work: Path, url: str, source: str) -> Path:
    """A pipeledger.toml for the command-line steps, loading into ``url``."""
    path = work / "bench-cli.toml"
    path.write_text(f'[warehouse]\nurl = "{url}"\n\n' + _pipeline_toml(source))
    return path


TIME_BIN = Path("/usr/bin/time")


@dataclass(frozen=True)
class Process:
    """A whole ``pipeledger`` process: wall and CPU seconds, peak RSS, what it printed."""

    wall: float
    cpu: float  # user + system: less moved by a busy machine than the wall time
    rss_mb: float
    output: str


def run_process(command: list[str]) -> Process:
    """``command`` as a whole process: interpreter start, imports and exit included. The
    peak RSS is the command's own (GNU time's, which forks from a small process), or
    ``ru_maxrss`` from wait4."""
    rss_file = DEFAULT_WORK / "cli-rss.txt"
    if TIME_BIN.exists():
        command = [str(TIME_BIN), "-f", "%M", "-o", str(rss_file), *command]
    env = {**os.environ, "PGAPPNAME": APP_NAME}
    started = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    output = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(command)} failed: {status}")
    kb = int(rss_file.read_text().split()[-1]) if TIME_BIN.exists() else usage.ru_maxrss
    return Process(wall, usage.ru_utime + usage.ru_stime, kb / 1024.0, output)


def pipeledger_command(args: list[str]) -> list[str]:
    """``pipeledger ARGS`` as a user runs it: the command installed beside this venv's
    interpreter (its own directory, not the current folder, goes first on the import path,
    so under ``--snapshot`` the snapshot on ``PYTHONPATH`` is what it imports). Without an
    installed command: ``python -P -m pipeledger`` (``-P``: the current folder is not put
    first on the import path either)."""
    installed = Path(sys.executable).parent / "pipeledger"
    if installed.exists():
        return [str(installed), *args]
    return [sys.executable, "-P", "-m", "pipeledger", *args]


def run_command(args: list[str]) -> Process:
    """``pipeledger ARGS`` as a whole process (``run_process``)."""
    return run_process(pipeledger_command(args))


def cli_series(url: str, work: Path, data: Dataset) -> dict[str, Measurement]:
    """``pipeledger run`` of the base file as a whole process into a fresh database."""
    source = _link_source(work, data.rows, data.base)
    with fresh_database(url, "pipeledger_bench_cli") as db:
        config = _cli_config(work, db, source.name)
        settle(db)
        print(f"  {'first-load-cli':<16} ...", end="", flush=True, file=sys.stderr)
        load = run_command(["-c", str(config), "run", "--json", PIPELINE])
        result = json.loads(load.output)[0]
        print(f" {load.wall:8.2f} s (whole process)  rss {load.rss_mb:6.1f} MB", file=sys.stderr)
        return {
            "first-load-cli": Measurement(
                name="first-load-cli",
                family="cli",
                rows_in_file=data.rows,
                table_rows=0,
                seconds=load.wall,
                rows_read=int(result["rows_read"]),
                rows_inserted=int(result["rows_inserted"]),
                rows_updated=int(result["rows_updated"]),
                peak_rss_mb=load.rss_mb,
                process_seconds=load.wall,
            )
        }


def startup(
    command: str, argv: list[str], calls: int, where: str = "", rows: int = 0
) -> dict[str, Measurement]:
    """The median wall time of ``calls`` runs of ``argv`` as a whole process; ``command``
    names it, ``where`` is the warehouse it reads (none for the baselines)."""
    name = f"{command} ({where})" if where else command
    runs = [run_process(argv) for _ in range(calls)]
    walls = [run.wall for run in runs]
    m = Measurement(
        name=name,
        family="startup",
        rows_in_file=0,
        table_rows=rows,
        seconds=statistics.median(walls),
        rows_read=0,
        rows_inserted=0,
        rows_updated=0,
        peak_rss_mb=max(run.rss_mb for run in runs),
        process_seconds=max(walls),
    )
    m.extra.update(command=command, warehouse=where)
    m.extra["calls_s"] = [round(w, 3) for w in walls]
    m.extra["calls_cpu_s"] = [round(run.cpu, 3) for run in runs]
    print(f"  {name:<40} {m.seconds:6.3f} s (median of {calls})", file=sys.stderr)
    return {name: m}


def startup_source(work: Path) -> Path:
    """The small orders CSV of the start-up part (``STARTUP_ROWS`` rows), written once."""
    return generate(work, STARTUP_ROWS, SEED, 0, 0, "startup").base


def startup_folder(work: Path, name: str, csv: Path, url: str | None) -> Path:
    """A fresh folder ``work/<name>/`` with ``csv`` under ``data/`` and a pipeledger.toml
    of one CSV pipeline; without ``url`` it has no ``[warehouse]`` (the embedded default:
    ``.pipeledger/warehouse.db`` beside it). Returns the config's path."""
    folder = work / name
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "data").mkdir(parents=True)
    os.link(csv, folder / "data" / csv.name)
    warehouse = f'[warehouse]\nurl = "{url}"\n\n' if url else ""
    config = folder / "pipeledger.toml"
    config.write_text(warehouse + _pipeline_toml("data"))
    return config


def unchanged_folder(work: Path, csv: Path, calls: int) -> dict[str, Measurement]:
    """``pipeledger run`` of an ``incremental = "files"`` pipeline whose folder of
    ``UNCHANGED_FILES`` CSV files (``csv`` linked under other names) it has taken already:
    the run lists the files, finds none new and ends (runs.load.files)."""
    config = startup_folder(work, "startup-files", csv, None)
    data = config.parent / "data"
    for n in range(1, UNCHANGED_FILES):
        os.link(csv, data / f"{n}-{csv.name}")
    config.write_text(
        config.read_text().replace('path = "data" }', 'path = "data" }\nincremental = "files"')
    )
    outcome = json.loads(run_command(["-c", str(config), "run", "--json", PIPELINE]).output)[0]
    if outcome["status"] != "success" or outcome["files"] is None:
        raise SystemExit("the start-up load of the folder of files did not take its files")
    argv = pipeledger_command(["-c", str(config), "run", PIPELINE])
    return startup(UNCHANGED, argv, calls, EMBEDDED, STARTUP_ROWS)


def load_once(config: Path, where: str) -> None:
    """The pipeline's first load, by a whole ``pipeledger run`` process (not timed): the
    quick commands then have a watermark, a run and a status to show."""
    outcome = json.loads(run_command(["-c", str(config), "run", "--json", PIPELINE]).output)[0]
    if outcome["status"] != "success" or outcome["rows_read"] != STARTUP_ROWS:
        raise SystemExit(f"the start-up load into {where} did not load {STARTUP_ROWS:,} rows")


def quick_commands(config: Path, calls: int, where: str) -> dict[str, Measurement]:
    """``state``, ``runs`` and ``status`` against ``config``'s warehouse."""
    ms: dict[str, Measurement] = {}
    for command in QUICK:
        argv = pipeledger_command(["-c", str(config), command])
        ms.update(startup(f"pipeledger {command}", argv, calls, where, STARTUP_ROWS))
    return ms


def startup_part(url: str, work: Path, csv: Path, calls: int) -> dict[str, Measurement]:
    """The start-up of the quick commands, whole processes: the baselines (the bare
    interpreter, the PostgreSQL driver's import), ``--help``, then ``state``, ``runs`` and
    ``status`` on the embedded default and on PostgreSQL, each after a first load of ``csv``."""
    print("  start-up of the quick commands", file=sys.stderr)
    settle(url)  # the loads before it leave the server checkpointing and vacuuming
    ms = startup("python -c pass", [sys.executable, "-c", "pass"], calls)
    ms.update(startup(IMPORT_PSYCOPG, [sys.executable, "-c", "import psycopg"], calls))
    config = startup_folder(work, "startup-embedded", csv, None)
    load_once(config, EMBEDDED)
    help_argv = pipeledger_command(["-c", str(config), "--help"])
    ms.update(startup("pipeledger --help", help_argv, calls))
    ms.update(quick_commands(config, calls, EMBEDDED))
    ms.update(unchanged_folder(work, csv, calls))
    with fresh_database(url, "pipeledger_bench_startup") as db:
        config = startup_folder(work, "startup-postgres", csv, db)
        load_once(config, POSTGRES)
        settle(db)
        ms.update(quick_commands(config, calls, POSTGRES))
    return ms


def use_snapshot(work: Path, rev: str) -> str:
    """Extract ``pipeledger/`` at git revision ``rev`` under ``work/snapshot-<commit>/`` and
    put it first on the import path of this process and of every step, so that edits made
    to the working tree while the benchmark runs do not leak into it. Returns the commit."""
    repo = str(HERE.parent)
    commit = subprocess.run(
        ["git", "-C", repo, "rev-parse", "--short", rev],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    folder = work / f"snapshot-{commit}"
    if not (folder / "pipeledger" / "__init__.py").exists():
        archive = subprocess.run(
            ["git", "-C", repo, "archive", commit, "pipeledger"], capture_output=True, check=True
        ).stdout
        folder.mkdir(parents=True, exist_ok=True)
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(folder, filter="data")
    paths = [str(folder), *filter(None, [os.environ.get("PYTHONPATH")])]
    os.environ["PYTHONPATH"] = os.pathsep.join(paths)
    sys.path.insert(0, str(folder))
    return commit


def compile_bytecode() -> None:
    """Write pipeledger's bytecode, as an installed package has it, before the whole-process
    steps time the command (``PYTHONDONTWRITEBYTECODE`` would otherwise make every start
    compile the sources again)."""
    import pipeledger

    folder = str(Path(pipeledger.__file__).parent)
    subprocess.run([sys.executable, "-m", "compileall", "-q", folder], check=True)


def one_round(
    args: argparse.Namespace,
    url: str,
    work: Path,
    data: Dataset,
    big: Dataset | None,
    index: int,
    log: ServerLog | None,
) -> dict[str, Measurement]:
    """Every step once: raw COPY, the 1x series with the hand-written baseline beside its
    incremental, the whole-process load, the start-up part, then the scale series."""
    if args.repeat > 1:
        print(f"round {index + 1} of {args.repeat}", file=sys.stderr)
    ms: dict[str, Measurement] = {}
    with fresh_database(url, "pipeledger_bench_raw") as db:
        ms["raw-copy"] = run_step(
            "raw-copy", "raw-copy", "raw", data.rows, 0, db, ["--csv", str(data.base)]
        )
    assert data.incremental is not None
    with fresh_database(url, "pipeledger_bench_hand") as hand_db:
        prepare_hand_target(hand_db, data.base)
        child = ["--csv", str(data.incremental), "--rows", str(data.rows)]

        def baseline() -> Measurement:
            return run_step(
                "hand-merge", "hand-merge", "baseline", data.incremental_rows, data.rows,
                hand_db, child,
            )  # fmt: skip

        ms.update(load_series(url, work, data, "", "load", log, baseline, index % 2 == 0))
    ms.update(cli_series(url, work, data))
    ms.update(startup_part(url, work, startup_source(work), args.calls))
    if big is not None:
        ms.update(load_series(url, work, big, f"-{args.scale_factor}x", "scale", log))
    return ms


@contextlib.contextmanager
def postgres_server(args: argparse.Namespace) -> Iterator[tuple[str, ServerLog | None]]:
    """The server measured: ``--postgres-url`` (or ``$PIPELEDGER_BENCH_POSTGRES_URL``), else
    a throwaway one, stopped at the end; with the server log when ``--server-log``."""
    url = args.postgres_url or os.environ.get(URL_ENV)
    if url and args.server_log:
        raise SystemExit("--server-log needs the throwaway server (no --postgres-url)")
    if url:
        yield url, None
        return
    from pipeledger.testing.postgres import ThrowawayPostgres

    settings = {**SERVER_SETTINGS, **(LOG_SETTINGS if args.server_log else {})}
    server = ThrowawayPostgres(settings=settings)
    url = server.start()
    try:
        global SERVER_CPU
        pid = (server.data_dir / "postmaster.pid").read_text().split()[0]
        SERVER_CPU = ServerCpu(int(pid))
        print(f"throwaway PostgreSQL at {url}", file=sys.stderr)
        yield url, ServerLog(server.log_path) if args.server_log else None
    finally:
        server.stop()


def generate_data(args: argparse.Namespace, work: Path) -> tuple[Dataset, Dataset | None]:
    """The 1x source CSVs and, with the scale check, the bigger ones (reused when there)."""
    changed, new = int(args.rows * CHANGED_FRACTION), int(args.rows * NEW_FRACTION)
    print(f"generating {args.rows:,} rows under {work} ...", file=sys.stderr)
    data = generate_in_child(work, args.rows, args.seed, changed, new)
    print(f"  done in {data.seconds:.1f} s (0 = reused)", file=sys.stderr)
    if not args.scale_check:
        return data, None
    rows = args.rows * args.scale_factor
    print(f"generating {rows:,} rows for the scale check ...", file=sys.stderr)
    # the same absolute incremental batch: it is the table that grows, not the batch
    big = generate_in_child(work, rows, args.seed, changed, new)
    print(f"  done in {big.seconds:.1f} s (0 = reused)", file=sys.stderr)
    return data, big


def _startup_row(m: Measurement) -> list[str]:
    return [
        f"`{m.extra['command']}`",
        m.extra["warehouse"] or "-",
        f"{m.seconds:.3f}",
        f"{min(m.extra['calls_s']):.3f}",
        f"{max(m.extra['calls_s']):.3f}",
        str(len(m.extra["calls_s"])),
        f"{statistics.median(m.extra['calls_cpu_s']):.3f}",
        f"{m.peak_rss_mb:.1f}",
    ]


def startup_block(ms: dict[str, Measurement], info: dict[str, str]) -> str:
    """The start-up section of ``RESULTS.md``, its markers included: the same from the full
    run and from ``--only startup``, which rewrites it alone."""
    starts = [m for m in ms.values() if m.family == "startup"]
    command = " ".join(["bench/load_bench.py", *sys.argv[1:]])
    lines = [
        STARTUP_BEGIN,
        "## Start-up of the quick commands",
        "",
        f"Run {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC by `{command}` (the full run and "
        "`--only startup` both write this section). Each command is a whole process of this "
        "venv, timed from its start to its exit (the installed `pipeledger` command, as a user "
        "runs it: interpreter start, imports and exit included), after pipeledger's bytecode was "
        "compiled as an installed package has it; the figure is the median wall time of all "
        "its runs (`--calls` in each of `--repeat` rounds), CPU is user + system. The "
        "embedded default: a fresh folder whose `pipeledger.toml` has no `[warehouse] url` "
        "(so the SQLite file `.pipeledger/warehouse.db` beside it) and one CSV pipeline, "
        f"{STARTUP_ROWS:,} rows loaded once by a `pipeledger run` process before the "
        "timing; PostgreSQL: the same pipeline and rows in a fresh database of the "
        "benchmark's server. Baselines, in the same run: the bare interpreter (`python -c "
        "pass`, with the venv's site) and the PostgreSQL driver's import.",
        "",
    ]
    lines += _fmt_table(
        ["command", "warehouse", "wall median", "min", "max", "runs", "CPU median", "peak RSS MB"],
        [_startup_row(m) for m in starts],
    )
    lines += ["", "### Start-up targets", ""]
    targets = startup_targets(ms)
    lines += _fmt_table(
        ["target", "result", "detail"], [[t.name, t.verdict, t.detail] for t in targets]
    )
    lines += ["", "For information (not targets):", ""]
    lines += [f"- {line}" for line in startup_information(ms)]
    lines += [
        f"- machine: {info['cpu']}, {info['cores']} cores, load average at the end "
        f"{info['load average at the end (1/5/15 min)']}; Python {info['python']}, psycopg "
        f"{info['psycopg']}; pipeledger {info['pipeledger commit']}, imported from "
        f"{info['pipeledger imported from']}",
        STARTUP_END,
    ]
    return "\n".join(lines)


def print_startup(ms: dict[str, Measurement]) -> None:
    """The start-up part on stdout: medians, information and targets."""
    print("\nstart-up (whole processes)                  median wall s  CPU s  RSS MB")
    for m in ms.values():
        if m.family == "startup":
            cpu = statistics.median(m.extra["calls_cpu_s"])
            print(f"{m.name:<44} {m.seconds:13.3f} {cpu:6.3f} {m.peak_rss_mb:7.1f}")
    for line in startup_information(ms):
        print(f"info  {line}")
    for t in startup_targets(ms):
        print(f"{t.verdict}  {t.name}: {t.detail}")


def print_figures(ms: dict[str, Measurement], targets: list[Target], infos: list[str]) -> None:
    """The load steps on stdout: figures, counts, information and targets."""
    raw = ms["raw-copy"]
    steps = [m for m in ms.values() if m.family != "startup"]
    print("\nstep                 seconds     rows read    rows/s  x COPY   us/row   RSS MB")
    for m in steps:
        print(
            f"{m.name:<19} {m.seconds:8.2f} {m.rows_read:>13,} {m.rows_per_s:>9,.0f} "
            f"{m.rows_per_s / raw.rows_per_s:6.2f} {m.us_per_row:8.2f} {m.peak_rss_mb:8.1f}"
        )
    for m in steps:
        if m.family != "raw" and not m.name.startswith("first-load"):
            print(
                f"{m.name}: inserted {m.rows_inserted:,} updated {m.rows_updated:,} "
                f"unchanged {m.extra.get('rows_unchanged', 0):,}"
            )
    print()
    for line in infos:
        print(f"info  {line}")
    for t in targets:
        print(f"{t.verdict}  {t.name}: {t.detail}")


def _save(path: Path, ms: dict[str, Measurement]) -> None:
    path.write_text(json.dumps({k: asdict(v) for k, v in ms.items()}, indent=2, default=str))


def main_startup(args: argparse.Namespace, work: Path, snapshot: str | None) -> None:
    """``--only startup``: the start-up part alone (no load data generated, no load steps);
    only its block of ``RESULTS.md`` is rewritten."""
    csv = startup_source(work)
    rounds: list[dict[str, Measurement]] = []
    with postgres_server(args) as (url, _):
        compile_bytecode()
        for index in range(args.repeat):
            if args.repeat > 1:
                print(f"round {index + 1} of {args.repeat}", file=sys.stderr)
            rounds.append(startup_part(url, work, csv, args.calls))
        ms = median_of(rounds)
        info = machine(url, snapshot)
    print_startup(ms)
    results = Path(args.results)
    replace_block(results, STARTUP_BEGIN, STARTUP_END, startup_block(ms, info))
    _save(work / "last_startup.json", ms)
    print(f"\nwrote the start-up section of {results}")


def main_parent(args: argparse.Namespace) -> None:
    work = Path(args.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    snapshot = use_snapshot(work, args.snapshot) if args.snapshot else None
    if args.repeat is None:
        args.repeat = 1 if args.only == "startup" else 3
    if args.only == "startup":
        main_startup(args, work, snapshot)
        return
    data, big = generate_data(args, work)
    with postgres_server(args) as (url, log):
        compile_bytecode()
        rounds = [one_round(args, url, work, data, big, index, log) for index in range(args.repeat)]
        ms = median_of(rounds)
        targets = evaluate(ms, rounds, args.scale_factor)
        info = machine(url, snapshot)
    infos = information(ms, args.scale_factor)
    print_figures(ms, targets, infos)
    print_startup(ms)
    results = Path(args.results)
    block = startup_block(ms, info)
    results.write_text(report(ms, targets, infos, info, data, big, results, block))
    _save(work / "last_run.json", ms)
    print(f"\nwrote {results}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--rows", type=int, default=1_000_000, help="rows in the source CSV")
    p.add_argument("--work", default=str(DEFAULT_WORK), help="work folder (git-ignored)")
    p.add_argument("--postgres-url", default=None, help=f"existing server (or ${URL_ENV})")
    p.add_argument(
        "--no-scale-check",
        "--quick",
        dest="scale_check",
        action="store_false",
        help="skip the --scale-factor x rows check (first load, re-run, incremental)",
    )
    p.add_argument("--scale-factor", type=int, default=10)
    p.add_argument(
        "--calls", type=int, default=7, help="runs of each quick command per round (start-up)"
    )
    p.add_argument(
        "--only",
        choices=["startup"],
        help="startup: only the start-up part (baselines, the quick commands on the embedded "
        "default and on PostgreSQL), no load data or steps; rewrites only its section of "
        "the results",
    )
    p.add_argument(
        "--server-log",
        action="store_true",
        help="log every statement's duration on the throwaway server and add server-side "
        "seconds per statement class to the report",
    )
    p.add_argument(
        "--repeat",
        type=int,
        default=None,
        help="rounds of every step (default 3; 1 with --only startup); the report shows the "
        "median time and the highest RSS",
    )
    p.add_argument(
        "--snapshot",
        metavar="REV",
        help="benchmark pipeledger/ as committed at git revision REV (e.g. HEAD) instead of "
        "the working tree, which others may be editing during the run",
    )
    p.add_argument("--seed", type=int, default=SEED)
    p.add_argument("--results", default=str(DEFAULT_RESULTS))
    # internal: one step in this (fresh) process
    p.add_argument(
        "--step",
        choices=["generate", "raw-copy", "hand-merge", "run", "backfill", "backfill-full"],
        help=argparse.SUPPRESS,
    )
    p.add_argument("--url", help=argparse.SUPPRESS)
    p.add_argument("--changed", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--new", type=int, default=0, help=argparse.SUPPRESS)
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
