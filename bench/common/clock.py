"""One clock for every benchmark, and the statistics their reports print."""

from __future__ import annotations

import statistics
import threading
from collections import defaultdict
from collections.abc import Callable, Sequence

# what a statement is, for a report (None: not one it counts), from the statement
# hook's kind and text (pipeledger.warehouse.session.observe_statements)
Classify = Callable[[str, str], str | None]


class Clock:
    """Accumulated seconds, and how many times, per phase. Safe to fill from several
    threads (the ledger's heartbeat runs statements on its own)."""

    def __init__(self) -> None:
        self.totals: dict[str, float] = defaultdict(float)
        self.counts: dict[str, int] = defaultdict(int)
        self._lock = threading.Lock()

    def add(self, phase: str, seconds: float) -> None:
        with self._lock:
            self.totals[phase] += seconds
            self.counts[phase] += 1

    def get(self, phase: str) -> float:
        return self.totals.get(phase, 0.0)

    def statements(self, classify: Classify) -> Callable[[str, str, float], None]:
        """An observer for ``observe_statements``: each statement's seconds go to the
        phase ``classify`` names."""

        def observe(kind: str, sql: str, seconds: float) -> None:
            phase = classify(kind, sql)
            if phase is not None:
                self.add(phase, seconds)

        return observe


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), int(-(-q * len(ordered) // 100))))
    return ordered[rank - 1]


def spread(values: Sequence[float], digits: int = 2) -> str:
    """``median M (min A, max B)``: how much rounds of the same step differ."""
    if not values:
        return "-"
    low, mid, high = min(values), statistics.median(values), max(values)
    return f"median {mid:.{digits}f} (min {low:.{digits}f}, max {high:.{digits}f})"
