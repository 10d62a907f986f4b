"""The graph as a whole: independent branches side by side, skipping downstream of a
failure, selectors by tag, bad model SQL, and cancelling a run of several nodes."""

from __future__ import annotations

import json
import signal
from typing import Any

import pytest

from tests.helpers import Project, order, orders_pipeline, write_big_orders_csv
from tests.runs.test_crash_and_concurrency import _wait_until_staging


def two_branches(project: Project) -> None:
    project.configure(
        models={
            "a_totals": {"query": "select customer_id, count(*) as n from raw.a group by 1",
                         "target": "mart.a_totals", "materialized": "replace", "tags": ["a"]},
            "b_totals": {"query": "select customer_id, count(*) as n from raw.b group by 1",
                         "target": "mart.b_totals", "materialized": "replace", "tags": ["b"]},
        },
        a=orders_pipeline(source={"kind": "csv", "path": "data/a*.csv"}, target="raw.a",
                          tags=["a"]),
        b=orders_pipeline(source={"kind": "csv", "path": "data/b*.csv"}, target="raw.b",
                          tags=["b"]),
    )  # fmt: skip


def by_node(outcomes: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {o["pipeline"]: o for o in outcomes}


def test_a_failing_branch_does_not_stop_the_other(project: Project) -> None:
    two_branches(project)
    project.write_csv("a_1.csv", [order(1, "2024-01-01T10:00:00Z")])
    (project.root / "data" / "a_2.csv").write_text("order_id,qty\n1\n")  # malformed
    project.write_csv("b_1.csv", [order(i, "2024-01-01T10:00:00Z") for i in range(1, 4)])
    code, out, err = project.cli("run", "--json", "--threads", "2")
    assert code == 1, err
    outcomes = by_node(json.loads(out))
    assert outcomes["a"]["status"] == "failed"
    assert (outcomes["a_totals"]["status"], outcomes["a_totals"]["reason"]) == (
        "skipped", "upstream_failed"
    )  # fmt: skip
    assert outcomes["b"]["status"] == outcomes["b_totals"]["status"] == "success"
    assert project.count("mart.b_totals") == 3
    assert not project.exists("mart.a_totals")


def test_tags_select_nodes(project: Project) -> None:
    two_branches(project)
    project.write_csv("a_1.csv", [order(1, "2024-01-01T10:00:00Z")])
    project.write_csv("b_1.csv", [order(1, "2024-01-01T10:00:00Z")])
    assert [o["pipeline"] for o in project.run_json("run", "tag:b")] == ["b", "b_totals"]
    code, _, err = project.cli("run", "tag:nothing")
    assert code == 2 and "no pipeline or model has this tag" in err


def test_a_model_whose_sql_does_not_parse_is_a_config_error(project: Project) -> None:
    project.configure(models={"m": {"query": "selec x fro", "target": "s.m",
                                    "materialized": "replace"}})  # fmt: skip
    code, _, err = project.cli("run")
    assert code == 2 and "models.m.query: not valid SQL" in err


@pytest.mark.slow
def test_sigterm_cancels_every_running_node(project: Project) -> None:
    project.configure(
        a=orders_pipeline(source={"kind": "csv", "path": "data/a*.csv"}, target="raw.a"),
        b=orders_pipeline(source={"kind": "csv", "path": "data/b*.csv"}, target="raw.b"),
    )  # fmt: skip
    for name in ("a", "b"):
        write_big_orders_csv(project.root / "data" / f"{name}_1.csv", 400_000, 1,
                             "2024-01-01T00:00:00+00:00")  # fmt: skip
    process = project.spawn("--verbose", "run", "--threads", "2")
    _wait_until_staging(process)
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate()
    assert process.returncode == 143, err
    assert not project.exists("raw.a") and not project.exists("raw.b")
    runs = project.run_json("runs")
    assert {r["status"] for r in runs} <= {"cancelled"}, runs
