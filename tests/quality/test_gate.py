"""The quality gate: halt, quarantine, schema drift, a learned row-count band, and checks
that run in the warehouse without pulling rows into Python."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from tests.helpers import ORDERS_HEADER, Project, order, orders_pipeline, write_big_orders_csv

CHECKS: dict[str, Any] = {
    "row_count": {"min": 1, "max": 30},
    "not_null": ["customer_id"],
    "range": {"amount": {"min": 0, "max": 100000}},
    "accepted_values": {"status": ["completed", "shipped", "processing", "cancelled"]},
}


def gated(**checks: Any) -> dict[str, Any]:
    return orders_pipeline(checks={**CHECKS, **checks})


def good_rows(first: int, count: int, day: str = "2024-01-01") -> list[list[Any]]:
    return [order(i, f"{day}T{i % 24:02d}:00:00Z") for i in range(first, first + count)]


def corrupted() -> list[list[Any]]:
    rows = good_rows(100, 95, "2024-01-02")  # 10x the usual 10 rows
    rows += [
        ["", 1, "2024-01-02", "5.00", "completed", 1, "2024-01-02T01:00:00Z"],  # null key
        order(101, "2024-01-02T02:00:00Z", status="shipped"),  # duplicate key 101
        order(300, "2024-01-02T03:00:00Z", amount="-12.00"),  # negative amount
        order(301, "2024-01-02T04:00:00Z", status="teleported"),  # unknown status
        order(302, "2024-01-02T05:00:00Z", customer_id=""),  # missing customer
    ]
    return rows


def test_corrupted_batch_halts_and_publishes_nothing(project: Project) -> None:
    project.configure(orders=gated())
    project.write_csv("orders_1.csv", good_rows(1, 10))
    project.run()
    marks, count = project.watermarks(), project.count()
    project.write_csv("orders_2.csv", corrupted())
    code, _, err = project.cli("run")
    assert code == 3, err
    report = err
    for words in (
        "quality gate failed; nothing was published",
        "row_count: observed 101 rows, expected 1..30",
        "key_not_null:order_id: observed 1 failing row(s)",
        "key_unique:order_id: observed 2 failing row(s)",
        "(101)",
        "range:amount: observed 1 failing row(s), expected >= 0 and <= 100000",
        "(300)",
        "accepted_values:status: observed 1 failing row(s)",
        "(301)",
        "not_null:customer_id: observed 1 failing row(s)",
        "(302)",
        "nothing was written; the watermark stays at",
    ):
        assert words in report, words
    assert project.count() == count and project.watermarks() == marks
    rows = project.query(
        f"SELECT check_name, status, failing_rows FROM "
        f"{project.table('pipeledger.quality_results')} WHERE status = 'fail'"
    )
    assert {r[0] for r in rows} == {
        "row_count",
        "key_not_null:order_id",
        "key_unique:order_id",
        "range:amount",
        "accepted_values:status",
        "not_null:customer_id",
    }
    events = {
        r[0]
        for r in project.query(f"SELECT event_type FROM {project.table('pipeledger.audit_events')}")
    }
    assert {"VALIDATION_FAILURE", "THRESHOLD_BREACH"} <= events
    status = project.query(
        f"SELECT status, error_code FROM {project.table('pipeledger.pipeline_runs')}"
        " ORDER BY started_at DESC LIMIT 1"
    )[0]
    assert status == ("failed", "GateFailed")


def test_quarantine_publishes_good_rows_and_sets_bad_ones_aside_once(project: Project) -> None:
    project.configure(orders=gated(on_fail="quarantine", row_count={"min": 1, "max": 1000}))
    project.write_csv("orders_1.csv", corrupted())
    first = project.run()
    assert first["status"] == "partial"
    assert first["rows_rejected"] == 6  # null key, both 101s, 300, 301, 302
    assert project.count() == 94  # 95 good rows minus order 101, whose key came twice
    quarantine = project.table("analytics.orders_quarantine")
    entries = project.query(f"SELECT check_name, reason FROM {quarantine} ORDER BY check_name")
    assert {e[0] for e in entries} == {
        "key_not_null:order_id",
        "key_unique:order_id",
        "range:amount",
        "accepted_values:status",
        "not_null:customer_id",
    }
    assert all(e[1] for e in entries)
    before = len(entries)
    again = project.run_json("backfill", "orders", "--start", "2024-01-01", "--end", "2024-01-03")[
        0
    ]
    assert (again["rows_inserted"], again["rows_updated"]) == (0, 0)
    assert len(project.query(f"SELECT 1 FROM {quarantine}")) == before  # nothing twice
    assert project.count() == 94
    runs = project.query(
        f"SELECT status, rows_rejected FROM {project.table('pipeledger.pipeline_runs')}"
        " ORDER BY started_at"
    )
    assert runs[0] == ("partial", 6)
    code, _, _ = project.cli("run", "--strict")
    assert code == 0  # the re-run reads only the boundary rows, which are clean


def test_strict_turns_a_quarantine_into_exit_3(project: Project) -> None:
    project.configure(orders=gated(on_fail="quarantine", row_count={"min": 1, "max": 1000}))
    project.write_csv("orders_1.csv", corrupted())
    code, out, _ = project.cli("run", "--strict")
    assert code == 3 and "quarantined" in out


def _header_with_coupon() -> list[str]:
    return [*ORDERS_HEADER, "coupon"]


@pytest.mark.parametrize("policy", ["fail", "evolve", "ignore"])
def test_an_added_column_is_schema_drift(project: Project, policy: str) -> None:
    project.configure(orders=gated(schema_drift=policy))
    project.write_csv("orders_1.csv", good_rows(1, 10))
    project.run()
    marks = project.watermarks()
    project.write_csv(
        "orders_2.csv", [[*order(50, "2024-01-02T10:00:00Z"), "SPRING24"]], _header_with_coupon()
    )
    code, _, err = project.cli("run")
    if policy == "fail":
        assert code == 3
        assert "schema_drift: observed added: coupon text" in err
        assert project.count() == 10 and project.watermarks() == marks
        return
    assert code == 0, err
    assert project.count() == 11
    columns = [
        r[0]
        for r in project.query(
            "SELECT name FROM pragma_table_info('analytics.orders')"
            if project.backend == "sqlite"
            else "SELECT column_name FROM information_schema.columns WHERE table_name = 'orders'"
        )
    ]
    assert ("coupon" in columns) == (policy == "evolve")
    if policy == "evolve":
        assert project.query(f"SELECT coupon FROM {project.table()} WHERE order_id = 50") == [
            ("SPRING24",)
        ]
    events = [
        json.loads(r[0]) if isinstance(r[0], str) else r[0]
        for r in project.query(
            f"SELECT new_values FROM {project.table('pipeledger.audit_events')} "
            "WHERE event_type = 'SCHEMA_CHANGE' AND metadata IS NOT NULL"
        )
    ]
    assert {"added": ["coupon text"]} in events


def test_learned_row_count_band_halts_a_run_at_a_tenth_of_normal(project: Project) -> None:
    project.configure(orders=gated(row_count={"auto": True, "sigma": 3, "min_history": 5}))
    for day in range(1, 4):
        project.write_csv(f"orders_{day}.csv", good_rows(day * 1000, 100, f"2024-01-{day:02d}"))
        result = project.run()
        learned = next(c for c in result["quality"]["checks"] if c["check"] == "row_count")
        assert learned["status"] == "not_learned"  # said so, and not silently passed
        assert "only" in learned["expected"]
    for day in range(4, 8):
        project.write_csv(
            f"orders_{day}.csv", good_rows(day * 1000, 100 + day, f"2024-01-{day:02d}")
        )
        project.run()
    project.write_csv("orders_8.csv", good_rows(8000, 10, "2024-01-08"))  # 10% of normal
    code, _, err = project.cli("run")
    assert code == 3
    # 10 new rows plus the few re-read at the watermark: far below the learned band
    assert "FAIL        row_count: observed 15 rows, expected" in err
    assert "mean 10" in err and "n=7" in err


# the command's own app (its ``main`` ends the process at once, without returning here)
PROBE = """
import os, sys
os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")  # as the command does
import pipeledger.runs.load.loader as loader
from pipeledger.cli.app import app

def high_water_mb():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM"):
            return int(line.split()[1]) // 1024

gate = loader.run_gate
def measured(session, spec):
    before = high_water_mb()
    report = gate(session, spec)
    print("GATE", before, high_water_mb(), file=sys.stderr)
    return report
loader.run_gate = measured
sys.argv = ["pipeledger", "check", "orders", "--json"]
try:
    app()
except SystemExit:
    pass
print("PEAK", high_water_mb(), file=sys.stderr)
"""


@pytest.mark.slow
def test_checking_a_million_staged_rows_keeps_memory_flat(project: Project) -> None:
    project.configure(orders=gated(row_count={"min": 1, "max": 2_000_000}))
    peaks = {}
    for rows in (300_000, 1_000_000):
        write_big_orders_csv(project.root / "data" / "orders_1.csv", rows, 1,
                             "2024-01-01T00:00:00+00:00")  # fmt: skip
        done = subprocess.run([sys.executable, "-c", PROBE], cwd=project.root, capture_output=True,
                              text=True, check=False)  # fmt: skip
        assert '"decision": "publish"' in done.stdout, done.stderr
        assert f'"observed": "{rows:,} rows"' in done.stdout
        before, after = map(int, done.stderr.split("GATE")[-1].split()[:2])
        # the checks ran as SQL over every staged row: not one row came into Python
        assert after - before < 10, (before, after)
        peaks[rows] = int(done.stderr.split("PEAK")[-1].split()[0])
    # and the whole dry run's memory does not follow the row count either
    assert peaks[1_000_000] < peaks[300_000] * 1.5, peaks


def test_duplicate_keys_in_a_first_load_halt(project: Project) -> None:
    project.configure(orders=gated())
    project.write_csv("orders_1.csv", [*good_rows(1, 5), order(3, "2024-01-01T09:00:00Z")])
    code, _, err = project.cli("run")
    assert code == 3
    assert "key_unique:order_id: observed 2 failing row(s)" in err and "(3)" in err
    assert not project.exists()
