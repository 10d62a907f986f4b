"""Running unattended without surprises, on both backends: a daily schedule once on the
night DST ends, a cron that never fires refused, catch-up after a crash in order, the
schedule of a project that never ran on it, and `serve` starting what is due while 100
alerts wait for a receiver that never answers."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.helpers import Project, order, orders_pipeline
from tests.webhook import Receiver

RUNS = "pipeledger.pipeline_runs"


def scheduled(project: Project) -> list[tuple[str, str, str]]:
    """(start, end, status) of the scheduled runs, in the order they started."""
    rows = project.query(
        f"SELECT data_interval_start, data_interval_end, status FROM {project.table(RUNS)} "
        "WHERE trigger_type = 'scheduled' ORDER BY started_at"
    )
    return [(_utc(a), _utc(b), str(s)) for a, b, s in rows]


def _utc(value: Any) -> str:
    moment = value if isinstance(value, datetime) else datetime.fromisoformat(value)
    return moment.astimezone(UTC).strftime("%m-%dT%H:%M")


def test_a_daily_schedule_runs_once_on_the_night_dst_ends(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.configure(
        orders=orders_pipeline(schedule="0 2 * * *", timezone="Europe/Berlin", catchup=True)
    )
    project.write_csv("orders_1.csv", [order(1, "2024-10-26T10:00:00Z")])
    nights = ["2024-10-26T12", "2024-10-27T00:30", "2024-10-27T01:30", "2024-10-27T12"]
    for now in [*nights, "2024-10-28T12"]:
        monkeypatch.setenv("PIPELEDGER_NOW", f"{now}:00Z" if now.count(":") else f"{now}:00:00Z")
        code, _, err = project.cli("run", "--due")
        assert code == 0, err
    assert scheduled(project) == [  # 02:00 CEST (00:00Z) once, then 02:00 CET (01:00Z)
        ("10-25T00:00", "10-26T00:00", "success"),
        ("10-26T00:00", "10-27T00:00", "success"),
        ("10-27T00:00", "10-28T01:00", "success"),
    ]


def test_a_cron_that_never_fires_is_refused_naming_the_node(project: Project) -> None:
    project.configure(
        healthy=orders_pipeline(schedule="0 * * * *"),
        feb30=orders_pipeline(target="analytics.feb30", schedule="0 2 30 2 *"),
    )
    for command in (("run", "--due"), ("schedule",), ("dag",)):
        code, _, err = project.cli(*command)
        assert code == 2, err
        assert "pipelines.feb30.schedule: '0 2 30 2 *' never fires" in err


def test_schedule_says_when_a_node_never_ran_on_its_schedule(project: Project) -> None:
    project.configure(orders=orders_pipeline(schedule="0 * * * *"))
    project.write_csv("orders_1.csv", [order(1, "2024-03-01T00:10:00Z")])
    assert project.cli("run")[0] == 0  # a manual run: not a scheduled one
    code, out, err = project.cli("schedule")
    assert code == 0, err
    assert "last  (never ran on its schedule)" in out and "1 overdue" in out


def test_catch_up_after_a_crash_runs_the_killed_interval_first(
    project: Project, monkeypatch: pytest.MonkeyPatch, warehouse_url: str
) -> None:
    project.configure(orders=orders_pipeline(schedule="0 * * * *", catchup=True))
    project.write_csv("orders_1.csv", [order(1, "2024-03-01T00:10:00Z")])
    monkeypatch.setenv("PIPELEDGER_NOW", "2024-03-01T00:30:00Z")
    assert project.cli("run", "--due")[0] == 0  # [23:00, 00:00)
    # a run --due killed during [00:00, 01:00): its run is left 'running', its process gone
    killed = (
        "import sys; from datetime import datetime; from pipeledger import Ledger; "
        "s, e = datetime.fromisoformat(sys.argv[2]), datetime.fromisoformat(sys.argv[3]); "
        "Ledger(sys.argv[1]).start_run('orders', trigger_type='scheduled', "
        "idempotency_key=f'schedule:{s.isoformat()}/{e.isoformat()}', data_interval=(s, e))"
    )
    interval = ("2024-03-01T00:00:00+00:00", "2024-03-01T01:00:00+00:00")
    subprocess.run([sys.executable, "-c", killed, warehouse_url, *interval], check=True)
    monkeypatch.setenv("PIPELEDGER_NOW", "2024-03-01T03:30:00Z")
    code, _, err = project.cli("run", "--due")
    assert code == 0, err
    assert scheduled(project) == [
        ("02-29T23:00", "03-01T00:00", "success"),
        ("03-01T00:00", "03-01T01:00", "abandoned"),  # settled before planning ...
        ("03-01T00:00", "03-01T01:00", "success"),  # ... so its interval runs first
        ("03-01T01:00", "03-01T02:00", "success"),
        ("03-01T02:00", "03-01T03:00", "success"),
    ]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    hook = Receiver()
    hook.start()
    yield hook
    hook.stop()


def test_serve_starts_what_is_due_at_once_with_100_alerts_waiting_for_a_hanging_receiver(
    project: Project, receiver: Receiver
) -> None:
    from pipeledger import alerts
    from pipeledger.config.model import load_config

    project.configure(
        orders=orders_pipeline(schedule="* * * * *"),
        raw=f'\n[alerts]\nwebhooks = {{ hook = "{receiver.url}" }}\ntimeout = "5s"\n',
    )
    project.write_csv("orders_1.csv", [order(1, "2024-03-01T00:10:00Z")])
    config = load_config(project.root / "pipeledger.toml")
    project.cli("ledger", "migrate")
    receiver.answer = 500  # 100 alerts, each tried once and pending
    for n in range(100):
        alerts.raise_event(
            config, "reconciliation_mismatch", "orders", None, f"w{n}", subject=str(n)
        )
    alerts.wait_for_watchers(timedelta(seconds=120))
    table = project.table("pipeledger.alerts")
    project.execute(f"UPDATE {table} SET next_attempt_at = created_at")  # all due again
    receiver.hang = True
    tried = len(receiver.arrived)  # the tries made before serve
    log = (project.root / "serve.err").open("w")
    process = subprocess.Popen(
        [sys.executable, "-m", "pipeledger", "serve", "--poll", "1m"],
        cwd=project.root,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        while "serving" not in (project.root / "serve.err").read_text():
            assert process.poll() is None, (project.root / "serve.err").read_text()
            time.sleep(0.02)
        ready = datetime.now(UTC)
        first = f"SELECT min(started_at) FROM {project.table(RUNS)}"
        while not (started := project.query(first)[0][0]):
            assert process.poll() is None, (project.root / "serve.err").read_text()
            time.sleep(0.05)
        began = started if isinstance(started, datetime) else datetime.fromisoformat(started)
        delay = (began.astimezone(UTC) - ready).total_seconds()
        receiver.wait_for(101)  # the background round is sending meanwhile
        ended = f"SELECT count(*) FROM {project.table(RUNS)} WHERE status != 'running'"
        while project.query(ended)[0][0] == 0:  # SIGTERM during a run would cancel it
            time.sleep(0.05)
        stopping = time.monotonic()
        process.send_signal(signal.SIGTERM)
        process.wait()
        stopped = time.monotonic() - stopping
    finally:
        if process.poll() is None:
            process.kill()
        log.close()
    print(f"serve: the due run started {delay:.2f} s after serve was ready; exit {stopped:.1f} s")
    # a delivery made before the run (inline) would hold it for its whole timeout (5 s) after
    # the hanging receiver got the request: the run starts before any delivery could have
    # ended, however slow the machine (on a quiet one ~0.5 s after serve is ready, README)
    first_request = min(receiver.arrived[tried:])  # serve's first, which hangs
    assert began.timestamp() < first_request + 5, (delay, began, first_request)
    # 0 while it waited; 143 when SIGTERM came during its bookkeeping after the run
    assert process.returncode in (0, 143), (project.root / "serve.err").read_text()
    statuses = project.query(f"SELECT status FROM {project.table(RUNS)}")
    assert [s for (s,) in statuses] == ["success"]
    rows = json.loads(project.cli("alerts", "--json")[1])
    assert len(rows) == 100 and all(r["status"] == "pending" for r in rows)
