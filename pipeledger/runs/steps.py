"""Timing the steps of a load. Extract, transform and staging interleave batch by batch,
so each step accumulates the time spent in it; a step's result is an immutable value.

A step is ``success`` once it has done all its work (:meth:`StepClock.finish`), ``failed``
if the run failed inside it, and ``interrupted`` if it had started but not finished when
the run failed elsewhere (its work rolled back with the run). A step that never started
is not reported."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Literal

StepStatus = Literal["success", "failed", "interrupted"]


@dataclass(frozen=True, kw_only=True)
class StepResult:
    """One step of a load (extract, transform, load) as the ledger records it."""

    name: str
    started_at: datetime
    ended_at: datetime
    duration_ms: int
    rows_in: int | None = None
    rows_out: int | None = None
    rows_rejected: int | None = None
    bytes: int | None = None
    status: StepStatus = "success"


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
    done: set[str] = field(default_factory=set)

    def finish(self, *names: str) -> None:
        """These steps have done all their work."""
        self.done.update(name for name in names if self.steps[name].started_at is not None)

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
            status = self._status(name)
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

    def _status(self, name: str) -> StepStatus:
        if self.failed == name:
            return "failed"
        return "success" if name in self.done else "interrupted"
