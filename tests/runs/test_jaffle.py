"""A dbt project nobody here wrote: dbt-labs' jaffle_shop, its three seeds loaded as they are
and its five models pasted with their refs (tests/data/jaffle, Apache-2.0, see NOTICE).
Every table equals DuckDB's answer over the same CSV files, computed here, after the first
build and after a round of changes, without --full-refresh; an identical re-run writes
nothing. Both backends; the staging layer as views (as in dbt) and as merge tables."""

from __future__ import annotations

import csv
import shutil
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tests.helpers import Project

DATA = Path(__file__).resolve().parents[1] / "data" / "jaffle"
SEEDS = ("raw_customers", "raw_orders", "raw_payments")
STAGING = ("stg_customers", "stg_orders", "stg_payments")
MARTS = {"customers": "customer_id", "orders": "order_id"}
STAGING_KEYS = {
    "stg_customers": "customer_id",
    "stg_orders": "order_id",
    "stg_payments": "payment_id",
}
# The seeds have no cursor column of their own: each is loaded as it is, a full snapshot
# (sync = "full": the whole file compared with the target by key and fingerprint every run,
# a key it lacks deleted), keyed on its id and without a cursor.
LOADS = {seed: {"key": ["id"]} for seed in ("raw_customers", "raw_orders", "raw_payments")}


def configure(project: Project, staging: str) -> None:
    models = project.root / "models"
    shutil.copytree(DATA / "models", models)
    for seed in SEEDS:
        shutil.copy(DATA / f"{seed}.csv", project.root / "data" / f"{seed}.csv")
    loads = {
        seed: {
            "source": {"kind": "csv", "path": f"data/{seed}.csv"},
            "target": f"jaffle.{seed}",
            "on_conflict": "update",
            "sync": "full",
            **LOADS[seed],
        }
        for seed in SEEDS
    }
    nodes: dict[str, dict[str, Any]] = {}
    for name in STAGING:
        body: dict[str, Any] = {"sql": f"models/{name}.sql", "target": f"jaffle.{name}"}
        if staging == "view":
            body["materialized"] = "view"
        else:
            body.update(materialized="merge", key=[STAGING_KEYS[name]])
        nodes[name] = body
    for name, key in MARTS.items():
        nodes[name] = {
            "sql": f"models/{name}.sql",
            "target": f"jaffle.{name}",
            "materialized": "merge",
            "key": [key],
        }
    project.configure("", nodes, pipelines=loads)


def oracle(project: Project) -> dict[str, list[tuple[str, ...]]]:
    """The marts (and staging) as DuckDB computes them from the same CSV files and SQL."""
    conn = duckdb.connect()
    conn.execute("SET integer_division = true")  # PostgreSQL's integer / integer
    for seed in SEEDS:
        path = project.root / "data" / f"{seed}.csv"
        conn.execute(f"CREATE TABLE {seed} AS SELECT * FROM read_csv_auto('{path}')")
    answers = {}
    for name in (*STAGING, *MARTS):
        sql = (project.root / "models" / f"{name}.sql").read_text()
        for node in (*SEEDS, *STAGING):
            sql = sql.replace("{{ ref('" + node + "') }}", node)
        sql = _without_jinja_comments(sql)
        conn.execute(f"CREATE TABLE {name} AS {sql}")
        answers[name] = _normal(conn.execute(f"SELECT * FROM {name}").fetchall())
    return answers


def _without_jinja_comments(sql: str) -> str:
    while "{#" in sql:
        start = sql.index("{#")
        sql = sql[:start] + sql[sql.index("#}", start) + 2 :]
    return sql


def _normal(rows: list[tuple[Any, ...]]) -> list[tuple[str, ...]]:
    return sorted(tuple(_value(v) for v in row) for row in rows)


def _value(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int | float | Decimal):
        number = Decimal(str(value))
        return str(number.quantize(Decimal(1))) if number == number.to_integral() else str(number)
    return str(value)


def ours(project: Project, name: str) -> list[tuple[str, ...]]:
    columns = project.query(
        "SELECT column_name FROM information_schema.columns WHERE table_schema = 'jaffle' "
        "AND table_name = %s ORDER BY ordinal_position"
        if project.backend == "postgres"
        else "SELECT name FROM pragma_table_info(%s)",
        [name if project.backend == "postgres" else f"jaffle.{name}"],
    )
    names = ", ".join(f'"{c}"' for (c,) in columns if not c.startswith("_pipeledger_"))
    return _normal(project.query(f"SELECT {names} FROM {project.table(f'jaffle.{name}')}"))


def assert_equal_to_duckdb(project: Project) -> None:
    expected = oracle(project)
    for name in (*STAGING, *MARTS):
        assert ours(project, name) == expected[name], name


def rewrite(project: Project, seed: str, change: Any) -> None:
    path = project.root / "data" / f"{seed}.csv"
    with path.open() as handle:
        rows = list(csv.reader(handle))
    rows = [rows[0], *change(rows[1:])]
    with path.open("w", newline="") as handle:
        csv.writer(handle, lineterminator="\n").writerows(rows)


def change_the_shop(project: Project) -> None:
    """New orders, status changes, a corrected payment, a deleted customer."""
    new_orders = [["100", "1", "2018-04-10", "placed"], ["101", "50", "2018-04-10", "completed"]]
    status = {"2": "returned", "10": "shipped", "13": "completed"}
    rewrite(
        project,
        "raw_orders",
        lambda rows: [[r[0], r[1], r[2], status.get(r[0], r[3])] for r in rows] + new_orders,
    )
    payments = [["200", "100", "coupon", "1250"], ["201", "101", "credit_card", "3300"]]
    rewrite(
        project,
        "raw_payments",
        lambda rows: [[r[0], r[1], r[2], "4700" if r[0] == "5" else r[3]] for r in rows] + payments,
    )
    rewrite(project, "raw_customers", lambda rows: [r for r in rows if r[0] != "3"])


def written(outcomes: list[dict[str, Any]]) -> dict[str, int]:
    keys = ("rows_inserted", "rows_updated", "rows_deleted")
    return {o["pipeline"]: sum(o.get(k) or 0 for k in keys) for o in outcomes}


@pytest.mark.parametrize("staging", ["view", "merge"])
def test_jaffle_shop_equals_duckdb_before_and_after_a_round_of_changes(
    project: Project, staging: str
) -> None:
    configure(project, staging)
    project.run_json("run")
    assert_equal_to_duckdb(project)
    assert set(written(project.run_json("run")).values()) == {0}
    change_the_shop(project)
    outcomes = {o["pipeline"]: o for o in project.run_json("run")}
    assert outcomes["customers"]["rows_deleted"] == 1  # customer 3
    assert outcomes["raw_customers"]["rows_deleted"] == 1
    assert_equal_to_duckdb(project)
    assert set(written(project.run_json("run")).values()) == {0}
