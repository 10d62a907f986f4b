"""Every tool's silver and gold against a full recompute from bronze, in the warehouse:
the rows each side has that the other lacks (``EXCEPT ALL`` both ways), so a stale, missing,
duplicated or wrong row is counted, whatever its column."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg

from bench.models.project import BRONZE, SILVER_COLUMNS, gold_sql, silver_sql

GOLD_COLUMNS = "order_date, revenue, orders"


@dataclass(frozen=True)
class Verdict:
    """How a tool's tables differ from the recompute (0 and 0: equal)."""

    silver_rows: int
    silver_differing: int  # rows in one side and not the other, both ways
    gold_rows: int
    gold_differing: int

    @property
    def equal(self) -> bool:
        return self.silver_differing == 0 and self.gold_differing == 0

    def describe(self) -> str:
        if self.equal:
            return f"equal ({self.silver_rows:,} silver rows, {self.gold_rows:,} days)"
        return (
            f"differs: {self.silver_differing:,} silver rows, {self.gold_differing:,} gold "
            f"rows not in both ({self.silver_rows:,} silver rows, {self.gold_rows:,} days)"
        )


def _differing(conn: psycopg.Connection[tuple[Any, ...]], got: str, want: str) -> int:
    row = conn.execute(
        f"SELECT (SELECT count(*) FROM (({got}) EXCEPT ALL ({want})) a)"
        f" + (SELECT count(*) FROM (({want}) EXCEPT ALL ({got})) b)"
    ).fetchone()
    return int(row[0]) if row else -1


def verify(url: str, schema: str) -> Verdict:
    """``schema.silver_orders`` and ``schema.gold_daily`` against silver and gold recomputed
    from ``bronze.orders`` as it is now."""
    recomputed_silver = f"SELECT {SILVER_COLUMNS} FROM ({silver_sql(BRONZE)}) s"
    recomputed_gold = gold_sql(f"({recomputed_silver}) r")
    silver = f"SELECT {SILVER_COLUMNS} FROM {schema}.silver_orders"
    gold = f"SELECT {GOLD_COLUMNS} FROM {schema}.gold_daily"
    with psycopg.connect(url) as conn:
        counts = conn.execute(
            f"SELECT (SELECT count(*) FROM {schema}.silver_orders),"
            f" (SELECT count(*) FROM {schema}.gold_daily)"
        ).fetchone()
        assert counts is not None
        return Verdict(
            silver_rows=int(counts[0]),
            silver_differing=_differing(conn, silver, recomputed_silver),
            gold_rows=int(counts[1]),
            gold_differing=_differing(conn, gold, recomputed_gold),
        )
