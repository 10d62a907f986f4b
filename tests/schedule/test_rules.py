"""The pure rules of running unattended: cron intervals, what is due, retry delays, the
clock hook and the new configuration keys."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from pipeledger.common import clock
from pipeledger.common.clock import now
from pipeledger.config.model import parse_config
from pipeledger.errors import ConfigError
from pipeledger.runs.retry import retry_delay
from pipeledger.schedule.cron import Cron, Interval
from pipeledger.schedule.due import plan


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


def test_the_latest_intervals_end_at_the_firings_up_to_now_included() -> None:
    hourly = Cron("0 * * * *")
    intervals = hourly.latest(at("2024-01-01T05:00:00+00:00"), 3)
    assert [(i.start.hour, i.end.hour) for i in intervals] == [(2, 3), (3, 4), (4, 5)]
    assert hourly.next_fire(at("2024-01-01T05:00:00+00:00")) == at("2024-01-01T06:00:00+00:00")


def test_a_daily_schedule_follows_its_time_zone_across_a_dst_change() -> None:
    paris = Cron("0 2 * * *", "Europe/Paris")
    (before,) = paris.latest(at("2024-03-30T12:00:00+00:00"), 1)
    (after,) = paris.latest(at("2024-04-01T12:00:00+00:00"), 1)
    assert before.end == at("2024-03-30T01:00:00+00:00")  # 02:00 CET
    assert after.end == at("2024-04-01T00:00:00+00:00")  # 02:00 CEST
    assert after.key == f"schedule:{after.start.isoformat()}/{after.end.isoformat()}"


def _hours(*ends: int) -> list[Interval]:
    return [Interval(at(f"2024-01-01T{e - 1:02}:00:00+00:00"), at(f"2024-01-01T{e:02}:00:00+00:00"))
            for e in ends]  # fmt: skip


def test_due_without_history_catchup_and_gaps() -> None:
    among = _hours(1, 2, 3, 4)
    assert plan("n", among, True, None, None, frozenset()).due == tuple(among[-1:])
    assert plan("n", among, False, at("2024-01-01T01:00:00+00:00"), None, frozenset()).due == (
        among[-1],
    )
    since = at("2024-01-01T01:00:00+00:00")
    held = frozenset({among[0].key, among[2].key})
    caught = plan("n", among, True, since, at("2024-01-01T03:00:00+00:00"), held)
    assert caught.due == (among[1], among[3])  # a gap left by a failed run is due again
    older = plan("n", among, True, at("2023-12-31T00:00:00+00:00"),
                 at("2023-12-31T00:00:00+00:00"), frozenset())  # fmt: skip
    assert older.due == tuple(among) and older.left_behind


def test_retry_delays_grow_with_jitter_and_stop_at_the_cap() -> None:
    base, cap = timedelta(seconds=30), timedelta(minutes=2)
    for attempt, expected in ((1, 30), (2, 60), (3, 120)):
        delays = {retry_delay(base, cap, attempt) for _ in range(50)}
        assert all(0.75 * expected <= d <= min(1.25 * expected, 120) for d in delays)
        assert len(delays) > 1  # jitter
    assert retry_delay(base, cap, 10) == 120


def test_the_clock_hook_starts_at_the_instant_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIPELEDGER_NOW", "2024-01-01T05:00:00")  # no offset: UTC
    given = at("2024-01-01T05:00:00+00:00")
    before = timedelta(seconds=time.monotonic() - clock.STARTED)  # the clock runs on from there
    moment = now()
    after = timedelta(seconds=time.monotonic() - clock.STARTED)
    assert given + before <= moment <= given + after
    monkeypatch.setenv("PIPELEDGER_NOW", "yesterday")
    with pytest.raises(ConfigError, match="PIPELEDGER_NOW"):
        now()


def test_operating_keys_are_validated_on_loads_and_models() -> None:
    bad = {"schedule": "every hour", "timezone": "Mars/Olympus", "retries": -1,
           "timeout": "0s", "retry_delay": "soon"}  # fmt: skip
    load = {"source": {"kind": "csv", "path": "x.csv"}, "target": "a.b", "key": ["k"],
            "cursor": "c", "on_conflict": "update", **bad}  # fmt: skip
    model = {"query": "select 1 as k", "target": "a.c", "materialized": "replace", **bad}
    with pytest.raises(ConfigError) as caught:
        parse_config({"pipelines": {"p": load}, "models": {"m": model}}, Path("p.toml"))
    message = str(caught.value)
    for where in ("pipelines.p", "models.m"):
        for key in ("schedule", "timezone", "retries", "timeout", "retry_delay"):
            assert f"{where}.{key}" in message
