"""An exact model of the documented semantics for ``on_conflict = "update"`` (unpartitioned,
timestamp cursor), to compare a warehouse with after every step.

* An incremental run stages the source rows with ``cursor >= watermark - lateness`` (every
  row while there is no watermark). Per key the greatest cursor wins; the winner replaces
  the stored row if any value differs. The watermark becomes ``max(old, greatest staged)``.
* A backfill stages ``start <= cursor <= end`` with the same merge and never moves the
  watermark.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tests.drills.source import Row, SourceRows, Value


@dataclass(frozen=True)
class Counts:
    """What a run reports; ``unchanged`` includes superseded copies (pipeline_runs does)."""

    read: int = 0
    inserted: int = 0
    updated: int = 0
    unchanged: int = 0

    @property
    def written(self) -> int:
        return self.inserted + self.updated


@dataclass
class Model:
    lateness_us: int
    target: dict[int, Row] = field(default_factory=dict)
    watermark: int | None = None

    def copy(self) -> Model:
        return Model(self.lateness_us, dict(self.target), self.watermark)

    def window_low(self) -> int | None:
        return None if self.watermark is None else self.watermark - self.lateness_us

    def incremental_rows(self, source: SourceRows) -> int:
        """How many rows an incremental run would read now."""
        return source.count_between(self.window_low())

    def incremental(self, source: SourceRows) -> Counts:
        staged = source.between(self.window_low())
        counts = self._merge(staged)
        if staged:
            top = max(r.cursor for r in staged)
            self.watermark = top if self.watermark is None else max(self.watermark, top)
        return counts

    def backfill(self, source: SourceRows, low: int, high: int) -> Counts:
        return self._merge(source.between(low, high))

    def _merge(self, staged: list[Row]) -> Counts:
        winners: dict[int, Row] = {}
        for row in staged:
            best = winners.get(row.order_id)
            if best is None or row.cursor > best.cursor:
                winners[row.order_id] = row
        inserted = updated = 0
        for key, row in winners.items():
            old = self.target.get(key)
            if old is None:
                inserted += 1
            elif old.value() != row.value():
                updated += 1
            self.target[key] = row
        unchanged = len(staged) - inserted - updated
        return Counts(len(staged), inserted, updated, unchanged)

    def values(self) -> dict[int, Value]:
        return {key: row.value() for key, row in self.target.items()}

    def max_cursor(self) -> int | None:
        return max((r.cursor for r in self.target.values()), default=None)
