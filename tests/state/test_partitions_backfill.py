"""Per-partition watermarks and backfills of an explicit range."""

from __future__ import annotations

from tests.helpers import Project, order, orders_pipeline

HEADER = ["order_id", "region", "amount", "updated_at"]


def regional(**overrides: object) -> dict[str, object]:
    pipeline = orders_pipeline(
        partition_by="region", lateness="1h", source={"kind": "csv", "path": "data/r*.csv"}
    )
    pipeline.update(overrides)
    return pipeline


def test_a_lagging_partition_neither_holds_back_nor_skips_another(project: Project) -> None:
    project.configure(orders=regional())
    project.write_csv(
        "r1.csv",
        [
            [1, "eu", "1.00", "2024-01-01T10:00:00Z"],  # eu lags (its feed is a day behind)
            [2, "us", "1.00", "2024-01-02T10:00:00Z"],
        ],
        HEADER,
    )
    first = project.run()
    assert first["watermark_after"] == {
        "eu": "2024-01-01T10:00:00.000000+00:00",
        "us": "2024-01-02T10:00:00.000000+00:00",
    }
    project.write_csv(
        "r2.csv",
        [
            [3, "eu", "1.00", "2024-01-01T12:00:00Z"],  # older than us's watermark: must still land
            [
                4,
                "us",
                "1.00",
                "2024-01-02T08:30:00Z",
            ],  # older than us's watermark - lateness: not read
            [5, "us", "1.00", "2024-01-02T11:00:00Z"],
            [6, "apac", "1.00", "2023-12-31T00:00:00Z"],  # a new partition is read from its start
        ],
        HEADER,
    )
    second = project.run()
    # read: eu rows >= 09:00 on 01-01 (1, 3); us rows >= 09:00 on 01-02 (2, 5); apac (6)
    assert second["rows_read"] == 5
    assert second["rows_inserted"] == 3
    assert second["watermark_after"] == {
        "apac": "2023-12-31T00:00:00.000000+00:00",
        "eu": "2024-01-01T12:00:00.000000+00:00",
        "us": "2024-01-02T11:00:00.000000+00:00",
    }
    assert [r[0] for r in project.rows("order_id, region")] == ["1", "2", "3", "5", "6"]
    assert set(project.watermarks()) == {"apac", "eu", "us"}


def test_backfill_reloads_exactly_the_range_and_leaves_the_watermark(project: Project) -> None:
    project.configure(orders=orders_pipeline(max_backfill="40d"))
    project.write_csv(
        "orders_1.csv", [order(i, f"2024-01-{i:02d}T10:00:00Z") for i in range(1, 21)]
    )
    project.run()
    live = project.watermarks()
    # a correction to days 5..7 arrives with the original cursors, plus a forgotten row
    project.write_csv(
        "orders_2.csv",
        [order(6, "2024-01-06T10:00:00Z", status="refunded"), order(99, "2024-01-07T10:00:00Z")],
    )
    result = project.run_json(
        "backfill", "orders", "--start", "2024-01-05T10:00:00Z", "--end", "2024-01-07T10:00:00Z"
    )[0]
    assert result["mode"] == "backfill"
    # closed at both ends: days 5, 6, 7 of the first file, and both rows of the second (6 twice)
    assert result["rows_read"] == 5
    assert (result["rows_inserted"], result["rows_updated"]) == (1, 1)
    assert project.count() == 21
    assert project.watermarks() == live
    again = project.run_json(
        "backfill", "orders", "--start", "2024-01-05T10:00:00Z", "--end", "2024-01-07T10:00:00Z"
    )[0]
    assert (again["rows_inserted"], again["rows_updated"]) == (0, 0)
    assert project.count() == 21


def test_backfill_refuses_inverted_or_too_wide_ranges(project: Project) -> None:
    project.configure(orders=orders_pipeline(max_backfill="30d"))
    project.write_csv("orders_1.csv", [order(1, "2024-01-01T10:00:00Z")])
    code, _, err = project.cli("backfill", "orders", "--start", "2024-02-01", "--end", "2024-01-01")
    assert code == 2 and "after --end" in err
    code, _, err = project.cli("backfill", "orders", "--start", "2024-01-01", "--end", "2024-03-01")
    assert code == 2 and "max_backfill" in err
    assert not project.exists()
