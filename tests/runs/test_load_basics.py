"""A full load, an identical re-run, an incremental batch, the boundary and late rows."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import Project, order, orders_pipeline


def test_full_load_lands_every_row_and_rerun_changes_nothing(project: Project) -> None:
    project.configure(orders=orders_pipeline())
    project.write_csv(
        "orders_1.csv", [order(i, f"2024-01-01T{i % 24:02d}:00:00Z") for i in range(1, 501)]
    )

    first = project.run()
    assert (first["rows_read"], first["rows_inserted"], first["rows_updated"]) == (500, 500, 0)
    assert project.count() == 500
    assert first["watermark_before"] is None
    assert first["watermark_after"] == "2024-01-01T23:00:00.000000+00:00"

    again = project.run()
    assert project.count() == 500
    assert (again["rows_inserted"], again["rows_updated"]) == (0, 0)
    assert again["watermark_before"] == again["watermark_after"] == first["watermark_after"]


def test_rows_carry_the_run_that_last_wrote_them(project: Project) -> None:
    project.configure(orders=orders_pipeline())
    project.write_csv(
        "orders_1.csv", [order(1, "2024-01-01T10:00:00Z"), order(2, "2024-01-01T11:00:00Z")]
    )
    first = project.run()
    project.write_csv("orders_2.csv", [order(2, "2024-01-01T12:00:00Z", status="shipped")])
    second = project.run()
    rows = project.query(
        "SELECT order_id, _pipeledger_run_id, _pipeledger_loaded_at "
        f"FROM {project.table()} ORDER BY 1"
    )
    assert [(r[0], str(r[1])) for r in rows] == [(1, first["run_id"]), (2, second["run_id"])]
    assert all(r[2] is not None for r in rows)


def test_incremental_run_reads_only_new_rows_and_applies_changes(project: Project) -> None:
    project.configure(orders=orders_pipeline(lateness="1h"))
    project.write_csv(
        "orders_1.csv", [order(i, f"2024-01-01T{i:02d}:00:00Z") for i in range(1, 11)]
    )
    project.run()
    # the watermark is 10:00; lateness 1h: the next run reads cursor >= 09:00
    project.write_csv(
        "orders_2.csv",
        [
            order(5, "2024-01-02T08:00:00Z", status="cancelled"),  # a change to an old order
            order(11, "2024-01-02T09:00:00Z"),  # new
            order(12, "2024-01-02T10:00:00Z"),  # new
        ],
    )
    second = project.run()
    # rows 9 and 10 (>= 09:00) are re-read as unchanged; rows 1..8 are not read at all
    assert second["rows_read"] == 2 + 3
    assert (second["rows_inserted"], second["rows_updated"], second["rows_unchanged"]) == (2, 1, 2)
    assert second["watermark_after"] == "2024-01-02T10:00:00.000000+00:00"
    assert project.count() == 12
    assert ("5", "cancelled", "10.00") in project.rows()


def test_boundary_row_and_late_row_each_land_exactly_once(project: Project) -> None:
    project.configure(orders=orders_pipeline(lateness="2h"))
    project.write_csv(
        "orders_1.csv", [order(1, "2024-01-01T10:00:00Z"), order(2, "2024-01-01T12:00:00Z")]
    )
    assert project.run()["watermark_after"] == "2024-01-01T12:00:00.000000+00:00"
    project.write_csv(
        "orders_2.csv",
        [
            order(3, "2024-01-01T12:00:00Z"),  # exactly at the watermark, arrived after the run
            order(4, "2024-01-01T10:30:00Z"),  # late, but inside the 2h lateness buffer
            order(5, "2024-01-01T09:00:00Z"),  # later than the buffer: needs a backfill
        ],
    )
    second = project.run()
    assert second["rows_inserted"] == 2
    third = project.run()
    assert (third["rows_inserted"], third["rows_updated"]) == (0, 0)
    ids = [r[0] for r in project.rows()]
    assert ids == ["1", "2", "3", "4"]
    assert project.count() == len(set(ids))
    backfilled = project.run_json(
        "backfill", "orders", "--start", "2024-01-01T00:00:00Z", "--end", "2024-01-01T09:59:59Z"
    )[0]
    assert backfilled["rows_inserted"] == 1
    assert project.count() == 5


def test_empty_source_is_a_successful_zero_row_run(project: Project) -> None:
    project.configure(orders=orders_pipeline())
    project.write_csv("orders_1.csv", [])
    code, out, err = project.cli("run")
    assert code == 0, err
    assert "no rows" in out
    result = project.run()
    assert (result["status"], result["rows_read"], result["watermark_after"]) == (
        "success",
        0,
        None,
    )


def test_state_lists_watermarks(project: Project) -> None:
    project.configure(orders=orders_pipeline())
    code, out, _ = project.cli("state")
    assert code == 0 and "nothing has been loaded" in out
    project.write_csv("orders_1.csv", [order(1, "2024-03-01T10:00:00Z")])
    project.run()
    assert project.watermarks() == {"": "2024-03-01T10:00:00.000000+00:00"}
    code, out, _ = project.cli("state")
    assert "2024-03-01T10:00:00" in out


def test_integer_cursor_and_date_cursor(project: Project) -> None:
    header = ["id", "version", "day", "note"]
    project.configure(
        by_version={
            "source": {"kind": "csv", "path": "data/v*.csv"},
            "target": "versions",
            "key": ["id"],
            "cursor": "version",
            "on_conflict": "newer_wins",
            "lateness": 1,
        },
        by_day={
            "source": {"kind": "csv", "path": "data/v*.csv"},
            "target": "days",
            "key": ["id"],
            "cursor": "day",
            "on_conflict": "update",
            "lateness": "1d",
        },
    )
    project.write_csv("v1.csv", [[1, 1, "2024-01-01", "a"], [2, 5, "2024-01-03", "b"]], header)
    assert project.run("by_version")["watermark_after"] == "5"
    assert project.run("by_day")["watermark_after"] == "2024-01-03"
    project.write_csv("v2.csv", [[3, 4, "2024-01-02", "late"], [4, 6, "2024-01-04", "c"]], header)
    assert project.run("by_version")["rows_read"] == 2 + 1  # versions >= 4
    assert project.run("by_day")["rows_read"] == 1 + 2  # days >= 2024-01-02
    assert project.count("versions") == project.count("days") == 4


def test_a_postgresql_target_that_gets_updates_has_room_for_them(
    postgres_url: str, tmp_path: Path
) -> None:
    project = Project(tmp_path, postgres_url)
    project.configure(
        orders=orders_pipeline(on_conflict="newer_wins"),
        events=orders_pipeline(on_conflict="ignore", target="analytics.events"),
    )
    project.write_csv("orders_1.csv", [order(1, "2024-01-01T10:00:00Z")])
    project.run_json("run")
    options = project.query(
        "SELECT relname, reloptions FROM pg_class WHERE relname IN ('orders', 'events') "
        "ORDER BY relname"
    )
    assert options == [("events", None), ("orders", ["fillfactor=90"])]
