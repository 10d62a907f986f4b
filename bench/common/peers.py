"""The peers' orders source: the dataset other tools' benchmarks of the same work use (an
orders table written the way another tool writes it: quoted CSV headers and text,
``2024-04-28 22:09:56.666549Z`` timestamps, and the same rows as Parquet), generated
here with the same seeds, so that the files are byte for byte the peers' own.

For a size N (100k or 1M rows), under ``work/peers/``:

- ``orders_<size>.csv`` / ``.parquet``: batch 1, N rows, ``order_id`` from
  10,000,000,000 up;
- ``orders_<size>_b2.csv`` / ``.parquet``: batch 2, 0.15 N rows: 10% of batch 1's keys
  again with a newer ``updated_at`` (January 2025) and another amount, status and item
  count, and 5% new keys;
- ``expected_<size>.json``: order-independent aggregates of the table after batch 1
  (``b1``) and after batch 1 + batch 2 (``b2``), which every tool's result is checked
  against (:mod:`bench.embedded.verify`).

``python -m bench.common.peers --size 1m`` writes them (1M rows: ~8 s, 77 + 23 MB, and
12 + 4 MB for batch 2); they are reused while ``expected_<size>.json`` is there.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from bench.common.process import WORK

SIZES = {"100k": 100_000, "1m": 1_000_000}
STATUSES = np.array(["pending", "paid", "shipped", "cancelled"])
KEY_BASE = 10_000_000_000
EPOCH_2020 = np.datetime64("2020-01-01", "D")
TS_2024 = np.datetime64("2024-01-01T00:00:00", "us")
TS_2025 = np.datetime64("2025-01-01T00:00:00", "us")
CUTOFF = "2025-01-01T00:00:00+00:00"  # every batch-2 row has updated_at >= this
SEED = 20240601
SCHEMA = pa.schema(
    [
        ("order_id", pa.int64()),
        ("customer_id", pa.int32()),
        ("order_date", pa.date32()),
        ("total_amount", pa.decimal128(12, 2)),
        ("status", pa.string()),
        ("line_item_count", pa.int32()),
        ("updated_at", pa.timestamp("us", tz="UTC")),
    ]
)
# the columns as a pipeledger pipeline declares them for the CSV (its text has no types)
CSV_COLUMNS = {
    "customer_id": "integer",
    "order_date": "date",
    "total_amount": "numeric(12,2)",
    "line_item_count": "integer",
    "updated_at": "timestamptz",
}
Columns = dict[str, np.ndarray[Any, Any]]


@dataclass(frozen=True, kw_only=True)
class PeerData:
    """The files of one size."""

    folder: Path
    size: str
    rows: int
    batch2_rows: int

    def file(self, batch: int, ext: str) -> Path:
        """Batch 1 or 2 as ``csv`` or ``parquet``."""
        stem = f"orders_{self.size}" if batch == 1 else f"orders_{self.size}_b2"
        return self.folder / f"{stem}.{ext}"

    def expected(self) -> dict[str, Any]:
        found: dict[str, Any] = json.loads((self.folder / f"expected_{self.size}.json").read_text())
        return found


def _table(cols: Columns) -> pa.Table:
    # decimal128(12,2) whose unscaled 128-bit value is the (positive) cent amount
    cents = cols["cents"]
    raw = np.zeros((len(cents), 2), dtype=np.int64)
    raw[:, 0] = cents
    amount = pa.Array.from_buffers(
        pa.decimal128(12, 2), len(cents), [None, pa.py_buffer(raw.tobytes())]
    )
    updated = pa.array(cols["updated_us"].astype("datetime64[us]"))
    return pa.table(
        {
            "order_id": pa.array(cols["order_id"], pa.int64()),
            "customer_id": pa.array(cols["customer_id"], pa.int32()),
            "order_date": pa.array(cols["order_date"].astype("datetime64[D]")).cast(pa.date32()),
            "total_amount": amount,
            "status": pa.array(STATUSES[cols["status_idx"]]),
            "line_item_count": pa.array(cols["items"], pa.int32()),
            "updated_at": updated.cast(pa.timestamp("us", tz="UTC")),
        },
        schema=SCHEMA,
    )


def _aggregates(cols: Columns) -> dict[str, Any]:
    """Exact integers over a table state (numpy arrays of its columns)."""
    names, counts = np.unique(STATUSES[cols["status_idx"]], return_counts=True)
    days = (cols["order_date"] - np.datetime64("1970-01-01", "D")).astype(np.int64)
    micros = (cols["updated_us"] - np.datetime64("1970-01-01T00:00:00", "us")).astype(np.int64)
    return {
        "n": len(cols["order_id"]),
        "sum_order_id": int(cols["order_id"].astype(object).sum()),
        "sum_customer_id": int(cols["customer_id"].astype(np.int64).sum()),
        "sum_line_item_count": int(cols["items"].astype(np.int64).sum()),
        "sum_amount_cents": int(cols["cents"].astype(np.int64).sum()),
        "sum_order_date_days": int(days.sum()),
        "sum_updated_us": int(micros.astype(object).sum()),
        "status_counts": {str(s): int(c) for s, c in zip(names, counts, strict=True)},
        "n_cursor_ge_2025": int((cols["updated_us"] >= TS_2025).sum()),
    }


def _write(table: pa.Table, folder: Path, stem: str) -> None:
    pq.write_table(table, str(folder / f"{stem}.parquet"))
    options = pacsv.WriteOptions(include_header=True, quoting_style="needed")
    pacsv.write_csv(table, str(folder / f"{stem}.csv"), write_options=options)


def _batch1(rng: np.random.Generator, n: int) -> Columns:
    return {
        "order_id": KEY_BASE + np.arange(n, dtype=np.int64),
        "customer_id": rng.integers(1, 200_001, n, dtype=np.int32),
        "order_date": EPOCH_2020 + rng.integers(0, 1827, n),
        "cents": rng.integers(100, 500_001, n, dtype=np.int64),
        "status_idx": rng.integers(0, 4, n),
        "items": rng.integers(1, 21, n, dtype=np.int32),
        "updated_us": TS_2024 + rng.integers(0, 365 * 86400 * 10**6, n).astype("timedelta64[us]"),
    }


def _batch2(rng: np.random.Generator, b1: Columns, n: int) -> tuple[Columns, np.ndarray[Any, Any]]:
    """10% of the keys changed (the indexes of those rows) and 5% new keys; the draws in
    the peers' order, so that the same seed makes the same rows."""
    n_upd, n_new = n // 10, n // 20
    upd = np.sort(rng.choice(n, size=n_upd, replace=False))
    u_cents = rng.integers(100, 500_001, n_upd, dtype=np.int64)
    u_status = rng.integers(0, 4, n_upd)
    u_items = rng.integers(1, 21, n_upd, dtype=np.int32)
    u_ts = TS_2025 + rng.integers(0, 30 * 86400 * 10**6, n_upd).astype("timedelta64[us]")
    new_id = KEY_BASE + n + np.arange(n_new, dtype=np.int64)
    new_cust = rng.integers(1, 200_001, n_new, dtype=np.int32)
    new_date = np.datetime64("2024-12-01", "D") + rng.integers(0, 60, n_new)
    new_cents = rng.integers(100, 500_001, n_new, dtype=np.int64)
    new_status = rng.integers(0, 4, n_new)
    new_items = rng.integers(1, 21, n_new, dtype=np.int32)
    new_ts = TS_2025 + rng.integers(0, 30 * 86400 * 10**6, n_new).astype("timedelta64[us]")
    b2 = {
        "order_id": np.concatenate([b1["order_id"][upd], new_id]),
        "customer_id": np.concatenate([b1["customer_id"][upd], new_cust]),
        "order_date": np.concatenate([b1["order_date"][upd], new_date]),
        "cents": np.concatenate([u_cents, new_cents]),
        "status_idx": np.concatenate([u_status, new_status]),
        "items": np.concatenate([u_items, new_items]),
        "updated_us": np.concatenate([u_ts, new_ts]),
    }
    return b2, upd


def _final(b1: Columns, b2: Columns, upd: np.ndarray[Any, Any]) -> Columns:
    """The table after batch 2: its changed rows replaced, its new rows added."""
    final = {k: v.copy() for k, v in b1.items()}
    for name in ("cents", "status_idx", "items", "updated_us"):
        final[name][upd] = b2[name][: len(upd)]
    return {k: np.concatenate([final[k], b2[k][len(upd) :]]) for k in final}


def generate(folder: Path, size: str) -> PeerData:
    """Write the files of ``size`` into ``folder`` (unless they are there) and say where."""
    n = SIZES[size]
    data = PeerData(folder=folder, size=size, rows=n, batch2_rows=n // 10 + n // 20)
    if (folder / f"expected_{size}.json").exists():
        return data
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(SEED + n)
    b1 = _batch1(rng, n)
    _write(_table(b1), folder, f"orders_{size}")
    b2, upd = _batch2(rng, b1, n)
    _write(_table(b2), folder, f"orders_{size}_b2")
    ids = b1["order_id"][upd][:: max(1, len(upd) // 50)]
    expected = {
        "size": size,
        "n_b1": n,
        "n_b2_rows": data.batch2_rows,
        "n_updated": len(upd),
        "n_new": n // 20,
        "cutoff": CUTOFF,
        "sample_updated_ids": [int(x) for x in ids],
        "b1": _aggregates(b1),
        "b2": _aggregates(_final(b1, b2, upd)),
    }
    (folder / f"expected_{size}.json").write_text(json.dumps(expected, indent=1))
    return data


def main() -> None:
    p = argparse.ArgumentParser(description="write the peers' orders files (see generate)")
    p.add_argument("--size", choices=sorted(SIZES), default="1m")
    p.add_argument("--work", type=Path, default=WORK)
    args = p.parse_args()
    started = time.perf_counter()
    data = generate(args.work / "peers", args.size)
    print(f"{data.folder}: {args.size} in {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
