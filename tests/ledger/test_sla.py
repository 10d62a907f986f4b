"""SLAs that mean something: freshness judged from the data and from the last success,
each breach recorded once per episode, runs slower than max_duration, reliability over 7
and 30 days, and the exit codes of ``status`` and ``anomalies --fail-on``."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from pipeledger.ledger.reads import sla
from pipeledger.ledger.reads.answers import FAILURES
from pipeledger.ledger.reads.queries import Health, data_time
from pipeledger.ledger.tables import RUNS, stored_datetime
from tests.helpers import Project, order, orders_pipeline
from tests.ledger.test_queries import ALTERNATING, MOVED, statuses
from tests.ledger_fixtures import NOW, TODAY, ledger, reading

DAY = timedelta(days=1)
HOUR = timedelta(hours=1)
SLA = timedelta(hours=26)


def test_a_cursor_stands_for_an_instant() -> None:
    assert data_time("2024-06-14") == datetime(2024, 6, 15, tzinfo=UTC)  # the day's end
    assert data_time("2024-06-14T10:00:00") == datetime(2024, 6, 14, 10, tzinfo=UTC)
    assert data_time("2024-06-14T10:00:00+02:00") == datetime(2024, 6, 14, 8, tzinfo=UTC)
    assert data_time('{"eu": "2024-06-10", "us": "2024-06-12T10:00:00Z"}') == datetime(
        2024, 6, 12, 10, tzinfo=UTC
    )
    assert [data_time(text) for text in ("123456", "-4", "", None, "soon")] == [None] * 5


def test_freshness_is_judged_from_the_data_and_from_the_last_success(warehouse_url: str) -> None:
    with ledger(warehouse_url) as b:
        for name in ("stalled", "current", "dated", "counter", "regional"):
            b.pipeline(name, SLA)
        b.pipeline("never", SLA, registered=NOW - 30 * HOUR)
        b.pipeline("short", timedelta(hours=6))

        def loaded(
            pipeline: str, cursor: str | None, watermark_after: str = MOVED["watermark_after"]
        ) -> None:
            before = MOVED["watermark_before"]
            run = b.run(
                pipeline, NOW - 2 * HOUR, watermark_before=before, watermark_after=watermark_after
            )
            if cursor is not None:
                b.snapshot(run, f"t.{pipeline}", 10, max_cursor=cursor)

        loaded("stalled", "2024-06-12T12:00:00+00:00")  # succeeds, but loads nothing new
        loaded("current", "2024-06-15T09:00:00+00:00")
        loaded("dated", "2024-06-14")  # a date: the data of the whole day
        loaded("short", "2024-06-14")
        loaded("counter", "123456")  # an integer tells no time
        loaded("regional", None, watermark_after='{"eu": "2024-06-10", "us": "2024-06-15"}')
    found = statuses(warehouse_url)
    late = {name: s.stale for name, s in found.items()}
    assert late == {"stalled": True, "current": False, "dated": False, "counter": False,
                    "regional": False, "never": True, "short": True}  # fmt: skip
    stalled = found["stalled"]
    assert (stalled.data_age_s, stalled.due_at) == (3 * 86_400, NOW - 2 * DAY + 2 * HOUR)
    assert stalled.health is Health.DEGRADED
    assert "newest data 3d old (SLA 1d2h)" in stalled.reasons[-1]
    assert found["dated"].newest_data_at == TODAY
    assert (found["counter"].newest_data_at, found["counter"].freshness_s) == (None, 7200 - 60)
    assert found["regional"].newest_data_at == TODAY + DAY
    assert (found["never"].due_at, found["never"].reasons[-1]) == (
        NOW - 4 * HOUR, "freshness SLA exceeded: never succeeded (SLA 1d2h)"
    )  # fmt: skip


def observe(url: str, now: datetime) -> list[sla.Breach]:
    with ledger(url) as b:
        return sla.observe(b.session, now, now - DAY)


def test_a_breach_is_recorded_once_per_episode(warehouse_url: str) -> None:
    start = NOW - 3 * DAY
    with ledger(warehouse_url) as b:
        b.pipeline("orders", timedelta(hours=6))
        first = b.run("orders", start, **MOVED)
        b.snapshot(first, "t", 10, max_cursor=start.isoformat())
    assert observe(warehouse_url, start + HOUR) == []
    (opened,) = observe(warehouse_url, start + 7 * HOUR)
    assert (opened.pipeline, opened.kind, opened.due_at) == (
        "orders",
        "freshness",
        start + 6 * HOUR,
    )
    assert opened.run_id == first.run_id
    assert observe(warehouse_url, start + 8 * HOUR) == []  # the same episode
    with ledger(warehouse_url) as b:
        fresh = b.run("orders", start + 9 * HOUR, run_id="fresh", **MOVED)
        b.snapshot(fresh, "t", 20, max_cursor=(start + 9 * HOUR).isoformat())
    assert observe(warehouse_url, start + 10 * HOUR) == []  # ends the episode
    (again,) = observe(warehouse_url, start + 20 * HOUR)  # a new one
    with reading(warehouse_url) as session:
        found = sla.breaches(session, start + 21 * HOUR)
    assert [(b.breach_id, b.open) for b in found] == [(again.breach_id, True),
                                                      (opened.breach_id, False)]  # fmt: skip
    assert found[1].ended_at == start + 10 * HOUR
    assert found[1].late_s == 4 * 3600  # due at +6h, fresh again when seen at +10h
    assert found[0].late_s == 6 * 3600  # due at +15h (data of +9h, a 6h SLA); 6h so far


def test_a_run_slower_than_max_duration_is_flagged(warehouse_url: str) -> None:
    with ledger(warehouse_url) as b:
        b.pipeline("orders", max_duration=timedelta(minutes=10))
        b.run("orders", NOW - 3 * HOUR, duration=timedelta(minutes=5), **MOVED)
        slow = b.run("orders", NOW - 2 * HOUR, duration=timedelta(minutes=15), **MOVED)
    (breach,) = observe(warehouse_url, NOW)
    assert (breach.kind, breach.run_id, breach.late_s) == ("duration", slow.run_id, 300)
    assert breach.due_at == slow.started_at + timedelta(minutes=10)
    assert observe(warehouse_url, NOW) == []  # once
    s = statuses(warehouse_url)["orders"]
    assert (s.slow, s.last_duration_ms, s.health) == (True, 900_000, Health.DEGRADED)
    assert s.reasons[-1] == "the latest run took 15m (max_duration 10m)"


def test_reliability_over_7_and_30_days(warehouse_url: str) -> None:
    minute = timedelta(minutes=1)
    with ledger(warehouse_url) as b:
        for i in range(20):  # durations 1..20 minutes, one a day from 20 days ago
            b.run("orders", NOW - (20 - i) * DAY - 6 * HOUR, duration=(i + 1) * minute, **MOVED)
        b.run("orders", NOW - 2 * DAY, status="failed", duration=minute)  # ends at -2d +1m
        b.run("orders", NOW - 2 * DAY + HOUR, status="timed_out", duration=minute)
        b.run("orders", NOW - 2 * DAY + 2 * HOUR, status="failed", trigger="backfill")
        b.run("orders", NOW - 2 * DAY + 3 * HOUR, duration=minute, **MOVED)  # recovered
        b.run("orders", NOW - HOUR, status="abandoned", duration=minute)  # failing again
    with reading(warehouse_url) as session:
        found = {r.days: r for r in sla.reliability(session, NOW)}
    month, week = found[30], found[7]
    assert (month.runs, month.successes, month.recoveries) == (25, 21, 1)
    assert month.mttr_s == (3 * HOUR).total_seconds()  # from the first failure's end
    assert month.failing_since == NOW - HOUR + minute
    assert month.p95_duration_ms == 19 * 60_000  # nearest rank of 21 successes: the 20th
    assert (week.runs, week.successes, week.recoveries) == (11, 7, 1)


def test_the_alerts_page_is_the_least_reliable_rows_of_the_report(warehouse_url: str) -> None:
    minute = timedelta(minutes=1)
    with ledger(warehouse_url) as b:
        for n, failures in enumerate([0, 1, 3, 0, 2, 5]):  # six pipelines, worse and better
            name = f"p{n}"
            b.pipeline(name, max_duration=timedelta(minutes=3))
            for i in range(8):  # a run a day, from 20 days ago: half of them in the week
                status = "failed" if i < failures else "success"
                at = NOW - (20 - 2 * i) * DAY - HOUR
                b.run(name, at, status=status, duration=(i + 1) * minute, **MOVED)
        b.run("p3", NOW - HOUR, status="timed_out", duration=minute)  # still failing
        b.run("p0", NOW - 2 * HOUR, status="success", trigger="backfill")  # not a frontier
    with ledger(warehouse_url) as b:
        assert sla.observe(b.session, NOW, NOW - 30 * DAY)  # the slow runs' breaches
    with reading(warehouse_url) as session:
        report = sla.sla_report(session, NOW)
        page = sla.sla_page(session, NOW, 3)
        whole = sla.sla_page(session, NOW, 100)
    week = {r.pipeline: r for r in report.reliability if r.days == 7}
    worst = sorted(
        week,
        key=lambda p: (
            0 if week[p].failing_since else 1,
            2.0 if week[p].success_rate is None else week[p].success_rate,
            p,
        ),
    )
    assert worst[0] == "p3" and page.nodes == whole.nodes == len(week) == 6
    expected = [r for name in worst[:3] for r in report.reliability if r.pipeline == name]
    assert list(page.reliability) == expected  # the very rows of `pipeledger sla`, worst first
    assert sorted(whole.reliability, key=lambda r: (r.pipeline, r.days)) == list(report.reliability)
    assert list(page.breaches) == list(report.breaches) and report.breaches


# -- the CLI ----------------------------------------------------------------------------


def cli_json(project: Project, *args: str) -> tuple[int, list[dict[str, Any]]]:
    """A ledger read's exit code and its JSON list (one object per pipeline)."""
    code, out, err = project.cli(*args, "--json")
    assert code in (0, 1), err
    found: list[dict[str, Any]] = json.loads(out)
    return code, found


def test_status_fails_on_a_volume_of_10_percent_not_on_a_re_run(
    project: Project, warehouse_url: str
) -> None:
    """Acceptance: a run whose volume is 10 % of normal makes ``status --fail-on critical``
    exit non-zero; a re-run that finds nothing new does not."""
    project.configure(orders=orders_pipeline())
    now = datetime.now(UTC)
    with ledger(warehouse_url) as b:  # a month of history: 100 rows a day, give or take
        b.daily("orders", ALTERNATING, before=now - DAY, **MOVED)
    project.write_csv("orders_0.csv", [order(i, "2024-01-01T10:00:00Z") for i in range(100)])
    assert project.run()["rows_inserted"] == 100
    assert project.run()["rows_inserted"] == 0  # nothing new: a no-op re-run
    for command in ("status", "anomalies"):
        code, found = cli_json(project, command, "--fail-on", "critical")
        assert code == 0, found
    assert cli_json(project, "status", "--fail-on", "degraded")[0] == 0

    project.write_csv("orders_1.csv", [order(i, "2024-01-02T10:00:00Z") for i in range(100, 110)])
    assert project.run()["rows_inserted"] == 10
    code, found = cli_json(project, "status", "--fail-on", "critical")
    assert code == 1 and [s["health"] for s in found] == ["CRITICAL"]
    code, found = cli_json(project, "anomalies", "--fail-on", "warning")
    assert code == 1 and [a["level"] for a in found] == ["CRITICAL"]
    code, _, err = project.cli("status", "--fail-on", "critical")
    assert code == 1 and "1 pipeline(s) at or above CRITICAL: orders (CRITICAL)" in err


def test_sla_command(project: Project, warehouse_url: str) -> None:
    project.configure(orders=orders_pipeline(freshness_sla="1h", max_duration="0s"))
    project.write_csv("orders_0.csv", [order(i, "2024-01-01T10:00:00Z") for i in range(3)])
    assert project.run()["status"] == "success"
    assert project.cli("watchdog")[0] == 0  # looks after SLAs (a run does it in the background)
    code, found = cli_json(project, "sla")
    assert code == 0 and isinstance(found, dict)
    kinds = sorted(b["kind"] for b in found["breaches"])
    assert kinds == ["duration", "freshness"]
    freshness = next(b for b in found["breaches"] if b["kind"] == "freshness")
    assert freshness["ended_at"] is None and freshness["late_s"] > 86_400 * 300
    assert [(r["days"], r["runs"], r["successes"]) for r in found["reliability"]] == [
        (7, 1, 1), (30, 1, 1)
    ]  # fmt: skip
    code, out, _ = project.cli("sla")
    assert code == 0 and "orders freshness due" in out and "orders 7d: 100% of 1" in out


@pytest.mark.parametrize("command", ["status", "anomalies", "sla", "alerts"])
def test_a_ledger_from_an_earlier_release_is_named(project: Project, command: str) -> None:
    from pipeledger.ledger.tables import RUNS, ledger_migrations
    from pipeledger.warehouse.adapters import open_warehouse
    from pipeledger.warehouse.migrations import Component, migrate

    project.configure()
    earlier = Component("ledger", lambda d: ledger_migrations(d)[:4], RUNS)
    url = project.warehouse_url or f"sqlite:///{project.root / '.pipeledger' / 'warehouse.db'}"
    with open_warehouse(url).session() as session:
        migrate(session, earlier)
    code, _, err = project.cli(command)
    assert code == 2 and "pipeledger ledger migrate" in err
    assert project.cli("ledger", "migrate")[0] == 0
    assert project.cli(command)[0] == 0


def _episodes(runs: list[tuple[Any, ...]], since: datetime) -> tuple[list[float], Any]:
    """The definition, run by run: among a pipeline's successes and failures (no backfill,
    replay or reconcile) that started since ``since``, in (start, run id) order, an
    episode opens at the end of a failure that follows a success or opens the window and
    closes at the end of the next success. The recovery times, and the open episode."""
    took, failing_since = [], None
    counted = sorted(
        (r for r in runs if r[4] >= since and r[2] in ("success", *FAILURES)
         and r[3] not in ("backfill", "replay", "reconcile")),
        key=lambda r: (r[4], r[1]),
    )  # fmt: skip
    for _, _, status, _, _, ended in counted:
        if status != "success":
            failing_since = failing_since or ended
        elif failing_since is not None:
            took.append((ended - failing_since).total_seconds())
            failing_since = None
    return took, failing_since


def test_recoveries_follow_the_definition_run_by_run(warehouse_url: str) -> None:
    # random histories: ties in start time, runs out of order, backfills and reconciles
    # between failures, partial and cancelled runs (neither), episodes across the windows
    import random

    statuses = ["success"] * 5 + ["failed", "timed_out", "abandoned", "partial", "cancelled"]
    triggers = ["scheduled"] * 6 + ["manual", "retry", "backfill", "replay", "reconcile"]
    with ledger(warehouse_url) as b:
        for p in range(12):
            rng = random.Random(p)
            for i in range(rng.randint(1, 90)):
                at = NOW - timedelta(hours=rng.randint(1, 40 * 24) // (1 + p % 3))
                b.run(
                    f"p{p:02d}", at, run_id=f"{rng.randint(0, 10**6):07d}-{i}",
                    status=rng.choice(statuses), trigger=rng.choice(triggers),
                    duration=timedelta(minutes=rng.randint(1, 90)),
                )  # fmt: skip
    with reading(warehouse_url) as session:
        rows = session.query(
            "SELECT pipeline, run_id, status, trigger_type, started_at, ended_at "
            f"FROM {session.dialect.table(RUNS)}"
        )
        found = {(r.pipeline, r.days): r for r in sla.reliability(session, NOW)}
    runs = [(p, i, s, t, stored_datetime(a), stored_datetime(e)) for p, i, s, t, a, e in rows]
    checked = 0
    for (pipeline, days), row in found.items():
        took, open_since = _episodes([r for r in runs if r[0] == pipeline], NOW - days * DAY)
        assert row.recoveries == len(took), (pipeline, days)
        assert row.mttr_s == (sum(took) / len(took) if took else None), (pipeline, days)
        assert row.failing_since == open_since, (pipeline, days)
        checked += bool(took) + bool(open_since)
    assert checked > 12  # the histories have episodes, closed and open
