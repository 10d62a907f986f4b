"""Schedules on every calendar: the firings of a cron expression in a time zone against a
reference that walks the clock minute by minute, around every DST change of ten years in
zones of both hemispheres (with 30- and 60-minute changes, and zones that dropped DST).

The rule (README, "Running unattended"): a wall-clock time that occurs twice fires once, at
its first occurrence; one that is skipped fires once, at the first instant after the gap."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from functools import cache
from zoneinfo import ZoneInfo

from hypothesis import given, settings
from hypothesis import strategies as st

from pipeledger.schedule.cron import Cron

ZONES = (
    "Europe/Berlin",
    "America/New_York",
    "Australia/Sydney",  # southern hemisphere: forward in October, back in April
    "Australia/Lord_Howe",  # changes by 30 minutes
    "America/Santiago",
    "Asia/Tehran",  # dropped DST in 2022
)
YEARS = (2020, 2030)  # ten years of changes
MINUTE = timedelta(minutes=1)
WARM_UP = timedelta(hours=3)  # longer than any repeated hour: its first occurrence is seen


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


# -- the reference: a clock walked minute by minute -------------------------------------


def _values(field: str, low: int, high: int) -> set[int]:
    found: set[int] = set()
    for part in field.split(","):
        span, _, step = part.partition("/")
        if span == "*":
            first, last = low, high
        elif "-" in span:
            first, last = (int(x) for x in span.split("-"))
        else:
            first = last = int(span)
        found |= set(range(first, last + 1, int(step or 1)))
    return found


def matcher(expression: str) -> Callable[[datetime], bool]:
    minute, hour, dom, month, dow = expression.split()
    sets = (_values(minute, 0, 59), _values(hour, 0, 23), _values(month, 1, 12))
    days, weekdays = _values(dom, 1, 31), _values(dow, 0, 6)

    def matches(wall: datetime) -> bool:
        if (wall.minute, wall.hour, wall.month) not in _product(*sets):
            return False
        by_date, by_weekday = wall.day in days, (wall.isoweekday() % 7) in weekdays
        if dom != "*" and dow != "*":  # both restricted: either one (as cron has it)
            return by_date or by_weekday
        return by_date and by_weekday

    return matches


def _product(minutes: set[int], hours: set[int], months: set[int]) -> set[tuple[int, int, int]]:
    return {(m, h, mo) for m in minutes for h in hours for mo in months}


def reference(expression: str, zone: str, start: datetime, end: datetime) -> list[datetime]:
    """The instants in ``(start, end]`` at which the schedule fires, found by walking the
    clock: a minute whose wall-clock time matches and has not been shown before, or the
    first minute after a jump forward that skipped a matching wall-clock time."""
    matches = matcher(expression)
    tz = ZoneInfo(zone)
    seen: set[datetime] = set()
    fires = []
    moment = start - WARM_UP
    shown = moment.astimezone(tz).replace(tzinfo=None) - MINUTE
    while moment <= end:
        wall = moment.astimezone(tz).replace(tzinfo=None)
        skipped = _between(shown, wall)
        fire = any(matches(s) for s in skipped) or (matches(wall) and wall not in seen)
        seen.add(wall)
        if fire and moment > start:
            fires.append(moment)
        shown, moment = wall, moment + MINUTE
    return fires


def _between(before: datetime, after: datetime) -> Iterator[datetime]:
    """The wall-clock minutes a jump forward from ``before`` to ``after`` skipped."""
    wall = before + MINUTE
    while wall < after:
        yield wall
        wall += MINUTE


@cache
def changes(zone: str) -> tuple[datetime, ...]:
    """Every change of the zone's UTC offset in :data:`YEARS` (to the hour after it)."""
    tz = ZoneInfo(zone)
    moment, end = datetime(YEARS[0], 1, 1, tzinfo=UTC), datetime(YEARS[1], 1, 1, tzinfo=UTC)
    found, offset = [], moment.astimezone(tz).utcoffset()
    while moment < end:
        moment += timedelta(hours=1)
        now = moment.astimezone(tz).utcoffset()
        if now != offset:
            found.append(moment)
            offset = now
    return tuple(found)


# -- the schedule under test ------------------------------------------------------------


def fires(cron: Cron, start: datetime, end: datetime) -> list[datetime]:
    found, moment = [], start
    while (moment := cron.next_fire(moment)) <= end:
        found.append(moment)
    return found


def compare(expression: str, zone: str, change: datetime) -> None:
    start, end = change - timedelta(days=1), change + timedelta(days=1)
    expected = reference(expression, zone, start, end)
    cron = Cron(expression, zone)
    assert fires(cron, start, end) == expected, (expression, zone, change)
    if len(expected) >= 2:  # looking back gives the same firings
        intervals = cron.latest(end, len(expected) - 1)
        assert [i.end for i in intervals] == expected[1:], (expression, zone, change)
        assert [i.start for i in intervals] == expected[:-1]


def test_every_change_of_ten_years_in_every_zone_fires_a_daily_2am_once() -> None:
    for zone in ZONES:
        assert len(changes(zone)) >= 4, zone  # DST changes there (Tehran until 2022)
        for change in changes(zone):
            compare("0 2 * * *", zone, change)
            compare("30 2 * * *", zone, change)


MINUTES = ("0", "30", "15,45", "*/20", "0-5", "59")
HOURS = ("*", "0", "1", "2", "3", "1-3", "*/2", "0,2,23")
DAYS = ("*", "1", "15", "28-31")
WEEKDAYS = ("*", "0", "1-5", "6")

expressions = st.builds(
    lambda m, h, d, w: f"{m} {h} {d} * {w}",
    st.sampled_from(MINUTES),
    st.sampled_from(HOURS),
    st.sampled_from(DAYS),
    st.sampled_from(WEEKDAYS),
)


@settings(max_examples=60, deadline=None)
@given(expression=expressions, zone=st.sampled_from(ZONES), which=st.integers(0, 10_000))
def test_any_schedule_around_any_change_matches_the_reference(
    expression: str, zone: str, which: int
) -> None:
    every = changes(zone)
    compare(expression, zone, every[which % len(every)])


def test_a_repeated_wall_clock_time_fires_once_at_its_first_occurrence() -> None:
    berlin = Cron("0 2 * * *", "Europe/Berlin")  # 2024-10-27: 02:00 at 00:00Z and 01:00Z
    (last,) = berlin.latest(at("2024-10-27T12:00:00Z"), 1)
    assert (last.start, last.end) == (at("2024-10-26T00:00:00Z"), at("2024-10-27T00:00:00Z"))
    assert berlin.next_fire(last.end) == at("2024-10-28T01:00:00Z")  # 02:00 CET
    hourly = Cron("0 * * * *", "Europe/Berlin")  # 02:00 once: one two-hour interval
    ends = [i.end for i in hourly.latest(at("2024-10-27T03:00:00Z"), 3)]
    assert ends == [
        at("2024-10-27T00:00:00Z"),
        at("2024-10-27T02:00:00Z"),
        at("2024-10-27T03:00:00Z"),
    ]


def test_a_skipped_wall_clock_time_fires_once_at_the_first_instant_after_the_gap() -> None:
    berlin = Cron("30 2 * * *", "Europe/Berlin")  # 2024-03-31: 02:00 -> 03:00 at 01:00Z
    assert berlin.next_fire(at("2024-03-30T12:00:00Z")) == at("2024-03-31T01:00:00Z")
    assert berlin.next_fire(at("2024-03-31T01:00:00Z")) == at("2024-04-01T00:30:00Z")
    several = Cron("*/20 2,3 * * *", "Europe/Berlin")  # 02:00, 02:20, 02:40 and 03:00: one
    start = at("2024-03-31T00:00:00Z")
    expected = ["01:00", "01:20", "01:40"]  # 03:00 (for the four), 03:20, 03:40 CEST
    found = fires(several, start, at("2024-03-31T02:00:00Z"))
    assert found == [at(f"2024-03-31T{t}:00Z") for t in expected]
