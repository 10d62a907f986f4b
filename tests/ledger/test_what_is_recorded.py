"""What the ledger and the CLI say is true: step states after a failure, rows read by a
halted run, the watermark a skipped run leaves, partitions in ``state``, no false drift
from a SQLite source, and the data interval every run records."""

from __future__ import annotations

import json
import sqlite3
import zlib
from datetime import UTC, datetime
from pathlib import Path

import psycopg

from pipeledger import Ledger
from tests.helpers import ORDERS_HEADER, Project, order, orders_pipeline, write_big_orders_csv

RUNS = "pipeledger.pipeline_runs"
TASKS = "pipeledger.task_runs"


def _tasks(project: Project, run_id: str) -> dict[str, str]:
    rows = project.query(
        f"SELECT name, status FROM {project.table(TASKS)} WHERE run_id = %s ORDER BY seq",
        [run_id],
    )
    return {str(name): str(status) for name, status in rows}


def _latest_run(project: Project, columns: str) -> tuple[object, ...]:
    return project.query(
        f"SELECT {columns} FROM {project.table(RUNS)} ORDER BY started_at DESC LIMIT 1"
    )[0]


def test_an_extract_failing_on_its_third_batch_records_no_step_as_a_success(
    project: Project,
) -> None:
    project.configure(orders=orders_pipeline())
    path = project.root / "data" / "orders_1.csv"
    write_big_orders_csv(path, 150_000, 1, "2024-01-01T00:00:00+00:00")
    with path.open("a") as handle:  # row 150,001: in the third batch of 65,536 rows
        handle.write("150001,1,2024-01-01\n")

    code, out, err = project.cli("run", "--json")

    assert code == 1, err
    [failed] = json.loads(out)
    assert "row 150001" in failed["error"] and "expected 7 fields, found 3" in failed["error"]
    tasks = _tasks(project, failed["run_id"])
    assert tasks["extract"] == "failed"
    assert "success" not in tasks.values(), tasks
    assert set(tasks.values()) <= {"failed", "interrupted"}
    # it had transformed and staged two batches when the third failed to parse
    assert tasks.get("transform") == "interrupted" and tasks.get("load") == "interrupted"
    status, rows_read = _latest_run(project, "status, rows_read")
    assert status == "failed" and 131_072 <= int(str(rows_read)) < 150_001  # two batches
    assert not project.exists()


def test_a_run_halted_by_its_gate_records_the_rows_it_read(project: Project) -> None:
    checks = {"accepted_values": {"status": ["completed"]}}
    project.configure(orders=orders_pipeline(checks=checks))
    rows = [order(i, f"2024-01-01T{i:02d}:00:00Z") for i in range(1, 11)]
    rows.append(order(11, "2024-01-01T11:00:00Z", status="teleported"))
    project.write_csv("orders_1.csv", rows)

    code, out, err = project.cli("run", "--json")

    assert code == 3, err
    [halted] = json.loads(out)
    assert halted["reason"] == "gate_halt"
    status, rows_read, error_code = _latest_run(project, "status, rows_read, error_code")
    assert (status, rows_read, error_code) == ("failed", 11, "GateFailed")
    assert _tasks(project, halted["run_id"])["quality"] == "failed"


def test_a_skipped_run_names_the_watermark_that_stays(tmp_path: Path, postgres_url: str) -> None:
    project = Project(tmp_path, postgres_url)
    project.configure(orders=orders_pipeline())
    project.write_csv("orders_1.csv", [order(1, "2024-01-01T10:00:00Z")])
    project.run()
    with psycopg.connect(postgres_url) as holder:  # what an active run of it holds
        holder.execute("SELECT pg_advisory_xact_lock(%s)", [zlib.crc32(b"pipeledger:orders")])
        code, _, err = project.cli("run")
        json_code, out, _ = project.cli("run", "--json")

    assert code == json_code == 4
    stays = "nothing was written; the watermark stays at 2024-01-01T10:00:00.000000+00:00"
    assert stays in err and "unset" not in err, err
    [skipped] = json.loads(out)
    assert skipped["status"] == "skipped"
    assert stays in skipped["error"] and "unset" not in skipped["error"]


def test_state_text_shows_every_partition_that_json_shows(project: Project) -> None:
    project.configure(orders=orders_pipeline(partition_by="region"))
    project.write_csv(
        "orders_1.csv",
        [
            [*order(1, "2024-01-01T10:00:00Z"), "eu"],
            [*order(2, "2024-01-02T10:00:00Z"), "us"],
        ],
        header=[*ORDERS_HEADER, "region"],
    )
    project.run()

    code, out, _ = project.cli("state", "--json")
    assert code == 0
    partitions = {r["partition"]: r["watermark"] for r in json.loads(out)}
    assert partitions == {
        "eu": "2024-01-01T10:00:00.000000+00:00",
        "us": "2024-01-02T10:00:00.000000+00:00",
    }
    code, text, _ = project.cli("state")
    assert code == 0
    lines = text.splitlines()
    assert len(lines) == 2, text
    for line, (partition, watermark) in zip(lines, sorted(partitions.items()), strict=True):
        assert line.startswith(f"orders [{partition}]  updated_at (timestamptz)  {watermark}")


def test_a_typed_sqlite_table_source_is_no_drift_on_its_first_load(project: Project) -> None:
    source = project.root / "data" / "shop.db"
    conn = sqlite3.connect(source)
    conn.execute(
        "CREATE TABLE orders (order_id INTEGER PRIMARY KEY, amount REAL, status TEXT, "
        "updated_at TEXT)"
    )
    conn.executemany(
        "INSERT INTO orders VALUES (?, ?, ?, ?)",
        [(i, i * 1.25, "completed", f"2024-01-0{1 + i % 5}T10:00:00+00:00") for i in range(1, 21)],
    )
    conn.commit()
    conn.close()
    project.configure(
        orders=orders_pipeline(
            source={"kind": "sql", "url": f"sqlite:///{source}", "table": "orders"},
            columns={"amount": "numeric(12,2)", "updated_at": "timestamptz"},
            checks={"not_null": ["status"], "schema_drift": "fail"},
        )
    )

    first = project.run()
    second = project.run()

    assert (first["status"], first["rows_inserted"]) == ("success", 20)
    assert (second["status"], second["rows_inserted"]) == ("success", 0)
    drift = project.query(
        f"SELECT count(*) FROM {project.table('pipeledger.audit_events')} "
        "WHERE event_type = 'SCHEMA_CHANGE' AND CAST(metadata AS text) LIKE %s",
        ['%"drift"%'],
    )
    assert drift == [(0,)]


def _interval(project: Project, run_id: str) -> tuple[datetime | None, datetime | None]:
    start, end = project.query(
        f"SELECT data_interval_start, data_interval_end FROM {project.table(RUNS)} "
        "WHERE run_id = %s",
        [run_id],
    )[0]
    return _instant(start), _instant(end)


def _instant(value: object) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value
    return datetime.fromisoformat(str(value))


def at(day: int, hour: int = 0) -> datetime:
    return datetime(2024, 1, day, hour, tzinfo=UTC)


def test_every_load_records_the_interval_it_covered_and_the_last_success_is_the_frontier(
    project: Project, warehouse_url: str
) -> None:
    project.configure(orders=orders_pipeline(lateness="1h"))
    ledger = Ledger(warehouse_url)
    project.write_csv("orders_1.csv", [order(i, f"2024-01-0{i}T10:00:00Z") for i in (1, 2, 3)])
    first = project.run()
    assert _interval(project, first["run_id"]) == (at(1, 10), at(3, 10))
    assert ledger.last_successful_run("orders") == at(3, 10)

    project.write_csv("orders_2.csv", [order(5, "2024-01-05T11:00:00Z")])
    second = project.run()  # from the watermark less the lateness to the new watermark
    assert _interval(project, second["run_id"]) == (at(3, 9), at(5, 11))
    assert ledger.last_successful_run("orders") == at(5, 11)

    [backfill] = project.run_json(
        "backfill", "orders", "--start", "2024-01-01", "--end", "2024-01-02"
    )
    # a date-only end covers that whole day
    assert _interval(project, backfill["run_id"]) == (at(1), at(3))
    # a backfill re-loads old data: the frontier is still the incremental run's
    assert ledger.last_successful_run("orders") == at(5, 11)

    third = project.run()  # nothing new: it covered the stretch up to the same watermark
    assert _interval(project, third["run_id"]) == (at(5, 10), at(5, 11))
    assert ledger.last_successful_run("orders") == at(5, 11)


def test_an_integer_cursor_records_no_interval(project: Project, warehouse_url: str) -> None:
    header = ["id", "version", "note"]
    project.configure(
        versions={
            "source": {"kind": "csv", "path": "data/v*.csv"}, "target": "versions",
            "key": ["id"], "cursor": "version", "on_conflict": "newer_wins",
        }
    )  # fmt: skip
    project.write_csv("v1.csv", [[1, 10, "a"], [2, 20, "b"]], header=header)
    run = project.run()
    assert run["status"] == "success"
    assert _interval(project, run["run_id"]) == (None, None)
    assert Ledger(warehouse_url).last_successful_run("versions") is None
