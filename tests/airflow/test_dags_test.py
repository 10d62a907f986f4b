"""Acceptance 1: ``airflow dags test`` of the DAG built from a three-node config (load ->
silver -> gold) succeeds on Airflow 3 and 2.11, and the ledger shows three runs whose
correlation id is Airflow's run id and whose data interval is Airflow's."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from pipeledger import api
from tests.airflow.harness import Airflow
from tests.helpers import Project, order, orders_pipeline

SCHEDULE = "0 3 * * *"


def three_nodes(project: Project, **pipeline: Any) -> Path:
    silver = {
        "query": "SELECT order_id, amount, customer_id, updated_at FROM analytics.orders",
        "target": "analytics.silver",
        "key": ["order_id"],
        "cursor": "updated_at",
        "on_conflict": "update",
        "schedule": SCHEDULE,
    }
    gold = {
        "query": "SELECT customer_id, sum(amount) AS total, max(updated_at) AS updated_at "
        "FROM analytics.silver GROUP BY customer_id",
        "target": "analytics.gold",
        "materialized": "replace",
        "schedule": SCHEDULE,
    }
    return project.configure(
        models={"silver": silver, "gold": gold},
        orders=orders_pipeline(schedule=SCHEDULE, **pipeline),
    )


def stored(value: str) -> datetime:
    """A time as Airflow's SQLite metadata database stores it (UTC)."""
    moment = datetime.fromisoformat(value)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


@pytest.mark.parametrize("version", [3, 2])
def test_dags_test_runs_three_nodes_with_airflow_s_run_id_and_interval(
    version: int, tmp_path: Path
) -> None:
    (tmp_path / "project").mkdir()
    project = Project(tmp_path / "project", None)
    config = three_nodes(project)
    project.write_csv(
        "orders_1.csv", [order(1, "2024-05-30T10:00:00Z"), order(2, "2024-05-30T11:00:00Z")]
    )
    airflow = Airflow(version, tmp_path / "airflow", config)
    airflow.cli("db", "migrate")

    done = airflow.cli("dags", "test", "pl_etl", "2024-06-01", check=False)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]

    with sqlite3.connect(airflow.home / "airflow.db") as meta:
        ((run_id, start, end),) = meta.execute(
            "SELECT run_id, data_interval_start, data_interval_end FROM dag_run"
        ).fetchall()
        states = dict(meta.execute("SELECT task_id, state FROM task_instance").fetchall())
    assert states == {"orders": "success", "silver": "success", "gold": "success"}
    interval = (stored(start), stored(end))
    assert interval == (datetime(2024, 5, 30, 3, tzinfo=UTC), datetime(2024, 5, 31, 3, tzinfo=UTC))

    runs = api.recent_runs(config)
    assert sorted(r.pipeline for r in runs) == ["gold", "orders", "silver"]
    for run in runs:
        detail = api.show(config, run.run_id)
        assert (detail.run.status, detail.correlation_id) == ("success", run_id)
        assert (detail.run.data_interval_start, detail.run.data_interval_end) == interval
        assert detail.run.attempt == 1
        assert detail.triggered_by == f"airflow pl_etl.{run.pipeline}"
    assert project.count("analytics.gold") == 2
