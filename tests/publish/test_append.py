"""mode = "append": every distinct version of a row kept once, the key and the cursor being
its identity, on both backends."""

from __future__ import annotations

import json
from typing import Any

from tests.helpers import Project, order, orders_pipeline

# three files carrying versions of the same keys: new versions, a version read again in
# another file, the same content at a newer cursor (a version of its own)
FILES = {
    "orders_1.csv": [order(k, "2024-01-01T10:00:00Z", status="new") for k in (1, 2, 3, 4, 5)],
    "orders_2.csv": [
        order(1, "2024-01-02T10:00:00Z", status="paid"),
        order(2, "2024-01-02T10:00:00Z", status="paid"),
        order(3, "2024-01-02T10:00:00Z", status="new"),  # same content, newer cursor
        order(4, "2024-01-01T10:00:00Z", status="new"),  # the very version of file 1
    ],
    "orders_3.csv": [
        order(1, "2024-01-03T10:00:00Z", status="shipped"),
        order(2, "2024-01-02T10:00:00Z", status="paid"),  # the very version of file 2
        order(6, "2024-01-03T10:00:00Z", status="new"),
    ],
}


def appending(**overrides: Any) -> dict[str, Any]:
    return orders_pipeline(**{"mode": "append", "on_conflict": "error", "lateness": "7d",
                              **overrides})  # fmt: skip


def distinct_versions() -> set[tuple[str, str, str]]:
    return {(str(r[0]), str(r[6]), str(r[4])) for rows in FILES.values() for r in rows}


def stored_versions(project: Project) -> list[tuple[str, str, str]]:
    rows = project.query(f"SELECT order_id, updated_at, status FROM {project.table()}")
    return [(str(k), _utc(at), str(s)) for k, at, s in rows]


def _utc(value: Any) -> str:
    text = value.isoformat() if hasattr(value, "isoformat") else str(value)
    return text.replace("+00:00", "Z").replace(".000000", "").replace(" ", "T")


def test_three_files_keep_every_distinct_version_once(project: Project) -> None:
    project.configure(orders=appending())
    outcomes = []
    for name, rows in FILES.items():
        project.write_csv(name, rows)
        outcomes.append(project.run())
    versions = stored_versions(project)
    assert sorted(versions) == sorted(distinct_versions()) and len(versions) == 10
    assert [o["rows_inserted"] for o in outcomes] == [5, 3, 2]
    assert all(o["rows_updated"] == 0 for o in outcomes)
    again = project.run()  # re-reading all three files within lateness adds nothing
    assert again["rows_read"] == 12 and again["rows_inserted"] == 0
    for args in ([], ["--full-compare"]):
        code, out, err = project.cli("backfill", "orders", "--start", "2024-01-01",
                                     "--end", "2024-01-03", "--json", *args)  # fmt: skip
        assert code == 0, err
        result = json.loads(out)[0]
        assert (result["rows_inserted"], result["rows_updated"]) == (0, 0)
    assert result["rows_staged"] == 12  # --full-compare compares every row
    assert sorted(stored_versions(project)) == sorted(distinct_versions())
    assert project.watermarks() == {"": "2024-01-03T10:00:00.000000+00:00"}


def test_a_backfill_skips_the_versions_the_target_holds(project: Project) -> None:
    project.configure(orders=appending())
    for name, rows in FILES.items():
        project.write_csv(name, rows)
    project.run()
    code, out, err = project.cli("backfill", "orders", "--start", "2024-01-01", "--end",
                                 "2024-01-03", "--json")  # fmt: skip
    assert code == 0, err
    result = json.loads(out)[0]
    assert result["rows_staged"] == 0 and result["rows_unchanged"] == 10


def test_a_version_read_again_with_other_content_follows_on_conflict(project: Project) -> None:
    project.configure(orders=appending())
    project.write_csv("orders_1.csv", [order(1, "2024-01-01T10:00:00Z", status="new")])
    project.run()
    project.write_csv("orders_1.csv", [order(1, "2024-01-01T10:00:00Z", status="changed")])
    code, _, err = project.cli("run")
    assert code == 1 and "on_conflict = 'error'" in err and "order_id=1" in err
    project.configure(orders=appending(on_conflict="update"))
    assert project.run()["rows_updated"] == 1
    assert project.rows("order_id, status") == [("1", "changed")]


def test_append_refuses_deletes_and_history(project: Project) -> None:
    project.configure(orders=appending(sync="full"))
    code, _, err = project.cli("run")
    assert code == 2 and "mode = 'append' keeps every version" in err
