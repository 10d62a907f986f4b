"""Rejected work is recorded: a refused backfill range and a duplicate trigger each leave a
``rejected`` run with its reason, and ``status`` counts rejected work apart from failures
(the success rate and the health are those of the runs that ran)."""

from __future__ import annotations

import json
from typing import Any

from tests.helpers import Project, order, orders_pipeline

RUNS = "pipeledger.pipeline_runs"


def _rejected(project: Project) -> list[tuple[Any, ...]]:
    rows = project.query(
        f"SELECT run_id, trigger_type, error_message, extra FROM {project.table(RUNS)} "
        "WHERE status = 'rejected' ORDER BY started_at"
    )
    return [(r[0], r[1], r[2], json.loads(r[3]) if isinstance(r[3], str) else r[3]) for r in rows]


def test_refused_work_is_recorded_rejected_and_counted_apart(project: Project) -> None:
    project.configure(orders=orders_pipeline(max_backfill="2d"))
    project.write_csv("orders_1.csv", [order(1, "2024-01-01T10:00:00Z")])
    assert project.run_json("run", "--idempotency-key", "day-1")[0]["status"] == "success"

    code, out, err = project.cli(
        "backfill", "orders", "--start", "2024-01-01", "--end", "2024-01-10", "--json"
    )
    assert code == 2, err
    assert "max_backfill" in out + err
    code, out, err = project.cli("run", "--idempotency-key", "day-1", "--json")
    assert code == 0, err  # the work is done: nothing to act on
    [duplicate] = json.loads(out)
    assert (duplicate["status"], duplicate["reason"]) == ("skipped", "duplicate")

    [backfill, dup] = _rejected(project)
    assert backfill[1] == "backfill" and backfill[3]["rejected"]["reason"] == "backfill_range"
    assert "max_backfill" in backfill[2]
    assert dup[3]["rejected"]["reason"] == "duplicate_trigger"
    assert dup[3]["rejected"]["duplicate_of"] == duplicate["duplicate_of"]
    assert dup[3]["duplicate_key"] == "day-1" and dup[0] == duplicate["run_id"]

    code, out, err = project.cli("status", "--json")
    assert code == 0, err
    [status] = json.loads(out)
    assert (status["rejected_7d"], status["queued"]) == (2, 0)
    assert (status["runs_7d"], status["successes_7d"]) == (1, 1)  # rejected work is no failure
    assert status["health"] == "HEALTHY" and status["last_failure_run_id"] is None
    code, text, err = project.cli("status")
    assert "2 rejected" in text, text
    # the key is still the first run's: a rejected record does not hold it
    code, out, _ = project.cli("run", "--idempotency-key", "day-1", "--json")
    assert json.loads(out)[0]["duplicate_of"] == duplicate["duplicate_of"]
