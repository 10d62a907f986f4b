"""Deletes: delete markers of a CDC feed, full snapshots that drop keys, soft deletes, the
safety gate against a truncated snapshot, and what the ledger and the models downstream
make of it, on both backends."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest

from tests.helpers import Project

HEADER = ["order_id", "status", "amount", "order_date", "updated_at", "op"]
SNAPSHOT_HEADER = HEADER[:-1]


def cdc(order_id: int, at: str, op: str = "I", status: str = "new", amount: str = "10.00",
        day: str = "2024-01-01") -> list[Any]:  # fmt: skip
    """A CDC feed's row; a delete carries only its key, cursor and operation."""
    if op == "D":
        return [order_id, "", "", "", at, op]
    return [order_id, status, amount, day, at, op]


def pipeline(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "source": {"kind": "csv", "path": "data/orders*.csv"},
        "target": "analytics.orders",
        "key": ["order_id"],
        "cursor": "updated_at",
        "on_conflict": "newer_wins",
        "columns": {"amount": "numeric(12,2)", "order_date": "date"},
        "deleted": {"column": "op", "values": ["D"]},
    }
    body.update(overrides)
    return body


def snapshot(**overrides: Any) -> dict[str, Any]:
    body = pipeline(sync="full", **overrides)
    del body["deleted"]
    return body


def ids(project: Project, where: str = "") -> list[int]:
    rows = project.query(f"SELECT order_id FROM {project.table()} {where} ORDER BY 1")
    return [int(r[0]) for r in rows]


def write_snapshot(project: Project, keys: range | list[int], at: str = "2024-01-01T10:00:00Z",
                   name: str = "orders_1.csv") -> None:  # fmt: skip
    rows = [[k, "new", "10.00", f"2024-01-{1 + k % 5:02d}", at] for k in keys]
    project.write_csv(name, rows, SNAPSHOT_HEADER)


def ledger_deleted(project: Project, run_id: str) -> tuple[int | None, list[int]]:
    """The run's rows_deleted in the ledger, and its RECORD_DELETED events' counts."""
    runs = project.table("pipeledger.pipeline_runs")
    events = project.table("pipeledger.audit_events")
    (deleted,) = project.query(f"SELECT rows_deleted FROM {runs} WHERE run_id = %s", [run_id])[0]
    counts = project.query(
        f"SELECT record_count FROM {events} WHERE run_id = %s AND event_type = 'RECORD_DELETED'",
        [run_id],
    )
    return deleted, [int(c) for (c,) in counts]


def test_a_cdc_feed_deletes_the_keys_it_marks_and_a_rerun_deletes_nothing(
    project: Project,
) -> None:
    project.configure(orders=pipeline())
    project.write_csv("orders_1.csv", [cdc(i, "2024-01-01T10:00:00Z") for i in range(1, 21)],
                      HEADER)  # fmt: skip
    project.run()
    project.write_csv("orders_2.csv", [
        cdc(3, "2024-01-02T10:00:00Z", "D"), cdc(5, "2024-01-02T10:00:00Z", "D"),
        cdc(7, "2024-01-02T10:00:00Z", "U", status="paid"), cdc(9, "2024-01-02T11:00:00Z", "D"),
        cdc(99, "2024-01-02T11:00:00Z", "D"),  # a key the target never had
    ], HEADER)  # fmt: skip
    result = project.run()
    assert (result["rows_deleted"], result["rows_updated"], result["rows_inserted"]) == (3, 1, 0)
    assert ids(project) == [i for i in range(1, 21) if i not in (3, 5, 9)]
    assert ("7", "paid") in project.rows("order_id, status")
    assert "op" not in _column_names(project)  # the operation code is no data
    assert ledger_deleted(project, result["run_id"]) == (3, [3])
    kept = ids(project)
    again = project.run()
    assert again["rows_deleted"] == 0 and ids(project) == kept
    assert ledger_deleted(project, again["run_id"]) == (0, [])


def _column_names(project: Project) -> list[str]:
    if project.backend == "sqlite":
        return [r[1] for r in project.query("SELECT * FROM pragma_table_info('analytics.orders')")]
    rows = project.query(
        "SELECT column_name FROM information_schema.columns "
        "WHERE table_schema = 'analytics' AND table_name = 'orders'"
    )
    return [r[0] for r in rows]


def test_within_a_run_the_greatest_cursor_decides_between_an_update_and_a_delete(
    project: Project,
) -> None:
    project.configure(orders=pipeline())
    project.write_csv("orders_1.csv", [cdc(i, "2024-01-01T10:00:00Z") for i in (1, 2, 3)], HEADER)
    project.run()
    project.write_csv("orders_2.csv", [
        cdc(1, "2024-01-02T10:00:00Z", "U", status="paid"), cdc(1, "2024-01-02T11:00:00Z", "D"),
        cdc(2, "2024-01-02T10:00:00Z", "D"), cdc(2, "2024-01-02T11:00:00Z", "I", status="back"),
        cdc(3, "2024-01-02T10:00:00Z", "U", status="paid"), cdc(3, "2024-01-02T10:00:00Z", "D"),
        cdc(4, "2024-01-02T10:00:00Z", "I"), cdc(4, "2024-01-02T12:00:00Z", "D"),
    ], HEADER)  # fmt: skip
    result = project.run()
    # 1: deleted after its update; 2: inserted again after its delete; 3: a delete wins at an
    # equal cursor; 4: inserted and deleted in one run, so never there
    assert project.rows("order_id, status") == [("2", "back")]
    assert result["rows_deleted"] == 2 and result["rows_updated"] == 1


def test_newer_wins_ignores_a_delete_older_than_the_stored_row(project: Project) -> None:
    project.configure(orders=pipeline(lateness="7d"))
    project.write_csv("orders_1.csv", [cdc(1, "2024-01-05T10:00:00Z"),
                                       cdc(2, "2024-01-05T10:00:00Z")], HEADER)  # fmt: skip
    project.run()
    project.write_csv("orders_1.csv", [cdc(1, "2024-01-04T10:00:00Z", "D"),
                                       cdc(2, "2024-01-05T10:00:00Z", "D")], HEADER)  # fmt: skip
    result = project.run()
    assert ids(project) == [1] and result["rows_deleted"] == 1


def test_under_update_a_delete_always_deletes(project: Project) -> None:
    project.configure(orders=pipeline(on_conflict="update", lateness="7d"))
    project.write_csv("orders_1.csv", [cdc(1, "2024-01-05T10:00:00Z")], HEADER)
    project.run()
    # the feed now says the key was deleted, at an older cursor (a correction)
    project.write_csv("orders_1.csv", [cdc(1, "2024-01-04T10:00:00Z", "D")], HEADER)
    assert project.run()["rows_deleted"] == 1 and ids(project) == []


def test_a_boolean_marker_soft_deletes_and_a_key_that_comes_back_is_undeleted(
    project: Project,
) -> None:
    header = [*SNAPSHOT_HEADER, "is_deleted"]
    project.configure(orders=pipeline(deleted={"column": "is_deleted"}, soft_delete=True))
    project.write_csv("orders_1.csv", [[i, "new", "1.00", "2024-01-01", "2024-01-01T10:00:00Z",
                                        "false"] for i in (1, 2, 3)], header)  # fmt: skip
    project.run()
    project.write_csv("orders_2.csv", [[2, "new", "1.00", "2024-01-01", "2024-01-02T10:00:00Z",
                                        "true"]], header)  # fmt: skip
    result = project.run()
    assert result["rows_deleted"] == 1 and ids(project) == [1, 2, 3]
    assert ids(project, "WHERE _pipeledger_deleted_at IS NULL") == [1, 3]
    assert project.run()["rows_deleted"] == 0
    project.write_csv("orders_3.csv", [[2, "back", "1.00", "2024-01-01", "2024-01-03T10:00:00Z",
                                        "false"]], header)  # fmt: skip
    back = project.run()
    assert (back["rows_updated"], back["rows_deleted"]) == (1, 0)
    assert ids(project, "WHERE _pipeledger_deleted_at IS NULL") == [1, 2, 3]


def test_a_marker_that_is_no_boolean_fails_naming_the_row(project: Project) -> None:
    header = [*SNAPSHOT_HEADER, "is_deleted"]
    project.configure(orders=pipeline(deleted={"column": "is_deleted"}))
    project.write_csv("orders_1.csv", [[1, "new", "1.00", "2024-01-01", "2024-01-01T10:00:00Z",
                                        "maybe"]], header)  # fmt: skip
    code, _, err = project.cli("run")
    assert code == 1 and "orders_1.csv row 1" in err and "'maybe' is not a boolean" in err


@pytest.mark.parametrize("soft", [False, True], ids=["hard", "soft"])
def test_a_full_snapshot_deletes_the_keys_it_lacks_once(project: Project, soft: bool) -> None:
    project.configure(orders=snapshot(soft_delete=soft))
    write_snapshot(project, range(1, 31))
    project.run()
    write_snapshot(project, [k for k in range(1, 31) if k % 3 != 0])  # 10 keys gone
    result = project.run()
    assert result["rows_deleted"] == 10 and result["rows_unchanged"] == 20
    live = "WHERE _pipeledger_deleted_at IS NULL" if soft else ""
    assert ids(project, live) == [k for k in range(1, 31) if k % 3 != 0]
    assert project.count() == (30 if soft else 20)
    check = result["quality"]["checks"][0]
    assert (check["check"], check["status"]) == ("delete_fraction", "pass")
    assert project.run()["rows_deleted"] == 0
    assert ledger_deleted(project, result["run_id"]) == (10, [10])


def test_a_snapshot_missing_most_keys_halts_and_deletes_nothing(project: Project) -> None:
    project.configure(orders=snapshot())
    write_snapshot(project, range(1, 51))
    project.run()
    mark = project.watermarks()
    write_snapshot(project, range(1, 11), at="2024-01-02T10:00:00Z")  # 80% lacking
    code, out, err = project.cli("run", "--json")
    assert code == 3, err
    outcome = json.loads(out)[0]
    assert outcome["reason"] == "gate_halt" and "delete_fraction" in outcome["error"]
    assert "40 of 50 row(s) lacking (80%)" in outcome["error"]
    assert project.count() == 50 and project.watermarks() == mark
    results = project.query(
        f"SELECT check_name, status, failing_rows FROM "
        f"{project.table('pipeledger.quality_results')} WHERE run_id = %s",
        [outcome["run_id"]],
    )
    assert results == [("delete_fraction", "fail", 40)]


def test_on_mass_delete_warn_lets_a_large_delete_through(project: Project) -> None:
    project.configure(orders=snapshot(on_mass_delete="warn", max_delete_fraction=0.25))
    write_snapshot(project, range(1, 11))
    project.run()
    write_snapshot(project, range(1, 6))
    result = project.run()
    assert result["rows_deleted"] == 5 and ids(project) == [1, 2, 3, 4, 5]
    assert result["quality"]["checks"][0]["status"] == "warn"


def test_an_empty_snapshot_is_a_mass_delete(project: Project) -> None:
    project.configure(orders=snapshot())
    write_snapshot(project, range(1, 11))
    project.run()
    write_snapshot(project, [])
    code, _, err = project.cli("run")
    assert code == 3 and project.count() == 10 and "delete_fraction" in err


def test_a_full_compare_backfill_of_a_snapshot_deletes_what_left_its_range(
    project: Project,
) -> None:
    """The issue's first finding: rows deleted at the source stayed in the target even
    after a --full-compare backfill. A backfill deletes only within its range."""
    project.configure(orders=snapshot())
    write_snapshot(project, range(1, 21), at="2024-01-01T10:00:00Z")
    write_snapshot(project, range(21, 41), at="2024-01-05T10:00:00Z", name="orders_2.csv")
    project.run()
    write_snapshot(project, range(1, 16), at="2024-01-01T10:00:00Z")  # 16..20 deleted
    write_snapshot(project, range(21, 31), at="2024-01-05T10:00:00Z", name="orders_2.csv")
    for args in (["--full-compare"], []):
        code, out, err = project.cli("backfill", "orders", "--start", "2024-01-01",
                                     "--end", "2024-01-02", "--json", *args)  # fmt: skip
        assert code == 0, err
    assert ids(project) == [*range(1, 16), *range(21, 41)]  # the other range is untouched
    assert json.loads(out)[0]["rows_deleted"] == 0


def test_marked_rows_are_exempt_from_the_value_checks(project: Project) -> None:
    project.configure(orders=pipeline(checks={"not_null": ["status", "amount"],
                                              "on_fail": "quarantine"}))  # fmt: skip
    project.write_csv("orders_1.csv", [cdc(i, "2024-01-01T10:00:00Z") for i in (1, 2)], HEADER)
    project.run()
    changes = [cdc(1, "2024-01-02T10:00:00Z", "D"), cdc(3, "2024-01-02T10:00:00Z", status="")]
    project.write_csv("orders_2.csv", changes, HEADER)
    result = project.run()
    assert result["rows_deleted"] == 1 and result["rows_rejected"] == 1 and ids(project) == [2]


GOLD = "select order_date, sum(amount) as revenue, count(*) as orders from analytics.orders " \
    "group by order_date"  # fmt: skip


def _gold(project: Project) -> dict[str, tuple[Decimal, int]]:
    rows = project.query(f"SELECT order_date, revenue, orders FROM {project.table('gold.daily')}")
    return {str(day): (Decimal(str(revenue)), int(n)) for day, revenue, n in rows}


@pytest.mark.parametrize("how", ["marker", "snapshot"])
def test_a_deleted_order_leaves_a_partition_overwrite_model(project: Project, how: str) -> None:
    model = {"query": GOLD, "target": "gold.daily", "materialized": "partition_overwrite",
             "partition_by": "order_date"}  # fmt: skip
    load = pipeline() if how == "marker" else snapshot()
    project.configure(models={"gold_daily": model}, orders=load)
    if how == "marker":
        project.write_csv("orders_1.csv", [cdc(i, "2024-01-01T10:00:00Z", amount=f"{i}.00",
                                                day=f"2024-01-0{1 + i % 2}") for i in range(1, 7)],
                          HEADER)  # fmt: skip
    else:
        rows = [[i, "new", f"{i}.00", f"2024-01-0{1 + i % 2}", "2024-01-01T10:00:00Z"]
                for i in range(1, 7)]  # fmt: skip
        project.write_csv("orders_1.csv", rows, SNAPSHOT_HEADER)
    project.run_json("run")
    assert _gold(project) == {"2024-01-01": (Decimal("12.00"), 3),
                              "2024-01-02": (Decimal("9.00"), 3)}  # fmt: skip
    if how == "marker":  # order 2 (day 1) deleted
        project.write_csv("orders_2.csv", [cdc(2, "2024-01-02T10:00:00Z", "D")], HEADER)
    else:
        rows = [[i, "new", f"{i}.00", f"2024-01-0{1 + i % 2}", "2024-01-01T10:00:00Z"]
                for i in range(1, 7) if i != 2]  # fmt: skip
        project.write_csv("orders_1.csv", rows, SNAPSHOT_HEADER)
    outcomes = project.run_json("run")
    assert outcomes[0]["rows_deleted"] == 1
    assert _gold(project) == {"2024-01-01": (Decimal("10.00"), 2),
                              "2024-01-02": (Decimal("9.00"), 3)}  # fmt: skip


@pytest.mark.parametrize(
    ("overrides", "words"),
    [
        ({"deleted": None, "soft_delete": True}, "soft_delete needs deletes"),
        ({"deleted": {"column": "order_id"}}, "cannot be a key, cursor or partition column"),
        ({"deleted": {"column": "op", "values": []}}, "deleted.values"),
        ({"max_delete_fraction": 0}, "max_delete_fraction"),
        ({"history": "scd2", "soft_delete": True}, "keeps deleted versions already"),
    ],
)
def test_deletes_that_cannot_work_are_refused_before_anything_runs(
    project: Project, overrides: dict[str, Any], words: str
) -> None:
    body = {k: v for k, v in {**pipeline(), **overrides}.items() if v is not None}
    project.configure(orders=body)
    code, _, err = project.cli("run")
    assert code == 2 and words in err and not project.exists()
