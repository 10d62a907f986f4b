"""SQL a person wrote reaches the database as SQL: a ``%`` in a string or a comment of a
model, or of a SQL source's query, survives the incremental runs (which bind parameters);
the embedded default runs a model translated, or refuses it before any node runs; ``check``
plans every model against the warehouse."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
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
    table = project.table("gold.returns")
    rows = project.query(f"SELECT order_date, returns, revenue FROM {table}")
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


REFUSED_SQL = """select order_id,
       status,
       status ~ '^ret' as returned
from bronze.orders
"""


def _orders_load() -> dict[str, Any]:
    return {
        "source": {"kind": "csv", "path": "data/orders*.csv"},
        "target": "bronze.orders",
        "key": ["order_id"],
        "cursor": "updated_at",
        "on_conflict": "newer_wins",
        "columns": {"amount": "numeric(12,2)", "order_date": "date"},
    }


def test_sqlite_refuses_a_model_it_cannot_compute_before_any_node_runs(tmp_path: Path) -> None:
    project = Project(tmp_path, None)  # the embedded default
    (project.root / "models").mkdir()
    (project.root / "models" / "flags.sql").write_text(REFUSED_SQL)
    project.configure(
        models={
            "flags": {
                "sql": "models/flags.sql",
                "target": "silver.flags",
                "materialized": "replace",
            }
        },
        bronze_orders=_orders_load(),
    )
    project.write_csv("orders_1.csv", [_order(1, "returned", "10.00", 1, 1)], HEADER)

    code, out, err = project.cli("run")
    assert code == 2, (out, err)
    assert "models.flags" in err and "line 3" in err and "status ~ '^ret'" in err
    assert "regular expression" in err
    assert not project.exists("bronze.orders")  # the load upstream of it did not run either
    code, out, _ = project.cli("runs", "--json")
    assert code == 0 and json.loads(out) == []

    code, out, _ = project.cli("check", "--json")
    assert code == 2
    (found,) = json.loads(out)
    assert found["status"] == "refused" and found["line"] == 3
    assert found["construct"] == "status ~ '^ret'"

    # rewritten without the regular expression it runs, on the same data
    (project.root / "models" / "flags.sql").write_text(
        REFUSED_SQL.replace("status ~ '^ret'", "status like 'ret%'")
    )
    outcomes = {o["pipeline"]: o for o in project.run_json("run")}
    assert outcomes["flags"]["status"] == "success"
    assert project.query('SELECT returned FROM "silver.flags"') == [(1,)]


def test_check_plans_every_model_against_the_warehouse(project: Project) -> None:
    project.configure(
        models={
            "good": {
                "query": "select order_id, amount * 2 as doubled, "
                "date_trunc('month', order_date) as month from bronze.orders",
                "target": "gold.good",
                "materialized": "replace",
            },
            "typo": {
                "query": "select order_id, amuont from bronze.orders",
                "target": "gold.typo",
                "materialized": "replace",
            },
        },
        bronze_orders=_orders_load(),
    )
    code, out, _ = project.cli("check", "--json")
    assert code == 0, out  # nothing loaded yet: the SQL is checked, the plan waits
    assert {c["model"]: c["status"] for c in json.loads(out)} == {
        "good": "unchecked",
        "typo": "unchecked",
    }

    project.write_csv("orders_1.csv", [_order(1, "shipped", "10.00", 1, 1)], HEADER)
    assert project.run_json("run", "bronze_orders")[0]["status"] == "success"
    code, out, _ = project.cli("check", "--json")
    assert code == 2
    found = {c["model"]: c for c in json.loads(out)}
    assert found["good"]["status"] == "ok"
    assert found["good"]["columns"] == {
        "order_id": "bigint",
        "doubled": "numeric(38,2)",
        "month": "timestamptz",
    }
    assert found["typo"]["status"] == "failed"
    assert "amuont" in found["typo"]["message"]
    code, out, _ = project.cli("check", "good")
    assert code == 0 and "ok" in out


def test_a_percent_in_a_sql_sources_query_survives_incremental_runs(
    tmp_path: Path, postgres_url: str
) -> None:
    project = Project(tmp_path, postgres_url)
    project.execute("CREATE TABLE shop_orders (id integer, status text, updated_at timestamptz)")
    query = (
        "select id, status, updated_at from shop_orders -- 100% of the returns\n"
        "where status like 'return%'"
    )
    project.configure(
        returns={
            "source": {"kind": "sql", "url": postgres_url, "query": query},
            "target": "bronze.returns",
            "key": ["id"],
            "cursor": "updated_at",
            "on_conflict": "update",
        }
    )
    insert = "INSERT INTO shop_orders VALUES (%s, %s, %s)"
    project.execute(insert, [1, "returned", "2024-03-01T10:00:00Z"])
    project.execute(insert, [2, "shipped", "2024-03-01T10:00:00Z"])
    assert project.run("returns")["rows_inserted"] == 1
    project.execute(insert, [3, "return_pending", "2024-03-02T10:00:00Z"])
    second = project.run("returns")  # reads from the watermark on: a bound parameter
    assert second["status"] == "success" and second["rows_inserted"] == 1
    assert project.rows("id, status", "bronze.returns") == [
        ("1", "returned"),
        ("3", "return_pending"),
    ]
