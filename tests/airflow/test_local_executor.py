"""Acceptance 2, on Airflow 3 with the LocalExecutor (4 parallel workers) and the suite's
PostgreSQL as Airflow's metadata database and as the warehouse: two independent branches
overlap in time; the same task instance run a second time loads nothing (skipped: its key
is held); a task SIGKILLed mid-load is retried by Airflow and the target has every row
exactly once."""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from pipeledger import api
from tests.airflow.harness import Airflow, running, wait_for
from tests.helpers import Project, orders_pipeline, write_big_orders_csv

DAG = "pl_etl"
BRANCH_ROWS = 150_000  # each branch's load takes seconds: long enough to overlap
KILLED_ROWS = 400_000  # the load that is killed: long enough to be killed mid-way


def gold(upstream: str) -> dict[str, Any]:
    return {
        "query": f"SELECT customer_id, count(*) AS orders, max(updated_at) AS updated_at "
        f"FROM analytics.{upstream} GROUP BY customer_id",
        "target": f"analytics.{upstream}_gold",
        "materialized": "replace",
    }


@pytest.fixture
def metadata(postgres_server: str) -> Iterator[str]:
    """A database of its own on the suite's PostgreSQL, for Airflow's metadata."""
    name = f"airflow_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base = postgres_server.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg2://")
    yield f"{base}/{name}"
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def ledger_runs(config: Path, correlation_id: str) -> dict[str, list[Any]]:
    """Each node's runs of one DAG run, oldest first."""
    found: dict[str, list[Any]] = {}
    for row in reversed(api.recent_runs(config, limit=500)):
        if row.correlation_id == correlation_id:
            found.setdefault(row.pipeline, []).append(row)
    return found


def trigger(airflow: Airflow, run_id: str, logical_date: str) -> str:
    airflow.cli("dags", "trigger", DAG, "-r", run_id, "-l", logical_date)
    return airflow.wait_for_run(DAG, run_id)


def test_branches_overlap_a_task_run_twice_loads_once_and_a_killed_task_lands_every_row(
    tmp_path: Path, postgres_url: str, metadata: str
) -> None:
    (tmp_path / "project").mkdir()
    project = Project(tmp_path / "project", postgres_url)
    config = project.configure(
        models={"a_gold": gold("a_orders"), "b_gold": gold("b_orders")},
        a_orders=orders_pipeline(source={"kind": "csv", "path": "data/a_*.csv"},
                                 target="analytics.a_orders", retries=1, retry_delay="1s"),
        b_orders=orders_pipeline(source={"kind": "csv", "path": "data/b_*.csv"},
                                 target="analytics.b_orders"),
    )  # fmt: skip
    data = project.root / "data"
    write_big_orders_csv(data / "a_1.csv", BRANCH_ROWS, 1, "2024-01-01T00:00:00")
    write_big_orders_csv(data / "b_1.csv", BRANCH_ROWS, 1, "2024-01-01T00:00:00")
    airflow = Airflow(3, tmp_path / "airflow", config, metadata)
    airflow.local_executor(parallelism=4)
    airflow.cli("db", "migrate")

    with running(airflow):
        airflow.wait_for_dag(DAG)

        # two independent branches at once, on different workers
        assert trigger(airflow, "first", "2024-06-01T00:00:00+00:00") == "success"
        runs = ledger_runs(config, "first")
        (a,), (b,) = runs["a_orders"], runs["b_orders"]
        assert a.started_at < b.ended_at and b.started_at < a.ended_at, (a, b)
        assert project.count("analytics.a_orders") == BRANCH_ROWS

        # the same task instance again, as a second worker would run it: it loads once,
        # though its source has new rows now (the idempotency key is Airflow's run id)
        write_big_orders_csv(data / "a_2.csv", 1000, BRANCH_ROWS + 1, "2024-02-01T00:00:00")
        again = airflow.cli("tasks", "test", DAG, "a_orders", "first", check=False)
        assert again.returncode == 0, again.stdout[-3000:]
        assert "Skipping task" in again.stdout and f"held by run {a.run_id}" in again.stdout
        # the duplicate is refused, and recorded as refused work (it wrote nothing)
        done, duplicate = ledger_runs(config, "first")["a_orders"]
        assert (done.run_id, done.status, duplicate.status) == (a.run_id, "success", "rejected")
        assert project.count("analytics.a_orders") == BRANCH_ROWS

        # a worker killed mid-load: Airflow retries it, and every row lands once
        write_big_orders_csv(
            data / "a_3.csv", KILLED_ROWS, BRANCH_ROWS + 1001, "2024-03-01T00:00:00"
        )
        airflow.cli("dags", "trigger", DAG, "-r", "second", "-l", "2024-06-02T00:00:00+00:00")
        victim = wait_for(
            "a_orders to be inside its transaction", lambda: _loading(project, config)
        )
        os.kill(victim, signal.SIGKILL)
        assert airflow.wait_for_run(DAG, "second") == "success"

    assert airflow.task_states(DAG, "second")["a_orders"] == ("success", 2)
    killed, retried = ledger_runs(config, "second")["a_orders"]
    assert (killed.attempt, killed.status) == (1, "abandoned")
    assert (retried.attempt, retried.status, retried.trigger_type) == (2, "success", "retry")
    assert retried.logical_run_id == killed.logical_run_id
    expected = BRANCH_ROWS + 1000 + KILLED_ROWS
    rows = project.query("SELECT count(*), count(DISTINCT order_id) FROM analytics.a_orders")
    assert rows == [(expected, expected)]


def _loading(project: Project, config: Path) -> int | None:
    """The pid of the task process running a_orders for DAG run "second", once its
    warehouse transaction is open (a session of its process inside a transaction)."""
    runs = ledger_runs(config, "second").get("a_orders", [])
    running = [r for r in runs if r.status == "running"]
    if not running:
        return None
    detail = api.show(config, running[0].run_id)
    sessions = project.query(
        "SELECT 1 FROM pg_stat_activity WHERE application_name LIKE %s "
        "AND xact_start IS NOT NULL AND xact_start < now() - interval '0.5 second'",
        [f"pipeledger {detail.pid}@%a_orders%"],
    )
    return int(detail.pid) if sessions and detail.pid else None
