"""A model rebuild at scale on the embedded default: a replace of 300k rows costs about its
first build (the sync compares rows by indexed keys or texts, never a scan inside a scan),
and SIGTERM stops it promptly, rolled back."""

from __future__ import annotations

import json
import signal
import time
from typing import Any

import pytest

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
def test_a_replace_of_300k_rows_rebuilds_within_twice_its_first_build(
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
    assert again["duration_s"] <= 2 * first["duration_s"], (
        first["duration_s"],
        again["duration_s"],
    )


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
