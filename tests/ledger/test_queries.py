"""What the ledger answers: runs, one run, status and health, volume anomalies, task trends,
audit trail, blocked pipelines and pruning, on synthetic ledgers in real databases (both
backends), and the CLI's ``--json`` faces over them."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any, TypedDict

import pytest

from pipeledger.errors import AmbiguousRunId
from pipeledger.ledger.reads import queries as q
from pipeledger.ledger.reads.queries import Health, Level
from pipeledger.ledger.tables import RUNS
from tests.helpers import Project
from tests.ledger_fixtures import NOW, TODAY, LedgerBuilder, ledger, reading

DAY = timedelta(days=1)
HOUR = timedelta(hours=1)
ALTERNATING = [90, 110] * 15  # mean 100, sample stddev sqrt(3000 / 29) = 10.17


def anomaly(url: str, pipeline: str, **kwargs: Any) -> q.VolumeAnomaly:
    with reading(url) as session:
        (found,) = q.volume_anomalies(session, NOW, pipeline, **kwargs)
    return found


def statuses(url: str, now: datetime = NOW) -> dict[str, q.PipelineStatus]:
    with reading(url) as session:
        return {s.pipeline: s for s in q.pipeline_status(session, now)}


# -- volume anomalies -------------------------------------------------------------------


def hand_computed(url: str, pipeline: str, latest: str) -> tuple[int, float, float]:
    """n, mean and sample stddev of the history, computed by the database itself."""
    with reading(url) as session:
        d = session.dialect
        w = "(rows_inserted + rows_updated)"
        if d.name == "postgres":
            stats = f"count(*), avg({w}), stddev_samp({w})"
        else:
            stats = (
                f"count(*), avg({w}), sqrt((sum({w} * {w}) - sum({w}) * sum({w}) * 1.0 / count(*))"
                " / (count(*) - 1))"
            )
        p = d.param
        ((n, mean, stddev),) = session.query(
            f"SELECT {stats} FROM {d.table(RUNS)} WHERE pipeline = {p} AND status = 'success' "
            f"AND trigger_type <> 'backfill' AND started_at >= {p} AND started_at < {p} "
            f"AND run_id <> {p}",
            [pipeline, TODAY - 30 * DAY, TODAY, latest],
        )
    return int(n), float(mean), float(stddev)


def test_volume_statistics_match_the_database_s_own(warehouse_url: str) -> None:
    values = [1000 + (i * 37) % 211 for i in range(30)]
    with ledger(warehouse_url) as b:
        b.daily("orders", values)
        latest = b.run("orders", TODAY + HOUR, written=1100)
    found = anomaly(warehouse_url, "orders")
    n, mean, stddev = hand_computed(warehouse_url, "orders", latest.run_id)
    assert (found.run_id, found.rows_written, found.n) == (latest.run_id, 1100, n)
    assert n == 30
    assert found.mean == pytest.approx(mean)
    assert found.stddev == pytest.approx(stddev)
    assert found.z_score == pytest.approx((1100 - mean) / stddev)
    assert found.level is Level.OK


@pytest.mark.parametrize(
    ("latest", "level"),
    [(95, Level.OK), (125, Level.WARNING), (75, Level.WARNING), (135, Level.CRITICAL)],
)
def test_levels_follow_the_z_score(warehouse_url: str, latest: int, level: Level) -> None:
    with ledger(warehouse_url) as b:
        b.daily("orders", ALTERNATING)
        b.run("orders", TODAY + HOUR, written=latest)
    found = anomaly(warehouse_url, "orders")
    assert found.z_score == pytest.approx((latest - 100) / (3000 / 29) ** 0.5)
    assert found.level is level


def test_todays_runs_backfills_failures_and_old_runs_are_not_history(warehouse_url: str) -> None:
    with ledger(warehouse_url) as b:
        b.daily("orders", ALTERNATING)
        b.run("orders", TODAY - 31 * DAY, written=9_000)  # before the window
        b.run("orders", TODAY - 3 * DAY + HOUR, written=9_000, trigger="backfill")
        b.run("orders", TODAY - 2 * DAY + HOUR, written=9_000, status="failed")
        b.run("orders", TODAY + HOUR, written=9_000)  # today: not history yet
        latest = b.run("orders", TODAY + 2 * HOUR, written=100)
        b.run("orders", TODAY + 3 * HOUR, written=50_000, trigger="backfill")  # not a signal
    found = anomaly(warehouse_url, "orders")
    assert (found.run_id, found.n, found.mean) == (latest.run_id, 30, 100.0)
    assert found.level is Level.OK
    assert hand_computed(warehouse_url, "orders", latest.run_id)[0] == 30


def test_the_latest_run_is_not_its_own_history(warehouse_url: str) -> None:
    with ledger(warehouse_url) as b:
        b.daily("orders", [100] * 6)
        latest = b.run("orders", TODAY - HOUR, written=100)  # yesterday, inside the window
    found = anomaly(warehouse_url, "orders")
    assert (found.run_id, found.n) == (latest.run_id, 6)


def test_too_little_history_is_said_so(warehouse_url: str) -> None:
    with ledger(warehouse_url) as b:
        b.daily("few", [100, 500, 20, 100])
        b.run("few", TODAY + HOUR, written=10_000)
        b.daily("enough", [100, 500, 20, 100, 90])
        b.run("enough", TODAY + HOUR, written=10_000)
    few = anomaly(warehouse_url, "few")
    assert (few.level, few.n) == (Level.INSUFFICIENT_HISTORY, 4)
    assert anomaly(warehouse_url, "few", min_history=4).level is Level.CRITICAL
    assert anomaly(warehouse_url, "enough").level is Level.CRITICAL


class Watermarks(TypedDict):
    """A run's watermark before and after, as :meth:`LedgerBuilder.run` takes them."""

    watermark_before: str
    watermark_after: str


MOVED = Watermarks(watermark_before="2024-06-14T00:00:00", watermark_after="2024-06-15T00:00:00")
KEPT = Watermarks(watermark_before="2024-06-15T00:00:00", watermark_after="2024-06-15T00:00:00")


def test_an_interval_that_wrote_nothing_though_its_watermark_moved_is_critical(
    warehouse_url: str,
) -> None:
    with ledger(warehouse_url) as b:
        b.run("fresh", TODAY + HOUR, written=0, **MOVED)
        b.daily("noisy", [0, 0, 0, 0, 0, 0, 10], **MOVED)
        b.run("noisy", TODAY + HOUR, written=0, **MOVED)
    for pipeline in ("fresh", "noisy"):
        found = anomaly(warehouse_url, pipeline)
        assert found.level is Level.CRITICAL
        assert found.reason == "zero rows written though the watermark moved"


def test_like_with_like_no_op_re_runs_and_failed_attempts_are_no_intervals(
    warehouse_url: str,
) -> None:
    """A healthy pipeline stays healthy when it is re-run with nothing new to read, by hand
    or by a second scheduler, as a load (watermark unchanged) or as a model (none)."""
    with ledger(warehouse_url) as b:
        history = b.daily("orders", ALTERNATING, **MOVED)
        for day in history[::5]:  # an attempt that failed, then its retry: one interval
            b.run("orders", day.started_at - HOUR, status="failed", written=None,
                  logical_run_id="l-" + day.run_id)  # fmt: skip
        latest = b.run("orders", TODAY + HOUR, written=100, **MOVED)
        b.run("orders", TODAY + 2 * HOUR, written=0, **KEPT)  # a re-run: nothing new
        b.run("orders", TODAY + 3 * HOUR, written=0, trigger="manual")  # a model's re-run
        b.run("orders", TODAY + 4 * HOUR, written=5000, trigger="backfill")
    found = anomaly(warehouse_url, "orders")
    assert (found.run_id, found.rows_written, found.n, found.level) == (
        latest.run_id,
        100,
        30,
        Level.OK,
    )
    assert statuses(warehouse_url)["orders"].health is Health.HEALTHY


def test_a_partial_run_is_an_interval_too(warehouse_url: str) -> None:
    with ledger(warehouse_url) as b:
        b.daily("orders", ALTERNATING, **MOVED)
        latest = b.run("orders", TODAY + HOUR, status="partial", written=10, **MOVED)
    found = anomaly(warehouse_url, "orders")
    assert (found.run_id, found.rows_written, found.level) == (latest.run_id, 10, Level.CRITICAL)


def test_a_constant_history(warehouse_url: str) -> None:
    with ledger(warehouse_url) as b:
        b.daily("same", [100] * 10)
        b.run("same", TODAY + HOUR, written=100)
        b.daily("other", [100] * 10)
        b.run("other", TODAY + HOUR, written=101)
    same, other = anomaly(warehouse_url, "same"), anomaly(warehouse_url, "other")
    with reading(warehouse_url) as session:
        assert q.volume_anomalies(session, NOW) == [other, same]
    assert (same.stddev, same.z_score, same.level) == (0.0, 0.0, Level.OK)
    assert (other.stddev, other.z_score, other.level) == (0.0, None, Level.CRITICAL)


def test_assess_volume_in_exact_integers() -> None:
    big = 3_000_000_000  # squares beyond 64 bits once summed: Python finishes exactly
    found = q.assess_volume("p", "r", NOW, big, 2, 2 * big, 2 * big * big)
    assert (found.mean, found.stddev, found.z_score) == (big, 0.0, 0.0)


# -- status and health ------------------------------------------------------------------


def hourly(b: LedgerBuilder, pipeline: str, successes: int, failures: int) -> None:
    """Runs an hour apart, from 5 days before today: the successes, then the failures."""
    statuses = ["success"] * successes + ["failed"] * failures
    for i, status in enumerate(statuses):
        b.run(pipeline, TODAY - 5 * DAY + i * HOUR, status=status, written=100)


def test_health_follows_the_success_rate(warehouse_url: str) -> None:
    with ledger(warehouse_url) as b:
        hourly(b, "ninety", 9, 1)
        hourly(b, "eighty_nine", 89, 11)
        hourly(b, "half", 10, 10)
        hourly(b, "forty_nine", 49, 51)
    found = statuses(warehouse_url)
    assert found["ninety"].success_rate_7d == 0.9
    assert found["eighty_nine"].success_rate_7d == 0.89
    assert {p: s.health for p, s in found.items()} == {
        "ninety": Health.HEALTHY,
        "eighty_nine": Health.DEGRADED,
        "half": Health.DEGRADED,
        "forty_nine": Health.CRITICAL,
    }
    assert all(s.anomaly is Level.OK for s in found.values())


def test_success_rate_ignores_running_skipped_and_older_runs(warehouse_url: str) -> None:
    with ledger(warehouse_url) as b:
        hourly(b, "orders", 9, 1)
        b.run("orders", NOW - 8 * DAY, status="failed")
        b.run("orders", NOW - 2 * HOUR, status="skipped")
        b.run("orders", NOW - 3 * HOUR, status="timed_out", written=None)
        b.run("orders", NOW - HOUR, status="running", written=None)
    s = statuses(warehouse_url)["orders"]
    assert (s.successes_7d, s.runs_7d) == (9, 11)
    assert s.success_rate_7d == pytest.approx(9 / 11)
    assert (s.last_status, s.last_run_at) == ("running", NOW - HOUR)
    assert s.avg_rows_7d == 100.0
    assert s.health is Health.DEGRADED


def test_freshness_against_the_sla(warehouse_url: str) -> None:
    with ledger(warehouse_url) as b:
        b.pipeline("late", timedelta(hours=6))
        b.pipeline("fine", timedelta(hours=24))
        b.pipeline("never", timedelta(hours=24))
        b.pipeline("lax")
        for pipeline in ("late", "fine", "lax"):
            b.run(pipeline, NOW - 10 * HOUR - timedelta(minutes=1))
    found = statuses(warehouse_url)
    late, fine, never, lax = (found[p] for p in ("late", "fine", "never", "lax"))
    assert (late.freshness_s, late.freshness_sla_s, late.stale) == (36_000, 21_600, True)
    assert late.health is Health.DEGRADED
    assert (fine.stale, fine.health) == (False, Health.HEALTHY)
    assert (lax.freshness_sla_s, lax.stale) == (None, False)
    assert (never.last_run_at, never.freshness_s, never.stale) == (None, None, True)
    assert (never.success_rate_7d, never.health) == (None, Health.DEGRADED)


def test_a_volume_anomaly_worsens_health(warehouse_url: str) -> None:
    with ledger(warehouse_url) as b:
        for pipeline, latest in (("warned", 125), ("alarmed", 135), ("calm", 100)):
            b.daily(pipeline, ALTERNATING)
            b.run(pipeline, TODAY + HOUR, written=latest)
    found = statuses(warehouse_url)
    assert {p: (s.anomaly, s.health) for p, s in found.items()} == {
        "warned": (Level.WARNING, Health.DEGRADED),
        "alarmed": (Level.CRITICAL, Health.CRITICAL),
        "calm": (Level.OK, Health.HEALTHY),
    }
    assert found["warned"].z_score == pytest.approx(anomaly(warehouse_url, "warned").z_score)


def test_rate_health_thresholds_are_exact() -> None:
    assert q.rate_health(9, 10) is Health.HEALTHY
    assert q.rate_health(899, 1000) is Health.DEGRADED
    assert q.rate_health(1, 2) is Health.DEGRADED
    assert q.rate_health(49, 100) is Health.CRITICAL
    assert q.rate_health(0, 0) is Health.UNKNOWN


# -- blocked ----------------------------------------------------------------------------


def test_blocked_downstreams(warehouse_url: str) -> None:
    with ledger(warehouse_url) as b:
        b.pipeline("hourly_src", timedelta(hours=2))
        b.run("hourly_src", NOW - 3 * HOUR - timedelta(minutes=1))
        b.run("daily_src", NOW - 5 * HOUR)  # no SLA: 24 h
        b.run("stale_src", NOW - 25 * HOUR)
        b.run("broken_src", NOW - HOUR, status="failed")
        b.depends("report", "hourly_src", "daily_src", "stale_src", "broken_src")
        b.depends("dashboard", "daily_src")
    with reading(warehouse_url) as session:
        found = {(x.downstream, x.upstream): x for x in q.blocked_pipelines(session, NOW)}
    assert set(found) == {
        ("report", "hourly_src"),
        ("report", "stale_src"),
        ("report", "broken_src"),
    }
    hourly_src = found["report", "hourly_src"]
    assert (hourly_src.expected_within_s, hourly_src.upstream_last_success) == (
        7200,
        NOW - 3 * HOUR,
    )
    assert found["report", "stale_src"].expected_within_s == 86_400
    assert "3h ago" in hourly_src.reason
    broken = found["report", "broken_src"]
    assert broken.upstream_last_success is None
    assert "never succeeded" in broken.reason


# -- prune ------------------------------------------------------------------------------


def test_prune_keeps_the_last_success_and_running_runs(warehouse_url: str) -> None:
    interval_end = datetime(2023, 12, 1, tzinfo=UTC)
    with ledger(warehouse_url) as b:
        s1 = b.run("a", NOW - 200 * DAY)
        f1 = b.run("a", NOW - 150 * DAY, status="failed")
        s2 = b.run("a", NOW - 120 * DAY)
        s3 = b.run("a", NOW - DAY)
        b.task(s1, "extract", 1)
        b.task(s1, "load", 2)
        b.task(s3, "load", 1)
        b.event(f1, "VALIDATION_FAILURE", f1.started_at, target_table="t")
        b.event(None, "SCHEMA_CHANGE", NOW - 200 * DAY, target_table="t")
        b.snapshot(s2, "t", 10)
        b.run("b", NOW - 300 * DAY)
        kept_b = b.run("b", NOW - 200 * DAY, data_interval_end=interval_end)
        b.run("b", NOW - 100 * DAY, status="failed")
        running = b.run("c", NOW - 200 * DAY, status="running")
        b.run("c", NOW - 200 * DAY, status="abandoned")
    with ledger(warehouse_url) as b:
        result = q.prune(b.session, timedelta(days=90), NOW)
    assert result.to_json() == {
        "cutoff": (NOW - 90 * DAY).isoformat(),
        "pipeline_runs": 6,
        "task_runs": 2,
        "audit_events": 1,
        "dataset_snapshots": 1,
        "quality_results": 0,
        "reconciliations": 0,
        "access_reads": 0,  # no read was recorded: this ledger was written directly
    }
    with reading(warehouse_url) as session:
        left = {r.run_id for r in q.list_runs(session, limit=100)}
        assert left == {s3.run_id, kept_b.run_id, running.run_id}
        assert q.last_success(session, "b") == interval_end
        assert len(q.audit_trail(session, "t")) == 1
        assert q.show_run(session, s3.run_id) is not None


# -- runs, show, tasks, audit -----------------------------------------------------------


def test_list_runs_filters_newest_first(warehouse_url: str) -> None:
    with ledger(warehouse_url) as b:
        orders = b.daily("orders", [100] * 5)
        failed = b.run("orders", NOW - HOUR, status="failed", error_message="boom")
        b.daily("customers", [10] * 5)
    with reading(warehouse_url) as session:
        assert [r.run_id for r in q.list_runs(session, "orders")] == [
            failed.run_id,
            *[r.run_id for r in reversed(orders)],
        ]
        assert len(q.list_runs(session)) == 11
        assert len(q.list_runs(session, limit=3)) == 3
        assert [r.run_id for r in q.list_runs(session, status="failed")] == [failed.run_id]
        recent = q.list_runs(session, "orders", since=TODAY - DAY)
        assert [r.started_at for r in recent] == [NOW - HOUR, TODAY - DAY + 2 * HOUR]
        item = q.list_runs(session, status="failed")[0].to_json()
    assert item["error_message"] == "boom"
    assert (item["rows_inserted"], item["rows_updated"], item["duration_ms"]) == (90, 10, 60_000)
    assert item["started_at"] == (NOW - HOUR).isoformat()


def test_show_a_run_by_id_or_unique_prefix(warehouse_url: str) -> None:
    with ledger(warehouse_url) as b:
        run = b.run("orders", NOW - HOUR, run_id="abcdef12-aaaa", watermark_after="2024-06-15")
        b.run("orders", NOW - 2 * HOUR, run_id="abcdef12-bbbb")
        b.task(run, "load", 2, rows_out=7)
        b.task(run, "extract", 1)
        b.event(run, "ROWS_REJECTED", NOW, target_table="t", metadata={"rows": [3, 4]})
        b.snapshot(run, "analytics.orders", 42)
    with reading(warehouse_url) as session:
        detail = q.show_run(session, "abcdef12-a")
        assert detail is not None
        assert q.show_run(session, "abcdef12-aaaa") == detail
        assert q.show_run(session, "abcdef1") is None
        assert q.show_run(session, "zzzzzzzz") is None
        with pytest.raises(AmbiguousRunId, match="abcdef12-aaaa, abcdef12-bbbb"):
            q.show_run(session, "abcdef12")
    payload = detail.to_json()
    assert (payload["run_id"], payload["watermark_after"]) == ("abcdef12-aaaa", "2024-06-15")
    assert [(t["seq"], t["name"], t["rows_out"]) for t in payload["tasks"]] == [
        (1, "extract", 10),
        (2, "load", 7),
    ]
    assert payload["events"][0]["metadata"] == {"rows": [3, 4]}
    assert payload["snapshots"][0]["row_count"] == 42
    assert payload["snapshots"][0]["columns"] == [{"name": "order_id", "type": "bigint"}]


def test_task_trends_per_day(warehouse_url: str) -> None:
    with ledger(warehouse_url) as b:
        for day, durations in ((TODAY - DAY, [1000, 3000]), (TODAY, [500])):
            for i, ms in enumerate(durations):
                run = b.run("orders", day + i * HOUR)
                b.task(run, "extract", 1, duration_ms=ms, rows_out=ms // 10)
        old = b.run("orders", TODAY - 20 * DAY)
        b.task(old, "extract", 1)
    with reading(warehouse_url) as session:
        found = q.task_trends(session, NOW, "orders")
        assert q.task_trends(session, NOW, "nothing") == []
    assert [t.to_json() for t in found] == [
        {"pipeline": "orders", "task": "extract", "day": "2024-06-14", "runs": 2,
         "avg_duration_ms": 2000.0, "max_duration_ms": 3000, "avg_rows_out": 200.0},
        {"pipeline": "orders", "task": "extract", "day": "2024-06-15", "runs": 1,
         "avg_duration_ms": 500.0, "max_duration_ms": 500, "avg_rows_out": 50.0},
    ]  # fmt: skip


def test_audit_trail_newest_first_with_values_parsed(warehouse_url: str) -> None:
    with ledger(warehouse_url) as b:
        run = b.run("orders", NOW - DAY)
        b.event(run, "UPDATE", NOW - 3 * HOUR, target_table="t", old_values={"qty": 1})
        b.event(run, "DELETE", NOW - HOUR, target_table="t", new_values={"qty": None})
        b.event(run, "UPDATE", NOW - 2 * HOUR, target_table="other")
    with reading(warehouse_url) as session:
        trail = q.audit_trail(session, "t")
        recent = q.audit_trail(session, "t", since=NOW - 2 * HOUR)
    assert [(e.event_type, e.old_values, e.new_values) for e in trail] == [
        ("DELETE", None, {"qty": None}),
        ("UPDATE", {"qty": 1}, None),
    ]
    assert [e.event_type for e in recent] == ["DELETE"]


# -- the CLI ----------------------------------------------------------------------------


def cli_json(project: Project, *args: str) -> Any:
    code, out, err = project.cli(*args, "--json")
    assert code == 0, f"exit {code}\nstdout: {out}\nstderr: {err}"
    return json.loads(out)


def test_cli_before_anything_was_recorded(project: Project) -> None:
    project.configure()
    code, out, _ = project.cli("runs")
    assert (code, out.strip()) == (0, "no runs recorded yet")
    for command in ("runs", "status", "anomalies", "tasks", "blocked"):
        assert cli_json(project, command) == []
    code, _, err = project.cli("show", "abcdef12")
    assert code == 1 and "no run with id 'abcdef12'" in err


def test_cli_json_shapes(project: Project, warehouse_url: str) -> None:
    project.configure()
    now = datetime.now(UTC)
    with ledger(warehouse_url) as b:
        b.pipeline("orders", timedelta(hours=1))
        runs = b.daily("orders", [100] * 10, before=now - DAY)
        b.task(runs[-1], "extract", 1)
        b.event(runs[-1], "UPDATE", now - DAY, target_table="analytics.orders")
        b.depends("report", "orders")
    listed = cli_json(project, "runs", "orders", "--since", "30d", "--status", "success")
    assert len(listed) == 10
    required = {
        "run_id", "logical_run_id", "attempt", "pipeline", "status", "trigger_type",
        "started_at", "ended_at", "duration_ms", "rows_read", "rows_inserted", "rows_updated",
        "rows_unchanged", "rows_rejected", "watermark_before", "watermark_after",
        "error_message", "error_code", "parent_run_id", "data_interval_start",
        "data_interval_end",
    }  # fmt: skip
    assert required <= set(listed[0])
    assert cli_json(project, "runs", "--limit", "2", "--status", "failed") == []
    shown = cli_json(project, "show", runs[-1].run_id[:8])
    assert shown["run_id"] == runs[-1].run_id and shown["tasks"][0]["name"] == "extract"
    (status,) = cli_json(project, "status")
    assert {"pipeline", "last_run_at", "last_status", "success_rate_7d", "avg_rows_7d",
            "health", "z_score", "stale", "freshness_s"} <= set(status)  # fmt: skip
    assert (status["health"], status["stale"], status["anomaly"]) == ("DEGRADED", True, "OK")
    (volume,) = cli_json(project, "anomalies", "orders")
    assert (volume["level"], volume["n"], volume["z_score"]) == ("OK", 9, 0.0)
    assert cli_json(project, "tasks")[0]["task"] == "extract"
    assert cli_json(project, "audit", "--table", "analytics.orders")[0]["event_type"] == "UPDATE"
    (blocked,) = cli_json(project, "blocked")
    assert (blocked["downstream"], blocked["upstream"], blocked["expected_within_s"]) == (
        "report",
        "orders",
        3600,
    )
    code, out, _ = project.cli("blocked")
    assert code == 0 and "BLOCKED report" in out


def test_cli_human_output_fits_a_terminal(project: Project, warehouse_url: str) -> None:
    project.configure()
    now = datetime.now(UTC)
    with ledger(warehouse_url) as b:
        run = b.run("orders", now - HOUR, status="failed", error_message="x" * 300)
        b.task(run, "extract", 1, status="failed")
    for args in (("runs",), ("show", run.run_id), ("status",), ("tasks",), ("blocked",)):
        code, out, err = project.cli(*args)
        assert code == 0, err
        assert out.strip() and max(len(line) for line in out.splitlines()) <= 100, out
    assert "failed" in project.cli("runs")[1]
    assert "no pipeline is blocked" in project.cli("blocked")[1]
    code, _, err = project.cli("runs", "--since", "yesterday")
    assert code == 2 and "--since 'yesterday'" in err


def test_cli_ledger_migrate_and_prune(project: Project, warehouse_url: str) -> None:
    project.configure()
    code, out, err = project.cli("ledger", "migrate")
    assert code == 0, err
    assert "ledger: applied version(s) 1" in out and "state: applied version(s) 1" in out
    assert cli_json(project, "ledger", "migrate") == {"ledger": [], "state": []}
    now = datetime.now(UTC)
    with ledger(warehouse_url) as b:
        for days in (200, 150, 1):
            b.run("orders", now - days * DAY)
    dry = cli_json(project, "ledger", "prune", "--older-than", "90d", "--dry-run")
    assert dry["pipeline_runs"] == 2
    code, out, _ = project.cli("ledger", "prune", "--older-than", "90d")
    assert code == 0 and out.startswith("deleted 2 run(s)")
    assert len(cli_json(project, "runs")) == 1
