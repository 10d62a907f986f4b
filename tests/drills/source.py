"""A seeded generator of order batches, written as CSV files, that remembers every row.

Cursors are integer microseconds since the Unix epoch (UTC), so that the model compares
them exactly. The generator never emits two *different* versions of one key at one cursor
(only identical re-sent copies), so the merge's tie-break order never matters.
"""

from __future__ import annotations

import bisect
import csv
import random
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

US = 1_000_000
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
BASE = datetime(2024, 1, 1, tzinfo=UTC)
HEADER = ("order_id", "customer_id", "status", "amount", "note", "updated_at")
STATUSES = ("new", "paid", "shipped", "delivered", "cancelled", "returned")
# CSV quoting, empty strings (kept as "", not NULL), separators and non-ASCII text
NOTES = ("", "plain", "with, comma", 'with "quotes"', "ünïcødé ✓", "  padded  ", "x" * 40)

Value = tuple[int, str, int, str, int]


def to_us(moment: datetime) -> int:
    return (moment - EPOCH) // timedelta(microseconds=1)


def to_datetime(us: int) -> datetime:
    return EPOCH + timedelta(microseconds=us)


def iso_z(us: int) -> str:
    return to_datetime(us).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class Row:
    order_id: int
    customer_id: int
    status: str
    amount_cents: int
    note: str
    cursor: int

    def value(self) -> Value:
        """What the target must hold for this key (the key itself aside)."""
        return (self.customer_id, self.status, self.amount_cents, self.note, self.cursor)

    def csv_fields(self) -> list[str]:
        sign, cents = ("-" if self.amount_cents < 0 else ""), abs(self.amount_cents)
        amount = f"{sign}{cents // 100}.{cents % 100:02d}"
        fields = [self.order_id, self.customer_id, self.status, amount, self.note]
        return [*map(str, fields), iso_z(self.cursor)]


class SourceRows:
    """Every row written so far, searchable by cursor range."""

    def __init__(self) -> None:
        self._rows: list[Row] = []
        self._sorted: list[Row] = []
        self._cursors: list[int] = []

    def extend(self, rows: list[Row]) -> None:
        self._rows.extend(rows)
        self._sorted = []  # re-sorted on the next range query

    def __len__(self) -> int:
        return len(self._rows)

    def __iter__(self) -> Iterator[Row]:
        return iter(self._rows)

    def _index(self) -> None:
        if len(self._sorted) != len(self._rows):
            self._sorted = sorted(self._rows, key=lambda r: r.cursor)
            self._cursors = [r.cursor for r in self._sorted]

    def between(self, low: int | None, high: int | None = None) -> list[Row]:
        """Rows with ``low <= cursor <= high`` (an open side when None)."""
        self._index()
        start = 0 if low is None else bisect.bisect_left(self._cursors, low)
        stop = len(self._cursors) if high is None else bisect.bisect_right(self._cursors, high)
        return self._sorted[start:stop]

    def count_between(self, low: int | None, high: int | None = None) -> int:
        self._index()
        start = 0 if low is None else bisect.bisect_left(self._cursors, low)
        stop = len(self._cursors) if high is None else bisect.bisect_right(self._cursors, high)
        return max(stop - start, 0)

    def bounds(self) -> tuple[int, int] | None:
        self._index()
        return (self._cursors[0], self._cursors[-1]) if self._cursors else None


class OrderSource:
    """Batches of orders: new keys, newer versions, late rows, rows beyond the lateness,
    rows on the window's boundary and identical re-sent copies."""

    def __init__(self, seed: int, lateness_us: int, start: datetime = BASE) -> None:
        self.rng = random.Random(seed)
        self.lateness_us = lateness_us
        self.clock = to_us(start)  # the next batch's fresh cursors start here
        self.next_key = 1
        self.newest: dict[int, Row] = {}  # key -> its newest version
        self.taken: dict[int, set[int]] = {}  # key -> cursors used (no two versions at one)
        self.rows = SourceRows()
        self.files = 0

    @property
    def top(self) -> int | None:
        """The greatest cursor emitted so far."""
        bounds = self.rows.bounds()
        return None if bounds is None else bounds[1]

    def _row(self, key: int, cursor: int) -> Row:
        r = self.rng
        amount = r.randint(-50_000, 99_999_999_99)  # numeric(12,2), negative amounts too
        row = Row(key, r.randint(1, 50_000), r.choice(STATUSES), amount, r.choice(NOTES), cursor)
        self.taken.setdefault(key, set()).add(cursor)
        newest = self.newest.get(key)
        if newest is None or cursor > newest.cursor:
            self.newest[key] = row
        return row

    def _free_cursor(self, key: int, low: int, high: int) -> int | None:
        taken = self.taken.get(key, set())
        for _ in range(20):
            cursor = self.rng.randint(low, max(low, high))
            if cursor not in taken:
                return cursor
        return None

    def _fresh_key(self) -> int:
        self.next_key += 1
        return self.next_key - 1

    def new_keys(self, n: int, span_s: int = 3600) -> list[Row]:
        """New keys with cursors in the next ``span_s`` seconds."""
        low, high = self.clock, self.clock + span_s * US
        self.clock = high + 1
        return [self._row(k, self.rng.randint(low, high)) for k in self._keys(n)]

    def _keys(self, n: int) -> list[int]:
        return [self._fresh_key() for _ in range(n)]

    def newer_versions(self, n: int, span_s: int = 3600) -> list[Row]:
        """Newer versions of existing keys, cursors in the next ``span_s`` seconds."""
        if not self.newest:
            return []
        low, high = self.clock, self.clock + span_s * US
        self.clock = high + 1
        keys = self.rng.sample(sorted(self.newest), min(n, len(self.newest)))
        return [self._row(k, self.rng.randint(low, high)) for k in keys]

    def late(self, n: int, within_s: int) -> list[Row]:
        """Rows up to ``within_s`` seconds behind the newest cursor: half new keys, half
        versions of existing keys newer than their stored newest (late, not a regression)."""
        top = self.top
        if top is None:
            return []
        low = top - within_s * US
        out = [self._row(k, self.rng.randint(low, top)) for k in self._keys((n + 1) // 2)]
        for key in self.rng.sample(sorted(self.newest), min(n // 2, len(self.newest))):
            cursor = self._free_cursor(key, max(low, self.newest[key].cursor + 1), top)
            if cursor is not None and cursor > self.newest[key].cursor:
                out.append(self._row(key, cursor))
        return out

    def beyond_lateness(self, n: int) -> list[Row]:
        """New keys more than the lateness behind the newest cursor: incremental runs never
        read them, only a backfill lands them."""
        top = self.top
        if top is None:
            return []
        high = top - self.lateness_us - 60 * US
        low = high - 6 * 3600 * US
        return [self._row(k, self.rng.randint(low, high)) for k in self._keys(n)]

    def older_versions(self, n: int) -> list[Row]:
        """Corrections: versions of existing keys older than their newest, within the
        lateness (``update`` lets them replace a stored newer row when they win a run)."""
        top = self.top
        if top is None or not self.newest:
            return []
        out = []
        for key in self.rng.sample(sorted(self.newest), min(n, len(self.newest))):
            newest = self.newest[key].cursor
            cursor = self._free_cursor(key, max(top - self.lateness_us, newest - 3600 * US), newest)
            if cursor is not None and cursor < newest:
                out.append(self._row(key, cursor))
        return out

    def boundary(self, watermark: int) -> list[Row]:
        """New keys exactly at ``watermark - lateness`` (an incremental run must read it), one
        microsecond before (it must not) and exactly at the watermark."""
        low = watermark - self.lateness_us
        return [self._row(self._fresh_key(), c) for c in (low, low - 1, watermark)]

    def copies(self, n: int) -> list[Row]:
        """Identical re-sent copies of versions already emitted."""
        if not len(self.rows):
            return []
        pool = list(self.rows)
        return [pool[self.rng.randrange(len(pool))] for _ in range(n)]

    def mixed(self, n: int, late_within_s: int) -> list[Row]:
        """A typical delivery: mostly new keys, then updates, late rows and copies."""
        rows = self.new_keys(n * 6 // 10, span_s=4 * 3600)
        rows += self.newer_versions(n * 25 // 100, span_s=4 * 3600)
        rows += self.late(n * 10 // 100, late_within_s)
        rows += self.copies(n * 5 // 100)
        return rows

    def write(self, folder: Path, rows: list[Row]) -> Path | None:
        """Write ``rows`` (shuffled) as the next CSV file; it appears atomically, so a run
        never reads half of it. Nothing is written for no rows."""
        if not rows:
            return None
        self.rng.shuffle(rows)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"orders_{self.files:05d}.csv"
        partial = folder / f".{path.name}.partial"
        with partial.open("w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(HEADER)
            writer.writerows(row.csv_fields() for row in rows)
        partial.replace(path)
        self.files += 1
        self.rows.extend(rows)
        return path
