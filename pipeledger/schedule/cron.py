"""Cron expressions in a time zone, and the intervals between their firings.

A schedule fires at the instants its cron expression names, read in its time zone (a
wall-clock time that a DST change skips fires at the first instant after the gap; one
that it repeats fires once). Between two consecutive firings lies one **interval**,
``[start, end)``: the run for it is due from ``end`` on, so ``0 2 * * *`` runs at 02:00
for the day that has just ended there.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

if TYPE_CHECKING:  # imported where a schedule is read: a run without one does not need it
    from croniter import croniter

_TICK = timedelta(microseconds=1)


def check_cron(expression: str) -> str:
    """``expression`` if it is a five-field cron expression, else ValueError."""
    from croniter import croniter

    if len(expression.split()) != 5 or not croniter.is_valid(expression):
        raise ValueError(
            f"{expression!r} is not a cron expression (five fields: minute hour day-of-month "
            "month day-of-week, e.g. '0 2 * * *')"
        )
    return expression


def check_zone(name: str) -> str:
    """``name`` if it is an IANA time zone (``UTC``, ``Europe/Paris``), else ValueError."""
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"{name!r} is not a time zone (use e.g. 'UTC', 'Europe/Paris')") from None
    return name


@dataclass(frozen=True)
class Interval:
    """``[start, end)`` in UTC: what one scheduled run is for."""

    start: datetime
    end: datetime

    @property
    def key(self) -> str:
        """The idempotency key of the interval's run (unique per pipeline in the ledger)."""
        return f"schedule:{self.start.isoformat()}/{self.end.isoformat()}"

    def to_json(self) -> dict[str, str]:
        return {"start": self.start.isoformat(), "end": self.end.isoformat()}


@dataclass(frozen=True)
class Cron:
    expression: str
    zone: str = "UTC"

    def _iterate(self, moment: datetime) -> croniter:
        from croniter import croniter

        return croniter(self.expression, moment.astimezone(ZoneInfo(self.zone)))

    def latest(self, moment: datetime, count: int) -> list[Interval]:
        """The ``count`` latest intervals that have ended by ``moment`` (a firing at
        ``moment`` itself counts), oldest first."""
        steps = self._iterate(moment + _TICK)
        fires = [_utc(steps.get_prev(datetime)) for _ in range(count + 1)]
        fires.reverse()
        return [Interval(a, b) for a, b in itertools.pairwise(fires)]

    def next_fire(self, moment: datetime) -> datetime:
        """The first firing after ``moment``."""
        return _utc(self._iterate(moment).get_next(datetime))

    def following(self, interval: Interval) -> Interval:
        """The interval after ``interval``."""
        return Interval(interval.end, self.next_fire(interval.end))


def _utc(moment: datetime) -> datetime:
    return moment.astimezone(UTC)
