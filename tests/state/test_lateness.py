"""Lateness, measured: what the buffer caught and cost, and rows later than it, which a run
now reports instead of dropping silently."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from typing import Any

import numpy as np
import pytest

from pipeledger.runs.load import late
from pipeledger.state.lateness import RunLateness, histogram, late_by, percentile, rounded
from pipeledger.state.lateness import report as lateness_report
from tests.helpers import Project, order, orders_pipeline


def lateness(project: Project) -> dict[str, Any]:
    code, out, err = project.cli("lateness", "orders", "--json")
    assert code == 0, err
    payload: dict[str, Any] = json.loads(out)
    return payload


def dropped_events(project: Project) -> list[tuple[Any, ...]]:
    return project.query(
        f"SELECT run_id, record_count FROM {project.table('pipeledger.audit_events')} "
        "WHERE event_type = 'LATE_ROW_DROPPED' ORDER BY created_at"
    )


def test_rows_10_30_and_90_minutes_late_against_a_one_hour_buffer(project: Project) -> None:
    project.configure(orders=orders_pipeline(lateness="1h"))
    project.write_csv("orders_1.csv", [order(1, "2024-01-01T10:00:00Z"),
                                       order(2, "2024-01-01T11:00:00Z"),
                                       order(3, "2024-01-01T12:00:00Z")])  # fmt: skip
    project.run()  # the watermark is 12:00; the next run reads from 11:00
    project.write_csv("orders_2.csv", [order(4, "2024-01-01T11:50:00Z"),  # 10 minutes late
                                       order(5, "2024-01-01T11:30:00Z"),  # 30 minutes late
                                       order(6, "2024-01-01T10:30:00Z"),  # 90 minutes late
                                       order(7, "2024-01-01T12:30:00Z")])  # fmt: skip

    second = project.run()
    code, out, _ = project.cli("run")  # nothing new: nothing is counted twice

    assert (second["rows_inserted"], second["late_rows_dropped"]) == (3, 1)
    assert code == 0 and "late" not in out
    assert project.rows("order_id")[-1] == ("7",) and ("6",) not in project.rows("order_id")
    assert dropped_events(project) == [(second["run_id"], 1)]
    report = lateness(project)
    assert report == {
        "pipeline": "orders",
        "runs": 2,  # the runs that started from a watermark
        "late_rows_caught": 2,
        "late_rows_missed": 1,
        "lateness_p50_s": 600,
        "lateness_p90_s": 1800,
        "lateness_p99_s": 1800,
        "lateness_max_s": 1800,
        "buffer_s": 3600,
        "rows_reread_per_run": 2.0,  # 11:00 in the second run; 11:30, 11:50, 12:00 in the third
        "suggested_buffer_s": 5400,
        "suggested_rows_reread_per_run": report["suggested_rows_reread_per_run"],
    }


def test_the_run_that_drops_a_late_row_says_so_and_how_to_load_it(project: Project) -> None:
    project.configure(orders=orders_pipeline(lateness="1h"))
    project.write_csv("orders_1.csv", [order(1, "2024-01-01T12:00:00Z")])
    project.run()
    project.write_csv("orders_2.csv", [order(2, "2024-01-01T09:00:00Z")])

    code, out, _ = project.cli("run")

    assert code == 0
    assert "1 row(s) in " in out and "orders_2.csv arrived later than the lateness buffer" in out
    assert "pipeledger backfill orders --start 2024-01-01T09:00:00.000000+00:00" in out
    backfill = project.run_json("backfill", "orders", "--start", "2024-01-01T09:00:00Z",
                                "--end", "2024-01-01T09:00:00Z")[0]  # fmt: skip
    assert backfill["rows_inserted"] == 1
    assert lateness(project)["late_rows_missed"] == 1  # found once, whoever finds it


def test_a_rewritten_file_costs_a_read_but_finds_only_what_is_new(project: Project) -> None:
    project.configure(orders=orders_pipeline(lateness="1h"))
    rows = [order(i, f"2024-01-01T{9 + i}:00:00Z") for i in range(1, 4)]
    project.write_csv("orders_1.csv", rows)
    project.run()
    # rewritten in place: its old rows, a changed row below the window, a new one in it
    rows[0] = order(1, "2024-01-01T10:00:00Z", status="refunded")
    project.write_csv("orders_1.csv", [*rows, order(4, "2024-01-01T12:30:00Z")])

    run = project.run()

    assert (run["rows_inserted"], run["late_rows_dropped"]) == (1, 1)
    assert lateness(project)["late_rows_missed"] == 1


def test_late_rows_are_found_in_the_runs_own_read_or_read_again_when_too_many(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new file is read once: its rows in the window are staged, those below it held
    until the merge. More than ``HELD_ROWS`` below it: the files are read again after."""
    project.configure(orders=orders_pipeline(lateness="1h"))
    project.write_csv("orders_1.csv", [order(1, "2024-01-01T12:00:00Z")])
    project.run()
    project.write_csv("orders_2.csv", [order(2, "2024-01-01T09:00:00Z"),
                                       order(3, "2024-01-01T12:30:00Z")])  # fmt: skip
    held = project.run()
    monkeypatch.setattr(late, "HELD_ROWS", 1)
    project.write_csv("orders_3.csv", [order(4, "2024-01-01T09:10:00Z"),
                                       order(5, "2024-01-01T09:20:00Z"),
                                       order(6, "2024-01-01T12:40:00Z")])  # fmt: skip
    read_again = project.run()

    assert (held["rows_inserted"], held["late_rows_dropped"]) == (1, 1)
    assert (read_again["rows_inserted"], read_again["late_rows_dropped"]) == (1, 2)
    assert lateness(project)["late_rows_missed"] == 3


def test_a_pipeline_without_late_rows_suggests_no_buffer(project: Project) -> None:
    project.configure(orders=orders_pipeline())
    project.write_csv("orders_1.csv", [order(1, "2024-01-01T10:00:00Z")])
    project.run()
    project.write_csv("orders_2.csv", [order(2, "2024-01-01T11:00:00Z")])
    project.run()

    report = lateness(project)

    assert (report["runs"], report["late_rows_caught"], report["late_rows_missed"]) == (1, 0, 0)
    assert (report["lateness_p50_s"], report["suggested_buffer_s"]) == (None, 0)
    assert report["rows_reread_per_run"] == 0.0


def test_tracking_starts_with_the_files_changed_since_the_watermark_moved(
    project: Project,
) -> None:
    project.configure(orders=orders_pipeline(lateness="1h"))
    project.write_csv("orders_1.csv", [order(1, "2024-01-01T10:00:00Z"),
                                       order(2, "2024-01-01T12:00:00Z")])  # fmt: skip
    project.run()
    # as an earlier release left it: no file tracked yet, and a row missing from the target
    project.execute(f"DELETE FROM {project.table('pipeledger.files_read')}")
    project.execute(f"DELETE FROM {project.table()} WHERE order_id = 1")
    project.write_csv("orders_2.csv", [order(3, "2024-01-01T09:00:00Z")])

    run = project.run()

    assert run["late_rows_dropped"] == 1  # orders_2.csv's row; orders_1.csv is taken as read
    assert dropped_events(project) == [(run["run_id"], 1)]


def test_lateness_is_kept_rounded_up_to_two_significant_digits() -> None:
    values = np.array([1, 99, 100, 101, 1234, 5400, 9999, 10_000, 86_401])
    assert rounded(values).tolist() == [1, 99, 100, 110, 1300, 5400, 10_000, 10_000, 87_000]
    hist = histogram(np.array([600, 1800, 1801]))
    assert hist == {600: 1, 1800: 1, 1900: 1}
    assert [percentile(hist, q) for q in (0.5, 0.66, 0.67, 0.999)] == [1800, 1800, 1900, 1900]
    assert percentile({}, 0.5) is None


def test_a_report_sums_the_runs_and_prices_the_suggested_buffer() -> None:
    runs = [
        RunLateness(3600, measured=True, rows_caught=2, rows_reread=10, caught={600: 1, 1800: 1},
                    max_caught_s=1800, rows_new=100, advanced_s=3600),
        RunLateness(3600, rows_missed=1, missed={5400: 1}),  # found by a reconcile
    ]  # fmt: skip

    report = lateness_report("orders", 3600, runs)

    assert (report.runs, report.late_rows_caught, report.late_rows_missed) == (1, 2, 1)
    assert (report.lateness_p50_s, report.lateness_max_s, report.rows_reread_per_run) == (
        600, 1800, 10.0,
    )  # fmt: skip
    assert report.suggested_buffer_s == 5400
    assert report.suggested_rows_reread_per_run == 150.0  # 100 rows per 3600 s, for 5400 s


def test_how_late_a_date_or_a_time_is() -> None:
    noon = datetime(2024, 1, 2, 12, tzinfo=UTC)
    assert late_by(noon, datetime(2024, 1, 2, 11, 59, 59, 500_000, tzinfo=UTC)) == 1
    assert late_by(date(2024, 1, 3), date(2024, 1, 1)) == 2 * 86_400
    assert late_by(10, 4) == 6
