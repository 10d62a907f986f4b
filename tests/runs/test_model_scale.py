"""A model rebuild at scale on the embedded default: a replace of 300k rows rewrites only
the rows that changed, the sync compares rows by an index (never a scan inside a scan: the
plan is asserted here, its speed is measured by ``bench``), and SIGTERM stops it promptly,
rolled back."""

from __future__ import annotations

import json
import signal
import sqlite3
import time
from typing import Any

import pytest

from pipeledger.common.columns import TableName
from pipeledger.runs.model import sql
from pipeledger.warehouse.dialect import SQLITE
from tests.helpers import Project, write_big_orders_csv
from tests.runs.test_crash_and_concurrency import _wait_until_staging as wait_for_log

ROWS = 300_000
COPY = "select order_id, customer_id, amount, qty, status from bronze.orders"


def big_project(project: Project, **model: Any) -> None:
    project.configure(
        models={"copy": {"query": COPY, "target": "gold.copy", "materialized": "replace", **model}},
        bronze={
            "source": {"kind": "csv", "path": "data/orders*.csv"},
            "target": "bronze.orders",
            "key": ["order_id"],
            "cursor": "updated_at",
            "on_conflict": "update",
            "columns": {"amount": "numeric(12,2)"},
        },
    )
    write_big_orders_csv(
        project.root / "data" / "orders_1.csv", ROWS, 1, "2024-01-02T00:00:00+00:00"
    )


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
@pytest.mark.parametrize("key", [[], ["order_id"]], ids=["by_text", "by_key"])
def test_a_replace_of_300k_rows_rewrites_only_the_row_that_changed(
    project: Project, key: list[str]
) -> None:
    big_project(project, key=key)
    first = {o["pipeline"]: o for o in project.run_json("run")}["copy"]
    assert first["rows_inserted"] == ROWS
    project.write_csv(
        "orders_2.csv", [[7, 2, "2024-01-02", "1.00", "done", 1, "2024-02-01T00:00:00Z"]]
    )
    again = {o["pipeline"]: o for o in project.run_json("run")}["copy"]
    changed = (again["rows_inserted"], again["rows_updated"], again["rows_deleted"])
    assert changed == ((0, 1, 0) if key else (1, 0, 1))  # order 7 changed
    assert project.count("gold.copy") == ROWS
    amounts = project.query(f"select amount from {project.table('gold.copy')} where order_id = 7")
    assert [float(a) for (a,) in amounts] == [1.0]


@pytest.mark.parametrize("names", [["a", "b", "c"], ["k", "v"]])
def test_the_sqlite_sync_probes_an_index_for_each_target_row(names: list[str]) -> None:
    """The pairing of target and staged rows searches the stage's index once per target
    row: a plan that scanned the stage per target row would be quadratic at 300k rows."""
    db = sqlite3.connect(":memory:")
    columns = ", ".join(names)
    db.execute(f"CREATE TABLE target ({columns})")
    db.execute(f"CREATE TEMP TABLE _pipeledger_stage ({columns})")
    rows = [tuple(range(i, i + len(names))) for i in range(1000)]
    marks = ", ".join("?" for _ in names)
    for table in ("target", "_pipeledger_stage"):
        db.executemany(f"INSERT INTO {table} VALUES ({marks})", rows)
    for statement in sql.pair_rows_setup(SQLITE, names):
        db.execute(statement)
    db.execute("ANALYZE")
    pairing = sql.pair_rows(SQLITE, TableName(None, "target"), names, "1 = 1")
    select = pairing[pairing.index(" AS SELECT ") + len(" AS ") :]
    plan = [row[-1] for row in db.execute(f"EXPLAIN QUERY PLAN {select}")]
    scans = [step for step in plan if step.startswith("SCAN")]
    assert scans == ["SCAN t"], plan  # the outer rows, once
    assert any(step.startswith("SEARCH s USING") and "INDEX" in step for step in plan), plan
    db.execute(pairing)
    paired = db.execute("SELECT count(*) FROM _pipeledger_pairs WHERE stage_row IS NOT NULL")
    assert paired.fetchone() == (1000,)
    db.close()


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_sigterm_stops_a_big_rebuild_promptly_and_rolls_it_back(project: Project) -> None:
    big_project(project)
    raw = project.root / "pipeledger.toml"
    raw.write_text(raw.read_text() + '\n[ledger]\nheartbeat = "1s"\nlease = "10s"\n')
    project.run_json("run")
    before = project.count("gold.copy")
    project.write_csv(
        "orders_2.csv", [[7, 2, "2024-01-02", "1.00", "done", 1, "2024-02-01T00:00:00Z"]]
    )
    project.run_json("run", "bronze")
    process = project.spawn("--verbose", "run", "copy")
    wait_for_log(process, word="publishing")
    signalled = time.monotonic()
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=60)
    stopped = time.monotonic() - signalled
    assert process.returncode == 143, err
    assert stopped < 5, stopped  # well within a lease; the statement is interrupted
    runs = json.loads(project.cli("runs", "copy", "--json")[1])
    assert runs[0]["status"] == "cancelled"
    assert project.count("gold.copy") == before
