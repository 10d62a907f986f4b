"""The run ledger, end to end: what every run leaves behind, crashes, retries, cancellation,
a separate ledger that goes down, and secrets that must never be stored."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from pipeledger.testing.postgres import ThrowawayPostgres
from tests.helpers import Project, order, orders_pipeline, write_big_orders_csv
from tests.runs.test_crash_and_concurrency import BIG, _paused, _wait_until_staging

RUNS = "pipeledger.pipeline_runs"
TASKS = "pipeledger.task_runs"
EVENTS = "pipeledger.audit_events"
SNAPSHOTS = "pipeledger.dataset_snapshots"


def runs(project: Project) -> list[dict[str, Any]]:
    columns = (
        "run_id, logical_run_id, attempt, status, trigger_type, rows_read, rows_inserted, "
        "rows_updated, rows_unchanged, watermark_before, watermark_after, error_code, "
        "error_message"
    )
    rows = project.query(f"SELECT {columns} FROM {project.table(RUNS)} ORDER BY started_at")
    return [dict(zip([c.strip() for c in columns.split(",")], row, strict=True)) for row in rows]


def test_every_run_and_backfill_leaves_exact_records(project: Project) -> None:
    project.configure(orders=orders_pipeline(lateness="1h"))
    project.write_csv(
        "orders_1.csv", [order(i, f"2024-01-0{1 + i % 3}T10:00:00Z") for i in range(1, 31)]
    )
    first = project.run()
    project.write_csv(
        "orders_2.csv",
        [order(5, "2024-01-05T10:00:00Z", status="refunded"), order(99, "2024-01-05T11:00:00Z")],
    )
    second = project.run()
    third = project.run_json("backfill", "orders", "--start", "2024-01-01", "--end", "2024-01-02")[
        0
    ]

    recorded = runs(project)
    assert [r["run_id"] for r in recorded] == [first["run_id"], second["run_id"], third["run_id"]]
    assert [r["trigger_type"] for r in recorded] == ["manual", "manual", "backfill"]
    for row, result in zip(recorded, (first, second, third), strict=True):
        assert row["status"] == "success"
        assert (row["rows_read"], row["rows_inserted"], row["rows_updated"]) == (
            result["rows_read"],
            result["rows_inserted"],
            result["rows_updated"],
        )
        assert row["logical_run_id"] == row["run_id"] and row["attempt"] == 1
    # the counts add up to the target table
    assert sum(r["rows_inserted"] for r in recorded) == project.count() == 31
    written = project.query(
        f"SELECT count(*) FROM {project.table()} WHERE _pipeledger_run_id = %s", [second["run_id"]]
    )[0][0]
    assert written == second["rows_inserted"] + second["rows_updated"] == 2
    # a task row per step, with rows
    for result in (first, second, third):
        tasks = project.query(
            f"SELECT name, status, rows_out FROM {project.table(TASKS)} "
            "WHERE run_id = %s ORDER BY seq",
            [result["run_id"]],
        )
        assert [(t[0], t[1]) for t in tasks] == [
            ("extract", "success"),
            ("transform", "success"),
            ("load", "success"),
        ]
        assert tasks[0][2] == result["rows_read"]
    # a snapshot per run that matches the table as it was committed
    snaps = project.query(f"SELECT run_id, row_count, max_cursor FROM {project.table(SNAPSHOTS)}")
    by_run = {s[0]: s for s in snaps}
    assert by_run[first["run_id"]][1] == 30 and by_run[second["run_id"]][1] == 31
    assert by_run[second["run_id"]][2] == "2024-01-05T11:00:00.000000+00:00"
    events = {
        (e[0], e[1])
        for e in project.query(f"SELECT run_id, event_type FROM {project.table(EVENTS)}")
    }
    assert (first["run_id"], "SCHEMA_CHANGE") in events
    assert (second["run_id"], "RECORD_UPDATED") in events
    assert (second["run_id"], "WATERMARK_ADVANCED") in events
    assert (third["run_id"], "BACKFILL") in events


def test_a_failed_run_records_its_error_and_a_retry_is_a_new_attempt(project: Project) -> None:
    project.configure(orders=orders_pipeline())
    code, _, _ = project.cli("run")  # no source file yet
    assert code == 1
    failed = runs(project)[0]
    assert failed["status"] == "failed" and failed["error_code"] == "SourceError"
    assert "no file matches" in failed["error_message"]
    project.write_csv("orders_1.csv", [order(1, "2024-01-01T10:00:00Z")])
    retried = project.run_json("run", "--retry")[0]
    first, second = runs(project)
    assert first == failed  # the failed attempt keeps its error
    assert second["run_id"] == retried["run_id"] != first["run_id"]
    assert (second["logical_run_id"], second["attempt"]) == (first["logical_run_id"], 2)
    assert (second["trigger_type"], second["status"]) == ("retry", "success")
    code, _, err = project.cli("run", "--retry")
    assert code == 2 and "nothing to retry" in err


@pytest.mark.slow
def test_sigkill_leaves_a_running_row_that_the_watchdog_abandons(project: Project) -> None:
    project.configure(
        orders=orders_pipeline(), raw='\n[ledger]\nlease = "1s"\nheartbeat = "200ms"\n'
    )
    project.write_csv("orders_0.csv", [order(i, "2023-12-31T10:00:00Z") for i in range(1, 11)])
    project.run()
    before = project.watermarks()
    write_big_orders_csv(
        project.root / "data" / "orders_1.csv", BIG, 1_000, "2024-01-01T00:00:00+00:00"
    )
    process = project.spawn("--verbose", "run")
    _wait_until_staging(process)
    process.send_signal(signal.SIGSTOP)  # mid-way on any machine; SIGKILL ends it stopped
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    killed = runs(project)[-1]
    assert killed["status"] == "running"
    # its process is gone from this host: the watchdog need not wait for the lease to end
    code, out, _ = project.cli("watchdog", "--json")
    assert code == 0 and json.loads(out)["abandoned"] == [killed["run_id"]]
    abandoned = runs(project)[-1]
    assert abandoned["status"] == "abandoned" and abandoned["error_code"] == "LEASE_EXPIRED"
    assert f"its process {process.pid} on" in abandoned["error_message"]
    assert project.count() == 10 and project.watermarks() == before
    assert project.run()["rows_inserted"] == BIG
    assert runs(project)[-1]["status"] == "success"
    assert runs(project)[-2]["status"] == "abandoned"  # a final state never changes


@pytest.mark.slow
def test_sigterm_cancels_the_run_and_rolls_back(project: Project) -> None:
    project.configure(orders=orders_pipeline())
    write_big_orders_csv(
        project.root / "data" / "orders_1.csv", BIG, 1, "2024-01-01T00:00:00+00:00"
    )
    process = project.spawn("--verbose", "run")
    _wait_until_staging(process)
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate()
    assert process.returncode == 143, err
    assert "cancelled" in err
    cancelled = runs(project)[-1]
    assert cancelled["status"] == "cancelled"
    assert not project.exists()


@pytest.fixture(scope="module")
def ledger_server() -> Iterator[ThrowawayPostgres]:
    with ThrowawayPostgres() as server:
        yield server


def _fresh_ledger_url(server: ThrowawayPostgres, name: str) -> str:
    with psycopg.connect(server.url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return server.url.rsplit("/", 1)[0] + f"/{name}"


@pytest.mark.slow
def test_separate_ledger_down_during_a_run_is_spooled_then_replayed(
    project: Project, ledger_server: ThrowawayPostgres, tmp_path: Path
) -> None:
    ledger_url = _fresh_ledger_url(ledger_server, f"ledger_{tmp_path.name[-12:].replace('-', '_')}")
    project.configure(orders=orders_pipeline(), raw=f'\n[ledger]\nurl = "{ledger_url}"\n')
    project.write_csv("orders_0.csv", [order(i, "2023-12-31T10:00:00Z") for i in range(1, 11)])
    first = project.run()
    write_big_orders_csv(
        project.root / "data" / "orders_1.csv", BIG, 1_000, "2024-01-01T00:00:00+00:00"
    )
    process = project.spawn("--verbose", "run", "--json")
    _wait_until_staging(process)
    with _paused(process):
        ledger_server.pause()  # the ledger goes down in the middle of the run
    try:
        out, err = process.communicate()
        assert process.returncode == 0, err  # the run completes (on_unavailable = "spool")
        second = json.loads(out)[0]
        assert project.count() == BIG + 10  # the data and the watermark committed
        spool = project.root / ".pipeledger" / "ledger-spool.jsonl"
        assert second["run_id"] in spool.read_text()
    finally:
        ledger_server.resume()
    third = project.run()  # replays the spool, then records itself
    assert not spool.exists()
    with psycopg.connect(ledger_url) as conn:
        rows = conn.execute(
            "SELECT run_id, status, rows_inserted FROM pipeledger.pipeline_runs ORDER BY started_at"
        ).fetchall()
        tasks = conn.execute(
            "SELECT run_id, count(*) FROM pipeledger.task_runs GROUP BY run_id"
        ).fetchall()
    assert rows == [
        (first["run_id"], "success", 10),
        (second["run_id"], "success", BIG),
        (third["run_id"], "success", 0),
    ]
    assert dict(tasks) == {first["run_id"]: 3, second["run_id"]: 3, third["run_id"]: 3}
    # the warehouse holds no ledger tables: only the watermark state
    assert not project.exists("pipeledger.pipeline_runs")


def test_separate_ledger_down_with_on_unavailable_fail_stops_the_run(
    project: Project, tmp_path: Path
) -> None:
    dead = "postgresql://postgres@127.0.0.1:1/ledger"
    project.configure(
        orders=orders_pipeline(), raw=f'\n[ledger]\nurl = "{dead}"\non_unavailable = "fail"\n'
    )
    project.write_csv("orders_0.csv", [order(1, "2023-12-31T10:00:00Z")])
    code, _, err = project.cli("run")
    assert code == 75 and "PostgreSQL connect" in err  # the ledger is down: transient
    assert not project.exists()


def test_a_late_final_record_for_an_abandoned_run_is_kept_as_an_event(warehouse_url: str) -> None:
    from datetime import UTC, datetime, timedelta

    from pipeledger.ledger import store
    from pipeledger.ledger.tables import AUDIT, LEDGER, RUNS
    from pipeledger.ledger.vocabulary import RunRecord, RunStatus, TriggerType
    from pipeledger.ledger.watchdog import abandon_expired
    from pipeledger.warehouse.adapters import open_warehouse
    from pipeledger.warehouse.migrations import migrate

    database = open_warehouse(warehouse_url)
    start = datetime.now(UTC) - timedelta(hours=1)
    record = RunRecord(
        run_id="r-1",
        logical_run_id="r-1",
        attempt=1,
        pipeline="orders",
        trigger_type=TriggerType.MANUAL,
        status=RunStatus.RUNNING,
        started_at=start,
        host="elsewhere",
        pid=1,
        lease_expires_at=start,
    )
    with database.session() as session:
        migrate(session, LEDGER)
        store.apply(session, store.run_op(record))
        assert abandon_expired(session) == {"r-1": "abandoned"}
    record.status, record.ended_at, record.rows_inserted = RunStatus.SUCCESS, datetime.now(UTC), 7
    for _ in range(2):  # a spool replayed twice records it once
        with database.session() as session:
            store.apply(session, store.run_op(record))
    with database.session(write=False) as session:
        d = session.dialect
        status = session.query(f"SELECT status FROM {d.table(RUNS)}")
        events = session.query(f"SELECT event_type FROM {d.table(AUDIT)}")
    assert status == [("abandoned",)]  # a final state never changes
    assert events == [("LATE_COMPLETION",)]  # but the truth is on record
