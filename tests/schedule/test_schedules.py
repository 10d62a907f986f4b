"""Schedules with catch-up (`run --due`, `schedule`, `serve`) and idempotent triggers, on
both backends, with the clock set by PIPELEDGER_NOW (`serve`: a clock the test moves, so
that no test waits for a firing in real time)."""

from __future__ import annotations

import json
import os
import signal
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from pipeledger import Ledger
from pipeledger.common import clock
from pipeledger.runs import due
from tests.helpers import Project, order, orders_pipeline

RUNS = "pipeledger.pipeline_runs"


def hourly(**overrides: Any) -> dict[str, Any]:
    return orders_pipeline(schedule="0 * * * *", catchup=True, **overrides)


def scheduled(project: Project, status: str = "success") -> list[tuple[str, str, str]]:
    """(start, end, run id) of the successful scheduled runs, oldest interval first."""
    rows = project.query(
        f"SELECT data_interval_start, data_interval_end, run_id, logical_run_id "
        f"FROM {project.table(RUNS)} WHERE trigger_type = 'scheduled' AND status = %s "
        "ORDER BY data_interval_start, started_at",
        [status],
    )
    assert all(row[2] == row[3] for row in rows)  # each interval is a logical run of its own
    return [(_utc(row[0]), _utc(row[1]), str(row[2])) for row in rows]


def _utc(value: Any) -> str:
    moment = value if isinstance(value, datetime) else datetime.fromisoformat(value)
    return moment.astimezone(UTC).strftime("%H:%M")


def test_an_hourly_pipeline_catches_up_each_missed_interval_once_in_order(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.configure(orders=hourly())
    project.write_csv("orders_1.csv", [order(1, "2024-01-01T00:10:00Z")])
    monkeypatch.setenv("PIPELEDGER_NOW", "2024-01-01T00:30:00Z")
    first = project.run_json("run", "--due")
    assert [(r["data_interval_start"], r["data_interval_end"]) for r in first] == [
        ("2023-12-31T23:00:00+00:00", "2024-01-01T00:00:00+00:00")
    ]
    assert first[0]["rows_inserted"] == 1

    monkeypatch.setenv("PIPELEDGER_NOW", "2024-01-01T05:30:00Z")  # five intervals missed
    code, out, _ = project.cli("schedule", "--json")
    (status,) = json.loads(out)
    assert code == 0 and status["overdue"] == 5 and status["next"] == "2024-01-01T06:00:00+00:00"
    caught_up = project.run_json("run", "--due")
    assert [r["data_interval_end"][11:16] for r in caught_up] == [
        "01:00", "02:00", "03:00", "04:00", "05:00",
    ]  # fmt: skip
    assert [r["status"] for r in caught_up] == ["success"] * 5
    assert [(s, e) for s, e, _ in scheduled(project)] == [
        ("23:00", "00:00"), ("00:00", "01:00"), ("01:00", "02:00"), ("02:00", "03:00"),
        ("03:00", "04:00"), ("04:00", "05:00"),
    ]  # fmt: skip
    assert project.count() == 1  # the watermark decides what is read; each row once

    assert project.run_json("run", "--due") == []  # nothing is due twice
    code, out, _ = project.cli("schedule", "--json")
    (status,) = json.loads(out)
    assert status["overdue"] == 0 and status["last"]["end"] == "2024-01-01T05:00:00+00:00"


def test_without_catchup_only_the_latest_interval_runs(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.configure(orders=orders_pipeline(schedule="0 2 * * *", timezone="Europe/Paris"))
    project.write_csv("orders_1.csv", [order(1, "2024-01-01T00:10:00Z")])
    monkeypatch.setenv("PIPELEDGER_NOW", "2024-01-05T12:00:00Z")
    (result,) = project.run_json("run", "--due")
    # 02:00 in Paris is 01:00 UTC in winter
    assert result["data_interval_start"] == "2024-01-04T01:00:00+00:00"
    assert result["data_interval_end"] == "2024-01-05T01:00:00+00:00"
    assert project.run_json("run", "--due") == []


@pytest.mark.slow
def test_two_schedulers_started_together_never_run_an_interval_twice(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.configure(orders=hourly())
    project.write_csv("orders_1.csv", [order(i, "2024-01-01T00:10:00Z") for i in range(1, 50)])
    monkeypatch.setenv("PIPELEDGER_NOW", "2024-01-01T00:30:00Z")
    project.run_json("run", "--due")
    monkeypatch.setenv("PIPELEDGER_NOW", "2024-01-01T05:30:00Z")
    processes = project.spawn_together(["run", "--due", "--json"], ["run", "--due", "--json"])
    outputs = [p.communicate() for p in processes]
    for process, (out, err) in zip(processes, outputs, strict=True):
        assert process.returncode in (0, 4), err
        for result in json.loads(out):
            assert result["status"] in ("success", "skipped"), result
            if result["status"] == "skipped":
                assert result["reason"] in ("duplicate", "locked", "busy")
    done = [(s, e) for s, e, _ in scheduled(project)]
    assert len(done) == len(set(done))  # no interval ran twice
    project.run_json("run", "--due")  # the next tick runs any interval a skip left over
    done = [(s, e) for s, e, _ in scheduled(project)]
    assert len(done) == len(set(done)) == 6
    assert project.count() == 49


def test_the_same_idempotency_key_twice_loads_once_and_reports_the_first_run(
    project: Project, warehouse_url: str
) -> None:
    project.configure(orders=orders_pipeline())
    project.write_csv("orders_1.csv", [order(i, "2024-01-01T10:00:00Z") for i in range(1, 4)])
    first = project.run_json("run", "orders", "--idempotency-key", "event-42")[0]
    project.write_csv("orders_2.csv", [order(9, "2024-01-02T10:00:00Z")])
    code, out, _ = project.cli("run", "orders", "--idempotency-key", "event-42", "--json")
    (second,) = json.loads(out)
    assert code == 0
    assert (second["status"], second["reason"]) == ("skipped", "duplicate")
    assert second["duplicate_of"] == first["run_id"]
    assert project.count() == 3  # the second trigger loaded nothing
    code, _, err = project.cli("run", "orders", "--idempotency-key", "event-42")
    assert code == 0 and f"held by run {first['run_id']} (success)" in err

    # while a run holding the key is still running, a duplicate is skipped (exit 4)
    ledger = Ledger(warehouse_url)  # another process's, e.g. an orchestrator's
    held = ledger.start_run("orders", idempotency_key="event-43")
    code, out, _ = project.cli("run", "orders", "--idempotency-key", "event-43", "--json")
    assert code == 4 and json.loads(out)[0]["duplicate_of"] == held
    ledger.fail_run(held, "the orchestrator gave up")
    # a failed run's key may be taken again
    (retried,) = project.run_json("run", "orders", "--idempotency-key", "event-43")
    assert retried["status"] == "success" and retried["rows_inserted"] == 1


class ServeClock:
    """The clock ``serve`` reads and sleeps on: time stands still while serve works and
    jumps to the end of each sleep at once. Serve's last sleep is cut short by a real
    SIGTERM, as a person stops it while it waits."""

    def __init__(self, start: datetime, sleeps: int) -> None:
        self.moment = start
        self.sleeps = sleeps
        self.slept: list[float] = []

    def now(self) -> datetime:
        return self.moment

    def pause(self, seconds: float) -> bool:
        self.slept.append(seconds)
        if len(self.slept) == self.sleeps:
            # only the command's own handler may meet it: the default one ends this process
            assert signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, signal.SIG_IGN)
            os.kill(os.getpid(), signal.SIGTERM)
            threading.Event().wait()  # its handler raises here, as it does in serve's wait
        self.moment += timedelta(seconds=seconds)
        return True


def test_serve_wakes_up_on_the_schedule_and_keeps_going_when_a_run_fails(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = orders_pipeline(
        source={"kind": "csv", "path": "missing/*.csv"}, target="analytics.broken",
        schedule="0 * * * *",
    )  # fmt: skip
    project.configure(orders=hourly(), broken=broken)
    project.write_csv("orders_1.csv", [order(1, "2024-01-01T00:10:00Z")])
    serve_clock = ServeClock(datetime(2024, 1, 1, 0, 59, 57, tzinfo=UTC), sleeps=2)
    monkeypatch.setattr(clock, "now", serve_clock.now)
    monkeypatch.setattr(due, "pause", serve_clock.pause)
    code, out, err = project.cli("serve", "--poll", "30s")
    assert code == 0, err
    assert serve_clock.slept == [3, 30]  # until 01:00, when the schedule fires; then --poll
    assert [(s, e) for s, e, _ in scheduled(project)] == [("23:00", "00:00"), ("00:00", "01:00")]
    assert len(scheduled(project, "failed")) == 2  # broken failed at each wake-up; serve went on
    assert out.count("orders interval") == out.count("broken interval") == 2
    assert "no file matches" in err and "stopped" in err


def test_due_and_keys_need_the_ledger(project: Project) -> None:
    project.configure(orders=hourly(), raw="\n[ledger]\nenabled = false\n")
    code, out, _ = project.cli("run", "--due", "--json")
    assert code == 2 and "needs the ledger" in json.loads(out)["error"]
    code, _, err = project.cli("run", "--idempotency-key", "k")
    assert code == 2 and "needs the ledger" in err
