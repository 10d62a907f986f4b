"""Alerts end to end, against a real webhook receiver on localhost: one alert per event
(with pipeline, run id and reason), never a second one for the same event, runs that do
not wait for a receiver that is down, and alerts that arrive once it is back."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from pipeledger import alerts
from tests.helpers import Project, order, orders_pipeline
from tests.webhook import Receiver

# longer than the suite lets a test run: the tests wait for the watchers, not for the clock
SETTLE = timedelta(hours=1)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    hook = Receiver()
    hook.start()
    yield hook
    hook.stop()


def configure(project: Project, receiver: Receiver, **settings: str) -> None:
    """orders (fresh rows of 2023: late against a 1h SLA at once), gated (a row its gate
    halts on) and broken (a malformed file)."""
    alerting = "".join(f'{key} = "{value}"\n' for key, value in settings.items())
    project.configure(
        orders=orders_pipeline(freshness_sla="1h"),
        gated=orders_pipeline(
            source={"kind": "csv", "path": "data/gated*.csv"}, target="analytics.gated",
            checks={"range": {"amount": {"min": 0}}},
        ),
        broken=orders_pipeline(
            source={"kind": "csv", "path": "data/broken*.csv"}, target="analytics.broken"
        ),
        raw=f'\n[alerts]\nwebhooks = {{ test = "{receiver.url}" }}\n{alerting}',
    )  # fmt: skip
    project.write_csv("orders_0.csv", [order(i, "2023-12-31T10:00:00Z") for i in range(1, 4)])
    project.write_csv("gated_0.csv", [order(1, "2024-01-01T10:00:00Z", amount="-5.00")])
    (project.root / "data" / "broken_0.csv").write_text("order_id,qty\n1,2,3,4\n")


def settled(receiver: Receiver) -> list[dict[str, Any]]:
    """What the receiver has once this process's watchers are idle: a watcher posts each
    alert and waits for the answer, which the receiver sends once it holds the alert, so
    nothing more is on its way."""
    alerts.wait_for_watchers(SETTLE)
    return receiver.alerts()


def by_event(received: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    found = {alert["event"]: alert for alert in received}
    assert len(found) == len(received), received  # one alert per event
    return found


def run_ids(project: Project) -> dict[str, str]:
    rows = project.query(
        f"SELECT pipeline, run_id FROM {project.table('pipeledger.pipeline_runs')} "
        "ORDER BY started_at"
    )
    return {str(pipeline): str(run_id) for pipeline, run_id in rows}


def test_one_alert_per_event_with_pipeline_run_id_and_reason(
    project: Project, receiver: Receiver
) -> None:
    configure(project, receiver)
    code, _, err = project.cli("run")
    assert code == 1, err  # broken failed for good (gated halted: 3, orders succeeded)
    found = by_event(settled(receiver))
    assert set(found) == {"failed", "gate_halt", "freshness_breach"}
    runs = run_ids(project)
    expected = {"failed": "broken", "gate_halt": "gated", "freshness_breach": "orders"}
    for event, pipeline in expected.items():
        alert = found[event]
        assert (alert["pipeline"], alert["run_id"]) == (pipeline, runs[pipeline])
        assert alert["reason"] and pipeline in alert["text"] and alert["alert_id"]
    assert "expected 2 fields, found 4" in found["failed"]["reason"]
    assert "quality gate failed" in found["gate_halt"]["reason"]
    assert "newest data" in found["freshness_breach"]["reason"]
    assert "SLA 1h" in found["freshness_breach"]["reason"]

    # looking again finds the same events: the watchdog, and a run of a pipeline still late
    assert project.cli("watchdog")[0] == 0
    assert project.cli("run", "orders")[0] == 0
    assert len(settled(receiver)) == 3
    code, out, _ = project.cli("alerts", "--json")
    listed = json.loads(out)
    assert code == 0 and {(a["event"], a["status"], a["attempts"]) for a in listed} == {
        ("failed", "delivered", 1), ("gate_halt", "delivered", 1),
        ("freshness_breach", "delivered", 1),
    }  # fmt: skip


def test_with_the_receiver_down_runs_succeed_and_alerts_arrive_once_it_is_back(
    project: Project, receiver: Receiver
) -> None:
    configure(project, receiver, retry_delay="0s")
    receiver.stop()
    assert project.cli("run", "orders")[0] == 0  # late, and its alert cannot be delivered
    assert project.cli("run", "broken")[0] == 1  # its own failure, nothing more
    alerts.wait_for_watchers(SETTLE)
    code, out, _ = project.cli("alerts", "--json")
    pending = json.loads(out)
    assert code == 0
    assert {(a["event"], a["status"]) for a in pending} == {
        ("freshness_breach", "pending"), ("failed", "pending")
    }  # fmt: skip
    assert all(a["attempts"] >= 1 and "refused" in a["last_error"].lower() for a in pending)
    assert receiver.alerts() == []

    receiver.start()
    project.write_csv("orders_1.csv", [order(9, "2024-01-01T10:00:00Z")])
    assert project.cli("run", "orders")[0] == 0  # the next run sends what waited
    found = by_event(settled(receiver))
    assert set(found) == {"freshness_breach", "failed"}
    assert project.cli("watchdog")[0] == 0
    assert len(settled(receiver)) == 2


def test_a_refusing_webhook_is_not_asked_again(project: Project, receiver: Receiver) -> None:
    configure(project, receiver, retry_delay="0s")
    receiver.answer = 404
    assert project.cli("run", "broken")[0] == 1
    assert len(settled(receiver)) == 1
    assert project.cli("watchdog")[0] == 0
    assert len(settled(receiver)) == 1
    (alert,) = json.loads(project.cli("alerts", "--json")[1])
    assert (alert["status"], alert["last_error"]) == ("failed", "HTTP 404 Not Found")


def test_only_the_events_asked_for(project: Project, receiver: Receiver) -> None:
    configure(project, receiver)
    with (project.root / "pipeledger.toml").open("a") as config:
        config.write('on = ["gate_halt"]\n')
    assert project.cli("run")[0] == 1
    assert [a["event"] for a in settled(receiver)] == ["gate_halt"]


def test_raise_event_for_what_no_run_records(project: Project, receiver: Receiver) -> None:
    from pipeledger.config.model import load_config

    configure(project, receiver)
    config = load_config(project.root / "pipeledger.toml")
    project.cli("ledger", "migrate")
    for _ in range(2):  # raised twice, sent once
        alerts.raise_event(config, "reconciliation_mismatch", "orders", None,
                           "3 rows in the source are missing from the target",
                           {"missing": 3}, subject="2024-01-01")  # fmt: skip
    (alert,) = settled(receiver)
    assert (alert["event"], alert["details"]) == ("reconciliation_mismatch", {"missing": 3})


def test_a_reconciliation_that_finds_rows_missing_sends_one_alert(
    project: Project, receiver: Receiver
) -> None:
    configure(project, receiver)
    with (project.root / "pipeledger.toml").open("a") as config:
        config.write('on = ["reconciliation_mismatch"]\n')
    assert project.cli("run", "orders")[0] == 0
    project.execute(f"DELETE FROM {project.table()} WHERE order_id = 2")
    code, out, err = project.cli("reconcile", "orders", "--json")
    assert code == 3, err
    run_id = json.loads(out)["run_id"]
    (alert,) = settled(receiver)
    assert (alert["event"], alert["pipeline"], alert["run_id"]) == (
        "reconciliation_mismatch", "orders", run_id
    )  # fmt: skip
    assert "1 rows missing" in alert["reason"] and alert["details"]["missing_rows"] == 1
    assert project.cli("watchdog")[0] == 0
    assert len(settled(receiver)) == 1  # looking again raises nothing new
