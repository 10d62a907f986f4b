"""The warehouse server goes away in the middle of a run, or exactly at its COMMIT: what the
run says, and how the ledger learns what really happened. Each test has a server of its
own, which it stops (the suite's shared server must stay up)."""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from pipeledger.testing.postgres import ThrowawayPostgres
from tests.helpers import Project, order, orders_pipeline
from tests.runs.test_crash_and_concurrency import _base, _paused, _wait_for_statement

pytestmark = pytest.mark.slow  # servers of their own, stopped mid-run


def _database(server: ThrowawayPostgres) -> str:
    name = f"w_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(server.url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return server.url.rsplit("/", 1)[0] + f"/{name}"


@pytest.fixture(scope="module")
def stoppable_server() -> Iterator[ThrowawayPostgres]:
    with ThrowawayPostgres() as server:
        yield server


def test_a_warehouse_outage_reports_the_loads_error_then_what_it_left(
    tmp_path: Path, stoppable_server: ThrowawayPostgres
) -> None:
    project = Project(tmp_path, _database(stoppable_server))
    before = _base(project)
    process = project.spawn("run")
    _wait_for_statement(project, process, "COPY%")
    with _paused(process):  # the server goes while the COPY is mid-way, on any machine
        stoppable_server.pause()
    try:
        _, err = process.communicate()
    finally:
        stoppable_server.resume()

    assert process.returncode == 75  # transient: the same run may succeed later
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines[0].startswith("error: PostgreSQL COPY into staging failed"), err
    stays = f"nothing was written; the watermark stays at {before['']}"
    said = [i for i, line in enumerate(lines) if stays in line]
    could_not = [i for i, line in enumerate(lines) if "could not record this failure" in line]
    assert said and could_not and said[0] < could_not[0], err
    assert not any(line.startswith("unexpected") for line in lines) and "Traceback" not in err
    assert project.count() == 10 and project.watermarks() == before


@pytest.fixture(scope="module")
def waiting_server() -> Iterator[ThrowawayPostgres]:
    """A server whose COMMITs wait for a standby that never comes, in a database that sets
    ``synchronous_commit = on``: a run's COMMIT is then on its way (committed locally, not
    yet acknowledged) for as long as the test likes."""
    settings = {
        "wal_level": "replica",
        "max_wal_senders": "2",
        "synchronous_standby_names": "'no_such_standby'",
        "synchronous_commit": "off",
    }
    with ThrowawayPostgres(settings=settings) as server:
        yield server


def test_a_connection_lost_during_commit_is_unknown_until_the_watchdog_settles_it(
    tmp_path: Path, waiting_server: ThrowawayPostgres
) -> None:
    warehouse, ledger = _database(waiting_server), _database(waiting_server)
    project = Project(tmp_path, warehouse)
    project.configure(orders=orders_pipeline(), raw=f'\n[ledger]\nurl = "{ledger}"\n')
    project.write_csv("orders_1.csv", [order(i, "2024-01-01T10:00:00Z") for i in range(1, 11)])
    project.run()
    project.write_csv("orders_2.csv", [order(i, "2024-01-02T10:00:00Z") for i in range(11, 31)])
    name = warehouse.rsplit("/", 1)[1]
    with psycopg.connect(waiting_server.url, autocommit=True) as admin:  # never waits itself
        admin.execute(f'ALTER DATABASE "{name}" SET synchronous_commit = on')
        process = project.spawn("run", "--json")
        backend = _waiting_in_commit(project, process)
        admin.execute("SELECT pg_terminate_backend(%s)", [backend])
        out, err = process.communicate()
        admin.execute(f'ALTER DATABASE "{name}" RESET synchronous_commit')

    assert process.returncode == 6, err
    [unknown] = json.loads(out)
    assert (unknown["status"], unknown["exit_code"]) == ("unknown", 6)
    assert "the connection was lost during COMMIT" in unknown["error"]
    said = "the outcome is unknown; the next run or `pipeledger watchdog` settles it"
    assert said in unknown["error"] and "nothing was written" not in unknown["error"]
    with psycopg.connect(ledger) as conn:
        status = "SELECT status, rows_inserted FROM pipeledger.pipeline_runs WHERE run_id = %s"
        assert conn.execute(status, [unknown["run_id"]]).fetchall() == [("running", None)]
        assert project.count() == 30  # it did commit: the server finished what it had begun
        code, out, _ = project.cli("watchdog", "--json")
        assert code == 0 and json.loads(out)["settled"] == {unknown["run_id"]: "success"}
        assert conn.execute(status, [unknown["run_id"]]).fetchall() == [("success", 20)]


def _waiting_in_commit(project: Project, process: subprocess.Popen[str]) -> int:
    """The backend of ``process``'s run once it waits in COMMIT for the standby."""
    while not (
        rows := project.query(
            "SELECT pid FROM pg_stat_activity WHERE application_name LIKE %s "
            "AND wait_event = 'SyncRep'",
            [f"pipeledger {process.pid}@%"],
        )
    ):
        assert process.poll() is None, f"the run ended first:\n{process.communicate()[1]}"
        time.sleep(0.02)
    return int(rows[0][0])
