"""Retries of transient failures only, timeouts and `pipeledger cancel`, on both backends.

The source that drops its connection or hangs is a real PostgreSQL table: the test holds a
lock on it, so the source's query waits (a realistic hang: a table being rebuilt), and
ends the waiting reader's session with pg_terminate_backend (a dropped connection)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest

from pipeledger import Ledger, RunStatus
from pipeledger.errors import UsageError
from tests.helpers import Project, order, orders_pipeline

RUNS = "pipeledger.pipeline_runs"
WAITING_READER = (
    "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
    "AND query LIKE '%%source_orders%%' AND application_name LIKE 'pipeledger %%'"
)


def attempts(project: Project) -> list[tuple[Any, ...]]:
    return project.query(
        f"SELECT logical_run_id, attempt, status, trigger_type, error_code "
        f"FROM {project.table(RUNS)} ORDER BY started_at"
    )


def sql_source(postgres_url: str, **overrides: Any) -> dict[str, Any]:
    with psycopg.connect(postgres_url) as conn:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS source_orders (order_id bigint, qty bigint, "
            "updated_at timestamptz)"
        )
        conn.execute("INSERT INTO source_orders VALUES (1, 2, '2024-01-01T10:00:00Z')")
    return orders_pipeline(
        source={"kind": "sql", "url": postgres_url, "table": "source_orders"},
        target="analytics.orders_copy", columns={}, **overrides,
    )  # fmt: skip


@contextmanager
def source_locked(postgres_url: str) -> Iterator[psycopg.Connection[Any]]:
    """The source table locked by another session: a reader waits until it is released."""
    with psycopg.connect(postgres_url) as conn:
        conn.execute("LOCK TABLE source_orders IN ACCESS EXCLUSIVE MODE")
        yield conn


def _wait_for_reader(watcher: psycopg.Connection[Any], running: Callable[[], bool]) -> int | None:
    """The backend of the run's source query once it waits on the lock; None if the run
    ended (``running()`` false) without ever waiting."""
    while running():
        rows = watcher.execute(WAITING_READER).fetchall()
        if rows:
            return int(rows[0][0])
        time.sleep(0.05)
    return None


def test_a_source_that_drops_the_connection_twice_succeeds_on_attempt_3(
    project: Project, postgres_url: str
) -> None:
    project.configure(orders=sql_source(postgres_url, retries=3, retry_delay="50ms"))
    killed: list[int] = []
    finished = threading.Event()

    def drop_twice() -> None:
        with (
            source_locked(postgres_url) as holder,
            psycopg.connect(postgres_url, autocommit=True) as watcher,
        ):
            for _ in range(2):
                reader = _wait_for_reader(watcher, lambda: not finished.is_set())
                if reader is None:
                    return  # the run is over: the assertions below say what it did
                watcher.execute("SELECT pg_terminate_backend(%s)", [reader])
                killed.append(reader)
                while watcher.execute(WAITING_READER).fetchall():
                    time.sleep(0.02)
            holder.commit()  # the third attempt reads

    dropper = threading.Thread(target=drop_twice)
    dropper.start()
    try:
        code, out, err = project.cli("run", "--json")
    finally:
        finished.set()
        dropper.join()
    assert code == 0, err
    (result,) = json.loads(out)
    assert result["status"] == "success" and result["rows_inserted"] == 1
    assert len(killed) == 2
    rows = attempts(project)
    assert len({r[0] for r in rows}) == 1  # one logical run
    assert [(r[1], r[2], r[3]) for r in rows] == [
        (1, "failed", "manual"), (2, "failed", "retry"), (3, "success", "retry"),
    ]  # fmt: skip
    assert all(r[4].startswith("TransientWarehouseError") for r in rows[:2])


def test_a_malformed_file_is_not_retried(project: Project) -> None:
    project.configure(orders=orders_pipeline(retries=3, retry_delay="50ms"))
    path = project.write_csv("orders_1.csv", [order(1, "2024-01-01T10:00:00Z")])
    path.write_text(path.read_text() + "2,only,three\n")
    code, out, _ = project.cli("run", "--json")
    (result,) = json.loads(out)
    assert code == 1 and (result["status"], result["attempt"]) == ("failed", 1)
    assert [(r[1], r[2]) for r in attempts(project)] == [(1, "failed")]


@pytest.mark.slow
def test_a_source_that_hangs_is_stopped_by_its_timeout(project: Project, postgres_url: str) -> None:
    project.configure(orders=sql_source(postgres_url, timeout="3s", retries=2))
    with source_locked(postgres_url):
        began = time.monotonic()
        code, out, err = project.cli("run", "--json")
        took = time.monotonic() - began
    (result,) = json.loads(out)
    assert code == 124, err
    assert (result["status"], result["reason"]) == ("timed_out", "timeout")
    assert "timeout of 3 s" in result["error"] and "nothing was written" in result["error"]
    assert 3 <= took < 15  # stopped within seconds, and not retried
    assert [r[2] for r in attempts(project)] == ["timed_out"]
    assert not project.exists("analytics.orders_copy")
    (again,) = project.run_json("run")  # its lock was released: the next run proceeds
    assert again["status"] == "success" and again["rows_inserted"] == 1


@pytest.mark.slow
def test_cancel_from_another_process_ends_a_running_load_as_cancelled(
    project: Project, postgres_url: str
) -> None:
    project.configure(
        orders=sql_source(postgres_url), raw='\n[ledger]\nlease = "5s"\nheartbeat = "200ms"\n'
    )
    with source_locked(postgres_url), psycopg.connect(postgres_url, autocommit=True) as watcher:
        process = project.spawn("run", "--json")
        try:
            assert _wait_for_reader(watcher, lambda: process.poll() is None), process.communicate()
            (run_id,) = [r[0] for r in project.query(
                f"SELECT run_id FROM {project.table(RUNS)} WHERE status = 'running'"
            )]  # fmt: skip
            code, out, err = project.cli("cancel", run_id[:8], "--json")
            assert code == 0, err
            assert json.loads(out)["run_id"] == run_id
            began = time.monotonic()
            out, err = process.communicate()
            assert time.monotonic() - began < 10
        finally:
            if process.poll() is None:
                process.kill()
    assert process.returncode == 130, err
    (result,) = json.loads(out)
    assert (result["status"], result["run_id"]) == ("cancelled", run_id)
    assert "nothing was written" in result["error"]
    (row,) = project.query(f"SELECT status, error_message FROM {project.table(RUNS)}")
    assert row[0] == "cancelled" and "cancelled by" in row[1]
    assert not project.exists("analytics.orders_copy")
    code, _, err = project.cli("cancel", run_id)
    assert code == 2 and "not running; nothing to cancel" in err


def test_an_orchestrator_opens_a_run_in_one_process_and_closes_it_in_another(
    project: Project, warehouse_url: str
) -> None:
    project.configure(orders=orders_pipeline())
    opener = Ledger(warehouse_url)
    run_id = opener.start_run("orders_from_airflow", trigger_type="scheduled")
    assert opener.heartbeat(run_id) is False
    closer = (
        "import sys; from pipeledger import Ledger; "
        "Ledger(sys.argv[1]).finish_run(sys.argv[2], rows_read=7, rows_inserted=5)"
    )
    subprocess.run([sys.executable, "-c", closer, warehouse_url, run_id], check=True)
    record = Ledger(warehouse_url).get_run(run_id)
    assert (record.status, record.rows_read, record.rows_inserted) == (RunStatus.SUCCESS, 7, 5)
    assert record.ended_at is not None and record.duration_ms is not None
    with pytest.raises(UsageError, match="a final state never changes"):
        opener.fail_run(run_id, "too late")

    second = opener.start_run("orders_from_airflow")
    opener.request_cancel(second, requested_by="ops")
    assert opener.heartbeat(second) is True  # the orchestrator is told to stop
    failed = Ledger(warehouse_url).fail_run(second, ValueError("the task was killed"))
    assert (failed.status, failed.error_code) == (RunStatus.FAILED, "ValueError")
