"""``pipeledger reconcile``: does the target hold what the source holds, window by window?"""

from __future__ import annotations

import json
import sqlite3
import tempfile
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest

from pipeledger.errors import ConfigError
from pipeledger.runs.reconcile.windows import Grain
from tests.helpers import ORDERS_HEADER, Project, order, orders_pipeline

DAYS = (1, 2, 3)


def three_days(project: Project, **changes: dict[str, Any]) -> None:
    """Four orders a day on 2024-01-01..03 (ids 1-4, 5-8, 9-12), one file; ``changes``
    overrides the values of an order (by id, as a string)."""
    rows = []
    for day in DAYS:
        for n in range(4):
            order_id = (day - 1) * 4 + n + 1
            values = {"status": "completed", **changes.get(str(order_id), {})}
            rows.append(order(order_id, f"2024-01-0{day}T{10 + n}:00:00Z", **values))
    project.write_csv("orders_1.csv", rows)


def reconcile(project: Project, *args: str) -> tuple[int, dict[str, Any]]:
    code, out, err = project.cli("reconcile", "orders", *args, "--json")
    assert code in (0, 3), f"exit {code}\nstdout: {out}\nstderr: {err}"
    payload: dict[str, Any] = json.loads(out)
    return code, payload


def brief(window: dict[str, Any]) -> tuple[Any, ...]:
    return (
        window["start"][:10], window["source_rows"], window["target_rows"],
        window["missing_rows"], window["extra_rows"], window["changed_rows"],
        window["sample_keys"],
    )  # fmt: skip


def test_a_clean_load_matches(project: Project) -> None:
    project.configure(orders=orders_pipeline())
    three_days(project)
    project.run()

    code, result = reconcile(project)

    assert code == 0
    assert (result["status"], result["windows"]) == ("match", [])
    assert (result["windows_compared"], result["source_rows"], result["target_rows"]) == (3, 12, 12)


def test_rows_deleted_by_hand_and_a_change_behind_the_cursor_are_found_and_repaired(
    project: Project,
) -> None:
    project.configure(orders=orders_pipeline())
    three_days(project)
    project.run()
    project.execute(f"DELETE FROM {project.table()} WHERE order_id IN (2, 3)")
    three_days(project, **{"6": {"status": "refunded"}})  # same cursor, other content

    code, result = reconcile(project)

    assert code == 3
    assert result["status"] == "mismatch"
    assert [brief(w) for w in result["windows"]] == [
        ("2024-01-01", 4, 2, 2, 0, 0, [2, 3]),
        ("2024-01-02", 4, 4, 0, 0, 1, [6]),
    ]
    assert result["windows"][0]["end"].startswith("2024-01-02T00:00:00")
    ledger = project.query(
        "SELECT status, windows_differing, missing_rows, extra_rows, changed_rows FROM "
        f"{project.table('pipeledger.reconciliations')} WHERE run_id = %s",
        [result["run_id"]],
    )
    assert ledger == [("mismatch", 2, 2, 0, 1)]
    events = project.query(
        f"SELECT record_count FROM {project.table('pipeledger.audit_events')} "
        "WHERE run_id = %s AND event_type = 'RECONCILIATION_MISMATCH' ORDER BY record_count",
        [result["run_id"]],
    )
    assert events == [(1,), (2,)]

    code, repaired = reconcile(project, "--repair")

    assert code == 0
    assert (repaired["status"], repaired["windows"]) == ("match", [])
    assert [brief(w) for w in repaired["found"]] == [brief(w) for w in result["windows"]]
    assert [(r["rows_inserted"], r["rows_updated"]) for r in repaired["repairs"]] == [(2, 1)]
    assert project.count() == 12
    assert project.rows("order_id, status")[5] == ("6", "refunded")
    assert reconcile(project)[1]["status"] == "match"


def test_a_row_edited_by_hand_differs_only_when_its_values_do(project: Project) -> None:
    project.configure(orders=orders_pipeline())
    three_days(project)
    project.run()
    # the trigger clears the fingerprint of a row updated outside pipeledger
    project.execute(f"UPDATE {project.table()} SET status = status WHERE order_id = 5")
    assert project.query(
        f"SELECT _pipeledger_row_hash FROM {project.table()} WHERE order_id = 5"
    ) == [(None,)]

    assert reconcile(project)[1]["status"] == "match"

    project.execute(f"UPDATE {project.table()} SET status = 'lost' WHERE order_id = 5")
    code, result = reconcile(project)

    assert code == 3
    assert [brief(w) for w in result["windows"]] == [("2024-01-02", 4, 4, 0, 0, 1, [5])]
    assert reconcile(project, "--repair")[0] == 0
    assert project.rows("order_id, status")[4] == ("5", "completed")


def test_a_row_the_source_lacks_stays_reported_after_a_repair(project: Project) -> None:
    project.configure(orders=orders_pipeline())
    three_days(project)
    project.run()
    project.execute(
        f"INSERT INTO {project.table()} (order_id, qty, order_date, amount, status, customer_id, "
        "updated_at, _pipeledger_run_id, _pipeledger_loaded_at) VALUES (99, 1, '2024-01-03', "
        "1.00, 'x', 1, '2024-01-03T09:00:00.000000+00:00', 'hand', "
        "'2024-01-03T09:00:00.000000+00:00')"
    )

    code, result = reconcile(project, "--repair")

    assert code == 3  # a backfill does not delete
    assert [brief(w) for w in result["windows"]] == [("2024-01-03", 4, 5, 0, 1, 0, [99])]


def test_only_the_current_version_of_a_key_counts_and_rows_past_the_watermark_wait(
    project: Project,
) -> None:
    project.configure(orders=orders_pipeline())
    three_days(project)
    # order 1 moved from day 1 to day 3 in a later file, loaded with it
    project.write_csv("orders_2.csv", [order(1, "2024-01-03T20:00:00Z", status="returned")])
    project.run()
    project.write_csv("orders_3.csv", [order(50, "2024-01-04T10:00:00Z")])  # not loaded yet

    code, result = reconcile(project)

    assert (code, result["status"]) == (0, "match")
    assert (result["source_rows"], result["windows_compared"]) == (12, 3)


def test_windows_by_hour_or_month_within_a_range(project: Project) -> None:
    project.configure(orders=orders_pipeline())
    three_days(project)
    project.run()
    project.execute(f"DELETE FROM {project.table()} WHERE order_id IN (2, 11)")

    _, hours = reconcile(project, "--by", "hour", "--start", "2024-01-01", "--end", "2024-01-02")
    _, months = reconcile(project, "--by", "month")

    assert [(w["start"], w["end"], w["missing_rows"]) for w in hours["windows"]] == [
        ("2024-01-01T11:00:00.000000+00:00", "2024-01-01T12:00:00.000000+00:00", 1)
    ]
    assert hours["windows_compared"] == 8
    assert [brief(w) for w in months["windows"]] == [("2024-01-01", 12, 10, 2, 0, 0, [2, 11])]
    assert months["windows"][0]["end"].startswith("2024-02-01")


def test_a_partitioned_pipeline_is_compared_up_to_each_partition_watermark(
    project: Project,
) -> None:
    header = ["order_id", "region", "amount", "updated_at"]
    project.configure(
        orders=orders_pipeline(partition_by="region", source={"kind": "csv", "path": "data/r*"})
    )
    project.write_csv("r1.csv", [[1, "eu", "1.00", "2024-01-01T10:00:00Z"],
                                 [2, "us", "1.00", "2024-01-05T10:00:00Z"]], header)  # fmt: skip
    project.run()
    # newer than eu's watermark: the next run's, not a difference (us has passed it)
    project.write_csv("r2.csv", [[3, "eu", "1.00", "2024-01-02T10:00:00Z"],
                                 [4, "us", "1.00", "2024-01-02T10:00:00Z"]], header)  # fmt: skip

    code, result = reconcile(project)

    assert code == 3
    assert [brief(w) for w in result["windows"]] == [("2024-01-02", 1, 0, 1, 0, 0, [4])]


def test_an_integer_cursor_takes_a_window_width(project: Project) -> None:
    project.configure(
        orders=orders_pipeline(
            cursor="version", columns={}, source={"kind": "csv", "path": "data/v*"}
        )
    )
    project.write_csv("v1.csv", [[i, i * 10] for i in range(1, 31)], ["order_id", "version"])
    project.run()
    project.execute(f"DELETE FROM {project.table()} WHERE order_id = 15")

    code, result = reconcile(project, "--by", "100")
    assert project.cli("reconcile", "orders")[0] == 2

    assert code == 3
    assert [(w["start"], w["end"], w["missing_rows"]) for w in result["windows"]] == [
        ("100", "200", 1)
    ]


def test_a_sql_source_counts_what_its_buffer_missed_once(project: Project) -> None:
    source = project.root / "data" / "shop.db"
    _source_rows(source, [(1, "2024-01-01T10:00:00+00:00"), (2, "2024-01-01T12:00:00+00:00")])
    project.configure(
        orders=orders_pipeline(
            lateness="1h", columns={"updated_at": "timestamptz"},
            source={"kind": "sql", "url": f"sqlite:///{source}", "table": "orders"},
        )
    )  # fmt: skip
    project.run()
    _source_rows(source, [(3, "2024-01-01T11:30:00+00:00"), (4, "2024-01-01T10:30:00+00:00")])
    assert project.run()["rows_inserted"] == 1  # 11:30 is caught; 10:30 is below the window

    first = reconcile(project)[1]
    again = reconcile(project)[1]

    assert [brief(w) for w in first["windows"]] == [("2024-01-01", 4, 3, 1, 0, 0, [4])]
    assert (first["late_rows_missed"], again["late_rows_missed"]) == (1, 0)
    assert reconcile(project, "--repair")[1]["status"] == "match"
    code, out, _ = project.cli("lateness", "orders", "--json")
    report = json.loads(out)
    assert code == 0
    assert (report["late_rows_caught"], report["late_rows_missed"]) == (1, 1)
    assert report["suggested_buffer_s"] == 5400


def test_reconcile_refuses_what_it_cannot_compare(project: Project) -> None:
    project.configure(orders=orders_pipeline())
    three_days(project)
    code, _, err = project.cli("reconcile", "orders")
    assert code == 2 and "loaded nothing yet" in err
    project.run()
    code, _, err = project.cli("reconcile", "orders", "--by", "week")
    assert code == 2 and "--by week" in err
    code, _, err = project.cli("reconcile", "orders", "--start", "12")
    assert code == 2 and "dates or timestamps" in err


def _source_rows(path: Path, rows: list[tuple[int, str]]) -> None:
    conn = sqlite3.connect(path)
    conn.execute(
        "CREATE TABLE IF NOT EXISTS orders (order_id INTEGER PRIMARY KEY, status TEXT, "
        "updated_at TEXT)"
    )
    conn.executemany("INSERT INTO orders VALUES (?, 'new', ?)", rows)
    conn.commit()
    conn.close()


def test_a_reconcile_run_is_pruned_with_its_findings_and_is_no_load(project: Project) -> None:
    project.configure(orders=orders_pipeline())
    three_days(project)
    load_run = project.run()["run_id"]
    project.execute(f"DELETE FROM {project.table()} WHERE order_id = 1")
    reconcile_run = reconcile(project)[1]["run_id"]

    code, out, _ = project.cli("status", "--json")
    (status,) = json.loads(out)
    assert code == 0 and status["last_status"] == "success" and status["runs_7d"] == 1
    code, out, _ = project.cli("ledger", "prune", "--older-than", "0s", "--json")

    assert code == 0 and json.loads(out)["reconciliations"] == 1
    runs = project.query(f"SELECT run_id FROM {project.table('pipeledger.pipeline_runs')}")
    assert runs == [(load_run,)] and reconcile_run != load_run


def test_a_reconcile_that_outlives_its_heartbeat_records_what_it_found(project: Project) -> None:
    # PostgreSQL: the comparison's snapshot must not hold the run's row that heartbeats renew
    project.configure(raw='[ledger]\nheartbeat = "10ms"\nlease = "1m"\n', orders=orders_pipeline())
    three_days(project)
    project.run()
    project.execute(f"DELETE FROM {project.table()} WHERE order_id = 12")

    code, result = reconcile(project)

    assert code == 3 and [brief(w) for w in result["windows"]] == [
        ("2024-01-03", 4, 3, 1, 0, 0, [12])
    ]
    status = project.query(
        f"SELECT status FROM {project.table('pipeledger.pipeline_runs')} WHERE run_id = %s",
        [result["run_id"]],
    )
    assert status == [("success",)]


def test_windows_and_the_backfills_that_cover_them() -> None:
    month = Grain.parse("month", "date", "orders")
    assert month.bounds("2024-12") == (date(2024, 12, 1), date(2025, 1, 1))
    assert month.backfill_ranges(["2024-02"], timedelta(days=14)) == [
        ("2024-02-01", "2024-02-14"), ("2024-02-15", "2024-02-28"), ("2024-02-29", "2024-02-29"),
    ]  # fmt: skip
    hour = Grain.parse("hour", "timestamptz", "orders")
    assert hour.backfill_ranges(["2024-01-06T01", "2024-01-05T23", "2024-01-06T00"], None) == [
        ("2024-01-05T23:00:00.000000+00:00", "2024-01-06T01:59:59.999999+00:00")
    ]  # windows that touch: one range
    assert Grain.parse("1000", "bigint", "orders").backfill_ranges(["-1000", "1000"], None) == [
        ("-1000", "-1"), ("1000", "1999"),
    ]  # fmt: skip
    for by, kind in (("hour", "date"), ("week", "timestamptz"), (None, "bigint"), ("0", "integer")):
        with pytest.raises(ConfigError):
            Grain.parse(by, kind, "orders")


def test_a_ledger_of_its_own_keeps_the_findings(project: Project, tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.db"
    project.configure(raw=f'[ledger]\nurl = "sqlite:///{ledger}"\n', orders=orders_pipeline())
    three_days(project)
    project.run()
    project.execute(f"DELETE FROM {project.table()} WHERE order_id = 4")

    code, result = reconcile(project)

    conn = sqlite3.connect(ledger)
    try:
        found = conn.execute(
            'SELECT status, missing_rows, windows FROM "pipeledger.reconciliations" '
            "WHERE run_id = ?",
            [result["run_id"]],
        ).fetchall()
    finally:
        conn.close()
    assert code == 3
    assert [(status, missing, json.loads(windows)[0]["sample_keys"])
            for status, missing, windows in found] == [("mismatch", 1, [4])]  # fmt: skip


def _compared(project: Project, **options: Any) -> tuple[str, list[str]]:
    """An in-process reconcile's status, and the statements its sessions ran."""
    from pipeledger import api
    from pipeledger.warehouse.session import observe_statements

    ran: list[str] = []
    config = api.load_config(project.root / "pipeledger.toml")
    with observe_statements(lambda kind, sql, seconds: ran.append(sql)):
        found = api.reconcile(config, "orders", **options)
    return found.status, ran


def _ranked(statements: list[str]) -> bool:
    """Whether the stage was indexed or ranked for the source's current versions."""
    return any("_pipeledger_reconcile_source" in sql for sql in statements)


@pytest.mark.parametrize(
    ("cursor", "by"),
    [("updated_at", "hour"), ("updated_at", "day"), ("updated_at", "month"),
     ("order_date", "day"), ("order_date", "month"), ("version", "7")],
)  # fmt: skip
def test_a_matching_source_is_decided_by_its_sums_read_as_it_streams(
    project: Project, cursor: str, by: str
) -> None:
    """Counted in Arrow as the source streams, in the windows the warehouse labels: when
    every window's sums equal the target's, the stage is neither indexed nor ranked; a
    row deleted by hand is then found the usual way, in its window."""
    project.configure(orders=orders_pipeline(cursor=cursor, columns={"order_date": "date"}))
    day = [f"2024-0{1 + n % 3}-{10 + n % 9}" for n in range(40)]
    rows = [
        [*order(n, f"{day[n]}T{10 + n % 5}:00:00Z", order_date=day[n]), n * 5 - 40]
        for n in range(1, 40)
    ]  # negative versions too: windows floor, as SQL's do
    project.write_csv("orders_1.csv", rows, [*ORDERS_HEADER, "version"])
    project.run()

    status, ran = _compared(project, by=by)
    assert (status, _ranked(ran)) == ("match", False)

    project.execute(f"DELETE FROM {project.table()} WHERE order_id = 7")
    status, ran = _compared(project, by=by)
    assert (status, _ranked(ran)) == ("mismatch", True)


def test_a_key_read_twice_is_ranked_to_its_current_version(project: Project) -> None:
    project.configure(orders=orders_pipeline())
    three_days(project)
    project.write_csv("orders_2.csv", [order(1, "2024-01-03T20:00:00Z", status="returned")])
    project.run()

    status, ran = _compared(project)

    assert (status, _ranked(ran)) == ("match", True)


@pytest.mark.parametrize("by", ["day", "month"])
def test_the_join_reads_only_the_hours_whose_sums_differ(project: Project, by: str) -> None:
    """Each key staged once, the source and the target are summed per hour too: the join
    that finds what differs reads the rows of the hours that differ, and every difference
    is in them, a row at an hour's last microsecond or a key moved to another day too."""
    project.configure(orders=orders_pipeline())
    times = ["2024-01-01T10:00:00.000000Z", "2024-01-01T10:59:59.999999Z"]
    times += ["2024-01-01T11:00:00.000000Z"]
    times += [f"2024-01-0{d}T{h:02}:30:00.000000Z" for d in (2, 3) for h in (8, 9, 10)]
    project.write_csv("orders_1.csv", [order(n, t) for n, t in enumerate(times, 1)])
    project.run()
    project.execute(f"DELETE FROM {project.table()} WHERE order_id = 2")  # 10:59:59.999999
    moved = order(4, "2024-01-03T08:45:00.000000Z")  # from 01-02T08 into 01-03T08, newer
    changed = order(8, "2024-01-03T09:30:00.000000Z", status="returned")  # same cursor
    rows = [order(n, t) for n, t in enumerate(times, 1) if n not in (4, 8)]
    project.write_csv("orders_1.csv", [*rows, moved, changed])

    status, ran = _compared(project, by=by)

    assert status == "mismatch"
    joins = [sql for sql in ran if "FULL JOIN" in sql]
    assert len(joins) == 1 and joins[0].count(" OR (") >= 2  # ranges of the hours only
    _, result = reconcile(project, "--by", by)
    found = {(w["start"][:10], w["missing_rows"], w["extra_rows"], w["changed_rows"],
              tuple(w["sample_keys"])) for w in result["windows"]}  # fmt: skip
    if by == "day":
        assert found == {
            ("2024-01-01", 1, 0, 0, (2,)),
            ("2024-01-02", 0, 1, 0, (4,)),
            ("2024-01-03", 1, 0, 1, (4, 8)),
        }
    else:
        assert found == {("2024-01-01", 1, 0, 2, (2, 4, 8))}


def _sixty_days() -> list[list[Any]]:
    """Four orders a day at 01, 05, 09 and 13 h for 60 days (ids 1-240)."""
    start = date(2024, 1, 1)
    return [
        order(day * 4 + n + 1, f"{start + timedelta(days=day)}T{1 + 4 * n:02}:00:00Z")
        for day in range(60)
        for n in range(4)
    ]


def test_the_hours_that_differ_are_staged_alone_and_found_by_their_buckets(
    project: Project,
) -> None:
    """More hours differ than a few ranges can name: the source's rows of those hours are
    staged alone (from the rows its one read set aside), the target's found by their
    hour's bucket, and every difference is still found in its day (a row deleted in 40
    days, one changed, one moved to another day), with the whole source counted."""
    project.configure(orders=orders_pipeline())
    rows = _sixty_days()
    project.write_csv("orders_1.csv", rows)
    project.run()
    deleted = [day * 4 + 2 for day in range(60) if day % 3 != 2]  # 05 h of 40 days
    project.execute(
        f"DELETE FROM {project.table()} WHERE order_id IN ({', '.join(map(str, deleted))})"
    )
    rows[2] = order(3, "2024-01-01T09:00:00Z", status="returned")  # changed, same cursor
    rows[7] = order(8, "2024-01-03T14:00:00Z")  # from 01-02 13 h to 01-03 14 h, newer
    project.write_csv("orders_1.csv", rows)

    status, ran = _compared(project)

    assert status == "mismatch"
    assert any("_pipeledger_reconcile_fine" in sql for sql in ran)  # buckets, not ranges
    assert not any("rank() OVER" in sql for sql in ran)  # each key once: nothing ranked
    _, result = reconcile(project)
    found = {w["start"][:10]: (w["missing_rows"], w["extra_rows"], w["changed_rows"],
                                w["sample_keys"]) for w in result["windows"]}  # fmt: skip
    expected = {
        str(date(2024, 1, 1) + timedelta(days=(key - 1) // 4)): (1, 0, 0, [key]) for key in deleted
    }
    expected["2024-01-01"] = (1, 0, 1, [2, 3])
    expected["2024-01-02"] = (1, 1, 0, [6, 8])
    expected["2024-01-03"] = (1, 0, 0, [8])
    assert found == expected
    assert (result["source_rows"], result["target_rows"]) == (240, 200)


@pytest.mark.parametrize("twice", [False, True])
def test_the_source_is_read_once_whatever_decides(
    project: Project, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, twice: bool
) -> None:
    """The source is read once: what the windows that differ need, or the stage (a key
    read twice), comes from the rows that read set aside, in a temporary file removed
    afterwards."""
    from pipeledger.runs.reconcile.compare import Reconcile

    project.configure(orders=orders_pipeline())
    three_days(project)
    if twice:
        project.write_csv("orders_2.csv", [order(1, "2024-01-01T10:30:00Z", status="returned")])
    project.run()
    project.execute(f"DELETE FROM {project.table()} WHERE order_id = 2")
    reads: list[int] = []
    batches = Reconcile._source_batches

    def read(self: Reconcile, frame: Any) -> Any:
        reads.append(1)
        yield from batches(self, frame)

    monkeypatch.setattr(Reconcile, "_source_batches", read)
    spills = tmp_path / "spills"
    spills.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spills))

    status, ran = _compared(project)

    assert (status, len(reads), list(spills.iterdir())) == ("mismatch", 1, [])
    assert any("rank() OVER" in sql for sql in ran) == twice
    monkeypatch.undo()
    _, result = reconcile(project)
    assert [brief(w) for w in result["windows"]] == [("2024-01-01", 4, 3, 1, 0, 0, [2])]


@pytest.mark.parametrize("newer", ["2024-01-01T10:30:00Z", "2024-01-03T20:00:00Z"])
def test_a_key_read_twice_in_a_window_that_differs_is_ranked(project: Project, newer: str) -> None:
    """Both versions of a key in an hour that differs (the unique index of the rows read
    again fails), or the older one there and the current one where the sums match (the
    key found missing is held by the target elsewhere): the whole source is staged and
    ranked, and the current version matches."""
    project.configure(orders=orders_pipeline())
    three_days(project)
    project.write_csv("orders_2.csv", [order(1, newer, status="returned")])
    project.run()
    project.execute(f"DELETE FROM {project.table()} WHERE order_id = 3")

    status, ran = _compared(project)

    assert (status, any("rank() OVER" in sql for sql in ran)) == ("mismatch", True)
    _, result = reconcile(project)
    assert [(w["start"][:10], w["missing_rows"], w["sample_keys"]) for w in result["windows"]] == [
        ("2024-01-01", 1, [3])
    ]
