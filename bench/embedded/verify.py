"""Every tool's table checked against the generator's expected state (``expected_<size>``
of :mod:`bench.common.peers`): row and key counts, exact sums of every column, the status
counts, how many rows carry a batch-2 cursor, and that a sample of the changed keys carries
it exactly when batch 2 has been applied. Read by the benchmark's own process after each
timed step, untimed."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common.peers import CUTOFF, PeerData

SUMS = [
    "n",
    "sum_order_id",
    "sum_customer_id",
    "sum_line_item_count",
    "sum_amount_cents",
    "sum_order_date_days",
    "sum_updated_us",
    "n_cursor_ge_2025",
]
# pipeledger's SQLite target: decimals and instants as text (ISO 8601 with microseconds, in
# UTC), so the sums are taken of their numbers; seconds and microseconds apart (a sum of
# 1M epoch microseconds overflows SQLite's 64-bit integers)
SQLITE_SUMS = """
SELECT count(*), sum(order_id), sum(customer_id), sum(line_item_count),
       sum(CAST(round(CAST(total_amount AS REAL) * 100) AS INTEGER)),
       sum(CAST(julianday(order_date) - julianday('1970-01-01') AS INTEGER)),
       sum(unixepoch(substr(updated_at, 1, 19))),
       sum(CAST(substr(updated_at, 21, 6) AS INTEGER)),
       sum(updated_at >= ?), count(DISTINCT order_id)
FROM orders"""
DUCKDB_SUMS = """
SELECT count(*), sum(order_id::HUGEINT), sum(customer_id::HUGEINT),
       sum(line_item_count::HUGEINT), sum(round(total_amount * 100)::HUGEINT),
       sum(datediff('day', DATE '1970-01-01', order_date)::HUGEINT),
       sum(epoch_us(updated_at)::HUGEINT),
       count(*) FILTER (WHERE updated_at >= ?::TIMESTAMPTZ), count(DISTINCT order_id)
FROM orders"""


@dataclass(frozen=True)
class Verdict:
    """Whether a table is the expected state; what differs if not."""

    correct: bool
    rows: int
    differences: tuple[str, ...]


def _sqlite_cutoff() -> str:
    return CUTOFF.replace("+00:00", ".000000+00:00")  # the stored text of the instant


def _compare(
    data: PeerData, batches: int, got: dict[str, int], statuses: dict[str, int], sample: int
) -> Verdict:
    expected = data.expected()
    state = expected["b2" if batches == 2 else "b1"]
    wrong = [f"{k}: {got[k]} != {state[k]}" for k in SUMS if int(got[k]) != int(state[k])]
    if got["keys"] != state["n"]:
        wrong.append(f"distinct keys: {got['keys']} != {state['n']}")
    if statuses != state["status_counts"]:
        wrong.append(f"status counts: {statuses} != {state['status_counts']}")
    ids = expected["sample_updated_ids"]
    if sample != (len(ids) if batches == 2 else 0):
        wrong.append(f"{sample} of {len(ids)} sampled changed keys carry a batch-2 cursor")
    return Verdict(not wrong, int(got["n"]), tuple(wrong))


def _named(row: Sequence[Any]) -> dict[str, int]:
    return dict(zip([*SUMS, "keys"], (int(v or 0) for v in row), strict=True))


def sqlite_table(path: Path, data: PeerData, batches: int) -> Verdict:
    """pipeledger's target ``orders`` in the SQLite file at ``path``."""
    ids = data.expected()["sample_updated_ids"]
    cutoff = _sqlite_cutoff()
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        row = list(conn.execute(SQLITE_SUMS, [cutoff]).fetchone())
        seconds, micros = row.pop(6), row.pop(6)
        row.insert(6, int(seconds) * 1_000_000 + int(micros))
        statuses = dict(conn.execute("SELECT status, count(*) FROM orders GROUP BY 1"))
        marks = ", ".join("?" * len(ids))
        sample = conn.execute(
            f"SELECT count(*) FROM orders WHERE order_id IN ({marks}) AND updated_at >= ?",
            [*ids, cutoff],
        ).fetchone()[0]
    conn.close()
    return _compare(data, batches, _named(row), statuses, int(sample))


def duckdb_table(path: Path, data: PeerData, batches: int) -> Verdict:
    """The DuckDB peer's table ``orders`` in the file at ``path``."""
    import duckdb

    ids = data.expected()["sample_updated_ids"]
    conn = duckdb.connect(str(path), read_only=True)
    try:
        row = conn.execute(DUCKDB_SUMS, [CUTOFF]).fetchone()
        assert row is not None
        statuses = dict(conn.execute("SELECT status, count(*) FROM orders GROUP BY 1").fetchall())
        marks = ", ".join("?" * len(ids))
        found = conn.execute(
            f"SELECT count(*) FROM orders WHERE order_id IN ({marks}) "
            "AND updated_at >= ?::TIMESTAMPTZ",
            [*ids, CUTOFF],
        ).fetchone()
    finally:
        conn.close()
    sample = int(found[0]) if found else -1
    return _compare(data, batches, _named(row), statuses, sample)
