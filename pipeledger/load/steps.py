"""Timing the steps of a load. Extract, transform and staging interleave batch by batch,
so each step accumulates the time spent in it; a step's result is an immutable value."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Literal

from pipeledger.load.result import StepResult

STEPS = ("extract", "transform", "quality", "load")


@dataclass
class _Step:
    started_at: datetime | None = None
    ended_at: datetime | None = None
    seconds: float = 0.0


@dataclass
class StepClock:
    """Accumulates time per step; knows which step was running when something failed."""

    steps: dict[str, _Step] = field(default_factory=lambda: {name: _Step() for name in STEPS})
    active: list[str] = field(default_factory=list)
    failed: str | None = None

    @contextmanager
    def measure(self, name: str) -> Iterator[None]:
        step = self.steps[name]
        step.started_at = step.started_at or datetime.now(UTC)
        self.active.append(name)
        begin = time.monotonic()
        try:
            yield
        except BaseException:
            self.failed = self.failed or name
            raise
        finally:
            elapsed = time.monotonic() - begin
            step.seconds += elapsed
            self.active.pop()
            for outer in self.active:  # nested steps do not count twice
                self.steps[outer].seconds -= elapsed
            step.ended_at = datetime.now(UTC)

    def results(
        self,
        rows: Mapping[str, tuple[int | None, int | None]],
        bytes_read: int,
        rejected: Mapping[str, int] | None = None,
    ) -> list[StepResult]:
        out = []
        for name, step in self.steps.items():
            if step.started_at is None:
                continue
            rows_in, rows_out = rows.get(name, (None, None))
            status: Literal["success", "failed"] = "failed" if self.failed == name else "success"
            out.append(
                StepResult(
                    name=name,
                    started_at=step.started_at,
                    ended_at=step.ended_at or step.started_at + timedelta(seconds=step.seconds),
                    duration_ms=max(0, int(step.seconds * 1000)),
                    rows_in=rows_in,
                    rows_out=rows_out,
                    rows_rejected=(rejected or {}).get(name),
                    bytes=bytes_read if name == "extract" else None,
                    status=status,
                )
            )
        return out
