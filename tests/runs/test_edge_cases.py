"""Edge cases found in review: each once lost a row, raised a false alarm or leaked a secret."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from tests.helpers import ORDERS_HEADER, Project, order, orders_pipeline
from tests.quality.test_gate import gated, good_rows


def test_sqlite_source_with_text_timestamps_loses_no_late_row(project: Project) -> None:
    source = project.root / "data" / "app.db"
    conn = sqlite3.connect(source)
    conn.execute("CREATE TABLE events (id INTEGER, note TEXT, ts TEXT)")
    conn.execute("INSERT INTO events VALUES (1, 'a', '2024-01-01 10:00:00')")
    conn.commit()
    project.configure(events={
        "source": {"kind": "sql", "url": f"sqlite:///{source}", "table": "events"},
        "target": "events", "key": ["id"], "cursor": "ts", "on_conflict": "newer_wins",
        "columns": {"ts": "timestamp"},
    })  # fmt: skip
    project.run()
    conn.execute("INSERT INTO events VALUES (2, 'late same day', '2024-01-01 11:00:00')")
    conn.execute("INSERT INTO events VALUES (3, 'at the mark', '2024-01-01 10:00:00')")
    conn.commit()
    conn.close()
    second = project.run()
    assert second["rows_inserted"] == 2
    assert project.count("events") == 3


def _with_coupon(rows: list[list[Any]]) -> list[list[Any]]:
    return [[*row, "SPRING"] for row in rows]


def test_first_load_sees_drift_in_any_file(project: Project) -> None:
    header = ORDERS_HEADER
    project.configure(orders=gated())
    project.write_csv("orders_1.csv", good_rows(1, 3))
    project.write_csv("orders_2.csv", _with_coupon(good_rows(4, 3)), [*header, "coupon"])
    code, _, err = project.cli("run")
    assert code == 3 and "schema_drift: observed added: coupon text" in err
    project.configure(orders=gated(schema_drift="evolve"))
    assert project.run()["rows_inserted"] == 6
    assert project.query(f"SELECT coupon FROM {project.table()} WHERE order_id = 5") == [
        ("SPRING",)
    ]


def test_identical_bad_rows_are_quarantined_once(project: Project) -> None:
    project.configure(orders=gated(on_fail="quarantine"))
    bad = order(9, "2024-01-01T09:00:00Z", status="teleported")
    project.write_csv("orders_1.csv", [*good_rows(1, 3), bad, bad])
    result = project.run()
    assert result["status"] == "partial" and project.count() == 3
    quarantined = project.query(
        f"SELECT check_name FROM {project.table('analytics.orders_quarantine')}"
    )
    assert sorted(q[0] for q in quarantined) == ["accepted_values:status", "key_unique:order_id"]


def test_a_row_already_in_quarantine_is_not_news(project: Project) -> None:
    project.configure(orders=gated(on_fail="quarantine"))
    project.write_csv(
        "orders_1.csv", [*good_rows(1, 3), order(9, "2024-01-01T09:00:00Z", amount="-1.00")]
    )
    assert project.run()["status"] == "partial"
    again = project.run()  # the bad row sits at the watermark and is read again
    assert again["status"] == "success" and again["quality"]["new_quarantine_entries"] == 0
    code, out, _ = project.cli("run", "--strict")
    assert code == 0 and "held back again" in out


def test_accepted_numeric_values_compare_as_numbers(project: Project) -> None:
    project.configure(orders=gated(accepted_values={"amount": [10, 12.5]}))
    project.write_csv(
        "orders_1.csv",
        [order(1, "2024-01-01T01:00:00Z"), order(2, "2024-01-01T02:00:00Z", amount="12.50")],
    )
    assert project.run()["rows_inserted"] == 2


def test_a_check_on_an_unknown_column_names_it(project: Project) -> None:
    project.configure(
        orders=gated(not_null=["customer_idd"]), other=orders_pipeline(target="other")
    )
    project.write_csv("orders_1.csv", good_rows(1, 3))
    code, out, _ = project.cli("run", "--json")
    assert code == 1
    by_name = {r["pipeline"]: r for r in json.loads(out)}
    assert "customer_idd" in by_name["orders"]["error"]
    assert by_name["other"]["status"] == "success"  # the other pipeline still ran


def test_odd_passwords_are_masked(tmp_path: Path) -> None:
    project = Project(tmp_path, "postgresql://loader:p%zzw@rd@127.0.0.1:1/dw")
    project.configure(orders=orders_pipeline())
    project.write_csv("orders_1.csv", [order(1, "2024-01-01T10:00:00Z")])
    code, out, err = project.cli("--debug", "run")
    assert code == 1
    assert "p%zzw" not in out + err and "w@rd" not in out + err


def test_a_date_only_backfill_end_covers_the_whole_day(project: Project) -> None:
    project.configure(orders=orders_pipeline())
    project.write_csv(
        "orders_1.csv", [order(1, "2024-03-07T23:30:00Z"), order(2, "2024-03-08T00:00:00Z")]
    )
    result = project.run_json("backfill", "orders", "--start", "2024-03-07", "--end", "2024-03-07")[
        0
    ]
    assert result["rows_read"] == 1 and result["rows_inserted"] == 1
