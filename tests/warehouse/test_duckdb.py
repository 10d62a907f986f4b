"""DuckDB as the warehouse (``url = "duckdb:///..."``): loads, re-runs and merges like the
others, keeps its ledger in a SQLite file beside it, rolls a failed run back whole (it has
no savepoints), and tells a second process that the file is busy. The whole suite runs on
it too with PIPELEDGER_TEST_DUCKDB=1 (README, "The embedded default: why SQLite", lists
what it lacks)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

import pytest

from tests.helpers import Project, order, orders_pipeline, write_big_orders_csv
from tests.publish import test_conflict_policies as policies
from tests.runs import test_models as models

pytest.importorskip("duckdb")


@pytest.fixture
def duck(tmp_path: Path) -> Project:
    return Project(tmp_path, f"duckdb:///{tmp_path / 'wh' / 'warehouse.duckdb'}")


def test_loads_reruns_and_merges_with_the_ledger_beside_it(duck: Project) -> None:
    duck.configure(orders=orders_pipeline(on_conflict="newer_wins"))
    duck.write_csv("orders_1.csv", [order(i, f"2024-01-01T{i:02d}:00:00Z") for i in range(1, 11)])
    first = duck.run()
    assert (first["rows_inserted"], first["rows_updated"]) == (10, 0)
    again = duck.run()
    assert (again["rows_read"], again["rows_inserted"], again["rows_updated"]) == (1, 0, 0)
    duck.write_csv(
        "orders_2.csv",
        [
            order(3, "2024-01-02T00:00:00Z", status="shipped", amount="12.50"),
            order(4, "2023-12-01T00:00:00Z", status="older"),  # older than the stored row
            order(11, "2024-01-02T00:00:00Z"),
        ],
    )
    third = duck.run()
    assert (third["rows_inserted"], third["rows_updated"]) == (1, 1)
    assert duck.rows()[2:4] == [("3", "shipped", "12.50"), ("4", "completed", "10.00")]
    assert duck.query(f"SELECT amount FROM {duck.table()} WHERE order_id = 3") == [
        (Decimal("12.50"),)
    ]
    assert duck.watermarks() == {"": "2024-01-02T00:00:00.000000+00:00"}
    ledger = duck.root / "wh" / "warehouse.ledger.db"
    assert ledger.exists()
    runs = duck.query('SELECT rows_inserted FROM "pipeledger.pipeline_runs" ORDER BY started_at')
    assert [r[0] for r in runs] == [10, 0, 1]
    code, out, _ = duck.cli("runs")
    assert code == 0 and out.count("success") == 3


def test_repeated_keys_of_a_first_load_keep_the_newest_version(duck: Project) -> None:
    """Without savepoints a failed insert would lose the run: the keys are checked first."""
    duck.configure(orders=orders_pipeline(on_conflict="newer_wins"))
    duck.write_csv(
        "orders_1.csv",
        [
            order(1, "2024-01-01T10:00:00Z", status="first"),
            order(1, "2024-01-01T12:00:00Z", status="newest"),
            order(2, "2024-01-01T11:00:00Z"),
        ],
    )
    result = duck.run()
    assert (result["rows_inserted"], result["rows_superseded"]) == (2, 1)
    assert duck.rows() == [("1", "newest", "10.00"), ("2", "completed", "10.00")]


def test_the_gate_counts_repeated_keys_and_quarantines_the_bad_rows(duck: Project) -> None:
    checks = {"not_null": ["status"], "range": {"amount": {"min": 0}}, "on_fail": "quarantine"}
    duck.configure(orders=orders_pipeline(checks=checks))
    duck.write_csv(
        "orders_1.csv",
        [
            order(1, "2024-01-01T10:00:00Z"),
            order(2, "2024-01-01T10:00:00Z", amount="-5.00"),
            order(3, "2024-01-01T10:00:00Z", status=""),
        ],
    )
    result = duck.run()
    assert (result["status"], result["rows_inserted"], result["rows_rejected"]) == (
        "partial",
        1,
        2,
    )
    assert duck.rows() == [("1", "completed", "10.00")]


def test_a_failed_run_writes_nothing_and_leaves_the_watermark(duck: Project) -> None:
    duck.configure(orders=orders_pipeline())
    duck.write_csv("orders_1.csv", [order(1, "2024-01-01T10:00:00Z")])
    duck.run()
    duck.write_csv("orders_2.csv", [order(2, "2024-01-02T10:00:00Z")])
    duck.write_csv("orders_3.csv", [order(3, "")])  # an empty cursor: the run fails
    code, _, err = duck.cli("run")
    assert code == 1 and "nothing was written" in err
    assert duck.count() == 1
    assert duck.watermarks() == {"": "2024-01-01T10:00:00.000000+00:00"}


def test_another_process_holding_the_file_makes_a_run_busy_and_it_did_nothing(
    duck: Project,
) -> None:
    duck.configure(orders=orders_pipeline())
    duck.write_csv("orders_1.csv", [order(1, "2024-01-01T10:00:00Z")])
    duck.run()
    path = duck.root / "wh" / "warehouse.duckdb"
    hold = f"import duckdb, sys; c = duckdb.connect({str(path)!r}); print('open', flush=True)"
    holder = subprocess.Popen(
        [sys.executable, "-c", f"{hold}; sys.stdin.read()"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "open\n"
        duck.write_csv("orders_2.csv", [order(2, "2024-01-02T10:00:00Z")])
        code, _, err = duck.cli("run")
        assert code == 4, err
        assert f"another process has this DuckDB warehouse open (process {holder.pid}" in err
        code, _, err = duck.cli("state")
        assert code != 0 and "one process at a time" in err
    finally:
        holder.communicate("")
    assert duck.count() == 1
    assert duck.run()["rows_inserted"] == 1


def test_a_backfill_compares_every_row_and_writes_nothing(duck: Project) -> None:
    """No triggers, so no fingerprint guard: a backfill stages every row of its range."""
    duck.configure(orders=orders_pipeline())
    duck.write_csv("orders_1.csv", [order(i, f"2024-01-01T{i:02d}:00:00Z") for i in range(1, 6)])
    duck.run()
    code, out, err = duck.cli(
        "backfill", "orders", "--start", "2024-01-01", "--end", "2024-01-02", "--json"
    )
    assert code == 0, err
    assert '"rows_staged": 5' in out and '"rows_updated": 0' in out


def test_the_ledger_cannot_live_in_a_duckdb_file(duck: Project) -> None:
    assert duck.warehouse_url is not None
    duck.configure(orders=orders_pipeline(), raw=f'\n[ledger]\nurl = "{duck.warehouse_url}"\n')
    code, _, err = duck.cli("run")
    assert code == 2 and "the ledger cannot live in a DuckDB file" in err


@pytest.mark.slow
def test_a_run_killed_mid_load_leaves_nothing_and_the_next_loads_every_row_once(
    duck: Project,
) -> None:
    duck.configure(orders=orders_pipeline())
    duck.write_csv("orders_0.csv", [order(1, "2023-12-31T10:00:00Z")])
    duck.run()
    rows = 300_000
    write_big_orders_csv(
        duck.root / "data" / "orders_1.csv", rows, 1_000, "2024-01-01T00:00:00+00:00"
    )
    process = duck.spawn("--verbose", "run")
    assert process.stderr is not None
    for line in process.stderr:  # the load has staged a batch: it is mid-way
        if "staged" in line:
            break
    process.send_signal(signal.SIGSTOP)
    assert process.poll() is None, "the load finished before it was killed"
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert duck.count() == 1
    assert duck.watermarks() == {"": "2023-12-31T10:00:00.000000+00:00"}
    result = duck.run()
    assert (result["rows_inserted"], result["rows_updated"]) == (rows, 0)
    assert duck.count() == rows + 1


# The shared tests of each conflict policy and of the models, on a DuckDB warehouse (they
# run on the backends of every test run; PIPELEDGER_TEST_DUCKDB=1 runs all the others too).
SHARED: list[Callable[[Project], None]] = [
    policies.test_update_policy_last_writer_wins,
    policies.test_ignore_policy_first_write_wins,
    policies.test_newer_wins_ignores_an_older_row_and_reports_it_unchanged,
    policies.test_error_policy_refuses_changed_rows_and_writes_nothing,
    policies.test_error_policy_refuses_two_versions_of_a_key_in_one_run,
    models.test_runs_in_dependency_order_and_gold_equals_an_independent_group_by,
    models.test_changes_reach_gold_in_one_run_and_only_touched_days_are_rewritten,
    models.test_full_refresh_and_backfill_of_a_model_are_idempotent,
]


@pytest.mark.parametrize("shared", SHARED, ids=[t.__name__.removeprefix("test_") for t in SHARED])
def test_shared_behaviour_holds_on_duckdb(duck: Project, shared: Callable[[Project], None]) -> None:
    shared(duck)


@pytest.mark.parametrize("policy", ["update", "newer_wins", "ignore"])
def test_duplicate_keys_of_an_incremental_batch_resolve_on_duckdb(
    duck: Project, policy: str
) -> None:
    policies.test_duplicate_keys_in_an_incremental_batch_resolve_to_the_greatest_cursor(
        duck, policy
    )
