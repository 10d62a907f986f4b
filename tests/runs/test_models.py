"""Models: bronze (a CSV load) -> silver (a merge model) -> gold (a partition_overwrite model),
run as one graph, incrementally and exactly once, on both backends."""

from __future__ import annotations

import csv
import json
import threading
import time
from collections import defaultdict
from decimal import Decimal
from typing import Any

import pytest

from pipeledger import api
from pipeledger.warehouse.session import observe_statements
from tests.helpers import Project, order, write_big_orders_csv
from tests.runs.test_crash_and_concurrency import _paused as paused
from tests.runs.test_crash_and_concurrency import _wait_until_staging as wait_until_staging

HEADER = ["order_id", "customer_id", "status", "amount", "order_date", "updated_at"]
SILVER_SQL = """
select order_id, customer_id, lower(status) as status, amount, order_date, updated_at
from bronze.orders
where status <> 'test'
"""
GOLD_SQL = """
select order_date, sum(amount) as revenue, count(*) as orders
from silver.orders
group by order_date
"""


def medallion(project: Project, **gold: Any) -> None:
    """Listed in reverse order on purpose: the graph decides the order, not the file."""
    (project.root / "models").mkdir(exist_ok=True)
    (project.root / "models" / "silver_orders.sql").write_text(SILVER_SQL)
    project.configure(
        models={
            "gold_daily": {
                "query": GOLD_SQL, "target": "gold.daily_revenue",
                "materialized": "partition_overwrite", "partition_by": "order_date", **gold,
            },
            "silver_orders": {
                "sql": "models/silver_orders.sql", "target": "silver.orders",
                "materialized": "merge", "key": ["order_id"], "cursor": "updated_at",
                "on_conflict": "newer_wins",
            },
        },
        bronze_orders={
            "source": {"kind": "csv", "path": "data/orders*.csv"}, "target": "bronze.orders",
            "key": ["order_id"], "cursor": "updated_at", "on_conflict": "newer_wins",
            "columns": {"amount": "numeric(12,2)"},
        },
    )  # fmt: skip


def row(
    order_id: int, day: int, amount: str, status: str = "completed", changed: int = 0
) -> list[Any]:
    """An order of 2024-01-``day``; ``changed``: how many hours after the first batch it
    was last changed (0: it is part of the first batch)."""
    updated = f"2024-01-{day:02d}T10:00:00Z" if not changed else f"2024-01-10T{changed:02d}:00:00Z"
    return [order_id, 100 + order_id % 7, status, amount, f"2024-01-{day:02d}", updated]


def first_batch() -> list[list[Any]]:
    statuses = ["Completed", "shipped", "test"]
    return [
        row(i, 1 + i % 5, f"{(i * 37) % 9000 / 100 + 1:.2f}", statuses[i % 3]) for i in range(1, 61)
    ]


def write(project: Project, name: str, rows: list[list[Any]]) -> None:
    project.write_csv(name, rows, HEADER)


def truth(project: Project) -> dict[str, tuple[str, int]]:
    """Gold computed independently: the newest version of every order in the CSV files,
    without 'test' orders, summed per day in exact decimals."""
    latest: dict[str, dict[str, str]] = {}
    for path in sorted((project.root / "data").glob("orders*.csv")):
        with path.open() as handle:
            for record in csv.DictReader(handle):
                old = latest.get(record["order_id"])
                if old is None or record["updated_at"] >= old["updated_at"]:
                    latest[record["order_id"]] = record
    days: dict[str, list[Decimal]] = defaultdict(list)
    for record in latest.values():
        if record["status"] != "test":
            days[record["order_date"]].append(Decimal(record["amount"]))
    return {day: (f"{sum(v):.2f}", len(v)) for day, v in days.items()}


def gold(project: Project) -> dict[str, tuple[str, int]]:
    rows = project.query(
        f"SELECT order_date, revenue, orders FROM {project.table('gold.daily_revenue')}"
    )
    return {str(day): (f"{Decimal(str(revenue)):.2f}", int(n)) for day, revenue, n in rows}


def gold_runs(project: Project) -> dict[str, str]:
    rows = project.query(
        f"SELECT order_date, _pipeledger_run_id FROM {project.table('gold.daily_revenue')}"
    )
    return {str(day): str(run_id) for day, run_id in rows}


def by_node(outcomes: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {o["pipeline"]: o for o in outcomes}


def written(outcome: dict[str, Any]) -> int:
    return sum(outcome.get(k) or 0 for k in ("rows_inserted", "rows_updated", "rows_deleted"))


def test_runs_in_dependency_order_and_gold_equals_an_independent_group_by(
    project: Project,
) -> None:
    medallion(project)
    write(project, "orders_1.csv", first_batch())
    outcomes = project.run_json("run")
    assert [o["pipeline"] for o in outcomes] == ["bronze_orders", "silver_orders", "gold_daily"]
    assert all(o["status"] == "success" for o in outcomes)
    assert gold(project) == truth(project)


def test_changes_reach_gold_in_one_run_and_only_touched_days_are_rewritten(
    project: Project,
) -> None:
    medallion(project)
    write(project, "orders_1.csv", first_batch())
    project.run_json("run")
    again = project.run_json("run")
    assert [written(o) for o in again] == [0, 0, 0]
    before = gold_runs(project)
    # orders 2 and 7 move from day 3 to day 9, order 4 changes amount on day 5, a new order on
    # day 2, and a 'test' order becomes real on day 1
    write(project, "orders_2.csv", [
        row(2, 9, "10.00", changed=1), row(7, 9, "12.50", changed=1), row(4, 5, "99.99", changed=1),
        row(100, 2, "5.55", changed=1), row(3, 4, "3.00", changed=1),
    ])  # fmt: skip
    outcomes = by_node(project.run_json("run"))
    assert gold(project) == truth(project)
    assert written(outcomes["bronze_orders"]) == 5
    after = gold_runs(project)
    gold_run = outcomes["gold_daily"]["run_id"]
    touched = {day for day, run_id in after.items() if run_id == gold_run}
    assert touched == {"2024-01-02", "2024-01-03", "2024-01-04", "2024-01-05", "2024-01-09"}
    assert all(after[day] == before[day] for day in after if day not in touched)


def test_a_cycle_is_refused_before_anything_runs(project: Project) -> None:
    project.configure(models={
        "a": {"query": "select * from s.b", "target": "s.a", "materialized": "replace"},
        "b": {"query": "select * from s.a", "target": "s.b", "materialized": "replace"},
    })  # fmt: skip
    code, out, err = project.cli("run", "--json")
    assert code == 2
    assert "cycle: a -> b -> a" in err or "cycle: b -> a -> b" in err
    assert json.loads(out)["exit_code"] == 2
    assert not project.exists("s.a")


def test_a_failed_load_skips_its_models_and_one_run_catches_up_after_the_fix(
    project: Project,
) -> None:
    medallion(project)
    write(project, "orders_1.csv", first_batch())
    project.run_json("run")
    before = gold(project)
    bad = project.root / "data" / "orders_2.csv"
    bad.write_text(",".join(HEADER) + "\n1,2,completed\n")
    code, out, _ = project.cli("run", "--json")
    assert code == 1
    outcomes = by_node(json.loads(out))
    assert outcomes["bronze_orders"]["status"] == "failed"
    for model in ("silver_orders", "gold_daily"):
        assert (outcomes[model]["status"], outcomes[model]["reason"]) == (
            "skipped",
            "upstream_failed",
        )
    assert gold(project) == before
    write(project, "orders_2.csv", [row(61, 3, "70.00", changed=2), row(5, 8, "1.00", changed=2)])
    outcomes = by_node(project.run_json("run"))
    assert all(o["status"] == "success" for o in outcomes.values())
    assert gold(project) == truth(project)
    statuses = project.query(
        "SELECT status, extra FROM pipeledger.pipeline_runs WHERE pipeline = 'gold_daily'"
        if project.backend == "postgres"
        else "SELECT status, extra FROM \"pipeledger.pipeline_runs\" WHERE pipeline = 'gold_daily'"
    )
    assert "skipped" in {s for s, _ in statuses}


def test_selectors_follow_edges_found_in_the_sql(project: Project) -> None:
    medallion(project)
    write(project, "orders_1.csv", first_batch())
    code, out, err = project.cli("dag", "--json")
    assert code == 0, err
    graph = json.loads(out)
    assert {(e["from"], e["to"]) for e in graph["edges"]} == {
        ("bronze_orders", "silver_orders"), ("silver_orders", "gold_daily"),
    }  # fmt: skip
    assert [o["pipeline"] for o in project.run_json("run", "+gold_daily")] == [
        "bronze_orders", "silver_orders", "gold_daily",
    ]  # fmt: skip
    assert [o["pipeline"] for o in project.run_json("run", "silver_orders+")] == [
        "silver_orders", "gold_daily",
    ]  # fmt: skip


def test_every_node_run_of_one_invocation_shares_a_correlation_id(project: Project) -> None:
    medallion(project)
    write(project, "orders_1.csv", first_batch())
    project.run_json("run")
    runs = project.run_json("runs")
    ids = {r["correlation_id"] for r in runs}
    assert len(ids) == 1 and None not in ids
    assert {r["pipeline"] for r in runs} == {"bronze_orders", "silver_orders", "gold_daily"}


def test_full_refresh_and_backfill_of_a_model_are_idempotent(project: Project) -> None:
    medallion(project)
    write(project, "orders_1.csv", first_batch())
    project.run_json("run")
    refreshed = by_node(project.run_json("run", "gold_daily", "--full-refresh"))
    assert refreshed["gold_daily"]["recomputed"] == "all"
    assert gold(project) == truth(project)
    code, out, err = project.cli(
        "backfill", "gold_daily", "--start", "2024-01-02", "--end", "2024-01-03", "--json"
    )
    assert code == 0, err
    [result] = json.loads(out)
    assert written(result) == 0  # the days were right already: nothing rewritten
    assert gold(project) == truth(project)


def test_a_replace_model_is_never_seen_half_built(project: Project) -> None:
    medallion(project)
    project.configure(models={"totals": {
        "query": "select customer_id, sum(amount) as total from bronze.orders group by 1",
        "target": "gold.totals", "materialized": "replace",
    }}, bronze_orders={
        "source": {"kind": "csv", "path": "data/orders*.csv"}, "target": "bronze.orders",
        "key": ["order_id"], "cursor": "updated_at", "on_conflict": "newer_wins",
        "columns": {"amount": "numeric(12,2)"},
    })  # fmt: skip
    write(project, "orders_1.csv", first_batch())
    project.run_json("run")
    seen: set[int] = set()
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            count = project.query(f"SELECT count(*) FROM {project.table('gold.totals')}")
            seen.add(int(count[0][0]))
            time.sleep(0.002)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for n in range(3):
            write(project, f"orders_{n + 2}.csv", [row(200 + n, 2, "1.00", changed=12 + n)])
            project.run_json("run", "+totals")
    finally:
        stop.set()
        reader.join()
    assert seen <= {7}  # seven customers, before and after every replace


@pytest.mark.slow
def test_an_upstream_load_committing_while_a_model_runs_is_consumed_once(project: Project) -> None:
    """The model runs while a big bronze load is staging: it neither half-reads that load
    nor skips it; the next model run consumes it exactly once."""
    medallion(project)
    project.write_csv("orders_1.csv", [order(i, "2024-01-01T10:00:00Z") for i in range(1, 11)])
    project.run_json("run")
    write_big_orders_csv(project.root / "data" / "orders_2.csv", 300_000, 1_000,
                         "2024-01-02T00:00:00+00:00")  # fmt: skip
    load = project.spawn("--verbose", "run", "bronze_orders")
    wait_until_staging(load)
    if project.backend == "postgres":  # it runs beside the frozen load, without seeing its rows
        with paused(load):
            code, out, err = project.cli("run", "silver_orders", "--json")
        [during] = json.loads(out)
        assert code == 0, err
        assert (during["status"], during["upstream_runs"], written(during)) == ("success", 0, 0)
    else:  # SQLite: one writer at a time, the model waits its turn or steps aside
        code, out, err = project.cli("run", "silver_orders", "--json")
        [during] = json.loads(out)
        assert code in (0, 4), err
    load.communicate()
    assert load.returncode == 0
    after = by_node(project.run_json("run", "silver_orders"))["silver_orders"]
    assert project.count("silver.orders") == 300_010
    total_inserted = after["rows_inserted"] + (during.get("rows_inserted") or 0)
    assert total_inserted == 300_000
    again = by_node(project.run_json("run", "silver_orders"))["silver_orders"]
    assert (again["upstream_runs"], written(again)) == (0, 0)


def test_a_load_reads_an_upstream_target_without_its_own_columns(project: Project) -> None:
    medallion(project)
    write(project, "orders_1.csv", first_batch())
    url = project.warehouse_url or "sqlite:///.pipeledger/warehouse.db"
    raw = project.root / "pipeledger.toml"
    raw.write_text(raw.read_text() + (
        f'\n[pipelines.copy]\nsource = {{ kind = "sql", url = "{url}", '
        'table = "bronze.orders" }'
        '\ntarget = "copy.orders"\nkey = ["order_id"]\ncursor = "updated_at"\n'
        'on_conflict = "update"\n'
        # SQLite hands back text: the types are declared, as for any SQLite source
        'columns = { updated_at = "timestamptz", amount = "numeric(12,2)" }\n'
    ))  # fmt: skip
    code, out, err = project.cli("dag", "--json")
    assert code == 0, err
    assert {"from": "bronze_orders", "to": "copy"} in json.loads(out)["edges"]
    outcomes = by_node(project.run_json("run"))
    assert outcomes["copy"]["rows_inserted"] == 60
    columns = [c[0] for c in project.query(
        "SELECT column_name FROM information_schema.columns WHERE table_schema = 'copy'"
        if project.backend == "postgres" else 'SELECT name FROM pragma_table_info(\'copy.orders\')'
    )]  # fmt: skip
    assert sorted(c for c in columns if not c.startswith("_pipeledger_")) == sorted(HEADER)


def test_a_model_outliving_its_heartbeat_still_records_its_run(project: Project) -> None:
    """The heartbeat renews the run's row while the model works; the model's own
    transaction must still write that row's final state (no serialization failure)."""
    medallion(project)
    raw = project.root / "pipeledger.toml"
    raw.write_text(raw.read_text() + '\n[ledger]\nheartbeat = "20ms"\nlease = "5s"\n')
    write(project, "orders_1.csv", first_batch())
    project.run_json("run", "bronze_orders")
    if project.backend == "postgres":  # slower than many heartbeats
        sleep = "(select count(*) * 0 from (select pg_sleep(0.3)) s)"
        slow = f"where status <> 'test' and order_id > {sleep}"
        sql = project.root / "models" / "silver_orders.sql"
        sql.write_text(SILVER_SQL.replace("where status <> 'test'", slow))
    outcome = by_node(project.run_json("run", "silver_orders", "--full-refresh"))
    assert outcome["silver_orders"]["status"] == "success"
    assert project.count("silver.orders") == 40


def test_a_new_merge_target_is_its_promoted_stage_defined_as_a_created_one(
    project: Project, backend: str
) -> None:
    """A merge model's first build stages into a table that becomes the target (no copy of
    every row): the target has the columns, order, key and NOT NULLs a created one has, and
    nothing of the stage is left behind."""
    medallion(project)
    write(project, "orders_1.csv", first_batch())
    statements: list[str] = []
    with observe_statements(lambda kind, sql, seconds: statements.append(sql)):
        outcomes = api.run(api.load_config(project.root / "pipeledger.toml"))
    assert [o.to_json()["status"] for o in outcomes] == ["success"] * 3
    silver = project.table("silver.orders")
    assert not [s for s in statements if s.startswith(f"INSERT INTO {silver}")]  # no copy
    renamed = [s.split(" RENAME TO ")[-1] for s in statements if " RENAME TO " in s]
    moved = [s for s in statements if s.endswith(' SET SCHEMA "silver"')]  # PostgreSQL's
    assert renamed.count(silver) == 1 if backend == "sqlite" else len(moved) == 1
    names = [
        "order_id", "customer_id", "status", "amount", "order_date", "updated_at",
        "_pipeledger_row_hash", "_pipeledger_run_id", "_pipeledger_loaded_at",
    ]  # fmt: skip
    if backend == "postgres":
        columns = project.query(
            "SELECT column_name, is_nullable, column_default FROM information_schema.columns "
            "WHERE table_schema = 'silver' AND table_name = 'orders' ORDER BY ordinal_position"
        )
        assert [c[0] for c in columns] == names
        required = {"order_id", "updated_at", "_pipeledger_run_id", "_pipeledger_loaded_at"}
        assert {c[0] for c in columns if c[1] == "NO"} == required
        assert {c[2] for c in columns} == {None}  # the promotion's defaults are gone
        assert project.query(
            "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
            "AND a.attnum = ANY(i.indkey) WHERE i.indrelid = 'silver.orders'::regclass "
            "AND i.indisprimary"
        ) == [("order_id",)]
        assert (
            project.query("SELECT nspname FROM pg_namespace WHERE nspname LIKE '\\_pipeledger\\_%'")
            == []
        )
    else:
        columns = project.query("SELECT name FROM pragma_table_info('silver.orders')")
        assert [c[0] for c in columns] == names
        (definition,) = project.query("SELECT sql FROM sqlite_master WHERE name = 'silver.orders'")[
            0
        ]
        assert "DEFAULT" not in definition.upper()
        assert project.query(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'silver.orders' "
            "AND name = 'silver.orders_pkey'"
        ) == [("silver.orders_pkey",)]
        assert not project.exists("_pipeledger_stage")
    assert gold(project) == truth(project)
    write(project, "orders_2.csv", [row(7, 2, "999.00", changed=3)])
    project.run()  # the promoted target merges as a created one does
    assert gold(project) == truth(project)


@pytest.mark.parametrize("backend", ["postgres"], indirect=True)
def test_a_new_merge_target_is_built_with_the_sessions_search_path(
    project: Project, warehouse_url: str
) -> None:
    """The promoted stage's schema goes first on the search path, before the session's own
    (here the connection's ``options``), so a model naming its upstream as that path finds
    it reads the same table while its first build stages."""
    sep = "&" if "?" in warehouse_url else "?"
    project.warehouse_url = f"{warehouse_url}{sep}options=-csearch_path%3Dbronze%2Cpublic"
    medallion(project)
    (project.root / "models" / "silver_orders.sql").write_text(
        SILVER_SQL.replace("from bronze.orders", "from orders")
    )
    write(project, "orders_1.csv", first_batch())
    project.run("bronze_orders")
    outcome = project.run("silver_orders")
    assert outcome["status"] == "success", outcome
    assert project.count("silver.orders") == 40  # every order but the 'test' ones
