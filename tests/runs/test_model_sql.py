"""A model's SQL reaches the database as SQL: a ``%`` in a string or a comment survives the
incremental runs (which bind parameters), and the embedded default computes PostgreSQL's
date arithmetic, on both backends."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from tests.helpers import Project

HEADER = ["order_id", "status", "amount", "order_date", "updated_at"]
PERCENT_SQL = """
-- returns are 100% of what this counts: 'return%' matches 'returned' and 'return_pending'
select order_date,
       count(*) filter (where status like 'return%') as returns,   /* 5% here, 10%% there */
       sum(amount) as revenue
from bronze.orders
where status not like '%test%'
group by order_date
"""


def _percent_project(project: Project) -> None:
    project.configure(
        models={
            "gold_returns": {
                "query": PERCENT_SQL,
                "target": "gold.returns",
                "materialized": "partition_overwrite",
                "partition_by": "order_date",
            }
        },
        bronze_orders={
            "source": {"kind": "csv", "path": "data/orders*.csv"},
            "target": "bronze.orders",
            "key": ["order_id"],
            "cursor": "updated_at",
            "on_conflict": "newer_wins",
            "columns": {"amount": "numeric(12,2)", "order_date": "date"},
        },
    )


def _order(order_id: int, status: str, amount: str, day: int, hour: int) -> list[Any]:
    return [order_id, status, amount, f"2024-03-{day:02d}", f"2024-03-10T{hour:02d}:00:00Z"]


def _gold(project: Project) -> dict[str, tuple[int, Decimal]]:
    rows = project.query(f"SELECT order_date, returns, revenue FROM {project.table('gold.returns')}")
    return {str(day): (int(n), Decimal(str(revenue))) for day, n, revenue in rows}


def test_a_percent_in_a_literal_and_in_comments_survives_incremental_runs(
    project: Project,
) -> None:
    _percent_project(project)
    project.write_csv(
        "orders_1.csv",
        [
            _order(1, "returned", "10.00", 1, 1),
            _order(2, "shipped", "20.50", 1, 1),
            _order(3, "return_pending", "5.25", 2, 1),
            _order(4, "test", "99.00", 2, 1),
        ],
        HEADER,
    )
    first = {o["pipeline"]: o for o in project.run_json("run")}
    assert first["gold_returns"]["status"] == "success"
    assert _gold(project) == {
        "2024-03-01": (1, Decimal("30.50")),
        "2024-03-02": (1, Decimal("5.25")),
    }

    # the second run recomputes only the touched day, which it binds as a parameter
    project.write_csv(
        "orders_2.csv",
        [_order(2, "returned", "20.50", 1, 2), _order(5, "returning", "1.00", 3, 2)],
        HEADER,
    )
    second = {o["pipeline"]: o for o in project.run_json("run")}
    assert second["gold_returns"]["status"] == "success", second["gold_returns"]
    assert second["gold_returns"]["recomputed"] == 2  # the days the new rows touch
    assert _gold(project) == {
        "2024-03-01": (2, Decimal("30.50")),
        "2024-03-02": (1, Decimal("5.25")),
        "2024-03-03": (1, Decimal("1.00")),
    }

    third = {o["pipeline"]: o for o in project.run_json("run")}  # nothing new: nothing runs
    assert third["gold_returns"]["rows_inserted"] == 0
