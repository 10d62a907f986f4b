"""Models that tell the truth: deletes, filter exits and key moves upstream reach every model
above, which then equals its full recompute (the same SQL run over the warehouse as it is),
on both backends, without --full-refresh."""

from __future__ import annotations

import json
import random
from decimal import Decimal
from typing import Any

import pytest

from tests.helpers import Project

HEADER = ["order_id", "customer_id", "status", "amount", "order_date", "updated_at", "op"]
SILVER = """
select order_id, customer_id, status, amount, order_date, updated_at
from bronze.orders
where status <> 'cancelled'
"""
BY_CUSTOMER = """
select customer_id, sum(amount) as total, count(*) as orders
from silver.orders
group by customer_id
"""
BY_DAY = """
select order_date, sum(amount) as revenue, count(*) as orders
from silver.orders
group by order_date
"""
HISTORY = """
select order_id, status, amount, updated_at from bronze.orders where status <> 'cancelled'
"""


def chain(project: Project, **silver: Any) -> None:
    project.configure(
        models={
            "silver": {
                "query": SILVER,
                "target": "silver.orders",
                "materialized": "merge",
                "key": ["order_id"],
                "cursor": "updated_at",
                "on_conflict": "update",
                **silver,
            },
            "by_customer": {
                "query": BY_CUSTOMER,
                "target": "gold.by_customer",
                "materialized": "merge",
                "key": ["customer_id"],
            },
            "by_day": {
                "query": BY_DAY,
                "target": "gold.by_day",
                "materialized": "partition_overwrite",
                "partition_by": "order_date",
            },
            "history": {
                "query": HISTORY,
                "target": "silver.history",
                "materialized": "scd2",
                "key": ["order_id"],
                "cursor": "updated_at",
            },
        },
        bronze={
            "source": {"kind": "csv", "path": "data/orders*.csv"},
            "target": "bronze.orders",
            "key": ["order_id"],
            "cursor": "updated_at",
            "on_conflict": "newer_wins",
            "columns": {"amount": "numeric(12,2)", "order_date": "date"},
            "deleted": {"column": "op", "values": ["D"]},
        },
    )


def order(
    order_id: int, customer: int, amount: str, day: int, hour: int, status: str = "completed"
) -> list[Any]:
    return [
        order_id,
        customer,
        status,
        amount,
        f"2024-01-{day:02d}",
        f"2024-01-10T{hour:02d}:00:00Z",
        "I",
    ]


def deleted(order_id: int, hour: int) -> list[Any]:
    return [order_id, "", "", "", "", f"2024-01-10T{hour:02d}:00:00Z", "D"]


def first_batch() -> list[list[Any]]:
    statuses = ["completed", "shipped", "cancelled", "completed"]
    return [
        order(i, 1 + i % 6, f"{i * 3 + 0.25:.2f}", 1 + i % 4, 1, statuses[i % 4])
        for i in range(1, 31)
    ]


def normal(value: Any) -> str:
    """A value as both backends show it (SQLite keeps decimals as text, sums as floats)."""
    if value is None:
        return "NULL"
    if isinstance(value, float | Decimal) or (isinstance(value, str) and _decimal(value)):
        return f"{Decimal(str(value)):.2f}"
    return str(value)


def _decimal(text: str) -> bool:
    try:
        Decimal(text)
    except ArithmeticError:
        return False
    return "." in text


def rows(project: Project, query: str) -> list[tuple[str, ...]]:
    return sorted(tuple(normal(v) for v in row) for row in project.query(query))


def table(project: Project, name: str, columns: str, where: str = "") -> list[tuple[str, ...]]:
    return rows(project, f"SELECT {columns} FROM {project.table(name)} {where}")


def recomputed(project: Project, sql: str, reads: dict[str, str]) -> list[tuple[str, ...]]:
    """The model's SQL run as it is over the warehouse now (its full recompute); ``reads``
    replaces the tables it reads (the full recompute of an upstream model)."""
    for name, text in {"bronze.orders": project.table("bronze.orders"), **reads}.items():
        sql = sql.replace(name, text)
    return rows(project, sql)


def assert_every_model_equals_its_full_recompute(project: Project) -> None:
    silver_columns = "order_id, customer_id, status, amount, order_date, updated_at"
    silver = recomputed(project, SILVER, {})
    assert table(project, "silver.orders", silver_columns) == silver
    inner = f"({SILVER.replace('bronze.orders', project.table('bronze.orders'))}) AS s"
    for name, sql, columns in (
        ("gold.by_customer", BY_CUSTOMER, "customer_id, total, orders"),
        ("gold.by_day", BY_DAY, "order_date, revenue, orders"),
    ):
        assert table(project, name, columns) == recomputed(project, sql, {"silver.orders": inner})
    current = table(
        project, "silver.history", "order_id, status, amount, updated_at", "WHERE is_current"
    )
    assert current == recomputed(project, HISTORY, {})


def by_node(outcomes: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {o["pipeline"]: o for o in outcomes}


def written(outcome: dict[str, Any]) -> int:
    return sum(outcome.get(k) or 0 for k in ("rows_inserted", "rows_updated", "rows_deleted"))


def test_deletes_filter_exits_and_key_moves_reach_every_model(project: Project) -> None:
    chain(project)
    project.write_csv("orders_1.csv", first_batch(), HEADER)
    project.run_json("run")
    assert_every_model_equals_its_full_recompute(project)
    # order 1 leaves the filter (cancelled), order 5 moves from customer 6 to customer 2 and
    # from day 2 to day 4, order 8 is deleted, order 9 changes its amount, order 6 (the only
    # remaining order of its customer 1, once order 1 is cancelled...) is deleted: customer 1
    # is produced by no upstream row any more
    project.write_csv(
        "orders_2.csv",
        [
            order(1, 2, "4.25", 2, 2, "cancelled"),
            order(5, 2, "15.25", 4, 2),
            deleted(8, 2),
            order(9, 4, "99.99", 2, 2),
            deleted(6, 2),
            deleted(12, 2),
            deleted(18, 2),
            deleted(24, 2),
            deleted(30, 2),
            order(31, 7, "1.00", 9, 2),
        ],
        HEADER,
    )
    outcomes = by_node(project.run_json("run"))
    assert_every_model_equals_its_full_recompute(project)
    assert outcomes["silver"]["rows_deleted"] == 4  # 1 left the filter; 8, 12, 24 deleted
    assert outcomes["by_customer"]["rows_deleted"] == 1  # customer 1 is gone
    customers = [int(r[0]) for r in table(project, "gold.by_customer", "customer_id")]
    assert 1 not in customers and 7 in customers
    # the history closes the versions of the orders that are gone
    closed = table(project, "silver.history", "order_id", "WHERE NOT is_current")
    assert {("1",), ("8",), ("12",)} <= set(closed)
    # an identical re-run writes nothing anywhere
    assert [written(o) for o in project.run_json("run")] == [0, 0, 0, 0, 0]
    # order 1 comes back into the filter, order 31 moves away, customer 1 returns
    project.write_csv(
        "orders_3.csv",
        [
            order(1, 1, "4.25", 2, 3, "shipped"),
            order(31, 3, "2.00", 1, 3),
            deleted(2, 3),
        ],
        HEADER,
    )
    outcomes = by_node(project.run_json("run"))
    assert_every_model_equals_its_full_recompute(project)
    assert outcomes["by_customer"]["rows_deleted"] == 1  # customer 7 (its only order moved)


def test_the_ledger_counts_what_a_model_deleted(project: Project) -> None:
    chain(project)
    project.write_csv("orders_1.csv", first_batch(), HEADER)
    project.run_json("run")
    project.write_csv("orders_2.csv", [deleted(2, 2), deleted(3, 2)], HEADER)
    silver = by_node(project.run_json("run"))["silver"]
    assert silver["rows_deleted"] == 1  # order 2 was cancelled: never in silver
    code, out, err = project.cli("show", silver["run_id"], "--json")
    assert code == 0, err
    shown = json.loads(out)
    assert shown["rows_deleted"] == 1
    events = [e for e in shown["events"] if e["event_type"] == "RECORD_DELETED"]
    assert [e["record_count"] for e in events] == [1]


def test_a_soft_deleting_model_marks_the_keys_it_no_longer_produces(project: Project) -> None:
    chain(project, soft_delete=True)
    project.write_csv("orders_1.csv", first_batch(), HEADER)
    project.run_json("run", "+silver")
    project.write_csv(
        "orders_2.csv", [deleted(4, 2), order(5, 1, "1.00", 1, 2, "cancelled")], HEADER
    )
    outcome = by_node(project.run_json("run", "+silver"))["silver"]
    assert outcome["rows_deleted"] == 2
    marked = table(project, "silver.orders", "order_id", "WHERE _pipeledger_deleted_at IS NOT NULL")
    assert marked == [("4",), ("5",)]
    # the key comes back when its row is produced again
    project.write_csv("orders_3.csv", [order(5, 1, "1.00", 1, 3)], HEADER)
    project.run_json("run", "+silver")
    marked = table(project, "silver.orders", "order_id", "WHERE _pipeledger_deleted_at IS NOT NULL")
    assert marked == [("4",)]


def test_a_full_refresh_reports_the_rows_it_dropped(project: Project) -> None:
    chain(project)
    project.write_csv("orders_1.csv", first_batch(), HEADER)
    project.run_json("run")
    before = project.count("silver.orders")
    outcome = by_node(project.run_json("run", "silver", "--full-refresh"))["silver"]
    assert (outcome["rows_deleted"], outcome["rows_inserted"]) == (before, before)


def test_dag_json_shows_what_each_model_recomputes(project: Project) -> None:
    chain(project)
    code, out, err = project.cli("dag", "--json")
    assert code == 0, err
    nodes = {n["name"]: n for n in json.loads(out)["nodes"]}
    assert nodes["silver"]["incremental"]["recompute"] == "keys"
    assert nodes["silver"]["incremental"]["traced"] == {"bronze.orders": ["order_id"]}
    assert nodes["by_day"]["incremental"]["recompute"] == "partitions"
    assert nodes["by_day"]["incremental"]["traced"] == {"silver.orders": ["order_date"]}
    assert "incremental" not in nodes["bronze"]


FALLBACK_SQL = """
select o.order_id, o.customer_id,
       row_number() over (partition by o.customer_id order by o.order_id desc) as nth
from bronze.orders o
"""


def test_a_model_the_lineage_cannot_follow_must_name_its_fallback(project: Project) -> None:
    chain(project)
    raw = project.root / "pipeledger.toml"
    base = raw.read_text()
    model = (
        f'\n[models.nth]\nquery = """{FALLBACK_SQL}"""\ntarget = "gold.nth"\n'
        'materialized = "merge"\nkey = ["order_id"]\n'
    )
    raw.write_text(base + model)
    code, _, err = project.cli("dag")
    assert code == 2
    assert "models.nth" in err and "window" in err and 'fallback = "partitions"' in err
    raw.write_text(base + model + 'fallback = "partitions"\npartition_by = "customer_id"\n')
    code, out, err = project.cli("dag", "--json")
    assert code == 0, err
    [nth] = [n for n in json.loads(out)["nodes"] if n["name"] == "nth"]
    assert nth["incremental"]["fallback"] == "partitions"
    assert nth["incremental"]["fallback_by"]["traced"] == {"bronze.orders": ["customer_id"]}
    project.write_csv("orders_1.csv", first_batch(), HEADER)
    project.run_json("run")
    # a new first order of customer 2 renumbers the customer's other orders
    project.write_csv(
        "orders_2.csv",
        [
            [40, 2, "completed", "1.00", "2024-01-01", "2024-01-10T02:00:00Z", "I"],
            deleted(8, 2),
        ],
        HEADER,
    )
    outcome = by_node(project.run_json("run"))["nth"]
    assert outcome["recomputed"] == 2  # customers 2 and 3 (order 8)
    sql = FALLBACK_SQL.replace("bronze.orders", project.table("bronze.orders"))
    assert table(project, "gold.nth", "order_id, customer_id, nth") == rows(project, sql)


@pytest.mark.parametrize(
    ("sql", "words"),
    [
        (
            "with d as (delete from bronze.orders returning order_id) select order_id from d",
            "a DELETE (a data-modifying CTE)",
        ),
        ("select order_id into bronze.stolen from bronze.orders", "SELECT ... INTO"),
        ("select order_id from bronze.orders for update", "FOR UPDATE"),
        ("select nextval('s') as order_id from bronze.orders", "nextval()"),
        ("select order_id from gold.m", "cycle: m -> m"),
    ],
)
def test_model_sql_that_writes_or_reads_itself_is_refused_before_anything_runs(
    project: Project, sql: str, words: str
) -> None:
    chain(project)
    raw = project.root / "pipeledger.toml"
    raw.write_text(
        raw.read_text() + f'\n[models.m]\nquery = "{sql}"\ntarget = "gold.m"\n'
        'materialized = "replace"\n'
    )
    project.write_csv("orders_1.csv", first_batch(), HEADER)
    for command in (["dag"], ["check", "m"], ["run"]):
        code, _, err = project.cli(*command)
        assert code == 2, (command, err)
        assert words in err
    assert not project.exists("bronze.orders")  # no node ran


def test_a_merge_model_without_a_cursor_compares_rows(project: Project) -> None:
    chain(project)
    project.write_csv("orders_1.csv", first_batch(), HEADER)
    project.run_json("run")
    project.write_csv("orders_2.csv", [order(9, 4, "99.99", 2, 2)], HEADER)
    outcome = by_node(project.run_json("run"))["by_customer"]
    assert (outcome["rows_updated"], outcome["rows_inserted"], outcome["rows_deleted"]) == (1, 0, 0)
    assert_every_model_equals_its_full_recompute(project)


def test_a_cursor_that_is_null_or_missing_is_named(project: Project) -> None:
    chain(project)
    raw = project.root / "pipeledger.toml"
    base = raw.read_text()
    raw.write_text(
        base
        + f'\n[models.m]\nquery = """{BY_CUSTOMER}"""\ntarget = "gold.m"\nkey = ["customer_id"]\n'
        'on_conflict = "newer_wins"\n'
    )
    code, _, err = project.cli("dag")
    assert code == 2 and "needs a cursor" in err and "newer_wins" in err
    nullable = (
        "select customer_id, max(case when status = 'lost' then updated_at end) as last_big "
        "from silver.orders group by customer_id"
    )
    raw.write_text(
        base + f'\n[models.m]\nquery = "{nullable}"\ntarget = "gold.m"\nkey = ["customer_id"]\n'
        'cursor = "last_big"\n'
    )
    project.write_csv("orders_1.csv", first_batch(), HEADER)
    project.run_json("run", "+silver")
    code, out, _ = project.cli("run", "m", "--json")
    assert code == 1
    [failed] = json.loads(out)
    assert "last_big is NULL" in failed["error"] and "leave cursor out" in failed["error"]


def test_a_key_the_query_produces_twice_is_refused_naming_it(project: Project) -> None:
    chain(project)
    raw = project.root / "pipeledger.toml"
    twice = "select customer_id, status from bronze.orders"
    raw.write_text(
        raw.read_text() + f'\n[models.m]\nquery = "{twice}"\ntarget = "gold.m"\n'
        'materialized = "replace"\nkey = ["customer_id"]\n'
    )
    project.write_csv("orders_1.csv", first_batch(), HEADER)
    code, out, _ = project.cli("run", "--json")
    assert code == 1
    failed = {o["pipeline"]: o for o in json.loads(out)}["m"]
    assert "produced key (" in failed["error"] and "Nothing was written" in failed["error"]


def test_an_scd2_model_with_an_integer_cursor_cannot_close_a_gone_key(project: Project) -> None:
    chain(project)
    raw = project.root / "pipeledger.toml"
    versions = "select order_id, status, customer_id as version from bronze.orders"
    raw.write_text(
        raw.read_text() + f'\n[models.m]\nquery = "{versions}"\ntarget = "gold.m"\n'
        'materialized = "scd2"\nkey = ["order_id"]\ncursor = "version"\n'
    )
    project.write_csv("orders_1.csv", first_batch(), HEADER)
    project.run_json("run", "+m")
    project.write_csv("orders_2.csv", [order(9, 5, "1.00", 2, 2)], HEADER)
    assert by_node(project.run_json("run", "+m"))["m"]["rows_inserted"] == 1  # a new version
    project.write_csv("orders_3.csv", [deleted(4, 3)], HEADER)
    code, out, _ = project.cli("run", "+m", "--json")
    assert code == 1
    failed = by_node(json.loads(out))["m"]
    assert "no longer produced" in failed["error"] and "'version' is bigint" in failed["error"]


def test_before_images_are_forgotten_once_every_model_reading_them_consumed_them(
    project: Project,
) -> None:
    chain(project)
    project.write_csv("orders_1.csv", first_batch(), HEADER)
    project.run_json("run")
    project.write_csv("orders_2.csv", [deleted(1, 2), order(5, 2, "15.25", 4, 2)], HEADER)
    project.run_json("run", "+silver")  # history, a reader of bronze too, has not run
    kept = "pipeledger.before__bronze__orders"
    assert project.count(kept) == 2
    outcome = by_node(project.run_json("run", "history"))["history"]
    assert outcome["rows_deleted"] == 1  # order 1's version closed
    assert project.count(kept) == 0
    project.run_json("run", "--threads", "1")  # two readers side by side would leave it
    assert project.count("pipeledger.before__silver__orders") == 0  # to their next runs
    assert_every_model_equals_its_full_recompute(project)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_any_mix_of_changes_leaves_every_model_equal_to_its_full_recompute(
    project: Project, seed: int
) -> None:
    """Random rounds of inserts, updates, deletes, filter exits and entries, and moves of
    an order to another customer or day (seeded: a failure replays)."""

    rng = random.Random(seed)
    chain(project)
    project.write_csv("orders_1.csv", first_batch(), HEADER)
    project.run_json("run")
    alive = set(range(1, 31))
    next_id = 31
    for round_ in range(2, 6):
        hour = round_
        rows: list[list[Any]] = []
        for order_id in rng.sample(sorted(alive), k=min(6, len(alive))):
            if rng.random() < 0.3:
                rows.append(deleted(order_id, hour))
                alive.discard(order_id)
            else:
                status = rng.choice(["completed", "shipped", "cancelled"])
                customer, day = rng.randint(1, 8), rng.randint(1, 6)
                rows.append(
                    order(
                        order_id, customer, f"{rng.randint(1, 9999) / 100:.2f}", day, hour, status
                    )
                )
        for _ in range(rng.randint(0, 3)):
            rows.append(order(next_id, rng.randint(1, 8), "5.00", rng.randint(1, 6), hour))
            alive.add(next_id)
            next_id += 1
        project.write_csv(f"orders_{round_}.csv", rows, HEADER)
        project.run_json("run")
        assert_every_model_equals_its_full_recompute(project)
