"""``indexes`` on a load or a model: made on the target in the run's transaction, once the
target exists and whenever one declared is missing; a column the target lacks fails the
run before anything commits."""

from __future__ import annotations

from typing import Any

from pipeledger.common.columns import TableName
from pipeledger.publish.indexes import index_name
from tests.helpers import Project, order, orders_pipeline


def _indexes_of(project: Project, table: str) -> set[str]:
    """The names of the indexes on ``table``, from the catalog."""
    if project.backend == "sqlite":
        rows = project.query(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ?", [table]
        )
    else:
        schema, name = table.split(".")
        rows = project.query(
            "SELECT indexname FROM pg_indexes WHERE schemaname = %s AND tablename = %s",
            [schema, name],
        )
    return {str(r[0]) for r in rows}


def _name(table: str, *columns: str) -> str:
    return index_name(TableName.parse(table), columns)


def _model(**extra: Any) -> dict[str, dict[str, Any]]:
    query = "select customer_id, count(*) as orders from analytics.orders group by customer_id"
    return {
        "per_customer": {
            "query": query,
            "target": "marts.per_customer",
            "materialized": "replace",
            **extra,
        }
    }


def test_declared_indexes_are_made_with_the_target_and_when_added_later(
    project: Project,
) -> None:
    project.configure(
        models=_model(indexes=["orders"]),
        orders=orders_pipeline(indexes=["customer_id", ["status", "order_date"]]),
    )
    project.write_csv("orders_1.csv", [order(1, "2024-01-01T10:00:00Z")])
    assert {o["status"] for o in project.run_json("run")} == {"success"}
    load_indexes = {_name("analytics.orders", "customer_id")}
    load_indexes.add(_name("analytics.orders", "status", "order_date"))
    assert load_indexes <= _indexes_of(project, "analytics.orders")
    assert _name("marts.per_customer", "orders") in _indexes_of(project, "marts.per_customer")

    # declared later: made by the next run, even one that writes no new row
    project.configure(
        models=_model(indexes=["orders", "customer_id"]),
        orders=orders_pipeline(indexes=["customer_id", ["status", "order_date"], "amount"]),
    )
    outcomes = {o["pipeline"]: o for o in project.run_json("run")}
    assert outcomes["orders"]["rows_inserted"] == 0
    assert _name("analytics.orders", "amount") in _indexes_of(project, "analytics.orders")
    assert _name("marts.per_customer", "customer_id") in _indexes_of(project, "marts.per_customer")

    # a full refresh makes the model's target anew: its indexes come back with it
    assert project.run_json("run", "per_customer", "--full-refresh")[0]["status"] == "success"
    assert {_name("marts.per_customer", c) for c in ("orders", "customer_id")} <= _indexes_of(
        project, "marts.per_customer"
    )


def test_an_index_on_a_column_the_target_lacks_fails_the_run_writing_nothing(
    project: Project,
) -> None:
    project.configure(orders=orders_pipeline(indexes=["customer_id", "no_such_column"]))
    project.write_csv("orders_1.csv", [order(1, "2024-01-01T10:00:00Z")])
    code, out, err = project.cli("run", "orders")
    assert code == 1, (out, err)
    assert "no_such_column" in err and "analytics.orders" in err
    assert "nothing was written" in err
    assert not project.exists("analytics.orders")
