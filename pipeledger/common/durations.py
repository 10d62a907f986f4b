"""Durations as people write them in a config or on a command line (``90m``, ``1d12h``)
and as pipeledger writes them back (``1d2h``)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

_DURATION = re.compile(r"(\d+)\s*(ms|w|d|h|m|s)")
_UNITS = {
    "w": "weeks",
    "d": "days",
    "h": "hours",
    "m": "minutes",
    "s": "seconds",
    "ms": "milliseconds",
}


def parse_duration(text: str) -> timedelta:
    """Parse ``"2h"``, ``"400d"``, ``"1d12h"``, ``"90m"`` or ``"30s"`` into a timedelta."""
    cleaned = text.strip().lower()
    parts = _DURATION.findall(cleaned)
    if not cleaned or _DURATION.sub("", cleaned).strip():
        raise ValueError(
            f"{text!r} is not a duration (use e.g. '30s', '15m', '2h', '400d', '1d12h')"
        )
    total = timedelta()
    for amount, unit in parts:
        total += timedelta(**{_UNITS[unit]: int(amount)})
    return total


def span(seconds: float) -> str:
    """A duration for people: ``1d2h``, ``3h5m``, ``45s``, ``2.5s``, ``350ms``."""
    if round(seconds * 1000) < 1000:
        return f"{round(seconds * 1000)}ms"
    if seconds < 10 and seconds != int(seconds):
        return f"{seconds:.1f}".rstrip("0").rstrip(".") + "s"
    s = int(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size:
            rest = s % size
            return f"{s // size}{unit}" + (span(rest) if rest and unit != "m" else "")
    return f"{s}s"


def parse_moment(text: str, now: datetime) -> datetime:
    """A duration back from ``now`` (``7d``, ``12h``) or an ISO-8601 time (UTC when it has
    no offset); ValueError otherwise."""
    try:
        return now - parse_duration(text)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(
            f"{text!r}: use a duration back from now (7d, 12h) or an ISO time"
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
