"""The orders source the load, ledger and gate benchmarks read: seeded CSVs of an orders
table (7 columns, key ``order_id``, cursor ``updated_at``), written once under
``bench/work/data-<tag>/`` and reused, and the pipeline that loads them.

``python -m bench.common.orders --rows N ...`` writes them in a subprocess of its own
(:func:`generate_in_child`), so the benchmark's process stays small.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from bench.common.process import json_child

PIPELINE = "orders"
TARGET = "orders"
SEED = 20240601
GEN_CHUNK = 1_000_000
CHANGED_FRACTION = 0.10  # of the keys, changed by the incremental file
NEW_FRACTION = 0.05  # new keys in the incremental file
STATUSES = ["new", "paid", "packed", "shipped", "delivered", "cancelled", "returned"]
BASE_START = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
BASE_SPAN_S = 365 * 86_400
INCR_START = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
INCR_SPAN_S = 7 * 86_400
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
# the same columns as a table's DDL, for the hand-written baselines
DDL = (
    "order_id bigint, qty integer, order_date date, amount numeric(12,2), status text, "
    "customer_id integer, updated_at timestamptz"
)


def pipeline(source: str) -> dict[str, Any]:
    """The orders pipeline over the CSVs in folder ``source``, as a config's mapping."""
    return {
        "source": {"kind": "csv", "path": source},
        "target": TARGET,
        "key": ["order_id"],
        "cursor": "updated_at",
        "on_conflict": "newer_wins",
        "columns": {"amount": "numeric(12,2)"},
    }


def pipeline_toml(source: str) -> str:
    """The same pipeline in a ``pipeledger.toml``."""
    return (
        f"[pipelines.{PIPELINE}]\n"
        f'source = {{ kind = "csv", path = "{source}" }}\ntarget = "{TARGET}"\n'
        'key = ["order_id"]\ncursor = "updated_at"\non_conflict = "newer_wins"\n'
        'columns = { amount = "numeric(12,2)" }\n'
    )


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
    """The CSVs of one size: the base file, the incremental one (if any) and their bounds."""

    base: Path
    incremental: Path | None
    rows: int
    incremental_rows: int
    cursor_min: str
    cursor_max: str
    seconds: float  # to generate them; 0 when reused


def _write(path: Path, chunks: Iterator[pa.Table]) -> tuple[int, Any, Any]:
    """Write ``chunks`` as one CSV; its rows and its cursor's bounds."""
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


def _reused(folder: Path, wanted: dict[str, int]) -> Dataset | None:
    """The dataset already in ``folder`` if it was made with ``wanted``."""
    base, incr = folder / "orders_000.csv", folder / "orders_001.csv"
    manifest = folder / "manifest.json"
    incremental = wanted["changed"] + wanted["new"] > 0
    if not (manifest.exists() and base.exists() and (incr.exists() or not incremental)):
        return None
    saved = json.loads(manifest.read_text())
    if any(saved.get(k) != v for k, v in wanted.items()):
        return None
    return Dataset(
        base=base,
        incremental=incr if incremental else None,
        rows=wanted["rows"],
        incremental_rows=int(saved["incremental_rows"]),
        cursor_min=saved["cursor_min"],
        cursor_max=saved["cursor_max"],
        seconds=0.0,
    )


def generate(work: Path, rows: int, seed: int, changed: int, new: int, tag: str) -> Dataset:
    """Write the source CSV(s) under ``work/data-<tag>/`` unless an identical set is there:
    the base file, and (when ``changed + new > 0``) an incremental file with ``changed``
    existing keys changed and ``new`` new keys."""
    folder = work / f"data-{tag}"
    wanted = {"rows": rows, "seed": seed, "changed": changed, "new": new, "version": 2}
    found = _reused(folder, wanted)
    if found is not None:
        return found
    started = time.perf_counter()
    base = folder / "orders_000.csv"
    n, low, high = _write(base, _base_chunks(rows, seed))
    assert n == rows
    incr, incr_rows = None, 0
    if changed + new > 0:
        incr = folder / "orders_001.csv"
        incr_rows, _, _ = _write(incr, iter([_incremental_table(rows, changed, new, seed)]))
    info = {**wanted, "incremental_rows": incr_rows}
    info |= {"cursor_min": low.isoformat(), "cursor_max": high.isoformat()}
    (folder / "manifest.json").write_text(json.dumps(info, indent=2))
    seconds = time.perf_counter() - started
    return Dataset(base, incr, rows, incr_rows, low.isoformat(), high.isoformat(), seconds)


def generate_in_child(work: Path, rows: int, seed: int, changed: int, new: int) -> Dataset:
    """:func:`generate` in a subprocess: keeps this process small, because a child's
    ``ru_maxrss`` starts from the parent's resident size at fork/exec time."""
    args = ["--work", str(work), "--rows", str(rows), "--seed", str(seed)]
    raw = json_child("bench.common.orders", [*args, "--changed", str(changed), "--new", str(new)])
    incremental = raw["incremental"]
    return Dataset(
        base=Path(raw["base"]),
        incremental=None if incremental is None else Path(incremental),
        rows=int(raw["rows"]),
        incremental_rows=int(raw["incremental_rows"]),
        cursor_min=str(raw["cursor_min"]),
        cursor_max=str(raw["cursor_max"]),
        seconds=float(raw["seconds"]),
    )


def incremental_sizes(rows: int) -> tuple[int, int]:
    """Keys the incremental file changes, and new keys in it, for a base of ``rows``."""
    return int(rows * CHANGED_FRACTION), int(rows * NEW_FRACTION)


def link_source(folder: Path, *files: Path) -> Path:
    """``folder`` holding hard links to exactly ``files`` (a pipeline's source folder)."""
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.iterdir():
        old.unlink()
    for f in files:
        os.link(f, folder / f.name)
    return folder


def main() -> None:
    p = argparse.ArgumentParser(description="write the orders CSVs (see generate)")
    p.add_argument("--work", type=Path, required=True)
    p.add_argument("--rows", type=int, required=True)
    p.add_argument("--seed", type=int, default=SEED)
    p.add_argument("--changed", type=int, default=0)
    p.add_argument("--new", type=int, default=0)
    args = p.parse_args()
    info = generate(args.work, args.rows, args.seed, args.changed, args.new, str(args.rows))
    print(json.dumps(asdict(info), default=str))


if __name__ == "__main__":
    main()
