"""Limits that say no early: max_rows and max_bytes halt a load before publish, with
nothing written, the watermark where it was and a ``rejected`` run naming the limit."""

from __future__ import annotations

import json
from typing import Any

from tests.helpers import Project, order, orders_pipeline

RUNS = "pipeledger.pipeline_runs"


def _runs(project: Project) -> list[tuple[Any, ...]]:
    return project.query(
        f"SELECT status, error_code, error_message, extra FROM {project.table(RUNS)} "
        "ORDER BY started_at"
    )


def _extra(value: Any) -> dict[str, Any]:
    return json.loads(value) if isinstance(value, str) else dict(value)


def test_max_rows_exceeded_halts_before_publish(project: Project) -> None:
    project.configure(orders=orders_pipeline(max_rows=5))
    project.write_csv("orders_1.csv", [order(i, f"2024-01-01T{i:02d}:00:00Z") for i in (1, 2)])
    assert project.run()["status"] == "success"
    mark = project.watermarks()
    project.write_csv("orders_2.csv", [order(i, f"2024-01-02T{i:02d}:00:00Z") for i in range(3, 9)])

    code, out, err = project.cli("run", "--json")

    assert code == 3, err
    [halted] = json.loads(out)
    assert (halted["status"], halted["reason"]) == ("rejected", "limit_exceeded")
    assert halted["rejected"] == {
        "reason": "limit_exceeded",
        "limit": "max_rows",
        "observed": 7,  # rows 3-8, and row 2 again: the lower bound is closed
        "maximum": 5,
    }
    assert "max_rows exceeded while staging: 7 rows read, the limit is 5" in halted["error"]
    assert "nothing was written" in halted["error"]
    assert project.count() == 2 and project.watermarks() == mark
    status, error_code, message, extra = _runs(project)[-1]
    assert (status, error_code) == ("rejected", "LimitExceeded")
    assert "max_rows" in message and "7" in message and "5" in message
    assert _extra(extra)["rejected"]["limit"] == "max_rows"


def test_the_tenant_wide_max_bytes_applies_when_the_node_has_none(project: Project) -> None:
    project.configure("\n[limits]\nmax_bytes = 64\n", orders=orders_pipeline())
    project.write_csv("orders_1.csv", [order(i, f"2024-01-01T{i:02d}:00:00Z") for i in range(1, 9)])

    code, out, err = project.cli("run", "--json")

    assert code == 3, err
    [halted] = json.loads(out)
    assert halted["rejected"]["limit"] == "max_bytes" and halted["rejected"]["maximum"] == 64
    assert halted["rejected"]["observed"] > 64
    assert not project.exists()
    assert project.watermarks() == {}
    assert _runs(project)[-1][0] == "rejected"


def test_a_node_limit_wins_over_the_default_and_a_run_within_it_loads(project: Project) -> None:
    project.configure("\n[limits]\nmax_rows = 1\n", orders=orders_pipeline(max_rows=10))
    project.write_csv("orders_1.csv", [order(i, f"2024-01-01T{i:02d}:00:00Z") for i in range(1, 9)])

    result = project.run()

    assert result["status"] == "success" and project.count() == 8
