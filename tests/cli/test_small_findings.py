"""What a new user meets first, each found once and kept fixed: a config path as a string,
global options after the command, a failed node's JSON with the documented keys, durations
in words, a late cancel recorded as such, and a busy SQLite retry kept on the record."""

from __future__ import annotations

import json
import logging
import sqlite3
from pathlib import Path

import pytest

from pipeledger import Ledger, api
from pipeledger.common.durations import span
from pipeledger.config.model import parse_config
from tests.helpers import Project, order, orders_pipeline

README_KEYS = {
    "pipeline",
    "run_id",
    "mode",
    "status",
    "target",
    "rows_read",
    "rows_staged",
    "rows_inserted",
    "rows_updated",
    "rows_unchanged",
    "rows_deleted",
    "rows_superseded",
    "watermark_before",
    "watermark_after",
    "started_at",
    "duration_s",
    "error",
    "late_rows_dropped",
}
REASONS = {
    "error",
    "transient",
    "unexpected",
    "gate_halt",
    "commit_unknown",
    "timeout",
    "cancel_requested",
    "upstream_failed",
    "locked",
    "busy",
    "duplicate",
}


def test_load_config_takes_a_path_as_a_string(project: Project) -> None:
    project.configure(orders=orders_pipeline())
    config = api.load_config(str(project.root / "pipeledger.toml"))
    assert list(config.pipelines) == ["orders"]


def test_global_options_work_after_the_command_too(project: Project) -> None:
    project.configure(orders=orders_pipeline())
    project.write_csv("orders_1.csv", [order(1, "2024-01-01T10:00:00Z")])
    code, _, err = project.cli("run", "-v", "--debug")
    assert code == 0, err
    code, _, err = project.cli("state", "-c", "elsewhere.toml")
    assert code == 2 and "elsewhere.toml" in err


def test_a_failed_node_has_the_keys_of_a_result_and_a_documented_reason(
    project: Project,
) -> None:
    project.configure(orders=orders_pipeline())
    (project.root / "data").mkdir(exist_ok=True)
    (project.root / "data" / "orders_1.csv").write_text("order_id,qty\n1,2,3,4\n")
    code, out, _ = project.cli("run", "--json")
    (failed,) = json.loads(out)
    assert code == 1 and set(failed) >= README_KEYS, README_KEYS - set(failed)
    assert failed["reason"] in REASONS and failed["reason"] == "error"
    assert (failed["target"], failed["mode"], failed["rows_inserted"]) == (
        "analytics.orders",
        "incremental",
        0,
    )


def test_durations_are_said_in_words() -> None:
    assert [span(s) for s in (0.35, 2.5, 45, 3900, 64 * 86400)] == [
        "350ms",
        "2.5s",
        "45s",
        "1h5m",
        "64d",
    ]
    pipeline = {**orders_pipeline(), "max_duration": "500ms"}  # the ledger keeps seconds
    with pytest.raises(api.ConfigError, match="give whole seconds"):
        parse_config({"pipelines": {"orders": pipeline}}, Path("p.toml"))


def test_a_backfill_wider_than_max_backfill_says_it_in_days(project: Project) -> None:
    project.configure(orders=orders_pipeline(max_backfill="64d"))
    project.write_csv("orders_1.csv", [order(1, "2024-01-01T10:00:00Z")])
    code, _, err = project.cli("backfill", "orders", "--start", "2024-01-01", "--end", "2024-06-01")
    assert code == 2 and "more than max_backfill = 64d" in err and "days," not in err


def test_a_cancel_that_comes_too_late_is_recorded_as_such(warehouse_url: str) -> None:
    ledger = Ledger(warehouse_url)
    run_id = ledger.start_run("orders")
    ledger.request_cancel(run_id, requested_by="ops", reason="wrong file")
    ledger.finish_run(run_id)  # it committed before it saw the request
    record = ledger.get_run(run_id)
    assert record.status == "success"
    assert record.extra["cancel"] == {"requested_by": "ops: wrong file", "took_effect": False}


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_a_retry_after_sqlite_was_busy_keeps_the_busy_attempt_on_record(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pipeledger.warehouse.adapters import sqlite as adapter

    project.configure(orders=orders_pipeline(retries=2, retry_delay="1s"))
    project.write_csv("orders_1.csv", [order(1, "2024-01-01T10:00:00Z")])
    assert project.cli("ledger", "migrate")[0] == 0
    monkeypatch.setattr(adapter, "BUSY_TIMEOUT_S", 0.2)
    holder = sqlite3.connect(
        project.root / ".pipeledger" / "warehouse.db", isolation_level=None, check_same_thread=False
    )
    holder.execute("BEGIN IMMEDIATE")  # another load holds the file

    class Release(logging.Handler):  # the first attempt failed: let the retry in
        def emit(self, record: logging.LogRecord) -> None:
            if "retrying in" in record.getMessage():
                holder.execute("ROLLBACK")

    handler = Release()
    logging.getLogger("pipeledger.run").addHandler(handler)
    try:
        (result,) = project.run_json("run")
    finally:
        logging.getLogger("pipeledger.run").removeHandler(handler)
        holder.close()
    rows = project.query(
        f"SELECT attempt, trigger_type, status, logical_run_id, run_id "
        f"FROM {project.table('pipeledger.pipeline_runs')} ORDER BY attempt"
    )
    (first, second) = rows
    assert (first[0], first[1], first[2]) == (1, "manual", "skipped")
    assert (second[0], second[1], second[2]) == (2, "retry", "success")
    assert second[3] == first[4] and result["run_id"] == second[4]
