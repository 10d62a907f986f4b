"""A user's own Python pipeline, instrumented with the API, shows up like any other."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from pipeledger import Ledger, RunStatus
from tests.helpers import Project


class ExtractBroke(RuntimeError):
    pass


def test_own_pipeline_appears_in_runs_show_and_status(project: Project, warehouse_url: str) -> None:
    project.configure()
    ledger = Ledger(warehouse_url)
    start, end = datetime(2024, 3, 1, tzinfo=UTC), datetime(2024, 3, 2, tzinfo=UTC)
    with ledger.run(
        "customer_orders_daily",
        trigger_type="scheduled",
        data_interval=(start, end),
        correlation_id="airflow:abc",
    ) as run:
        run_id = run.run_id
        assert len(run_id) == 36  # known before anything was written
        with run.task("extract") as t:
            t.rows_out = 120
        with run.task("load") as t:
            t.rows_in, t.rows_out = 120, 118
        run.audit(
            "VALIDATION_FAILURE",
            target_table="fact_orders",
            record_count=2,
            metadata={"check": "amount >= 0"},
        )
        run.set_counts(rows_read=120, rows_inserted=100, rows_updated=18, rows_rejected=2)
    assert ledger.last_successful_run("customer_orders_daily") == end

    code, out, _ = project.cli("runs", "customer_orders_daily", "--json")
    assert code == 0
    listed = json.loads(out)
    assert [(r["run_id"], r["status"], r["rows_inserted"]) for r in listed] == [
        (run_id, "success", 100)
    ]
    code, out, _ = project.cli("show", run_id[:8], "--json")
    shown = json.loads(out)
    assert code == 0 and [t["name"] for t in shown["tasks"]] == ["extract", "load"]
    assert shown["events"][0]["event_type"] == "VALIDATION_FAILURE"
    code, out, _ = project.cli("status", "--json")
    status = {s["pipeline"]: s for s in json.loads(out)}
    assert status["customer_orders_daily"]["last_status"] == "success"


def test_an_exception_marks_task_and_run_failed_and_is_reraised_unchanged(
    project: Project, warehouse_url: str
) -> None:
    ledger = Ledger(warehouse_url)
    error = ExtractBroke("upstream API said 503 for postgresql://me:hunter22@db/x")
    with pytest.raises(ExtractBroke) as caught, ledger.run("api_pull") as run, run.task("extract"):
        raise error
    assert caught.value is error
    row = project.query(
        f"SELECT status, error_code, error_message FROM {project.table('pipeledger.pipeline_runs')}"
        " WHERE run_id = %s",
        [run.run_id],
    )[0]
    assert row[0] == "failed" and row[1] == "ExtractBroke"
    assert "503" in row[2] and "hunter22" not in row[2]
    task = project.query(
        f"SELECT name, status FROM {project.table('pipeledger.task_runs')} WHERE run_id = %s",
        [run.run_id],
    )
    assert task == [("extract", "failed")]


def test_mark_partial_and_illegal_transitions(project: Project, warehouse_url: str) -> None:
    ledger = Ledger(warehouse_url)
    with ledger.run("nightly") as run:
        run.mark(RunStatus.PARTIAL, "3 of 4 shards loaded")
        with pytest.raises(ValueError, match="cannot go from running to running"):
            run.mark("running")
    rows = project.query(
        f"SELECT status, error_message FROM {project.table('pipeledger.pipeline_runs')}"
    )
    assert rows == [("partial", "3 of 4 shards loaded")]
