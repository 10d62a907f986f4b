"""What any orchestrator passes to `pipeledger run`: its data interval, its try number and
its run id, and how the ledger files them (``runs.scaffold._filing``)."""

from __future__ import annotations

import json

from tests.helpers import Project, order, orders_pipeline

RUNS = "pipeledger.pipeline_runs"


def filed(project: Project) -> list[tuple[object, ...]]:
    return project.query(
        f"SELECT run_id, logical_run_id, attempt, status, trigger_type, parent_run_id, "
        f"correlation_id, extra FROM {project.table(RUNS)} ORDER BY started_at"
    )


def test_an_orchestrator_s_interval_is_the_run_s_and_its_second_try_continues_the_first(
    project: Project,
) -> None:
    project.configure(orders=orders_pipeline())
    path = project.write_csv("orders_1.csv", [order(1, "2024-01-01T10:00:00Z")])
    path.write_text(path.read_text() + "2,only,three\n")
    interval = [
        "--data-interval-start",
        "2024-06-01T03:00:00+00:00",
        "--data-interval-end",
        "2024-06-02T03:00:00Z",
    ]
    task = ["--correlation-id", "scheduled__2024-06-01", *interval]
    code, _, _ = project.cli("run", *task, "--attempt", "1", "--json")
    assert code == 1
    project.write_csv("orders_1.csv", [order(1, "2024-01-01T10:00:00Z")])  # fixed
    (second,) = project.run_json("run", *task, "--attempt", "2")
    assert second["status"] == "success"

    first_try, second_try = filed(project)
    assert first_try[2:5] == (1, "failed", "manual")
    assert second_try[1:5] == (first_try[1], 2, "success", "retry")
    assert second_try[5] == first_try[0]  # its parent: the try before
    assert second_try[6] == "scheduled__2024-06-01"
    (detail,) = [json.loads(project.cli("show", str(second_try[0]), "--json")[1])]
    assert detail["data_interval_start"].startswith("2024-06-01T03:00:00")
    assert detail["data_interval_end"].startswith("2024-06-02T03:00:00")


def test_a_try_whose_earlier_tries_left_nothing_starts_its_own_logical_run(
    project: Project,
) -> None:
    project.configure(orders=orders_pipeline())
    project.write_csv("orders_1.csv", [order(1, "2024-01-01T10:00:00Z")])
    (result,) = project.run_json("run", "--correlation-id", "task-7", "--attempt", "3")
    ((run_id, logical, attempt, status, kind, parent, _, _),) = filed(project)
    assert (run_id, logical, attempt, status, kind, parent) == (
        result["run_id"], result["run_id"], 3, "success", "manual", None,
    )  # fmt: skip
    # a later try after a published one is not its retry: a logical run publishes once
    (again,) = project.run_json("run", "--correlation-id", "task-7", "--attempt", "4")
    assert filed(project)[1][1:5] == (again["run_id"], 4, "success", "manual")


def test_a_half_or_inverted_interval_and_attempt_with_retry_are_refused(project: Project) -> None:
    project.configure(orders=orders_pipeline())
    project.write_csv("orders_1.csv", [order(1, "2024-01-01T10:00:00Z")])
    for args, words in [
        (["--data-interval-start", "2024-06-01"], "give both"),
        (["--data-interval-start", "2024-06-02", "--data-interval-end", "2024-06-01"], "is after"),
        (["--data-interval-start", "noon", "--data-interval-end", "2024-06-01"], "not an ISO 8601"),
        (["--retry", "--attempt", "2"], "use one of them"),
        (["--due", "--attempt", "2"], "--due"),
    ]:
        code, _, err = project.cli("run", *args)
        assert code == 2 and words in err, (args, err)
    assert not project.exists()
