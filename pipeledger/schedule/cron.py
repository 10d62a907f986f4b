"""Cron expressions in a time zone, and the intervals between their firings.

A schedule fires at the instants its cron expression names, read on the wall clock of its
time zone. The expression is matched against wall-clock times (a calendar without DST), and
each matching wall-clock time becomes one instant:

- a time that occurs once is that instant;
- a time that a DST change repeats (``02:30`` on the night clocks go back) fires once, at
  its **first** occurrence (the summer-time one);
- a time that a DST change skips (``02:30`` on the night clocks go forward) fires once, at
  the **first instant after the gap** (``03:00`` summer time); several skipped times and a
  firing at the end of the gap itself make one firing there.

So ``0 2 * * *`` in Europe/Berlin fires exactly once every day, and an hourly ``0 * * * *``
there has one two-hour interval on the night clocks go back (use ``UTC`` for strictly
hourly slots). Between two consecutive firings lies one **interval**, ``[start, end)``: the
run for it is due from ``end`` on, so ``0 2 * * *`` runs at 02:00 for the day that has just
ended there.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pipeledger.errors import ConfigError

# croniter is imported where a schedule is read: a run without one does not need it

# A wall-clock time up to this much later than an instant's can still name an earlier
# instant (the repeated hour when clocks go back: at most 2 h anywhere in use)
_FOLD_SLACK = timedelta(hours=3)
HORIZON_YEARS = 5  # a schedule must fire within this many years of now to be accepted


def check_cron(expression: str) -> str:
    """``expression`` if it is a five-field cron expression that fires within
    :data:`HORIZON_YEARS` years, else ValueError."""
    from croniter import CroniterBadDateError, croniter

    if len(expression.split()) != 5 or not croniter.is_valid(expression):
        raise ValueError(
            f"{expression!r} is not a cron expression (five fields: minute hour day-of-month "
            "month day-of-week, e.g. '0 2 * * *')"
        )
    now = datetime.now(UTC).replace(tzinfo=None, second=0, microsecond=0)
    try:
        first = croniter(expression, now).get_next(datetime)
    except CroniterBadDateError:
        first = None
    if first is None or first > now.replace(year=now.year + HORIZON_YEARS, day=1):
        raise ValueError(
            f"{expression!r} never fires (no date matches it in the next {HORIZON_YEARS} "
            "years, e.g. 30 February): nothing would ever run"
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


def _wall(moment: datetime, zone: ZoneInfo) -> datetime:
    """The wall-clock time (naive) that ``moment`` shows in ``zone``."""
    return moment.astimezone(zone).replace(tzinfo=None, fold=0)


def instant(wall: datetime, zone: ZoneInfo) -> datetime:
    """The instant (UTC) a schedule fires for the wall-clock time ``wall`` (module
    docstring): its first occurrence, or the first instant after the gap that skips it."""
    first = wall.replace(tzinfo=zone, fold=0).astimezone(UTC)
    if _wall(first, zone) == wall:
        return first  # it exists; fold 0 is the earlier of two occurrences
    # in a gap: fold 1 lies before the change and fold 0 after it; find the change, the
    # first whole second (changes fall on whole seconds) whose wall clock is past ``wall``
    before = int(wall.replace(tzinfo=zone, fold=1).timestamp())
    after = int(first.timestamp()) + 1
    while after - before > 1:
        middle = (before + after) // 2
        if _wall(datetime.fromtimestamp(middle, UTC), zone) >= wall:
            after = middle
        else:
            before = middle
    return datetime.fromtimestamp(after, UTC)


@dataclass(frozen=True)
class Cron:
    expression: str
    zone: str = "UTC"

    def _fires(self, moment: datetime, later: bool) -> Iterator[datetime]:
        """Firings after ``moment`` (ascending) or up to it included (descending), each
        instant once. Raises ConfigError for an expression that no longer fires."""
        zone = ZoneInfo(self.zone)
        start = _wall(moment, zone) if later else _wall(moment, zone) + _FOLD_SLACK
        from croniter import CroniterBadDateError, croniter

        steps = croniter(self.expression, start)
        last = None
        while True:
            try:
                wall = steps.get_next(datetime) if later else steps.get_prev(datetime)
            except CroniterBadDateError:
                raise ConfigError(
                    f"schedule {self.expression!r} ({self.zone}) has no firing "
                    f"{'after' if later else 'up to'} {moment.isoformat()}"
                ) from None
            fire = instant(wall, zone)
            if (fire > moment) != later or fire == last:
                continue  # a wall time of the repeated hour that names the other side
            last = fire
            yield fire

    def latest(self, moment: datetime, count: int) -> list[Interval]:
        """The ``count`` latest intervals that have ended by ``moment`` (a firing at
        ``moment`` itself counts), oldest first."""
        fires = list(itertools.islice(self._fires(moment, later=False), count + 1))
        fires.reverse()
        return [Interval(a, b) for a, b in itertools.pairwise(fires)]

    def next_fire(self, moment: datetime) -> datetime:
        """The first firing after ``moment``."""
        return next(self._fires(moment, later=True))

    def following(self, interval: Interval) -> Interval:
        """The interval after ``interval``."""
        return Interval(interval.end, self.next_fire(interval.end))
