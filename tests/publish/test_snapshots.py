"""Full snapshots without a cursor (``sync = "full"``): a key-only dimension is compared
whole with its target by key and fingerprint on every run; what the watermark, the ledger,
``state``, ``backfill``, ``lateness`` and ``reconcile`` say of such a pipeline. Both backends."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.helpers import Project

# the first rows of jaffle-shop's seed raw_customers.csv: an id and two names, no date
JAFFLE = [
    ("Michael", "P."),
    ("Shawn", "M."),
    ("Kathleen", "P."),
    ("Jimmy", "C."),
    ("Katherine", "R."),
    ("Sarah", "R."),
    ("Martin", "M."),
    ("Frank", "R."),
    ("Jennifer", "F."),
    ("Henry", "W."),
]
HEADER = ["id", "first_name", "last_name"]


def customers(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "source": {"kind": "csv", "path": "data/raw_customers.csv"},
        "target": "jaffle.raw_customers",
        "key": ["id"],
        "sync": "full",
        "on_conflict": "update",
    }
    body.update(overrides)
    return body


def seed(count: int = 100) -> list[list[Any]]:
    return [[i, *JAFFLE[(i - 1) % len(JAFFLE)]] for i in range(1, count + 1)]


def table(project: Project) -> list[tuple[str, ...]]:
    return project.rows("id, first_name, last_name", "jaffle.raw_customers")


def expected(rows: list[list[Any]]) -> list[tuple[str, ...]]:
    return sorted((tuple(str(v) for v in r) for r in rows), key=lambda r: int(r[0]))


def state(project: Project) -> dict[str, Any]:
    code, out, err = project.cli("state", "customers", "--json")
    assert code == 0, err
    [row] = json.loads(out)
    return dict(row)


def test_a_key_only_dimension_loads_reruns_writing_nothing_and_applies_a_changed_snapshot(
    project: Project,
) -> None:
    project.configure(customers=customers())
    rows = seed()
    project.write_csv("raw_customers.csv", rows, HEADER)
    first = project.run()
    assert (first["rows_read"], first["rows_inserted"]) == (100, 100)
    assert first["watermark_after"] is None and table(project) == expected(rows)
    taken = state(project)
    assert (taken["watermark"], taken["cursor_column"]) == (None, None)
    assert taken["snapshot"]["rows"] == 100 and taken["snapshot"]["run_id"] == first["run_id"]

    again = project.run()
    written = ("rows_inserted", "rows_updated", "rows_deleted")
    assert [again[k] for k in written] == [0, 0, 0] and again["rows_unchanged"] == 100
    same = state(project)["snapshot"]
    assert same["fingerprint"] == taken["snapshot"]["fingerprint"]
    assert (same["run_id"], same["changed_by"]) == (again["run_id"], first["run_id"])

    kept = {r[0]: r for r in rows if r[0] not in (7, 8, 9)}  # three customers deleted
    kept[1], kept[12] = [1, "Mike", "P."], [12, "Shawna", "M."]  # corrected names
    kept[101] = [101, "New", "C."]
    changed = list(kept.values())
    project.write_csv("raw_customers.csv", changed, HEADER)
    third = project.run()
    assert [third[k] for k in written] == [1, 2, 3] and third["rows_unchanged"] == 95
    assert table(project) == expected(changed)
    new = state(project)["snapshot"]
    assert new["fingerprint"] != same["fingerprint"] and new["changed_by"] == third["run_id"]
    runs = project.table("pipeledger.pipeline_runs")
    recorded = project.query(
        f"SELECT rows_inserted, rows_updated, rows_deleted, watermark_after FROM {runs} "
        "WHERE run_id = %s",
        [third["run_id"]],
    )
    assert recorded == [(1, 2, 3, None)]


def test_a_snapshot_without_a_cursor_keeps_the_mass_delete_gate(project: Project) -> None:
    project.configure(customers=customers())
    project.write_csv("raw_customers.csv", seed(), HEADER)
    project.run()
    project.write_csv("raw_customers.csv", seed(10), HEADER)  # a truncated extract
    code, _, err = project.cli("run")
    assert code == 3 and "delete_fraction" in err and "90 of 100 row(s) lacking" in err
    assert "the target stays as the last committed run left it" in err
    assert project.count("jaffle.raw_customers") == 100


def test_soft_deletes_and_duplicate_keys_without_a_cursor(project: Project) -> None:
    project.configure(customers=customers(soft_delete=True))
    project.write_csv("raw_customers.csv", seed(20), HEADER)
    project.run()
    rows = [r for r in seed(20) if r[0] != 5] + [[3, "Kathleen", "Q."]]  # 3 twice, 5 gone
    project.write_csv("raw_customers.csv", rows, HEADER)
    result = project.run()
    assert (result["rows_deleted"], result["rows_superseded"]) == (1, 1)
    live = project.query(
        f"SELECT id, last_name FROM {project.table('jaffle.raw_customers')} "
        "WHERE _pipeledger_deleted_at IS NULL AND id IN (3, 5)"
    )
    assert [(int(i), str(n)) for i, n in live] == [(3, "Q.")]  # the greater row wins
    assert project.run()["rows_deleted"] == 0


def test_tpch_region_loads_as_is_from_parquet(project: Project) -> None:
    """TPC-H's region: a key and two text columns, no date anywhere."""
    names = ["AFRICA", "AMERICA", "ASIA", "EUROPE", "MIDDLE EAST"]
    region = pa.table(
        {
            "r_regionkey": pa.array(range(5), pa.int32()),
            "r_name": pa.array(names),
            "r_comment": pa.array([f"comment of {n.lower()}" for n in names]),
        }
    )
    pq.write_table(region, project.root / "data" / "region.parquet")
    source = {"kind": "parquet", "path": "data/region.parquet"}
    project.configure(
        region={
            "source": source,
            "target": "tpch.region",
            "key": ["r_regionkey"],
            "sync": "full",
            "on_conflict": "error",
        }
    )
    assert project.run()["rows_inserted"] == 5
    assert project.rows("r_regionkey, r_name", "tpch.region")[2] == ("2", "ASIA")
    assert project.run()["rows_unchanged"] == 5


def test_backfill_and_lateness_say_why_a_pipeline_without_a_cursor_has_neither(
    project: Project,
) -> None:
    project.configure(customers=customers())
    project.write_csv("raw_customers.csv", seed(5), HEADER)
    project.run()
    code, _, err = project.cli(
        "backfill", "customers", "--start", "2024-01-01", "--end", "2024-01-02"
    )
    assert code == 2 and "has no cursor, so no range to backfill" in err
    assert "compares the whole source with the target" in err
    code, _, err = project.cli("lateness", "customers")
    assert code == 2 and "no row can be late" in err


def test_reconcile_compares_the_whole_snapshot_and_repair_runs_it(project: Project) -> None:
    project.configure(customers=customers())
    project.write_csv("raw_customers.csv", seed(30), HEADER)
    project.run()
    assert json.loads(project.cli("reconcile", "customers", "--json")[1])["status"] == "match"
    target = project.table("jaffle.raw_customers")
    project.execute(f"UPDATE {target} SET last_name = 'X.' WHERE id = 2")
    project.execute(f"DELETE FROM {target} WHERE id = 3")
    project.execute(
        f"INSERT INTO {target} SELECT 999, first_name, last_name, "
        f"_pipeledger_row_hash, _pipeledger_run_id, _pipeledger_loaded_at "
        f"FROM {target} WHERE id = 1"
    )
    code, out, err = project.cli("reconcile", "customers", "--json")
    assert code == 3, err
    found = json.loads(out)
    assert found["by"] == "all" and len(found["windows"]) == 1
    window = found["windows"][0]
    assert (window["start"], window["end"]) == (None, None)
    counts = (window["missing_rows"], window["extra_rows"], window["changed_rows"])
    assert counts == (1, 1, 1) and sorted(window["sample_keys"]) == [2, 3, 999]
    code, _, err = project.cli("reconcile", "customers", "--by", "day")
    assert code == 2 and "compares its whole snapshot" in err
    code, out, err = project.cli("reconcile", "customers", "--repair", "--json")
    assert code == 0, err
    repaired = json.loads(out)
    assert repaired["status"] == "match"
    [fix] = repaired["repairs"]
    assert (fix["start"], fix["rows_inserted"], fix["rows_updated"], fix["rows_deleted"]) == (
        None,
        1,
        1,
        1,
    )


@pytest.mark.parametrize(
    ("overrides", "words"),
    [
        ({"sync": "incremental"}, "cursor is required"),
        ({"on_conflict": "newer_wins"}, "on_conflict = 'newer_wins' need(s) a cursor"),
        ({"history": "scd2"}, "history need(s) a cursor"),
        ({"partition_by": "last_name"}, "partition_by need(s) a cursor"),
        ({"lateness": "2h"}, "lateness need(s) a cursor"),
        ({"max_backfill": "30d"}, "max_backfill need(s) a cursor"),
    ],
)
def test_what_needs_a_cursor_is_refused_before_anything_runs(
    project: Project, overrides: dict[str, Any], words: str
) -> None:
    project.configure(customers=customers(**overrides))
    project.write_csv("raw_customers.csv", seed(3), HEADER)
    code, _, err = project.cli("run")
    assert code == 2 and words in err and not project.exists("jaffle.raw_customers")
