"""A separate ledger that goes away in the middle of a run: what the run says, where its
record goes, and how the ledger catches up from the warehouse afterwards.

The ledger is a database of its own on the test server, made unreachable while the run
stages (``ALLOW_CONNECTIONS false`` and its sessions ended): the run opened in the ledger,
and cannot record its end there."""

from __future__ import annotations

import json
import resource
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.helpers import Project, order, orders_pipeline, write_big_orders_csv
from tests.runs.test_crash_and_concurrency import _paused, _wait_until_staging

BIG = 200_000  # rows: a run still stages when the ledger goes


@dataclass
class LedgerDatabase:
    server: str  # the server's URL (a superuser's)
    name: str

    @property
    def url(self) -> str:
        return self.server.rsplit("/", 1)[0] + f"/{self.name}"

    def cut(self) -> None:
        """No one can connect any more, and every open session ends."""
        with psycopg.connect(self.server, autocommit=True) as conn:
            conn.execute(f'ALTER DATABASE "{self.name}" ALLOW_CONNECTIONS false')
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                [self.name],
            )

    def restore(self) -> None:
        with psycopg.connect(self.server, autocommit=True) as conn:
            conn.execute(f'ALTER DATABASE "{self.name}" ALLOW_CONNECTIONS true')

    def query(self, sql: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.url) as conn:
            return list(conn.execute(sql, params).fetchall())

    def run(self, run_id: str) -> tuple[Any, ...]:
        rows = self.query(
            "SELECT status, rows_read, rows_inserted, error_code FROM pipeledger.pipeline_runs "
            "WHERE run_id = %s",
            [run_id],
        )
        assert len(rows) == 1, rows
        return rows[0]


@pytest.fixture
def ledger_database(postgres_server: str) -> Iterator[LedgerDatabase]:
    database = LedgerDatabase(postgres_server, f"l_{uuid.uuid4().hex[:16]}")
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{database.name}"')
    yield database
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{database.name}" WITH (FORCE)')


def _project(
    tmp_path: Path, postgres_url: str, ledger: LedgerDatabase, mode: str, **pipeline: Any
) -> Project:
    project = Project(tmp_path, postgres_url)
    project.configure(
        orders=orders_pipeline(**pipeline),
        raw=f'\n[ledger]\nurl = "{ledger.url}"\non_unavailable = "{mode}"\n'
        'lease = "2s"\nheartbeat = "200ms"\n',
    )
    project.write_csv("orders_0.csv", [order(i, "2023-12-31T10:00:00Z") for i in range(1, 11)])
    project.run()
    write_big_orders_csv(
        project.root / "data" / "orders_1.csv", BIG, 1_000, "2024-01-01T00:00:00+00:00"
    )
    return project


def _file_size_limit(size: int) -> Callable[[], None]:
    """For a child process: files may not grow past ``size`` bytes (as on a full disk, a
    write past it fails; Python ignores SIGXFSZ)."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))

    return limit


def _run_losing_the_ledger(
    project: Project, ledger: LedgerDatabase, **options: Any
) -> tuple[int, dict[str, Any], str]:
    process = project.spawn("--verbose", "run", "--json", **options)
    _wait_until_staging(process)
    with _paused(process):  # the ledger goes while the run is mid-way, on any machine
        ledger.cut()
    out, err = process.communicate()
    [result] = json.loads(out)
    return process.returncode, result, err


@pytest.mark.slow
def test_ledger_lost_before_the_final_record_exits_5_and_the_watchdog_records_the_run(
    tmp_path: Path, postgres_url: str, ledger_database: LedgerDatabase
) -> None:
    project = _project(tmp_path, postgres_url, ledger_database, "fail")
    code, result, err = _run_losing_the_ledger(project, ledger_database)

    assert code == 5, err
    assert (result["status"], result["rows_inserted"]) == ("success", BIG)
    said = result["ledger_error"]
    assert "could not be written to the ledger" in said
    assert "its rows and watermark are committed" in said and "`pipeledger watchdog`" in said
    assert project.count() == BIG + 10
    assert project.watermarks() == {"": result["watermark_after"]}

    ledger_database.restore()
    assert ledger_database.run(result["run_id"])[0] == "running"
    code, out, _ = project.cli("watchdog", "--json")
    assert code == 0 and json.loads(out)["settled"] == {result["run_id"]: "success"}
    assert ledger_database.run(result["run_id"]) == ("success", BIG + 10, BIG, None)
    tasks = ledger_database.query(
        "SELECT name, status FROM pipeledger.task_runs WHERE run_id = %s ORDER BY seq",
        [result["run_id"]],
    )
    assert tasks == [("extract", "success"), ("transform", "success"), ("load", "success")]


@pytest.mark.slow
def test_disk_full_while_spooling_leaves_no_torn_line_and_the_next_run_records_the_run(
    tmp_path: Path, postgres_url: str, ledger_database: LedgerDatabase
) -> None:
    project = _project(tmp_path, postgres_url, ledger_database, "spool")
    spool = project.root / ".pipeledger" / "ledger-spool.jsonl"
    code, result, err = _run_losing_the_ledger(
        project, ledger_database, preexec_fn=_file_size_limit(512)
    )

    assert code == 5, err
    assert (result["status"], result["rows_inserted"]) == ("success", BIG)
    assert "so nothing was spooled" in result["ledger_error"]
    assert "File too large" in result["ledger_error"]
    assert "spooled to" not in err  # a record is said to be spooled only once it is
    assert not spool.exists()  # the part that fitted was cut back, the empty file removed
    assert project.count() == BIG + 10

    ledger_database.restore()
    after = project.run()  # its opening settles the run from the warehouse's commit log
    assert ledger_database.run(result["run_id"]) == ("success", BIG + 10, BIG, None)
    assert ledger_database.run(after["run_id"])[0] == "success"
    assert not spool.with_suffix(".rejected").exists()


@pytest.mark.slow
def test_a_spooled_failure_is_replayed_before_the_watchdog_judges_the_run(
    tmp_path: Path, postgres_url: str, ledger_database: LedgerDatabase
) -> None:
    project = _project(tmp_path, postgres_url, ledger_database, "spool",
                       checks={"not_null": ["status"]})  # fmt: skip
    # the last file's row without a status halts the run at its gate, after everything
    # staged and after the ledger is gone
    project.write_csv("orders_2.csv", [order(BIG + 1, "2024-01-02T00:00:00Z", status="")])
    process = project.spawn("--verbose", "run")
    _wait_until_staging(process)
    with _paused(process):
        ledger_database.cut()
    _, err = process.communicate()
    assert process.returncode == 3 and "status" in err, err
    spool = project.root / ".pipeledger" / "ledger-spool.jsonl"
    [failed] = [json.loads(line)["data"] for line in spool.read_text().splitlines()[:1]]
    assert failed["status"] == "failed"

    ledger_database.restore()
    code, out, _ = project.cli("watchdog", "--json")
    assert code == 0 and json.loads(out)["settled"] == {}  # the spool told it what happened
    status, _, _, error_code = ledger_database.run(failed["run_id"])
    assert (status, error_code) == ("failed", "GateFailed")
    late = ledger_database.query(
        "SELECT count(*) FROM pipeledger.audit_events WHERE event_type = 'LATE_COMPLETION'"
    )
    assert late == [(0,)] and not spool.exists()
    assert project.count() == 10


def test_a_warehouse_unreachable_from_the_start_is_recorded_in_a_ledger_of_its_own(
    tmp_path: Path, ledger_database: LedgerDatabase
) -> None:
    project = Project(tmp_path, "postgresql://postgres@127.0.0.1:1/warehouse")  # nothing there
    project.configure(orders=orders_pipeline(), raw=f'\n[ledger]\nurl = "{ledger_database.url}"\n')
    project.write_csv("orders_1.csv", [order(1, "2024-01-01T10:00:00Z")])
    code, _, err = project.cli("run")
    assert code == 75 and err.startswith("error: PostgreSQL connect to")
    assert "pipeline orders: the run could not start; nothing was read or written" in err
    [(status, code_text, message)] = ledger_database.query(
        "SELECT status, error_code, error_message FROM pipeledger.pipeline_runs"
    )
    assert (status, code_text) == ("failed", "TransientWarehouseError")
    assert "Connection refused" in message
