"""A merge model whose key is its upstream's own key (traced through its SQL) recomputes
many touched keys over the rows its upstream's pending runs wrote, read by one scan,
instead of matching the whole upstream to the touched keys (PostgreSQL, which knows the
upstream's unique indexes and size). Whichever way it stages, the target equals a full
recompute: updated, new, filtered-out and unchanged rows alike."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pytest

from pipeledger import api
from pipeledger.warehouse.session import observe_statements
from tests.helpers import Project

HEADER = ["order_id", "customer_id", "status", "amount", "order_date", "updated_at"]
SILVER = (
    "select order_id, customer_id, upper(status) as status, amount * 2 as amount, order_date, "
    "updated_at from bronze.orders where status <> 'test'"
)
# the upstream on the kept side of an outer join: the scope still filters the stage
JOINED = (
    "select o.order_id, o.amount, c.segment, o.updated_at from bronze.orders o "
    "left join bronze.customers c on c.customer_id = o.customer_id where o.status <> 'test'"
)
ROWS = 2_000
pytestmark = pytest.mark.parametrize("backend", ["postgres"], indirect=True)


def orders(ids: range, hour: int, status: str = "done", test: int = 9) -> list[list[Any]]:
    """Orders ``ids`` as of ``hour``; every ``test``-th one a test order (left out)."""
    return [
        [i, i % 40, "test" if i % test == 0 else status, f"{i % 500}.25",
         f"2024-03-{1 + i % 20:02d}", f"2024-03-21T{hour:02d}:00:00Z"]
        for i in ids
    ]  # fmt: skip


def write(path: Path, rows: list[list[Any]], header: list[str] = HEADER) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)


def project_with(
    project: Project, bronze: dict[str, Any], extra: dict[str, Any] | None = None, **models: str
) -> None:
    write(
        project.root / "customers" / "customers.csv",
        [[c, f"segment {c % 3}"] for c in range(30)],  # customers 30-39 match nothing
        ["customer_id", "segment"],
    )
    nodes = {
        name: {
            "query": query, "target": f"silver.{name}", "materialized": "merge",
            "key": ["order_id"], "cursor": "updated_at", "on_conflict": "newer_wins",
            **(extra or {}),
        }
        for name, query in models.items()
    }  # fmt: skip
    project.configure(
        models=nodes,
        bronze_orders={
            "source": {"kind": "csv", "path": "data/orders*.csv"},
            "target": "bronze.orders",
            "cursor": "updated_at",
            "columns": {"amount": "numeric(12,2)"},
            **bronze,
        },
        bronze_customers={
            "source": {"kind": "csv", "path": "customers/customers.csv"},
            "target": "bronze.customers",
            "key": ["customer_id"],
            "on_conflict": "update",
            "incremental": "files",
        },
    )


def run(project: Project) -> tuple[dict[str, dict[str, Any]], list[str]]:
    statements: list[str] = []
    with observe_statements(lambda kind, sql, seconds: statements.append(sql)):
        outcomes = api.run(api.load_config(project.root / "pipeledger.toml"))
    results = {o.to_json()["pipeline"]: o.to_json() for o in outcomes}
    assert {n: r["status"] for n, r in results.items()} == dict.fromkeys(results, "success")
    return results, statements


def stagings(statements: list[str], model: str) -> list[str]:
    """The statements that filled a model's stage from its query (by its SQL's words)."""
    marker = "segment" if model == "joined" else "UPPER("
    return [
        s for s in statements if s.startswith('INSERT INTO "_pipeledger_stage"') and marker in s
    ]


def differences(project: Project, model: str, query: str, live: str = "true") -> int:
    """Rows in the model's target (those ``live``) or in its query over the upstream now,
    not in both."""
    plain = "order_id, customer_id, status, amount, order_date, updated_at"
    columns = "order_id, amount, segment, updated_at" if model == "joined" else plain
    target = f"SELECT {columns} FROM silver.{model} WHERE {live}"
    return int(
        project.query(
            f"SELECT (SELECT count(*) FROM (({target}) EXCEPT ALL ({query})) a) "
            f"+ (SELECT count(*) FROM (({query}) EXCEPT ALL ({target})) b)"
        )[0][0]
    )


@pytest.mark.parametrize("soft_delete", [False, True], ids=["deletes", "marks"])
def test_many_touched_keys_are_recomputed_over_the_changed_rows_alone(
    project: Project, soft_delete: bool
) -> None:
    bronze = {"key": ["order_id"], "on_conflict": "newer_wins"}
    project_with(project, bronze, {"soft_delete": soft_delete}, plain=SILVER)
    write(project.root / "data" / "orders_1.csv", orders(range(1, ROWS + 1), 1))
    run(project)
    # 900 of 2,000 orders change (every 7th now a test order: one the model had goes, a
    # former test order comes), 300 are new: 1,200 touched keys, far more than are bound
    # as values, and more than 5% of the table
    write(project.root / "data" / "orders_2.csv", orders(range(1101, ROWS + 301), 2, test=7))
    results, statements = run(project)
    [staging] = stagings(statements, "plain")
    assert '"_pipeledger_run_id" IN (' in staging  # the changed rows, read by their run
    assert "_pipeledger_touched" not in staging  # every row they yield is a touched key
    live = "_pipeledger_deleted_at IS NULL" if soft_delete else "true"
    assert differences(project, "plain", SILVER, live) == 0
    old, new = range(1101, ROWS + 1), range(ROWS + 1, ROWS + 301)
    counts = (
        sum(1 for i in new if i % 7) + sum(1 for i in old if i % 9 == 0 and i % 7),
        sum(1 for i in old if i % 9 and i % 7),
        sum(1 for i in old if i % 9 and i % 7 == 0),
    )
    silver = results["plain"]
    assert (silver["rows_inserted"], silver["rows_updated"], silver["rows_deleted"]) == counts
    marked = "_pipeledger_deleted_at IS NOT NULL" if soft_delete else "false"
    [(kept,)] = project.query(f"SELECT count(*) FROM silver.plain WHERE {marked}")
    assert kept == (counts[2] if soft_delete else 0)  # marked deleted, still there
    # again with nothing changed upstream: nothing recomputed, nothing written
    again, _ = run(project)
    assert again["plain"]["rows_read"] == 0 and again["plain"]["rows_updated"] == 0


def test_an_outer_join_keeps_the_scope_filter_and_equals_a_full_recompute(
    project: Project,
) -> None:
    project_with(project, {"key": ["order_id"], "on_conflict": "newer_wins"}, joined=JOINED)
    write(project.root / "data" / "orders_1.csv", orders(range(1, ROWS + 1), 1))
    run(project)
    write(project.root / "data" / "orders_2.csv", orders(range(1, 1201), 3, "shipped"))
    _, statements = run(project)
    [staging] = stagings(statements, "joined")
    assert '"_pipeledger_run_id" IN (' in staging and "_pipeledger_touched" in staging
    assert differences(project, "joined", JOINED) == 0


@pytest.mark.parametrize(
    "bronze",
    [
        {"key": ["order_id"], "on_conflict": "newer_wins"},  # few touched beside the table
        {"key": ["order_id"], "mode": "append", "on_conflict": "ignore"},  # a row a version
    ],
    ids=["few_touched", "no_unique_key"],
)
def test_otherwise_the_touched_keys_are_matched_and_the_result_is_the_same(
    project: Project, bronze: dict[str, Any]
) -> None:
    project_with(project, bronze, plain=SILVER)
    unique = bronze.get("mode") != "append"
    rows = 20_000 if unique else ROWS
    write(project.root / "data" / "orders_1.csv", orders(range(1, rows + 1), 1))
    run(project)
    touched = range(1, 801) if unique else range(1, 1201)  # 4% / 60% of the rows
    write(project.root / "data" / "orders_2.csv", orders(touched, 4, "shipped"))
    _, statements = run(project)
    [staging] = stagings(statements, "plain")
    assert "_pipeledger_touched" in staging and '"_pipeledger_run_id" IN (' not in staging
    if unique:
        assert differences(project, "plain", SILVER) == 0
    else:  # the newest version of each order, as the merge keeps it
        newest = (
            f"SELECT * FROM ({SILVER}) s WHERE updated_at = "
            "(SELECT max(updated_at) FROM bronze.orders b WHERE b.order_id = s.order_id)"
        )
        assert differences(project, "plain", newest) == 0
