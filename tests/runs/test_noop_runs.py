"""A run that finds nothing new does next to nothing: a load that wrote no row leaves its
models nothing to consume, so every model of a no-op DAG run stages nothing, issues a
bounded number of statements and imports neither Arrow nor numpy. (Its wall time is
measured by ``python -m bench.models``.)"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from pipeledger import api
from pipeledger.warehouse.session import observe_statements
from tests.cli.test_startup import probe
from tests.helpers import Project, order, orders_pipeline

# what a no-op run may issue per node, every statement counted (its lock, its look at the
# target and at each upstream's pending runs, its schema made outside the transaction, the
# ledger's records of the run): 12.6 on SQLite and 15 on PostgreSQL when this was written.
# A regression (a schema introspected per statement, a stage made for nothing) shows here
MAX_STATEMENTS_PER_NODE = 16


def chain(project: Project, files: bool = False) -> None:
    """A load and four models: silver (merge), two golds over it, one over a gold."""
    load = orders_pipeline(target="raw.orders")
    if files:  # a no-op run lists the folder and reads nothing
        del load["cursor"]
        load["incremental"] = "files"
    project.configure(
        orders=load,
        models={
            "silver": {
                "query": "select order_id, amount, order_date, updated_at "
                "from raw.orders where status <> 'cancelled'",
                "target": "s.silver",
                "key": ["order_id"],
                "cursor": "updated_at",
            },
            "gold": {
                "query": "select order_date, sum(amount) as revenue, count(*) as n "
                "from s.silver group by order_date",
                "target": "g.gold",
                "materialized": "partition_overwrite",
                "partition_by": "order_date",
            },
            "gold_big": {
                "query": "select order_date, count(*) as n from s.silver "
                "where amount > 5 group by order_date",
                "target": "g.gold_big",
                "key": ["order_date"],
            },
            "top": {
                "query": "select order_date, revenue from g.gold where n > 1",
                "target": "g.top",
                "key": ["order_date"],
            },
        },
    )


def counted_run(project: Project) -> tuple[list[dict[str, Any]], list[str]]:
    statements: list[str] = []
    with observe_statements(lambda kind, sql, seconds: statements.append(sql)):
        outcomes = [o.to_json() for o in api.run(api.load_config(project.root / "pipeledger.toml"))]
    return outcomes, statements


def test_a_no_op_run_stages_nothing_and_issues_few_statements(project: Project) -> None:
    chain(project, files=True)  # the load lists the folder and stages nothing
    project.write_csv("orders_1.csv", [order(i, "2024-01-01T10:00:00Z") for i in range(1, 6)])
    first = project.run_json("run")
    assert [o["status"] for o in first] == ["success"] * 5
    outcomes, statements = counted_run(project)
    models = [o for o in outcomes if o.get("kind") == "model"]
    assert len(models) == 4
    for model in models:  # nothing upstream changed: nothing consumed, nothing computed
        assert (model["upstream_runs"], model["rows_read"], model["rows_inserted"]) == (0, 0, 0)
    assert not [s for s in statements if "_pipeledger_stage" in s]
    per_node = len(statements) / len(outcomes)
    assert per_node <= MAX_STATEMENTS_PER_NODE, Counter(s.split()[0] for s in statements)
    assert project.count("g.gold") == 1 and project.count("g.top") == 1


def test_a_load_that_wrote_rows_is_consumed_and_one_that_wrote_none_is_not(
    project: Project,
) -> None:
    chain(project)
    project.write_csv("orders_1.csv", [order(1, "2024-01-01T10:00:00Z")])
    project.run_json("run")
    project.write_csv("orders_2.csv", [order(2, "2024-01-02T10:00:00Z", amount="7.00")])
    changed = {o["pipeline"]: o for o in project.run_json("run")}
    assert changed["orders"]["rows_inserted"] == 1
    assert changed["silver"]["upstream_runs"] == 1 and changed["silver"]["rows_inserted"] == 1
    assert changed["gold"]["upstream_runs"] == 1  # silver wrote a row: gold recomputes
    assert project.count("s.silver") == 2
    again = {o["pipeline"]: o for o in project.run_json("run")}
    assert again["orders"]["rows_inserted"] == 0
    assert all(again[m]["upstream_runs"] == 0 for m in ("silver", "gold", "gold_big", "top"))
    # a change that the silver filter drops: silver deletes nothing new, writes nothing
    project.write_csv("orders_3.csv", [order(3, "2024-01-03T10:00:00Z", status="cancelled")])
    filtered = {o["pipeline"]: o for o in project.run_json("run")}
    assert filtered["silver"]["upstream_runs"] == 1
    assert filtered["silver"]["rows_inserted"] == filtered["silver"]["rows_deleted"] == 0
    assert filtered["gold"]["upstream_runs"] == 0  # silver wrote nothing: nothing to do


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_a_no_op_run_of_models_imports_no_arrow(project: Project) -> None:
    chain(project, files=True)
    project.write_csv("orders_1.csv", [order(i, "2024-01-01T10:00:00Z") for i in range(1, 4)])
    project.run_json("run")
    printed, modules = probe(project.root, ["run", "--json"])
    assert "exit 0" in printed
    assert not {"pyarrow", "numpy", "pipeledger.transform.conform"} & modules
