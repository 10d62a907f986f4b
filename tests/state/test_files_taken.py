"""``incremental = "files"``: each new or changed file is read exactly once, whatever its
cursors; the files taken commit with their rows; an unchanged folder is passed by without
the loader. With partitions, backfill, quarantine and the lateness report, and a real
SIGKILL between two files. Both backends."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_startup import probe
from tests.helpers import Project, order, orders_pipeline, write_big_orders_csv


def files_pipeline(**overrides: Any) -> dict[str, Any]:
    return orders_pipeline(source={"kind": "csv", "path": "data"}, incremental="files", **overrides)


def taken(project: Project) -> list[tuple[str, int | None, str]]:
    """(file, rows, run) of every file taken, by name."""
    rows = project.query(
        f"SELECT path, row_count, run_id FROM {project.table('pipeledger.files_taken')} "
        "ORDER BY path"
    )
    return [(str(p), None if n is None else int(n), str(r)) for p, n, r in rows]


def test_a_new_file_older_than_the_watermark_loads_exactly_once(project: Project) -> None:
    project.configure(orders=files_pipeline())
    project.write_csv("orders_1.csv", [order(i, "2024-03-01T10:00:00Z") for i in range(1, 11)])
    first = project.run()
    assert first["watermark_after"] == "2024-03-01T10:00:00.000000+00:00"
    # a late batch: every cursor far below the watermark (a cursor window would skip it)
    project.write_csv("orders_0.csv", [order(i, "2023-12-31T10:00:00Z") for i in range(11, 16)])
    second = project.run()
    assert (second["rows_read"], second["rows_inserted"]) == (5, 5)
    assert second["files"] == {"read": ["data/orders_0.csv"], "touched": 0, "unchanged": 1}
    assert second["watermark_after"] == first["watermark_after"]  # it never moves back
    assert second["late_rows_dropped"] == 0
    third = project.run()
    assert third["rows_read"] == 0 and third["files"]["unchanged"] == 2
    assert project.count() == 15
    assert [(p, n, r) for p, n, r in taken(project)] == [
        ("data/orders_0.csv", 5, second["run_id"]),
        ("data/orders_1.csv", 10, first["run_id"]),
    ]
    extra = project.query(
        f"SELECT extra FROM {project.table('pipeledger.pipeline_runs')} WHERE run_id = %s",
        [second["run_id"]],
    )[0][0]
    extra = extra if isinstance(extra, dict) else json.loads(extra)
    assert extra["files"] == {
        "read": 1,
        "touched": 0,
        "unchanged": 1,
        "paths": ["data/orders_0.csv"],
    }
    report = json.loads(project.cli("lateness", "orders", "--json")[1])
    assert (report["late_rows_caught"], report["late_rows_missed"]) == (5, 0)


def test_the_same_file_under_cursor_windows_is_only_warned_about(project: Project) -> None:
    """What ``incremental = "files"`` is for: the default reads a cursor window."""
    project.configure(orders=orders_pipeline(source={"kind": "csv", "path": "data"}))
    project.write_csv("orders_1.csv", [order(i, "2024-03-01T10:00:00Z") for i in range(1, 11)])
    project.run()
    project.write_csv("orders_0.csv", [order(i, "2023-12-31T10:00:00Z") for i in range(11, 16)])
    assert project.run()["late_rows_dropped"] == 5 and project.count() == 10


def test_a_changed_file_is_read_again_and_a_touched_one_is_not(project: Project) -> None:
    project.configure(orders=files_pipeline())
    path = project.write_csv("orders_1.csv", [order(i, "2024-01-01T10:00:00Z") for i in (1, 2)])
    other = project.write_csv("orders_2.csv", [order(3, "2024-01-01T10:00:00Z")])
    project.run()
    os.utime(other, ns=(time.time_ns(), time.time_ns() + 10**9))  # copied: a new time only
    rows = [order(1, "2024-01-02T10:00:00Z", status="paid"), order(2, "2024-01-01T10:00:00Z")]
    project.write_csv(path.name, [*rows, order(4, "2024-01-02T10:00:00Z")])
    result = project.run()
    assert result["files"] == {"read": ["data/orders_1.csv"], "touched": 1, "unchanged": 0}
    assert [result[k] for k in ("rows_read", "rows_inserted", "rows_updated")] == [3, 1, 1]
    assert dict((p, n) for p, n, _ in taken(project)) == {
        "data/orders_1.csv": 3,
        "data/orders_2.csv": 1,  # its rows as counted when it was read
    }
    assert project.run()["files"] == {"read": [], "touched": 0, "unchanged": 2}


def test_an_unchanged_folder_of_eight_files_reads_nothing_and_imports_no_loader(
    project: Project,
) -> None:
    project.configure(orders=files_pipeline())
    for n in range(8):
        project.write_csv(
            f"orders_{n}.csv", [order(n * 10 + i, "2024-01-01T10:00:00Z") for i in range(10)]
        )
    assert project.run()["rows_read"] == 80
    printed, modules = probe(project.root, ["run", "--json"])
    [result] = json.loads(printed.rsplit("exit", 1)[0])
    assert (result["rows_read"], result["files"]["unchanged"]) == (0, 8)
    assert "exit 0" in printed
    loader = ("pipeledger.runs.load.loader", "pipeledger.transform", "pipeledger.sources.csv")
    found = [m for m in modules if m.split(".")[0] in ("pyarrow", "numpy") or m.startswith(loader)]
    assert found == []  # a listing and a comparison: no reader, no Arrow
    runs = project.query(
        f"SELECT status, rows_read FROM {project.table('pipeledger.pipeline_runs')} "
        "WHERE run_id = %s",
        [result["run_id"]],
    )
    assert runs == [("success", 0)]


def test_partitions_keep_their_watermarks_and_an_old_partitions_file_loads(
    project: Project,
) -> None:
    header = ["order_id", "region", "updated_at"]
    project.configure(orders={**files_pipeline(partition_by="region"), "columns": {}})
    first = [[1, "eu", "2024-02-01T00:00:00Z"], [2, "us", "2024-03-01T00:00:00Z"]]
    project.write_csv("a.csv", first, header)
    project.run()
    later = [[3, "eu", "2024-01-01T00:00:00Z"], [4, "us", "2024-04-01T00:00:00Z"]]
    project.write_csv("b.csv", later, header)
    result = project.run()
    assert result["rows_inserted"] == 2
    assert result["watermark_after"] == {
        "eu": "2024-02-01T00:00:00.000000+00:00",
        "us": "2024-04-01T00:00:00.000000+00:00",
    }


def test_a_backfill_reads_every_file_in_its_range_and_takes_none(project: Project) -> None:
    project.configure(orders=files_pipeline())
    project.write_csv("orders_1.csv", [order(1, "2024-01-05T10:00:00Z")])
    project.run()
    before = taken(project)
    project.write_csv(
        "orders_0.csv", [order(2, "2024-01-02T10:00:00Z"), order(3, "2023-06-01T10:00:00Z")]
    )
    code, out, err = project.cli(
        "backfill", "orders", "--start", "2024-01-01", "--end", "2024-01-31", "--json"
    )
    assert code == 0, err
    assert json.loads(out)[0]["rows_inserted"] == 1 and taken(project) == before
    result = project.run()  # the new file is still new: read whole, the rows it holds kept
    assert (result["files"]["read"], result["rows_inserted"]) == (["data/orders_0.csv"], 1)
    assert result["rows_unchanged"] == 1 and project.count() == 3


def test_a_file_with_a_bad_row_is_taken_and_its_row_waits_in_quarantine(
    project: Project,
) -> None:
    project.configure(
        orders=files_pipeline(checks={"not_null": ["status"], "on_fail": "quarantine"})
    )
    project.write_csv(
        "orders_1.csv",
        [order(1, "2024-01-01T10:00:00Z"), order(2, "2024-01-01T10:00:00Z", status="")],
    )
    assert project.run()["rows_rejected"] == 1
    assert project.run()["rows_read"] == 0  # taken: not read again, the row not re-quarantined
    project.configure(orders=files_pipeline())  # the check is dropped: the row is fine now
    code, _, err = project.cli("quarantine", "replay", "orders", "--json")
    assert code == 0, err
    assert project.count() == 2


def test_a_file_changing_while_it_is_read_fails_the_run_and_takes_nothing(
    project: Project,
) -> None:
    project.configure(orders=files_pipeline())
    write_big_orders_csv(
        project.root / "data" / "orders_1.csv", 300_000, 1, "2024-01-01T00:00:00+00:00"
    )
    second = project.write_csv("orders_2.csv", [order(900_001, "2024-01-02T00:00:00Z")])
    process = project.spawn("--verbose", "run")
    _wait_for(process, "file 1 of 2")
    process.send_signal(signal.SIGSTOP)
    project.write_csv(
        second.name,
        [order(900_001, "2024-01-02T00:00:00Z"), order(900_002, "2024-01-02T00:00:00Z")],
    )
    process.send_signal(signal.SIGCONT)
    _, err = process.communicate(timeout=300)
    assert process.returncode == 75, err  # transient: a retry reads it again
    assert "orders_2.csv changed while it was read" in err and "no file was taken" in err
    assert not project.exists() or project.count() == 0
    assert project.run()["rows_inserted"] == 300_002


def _wait_for(process: subprocess.Popen[str], words: str, timeout: float = 120.0) -> str:
    """Read the run's log until a line says ``words``; return what it said."""
    assert process.stderr is not None
    deadline = time.monotonic() + timeout
    seen = ""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([process.stderr], [], [], 0.5)
        if ready:
            line = process.stderr.readline()
            seen += line
            if words in line:
                return seen
        assert process.poll() is None, f"the run ended before it said {words!r}:\n{seen}"
    raise AssertionError(f"no {words!r} within {timeout}s:\n{seen}")


def test_sigkill_between_files_leaves_each_file_loaded_once_after_the_retry(
    project: Project,
) -> None:
    project.configure(orders=files_pipeline())
    for n in range(4):
        write_big_orders_csv(
            project.root / "data" / f"orders_{n}.csv",
            100_000,
            n * 100_000,
            f"2024-01-0{n + 1}T00:00:00+00:00",
        )
    process = project.spawn("--verbose", "run")
    _wait_for(process, "file 3 of 4")  # two files read and staged, the third begun
    process.send_signal(signal.SIGSTOP)  # SIGKILL ends it there, on any machine
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=30)
    assert process.returncode == -signal.SIGKILL
    assert not project.exists() and taken_or_none(project) == []
    retry = project.run()
    assert (retry["rows_read"], retry["rows_inserted"]) == (400_000, 400_000)
    assert project.query(f"SELECT count(*), count(DISTINCT order_id) FROM {project.table()}") == [
        (400_000, 400_000)
    ]
    assert [n for _, n, _ in taken(project)] == [100_000] * 4
    assert project.run()["rows_read"] == 0


def taken_or_none(project: Project) -> list[tuple[str, int | None, str]]:
    """The files taken, or none when the state tables are not there yet."""
    if not project.exists("pipeledger.files_taken"):
        return []
    return taken(project)


def test_state_shows_the_files_taken(project: Project) -> None:
    project.configure(orders=files_pipeline())
    project.write_csv("orders_1.csv", [order(1, "2024-01-01T10:00:00Z")])
    project.run()
    code, out, err = project.cli("state", "--json")
    assert code == 0, err
    [row] = json.loads(out)
    assert row["watermark"] == "2024-01-01T10:00:00.000000+00:00"
    assert row["files"]["files"] == 1 and row["files"]["bytes"] > 0
    code, out, _ = project.cli("state")
    assert "files     1 taken" in out


@pytest.mark.parametrize(
    ("overrides", "words"),
    [
        ({"source": {"kind": "sql", "url": "sqlite:///x.db", "table": "t"}}, "needs a file source"),
        ({"sync": "full"}, "choose one"),
        ({"lateness": "2h"}, "lateness has nothing to do"),
    ],
)
def test_what_reading_files_once_cannot_do_is_refused(
    project: Project, overrides: dict[str, Any], words: str
) -> None:
    project.configure(orders={**files_pipeline(), **overrides})
    code, _, err = project.cli("run")
    assert code == 2 and words in err


def test_files_once_without_a_cursor(project: Project, tmp_path: Path) -> None:
    """A drop folder of key-only files: each new file merged by key, once."""
    body = {k: v for k, v in files_pipeline().items() if k not in ("cursor", "columns")}
    project.configure(customers={**body, "target": "raw.customers", "key": ["id"]})
    header = ["id", "name"]
    project.write_csv("c1.csv", [[1, "a"], [2, "b"]], header)
    assert project.run()["rows_inserted"] == 2
    project.write_csv("c2.csv", [[2, "B"], [3, "c"]], header)
    result = project.run()
    assert (result["rows_inserted"], result["rows_updated"], result["rows_deleted"]) == (1, 1, 0)
    assert project.rows("id, name", "raw.customers") == [("1", "a"), ("2", "B"), ("3", "c")]
    assert project.run()["rows_read"] == 0


def test_a_dropped_target_reads_every_file_again(project: Project) -> None:
    project.configure(orders=files_pipeline())
    project.write_csv("orders_1.csv", [order(1, "2024-01-01T10:00:00Z")])
    project.write_csv("orders_2.csv", [order(2, "2024-01-02T10:00:00Z")])
    project.run()
    project.execute(f"DROP TABLE {project.table()}")  # to start again
    result = project.run()
    assert (result["rows_inserted"], len(result["files"]["read"])) == (2, 2)


def test_a_parquet_folder_is_read_file_by_file_once(project: Project) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    def write(name: str, keys: range, day: str) -> None:
        table = pa.table(
            {
                "l_orderkey": pa.array(list(keys), pa.int64()),
                "l_shipdate": pa.array([day] * len(keys)).cast(pa.date32()),
            }
        )
        pq.write_table(table, project.root / "data" / name)

    source = {"kind": "parquet", "path": "data/*.parquet"}
    project.configure(
        lineitem={
            "source": source,
            "target": "tpch.lineitem",
            "key": ["l_orderkey"],
            "cursor": "l_shipdate",
            "on_conflict": "update",
            "incremental": "files",
        }
    )
    write("1998-12.parquet", range(0, 100), "1998-12-01")
    write("1998-11.parquet", range(100, 150), "1998-11-01")
    assert project.run("lineitem")["rows_inserted"] == 150
    write("1992-01.parquet", range(150, 160), "1992-01-02")  # a new file of an old month
    result = project.run("lineitem")
    assert (result["rows_read"], result["rows_inserted"]) == (10, 10)
    assert result["files"]["read"] == ["data/1992-01.parquet"]
    assert project.run("lineitem")["rows_read"] == 0 and project.count("tpch.lineitem") == 160
