"""A load killed with SIGKILL leaves nothing behind; other processes can read during a load."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest

from tests.helpers import ORDERS_HEADER, Project, order, orders_pipeline, write_big_orders_csv

pytestmark = pytest.mark.slow  # SIGKILLs, 600k-row loads and 20 processes at once

BIG = 600_000


def _wait_until_staging(process: subprocess.Popen[str], word: str = "staged") -> str:
    """Read the run's log until it says ``word`` (a load: it has staged at least one batch);
    return what it said. Each read waits for the next line, or for the process to end (then
    the log ends)."""
    assert process.stderr is not None
    seen = ""
    for line in process.stderr:
        seen += line
        if word in line:
            return seen
    raise AssertionError(f"the run ended before it could be observed:\n{seen}")


@contextmanager
def _paused(process: subprocess.Popen[str]) -> Iterator[None]:
    """Freeze ``process`` (SIGSTOP) for the block, so what the block does happens while
    the process is mid-way, however fast the machine; then let it go on (SIGCONT)."""
    process.send_signal(signal.SIGSTOP)
    try:
        yield
    finally:
        process.send_signal(signal.SIGCONT)


def _base(project: Project) -> dict[str, str]:
    project.configure(orders=orders_pipeline())
    project.write_csv("orders_0.csv", [order(i, "2023-12-31T10:00:00Z") for i in range(1, 11)])
    project.run()
    write_big_orders_csv(
        project.root / "data" / "orders_1.csv", BIG, 1_000, "2024-01-01T00:00:00+00:00"
    )
    return project.watermarks()


def test_sigkill_mid_load_leaves_target_and_watermark_untouched(project: Project) -> None:
    before = _base(project)
    process = project.spawn("--verbose", "run")
    _wait_until_staging(process)
    process.send_signal(signal.SIGSTOP)  # mid-way on any machine; SIGKILL ends it stopped
    assert process.poll() is None, "the load finished before it was killed"
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert process.returncode == -signal.SIGKILL
    assert project.count() == 10
    assert project.watermarks() == before
    result = project.run()
    assert (result["rows_inserted"], result["rows_updated"]) == (BIG, 0)
    assert project.count() == BIG + 10


def test_sigkill_mid_first_load_leaves_no_target_and_no_stage(project: Project) -> None:
    """A first load stages into the table it becomes (SQLite: ``main._pipeledger_stage``,
    PostgreSQL: a schema of the run's own): a kill leaves neither, nor any watermark."""
    project.configure(orders=orders_pipeline())
    write_big_orders_csv(
        project.root / "data" / "orders_1.csv", BIG, 1_000, "2024-01-01T00:00:00+00:00"
    )
    process = project.spawn("--verbose", "run")
    _wait_until_staging(process)
    process.send_signal(signal.SIGSTOP)
    assert process.poll() is None, "the load finished before it was killed"
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert not project.exists()
    if project.backend == "sqlite":
        tables = project.query("SELECT name FROM sqlite_master WHERE name LIKE '%stage%'")
    else:
        tables = project.query(  # the run's own schemas, \_pipeledger\_<uuid>
            "SELECT nspname FROM pg_namespace WHERE nspname LIKE '\\_pipeledger\\_%%'"
        )
    assert tables == []
    assert project.watermarks() == {}
    result = project.run()
    assert (result["rows_inserted"], result["rows_updated"]) == (BIG, 0)
    assert project.count() == BIG
    assert project.query(f"SELECT count(DISTINCT order_id) FROM {project.table()}") == [(BIG,)]


def test_state_can_be_read_from_another_process_while_a_load_runs(project: Project) -> None:
    before = _base(project)
    load = project.spawn("--verbose", "run")
    _wait_until_staging(load)
    with _paused(load):
        reader = project.spawn("state", "--json")
        out, err = reader.communicate()
        assert reader.returncode == 0, err
        assert load.poll() is None, "the load should still be running while state was read"
    assert {r["partition"] or "": r["watermark"] for r in json.loads(out)} == before
    load.communicate()
    assert load.returncode == 0
    assert project.watermarks() != before
    assert project.count() == BIG + 10


def _wait_for_statement(project: Project, process: subprocess.Popen[str], pattern: str) -> None:
    """Wait until the run of ``process`` executes a statement like ``pattern`` (its
    sessions are named after its process: ``pipeledger.warehouse.clients``), or ends."""
    while not project.query(
        "SELECT 1 FROM pg_stat_activity WHERE application_name LIKE %s "
        "AND state = 'active' AND query LIKE %s",
        [f"pipeledger {process.pid}@%", pattern],
    ):
        assert process.poll() is None, f"the run ended first:\n{process.communicate()[1]}"
        time.sleep(0.01)


def test_a_run_right_after_one_killed_in_its_merge_loads_every_row_once(
    tmp_path: Path, postgres_url: str
) -> None:
    """The killed run's session goes on with its merge (here: waiting for a row that a
    person holds locked), holding the pipeline's lock: the next run must not be skipped."""
    project = Project(tmp_path, postgres_url)
    project.configure(orders=orders_pipeline())
    project.write_csv("orders_0.csv", [order(i, "2023-12-31T10:00:00Z") for i in range(1, 11)])
    project.run()
    changed = [order(1, "2024-01-01T00:00:00Z", status="refunded")]
    project.write_csv(
        "orders_1.csv", changed + [order(i, "2024-01-01T01:00:00Z") for i in range(11, 1011)]
    )
    [retry], release = project.spawn_gated(["run", "--json"])
    with psycopg.connect(postgres_url) as person:
        person.execute("SELECT 1 FROM analytics.orders WHERE order_id = 1 FOR UPDATE")
        killed = project.spawn("run")
        _wait_for_statement(project, killed, '%INSERT INTO "analytics"."orders" AS t%')
        os.kill(killed.pid, signal.SIGKILL)
        killed.wait()
        release()  # at once, while the dead run's session still waits in its merge
        _wait_for_statement(project, retry, '%INSERT INTO "analytics"."orders" AS t%')
        person.rollback()
        out, err = retry.communicate()

    assert retry.returncode == 0, err
    [result] = json.loads(out)
    assert (result["rows_inserted"], result["rows_updated"]) == (1000, 1)
    assert project.query("SELECT count(*), count(DISTINCT order_id) FROM analytics.orders") == [
        (1010, 1010)
    ]
    runs = project.query(
        "SELECT status, error_message FROM pipeledger.pipeline_runs ORDER BY started_at"
    )
    assert [status for status, _ in runs] == ["success", "abandoned", "success"]
    assert f"its process {killed.pid} on" in runs[1][1] and "ended without finishing" in runs[1][1]


def test_of_twenty_runs_started_together_one_loads_and_the_others_are_skipped(
    tmp_path: Path, postgres_url: str
) -> None:
    """The source is a table the test holds locked: the run that gets the pipeline's lock
    waits in its source query until every other run has been turned away."""
    project = Project(tmp_path, postgres_url)
    columns = (
        "order_id bigint, qty integer, order_date date, amount numeric(12,2), status text, "
        "customer_id bigint, updated_at timestamptz"
    )
    project.execute(f"CREATE SCHEMA src; CREATE TABLE src.orders ({columns})")
    source = {"kind": "sql", "url": postgres_url, "table": "src.orders"}
    project.configure(orders=orders_pipeline(source=source))
    fill = (
        "INSERT INTO src.orders SELECT i, 1, '2024-01-01', 9.99, 'completed', i, "
        "%s::timestamptz FROM generate_series(%s::int, %s::int) i"
    )
    project.execute(fill, ["2024-01-01T00:00:00Z", 1, 10])
    project.run()
    project.execute(fill, ["2024-01-02T00:00:00Z", 11, 1010])
    with psycopg.connect(postgres_url) as source_lock:
        source_lock.execute("LOCK TABLE src.orders IN ACCESS EXCLUSIVE MODE")
        processes = project.spawn_together(*[["run", "--json"]] * 20)
        while sum(p.poll() is not None for p in processes) < 19:  # turned away, one by one
            time.sleep(0.05)
    outcomes = []
    for process in processes:
        out, err = process.communicate()
        outcomes.append((process.returncode, json.loads(out)[0], err))

    loaded = [result for code, result, _ in outcomes if code == 0]
    assert [(r["status"], r["rows_inserted"]) for r in loaded] == [("success", 1000)]
    skipped = [(code, result["status"]) for code, result, _ in outcomes if code != 0]
    odd = [err for code, _, err in outcomes if code not in (0, 4)]
    assert skipped == [(4, "skipped")] * 19, odd
    assert project.count() == 1010
    statuses = project.query(
        "SELECT status, count(*) FROM pipeledger.pipeline_runs GROUP BY status ORDER BY status"
    )
    assert statuses == [("skipped", 19), ("success", 2)]


def test_first_loads_of_two_pipelines_into_one_new_schema_both_succeed(
    tmp_path: Path, postgres_url: str
) -> None:
    """Each first load stages in a schema of its own; the target schema is made in a short
    transaction of its own, so neither waits for the other's load to end."""
    project = Project(tmp_path, postgres_url)
    rows = 150_000
    pipelines = {}
    for name in ("a", "b"):
        csv = f"data/{name}.csv"
        write_big_orders_csv(project.root / csv, rows, 1, "2024-01-01T00:00:00+00:00")
        source = {"kind": "csv", "path": csv}
        pipelines[name] = orders_pipeline(source=source, target=f"fresh.{name}")
    project.configure(pipelines=pipelines)
    processes = project.spawn_together(["run", "a"], ["run", "b"])
    for process in processes:
        _, err = process.communicate()
        assert process.returncode == 0, err
    assert project.count("fresh.a") == project.count("fresh.b") == rows


def test_first_loads_of_every_kind_into_one_new_schema_run_side_by_side(
    tmp_path: Path, postgres_url: str
) -> None:
    """SCD2 history, delete markers, a gate that quarantines and a snapshot without a
    cursor: four first loads into one schema that does not exist yet, ``--threads 4``. Each
    makes the schema in a short transaction of its own (a CREATE SCHEMA inside the long
    load transactions would race on the catalog's unique index), five fresh databases."""
    base = postgres_url.rpartition("/")[0]
    for attempt in range(5):
        name = f"{postgres_url.rpartition('/')[2]}_{attempt}"
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
        (tmp_path / str(attempt)).mkdir()
        project = Project(tmp_path / str(attempt), f"{base}/{name}")
        rows = [
            order(i, "2024-01-01T10:00:00Z", status="" if i == 3 else "new") for i in range(1, 201)
        ]
        project.write_csv("orders.csv", rows)
        project.write_csv("marked.csv", [[*r, "I"] for r in rows], [*ORDERS_HEADER, "op"])
        csv = {"kind": "csv", "path": "data/orders.csv"}
        project.configure(
            history=orders_pipeline(source=csv, target="fresh.history", history="scd2"),
            marked=orders_pipeline(
                source={"kind": "csv", "path": "data/marked.csv"},
                target="fresh.marked",
                deleted={"column": "op", "values": ["D"]},
            ),
            gated=orders_pipeline(
                source=csv,
                target="fresh.gated",
                checks={"not_null": ["status"], "on_fail": "quarantine"},
            ),
            snapshot=without_cursor(
                orders_pipeline(source=csv, target="fresh.snapshot", sync="full")
            ),
        )
        outcomes = project.run_json("run", "--threads", "4")
        assert sorted(o["status"] for o in outcomes) == ["partial", "success", "success", "success"]
        assert project.count("fresh.gated_quarantine") == 1
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


def without_cursor(pipeline: dict[str, object]) -> dict[str, object]:
    return {key: value for key, value in pipeline.items() if key != "cursor"}
