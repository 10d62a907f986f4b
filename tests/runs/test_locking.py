"""One active run per pipeline: a second run is skipped at once (exit 4) and writes nothing."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import time
import zlib
from pathlib import Path

import psycopg
import pytest

from tests.helpers import Project, order, orders_pipeline


def test_postgres_second_run_of_a_pipeline_is_refused(tmp_path: Path, postgres_url: str) -> None:
    project = Project(tmp_path, postgres_url)
    project.configure(orders=orders_pipeline())
    project.write_csv("orders_1.csv", [order(1, "2024-01-01T10:00:00Z")])
    with psycopg.connect(postgres_url) as holder:  # what an active run holds
        holder.execute("SELECT pg_advisory_xact_lock(%s)", [zlib.crc32(b"pipeledger:orders")])
        code, _, err = project.cli("run")
        json_code, out, _ = project.cli("run", "--json")
    assert code == 4 and json_code == 4
    assert "another run holds its lock" in err and "nothing was written" in err
    [skipped] = json.loads(out)
    assert (skipped["status"], skipped["reason"], skipped["exit_code"]) == ("skipped", "locked", 4)
    assert not project.exists()
    assert project.run()["rows_inserted"] == 1


@pytest.mark.slow
def test_sqlite_second_writer_waits_then_fails_cleanly(tmp_path: Path) -> None:
    project = Project(tmp_path, None)
    project.configure(orders=orders_pipeline())
    project.write_csv("orders_1.csv", [order(1, "2024-01-01T10:00:00Z")])
    project.run()
    holder = sqlite3.connect(tmp_path / ".pipeledger" / "warehouse.db", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        code, _, err = project.cli("run")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert code == 4 and "another load is writing" in err


def test_a_skipped_run_names_the_watermark_that_stays(tmp_path: Path, postgres_url: str) -> None:
    project = Project(tmp_path, postgres_url)
    project.configure(orders=orders_pipeline())
    project.write_csv("orders_1.csv", [order(1, "2024-01-01T10:00:00Z")])
    watermark = project.run()["watermark_after"]
    project.write_csv("orders_2.csv", [order(2, "2024-01-02T10:00:00Z")])
    with psycopg.connect(postgres_url) as holder:  # what an active run holds
        holder.execute("SELECT pg_advisory_xact_lock(%s)", [zlib.crc32(b"pipeledger:orders")])
        code, _, err = project.cli("run")
        json_code, out, _ = project.cli("run", "--json")
    stays = f"nothing was written; the watermark stays at {watermark}"
    assert code == json_code == 4
    assert err.startswith("skipped: pipeline orders: another run holds its lock") and stays in err
    [skipped] = json.loads(out)
    assert skipped["status"] == "skipped" and stays in skipped["error"]
    recorded = project.query(
        "SELECT status, error_message FROM pipeledger.pipeline_runs ORDER BY started_at"
    )
    assert [status for status, _ in recorded] == ["success", "skipped", "skipped"]
    assert all(stays in message for _, message in recorded[1:])
    assert project.watermarks() == {"": watermark}


def _dead_pid() -> int:
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


def test_a_lock_held_by_the_session_of_a_dead_process_is_taken_over(
    tmp_path: Path, postgres_url: str
) -> None:
    """A session named after a pipeledger process of this host that no longer exists (its
    client was killed while the server still ran its statement) is ended, and the run
    goes on; one named after a live process skips the run at once."""
    project = Project(tmp_path, postgres_url)
    project.configure(orders=orders_pipeline())
    project.write_csv("orders_1.csv", [order(1, "2024-01-01T10:00:00Z")])
    key = zlib.crc32(b"pipeledger:orders")
    here = socket.gethostname()
    with psycopg.connect(
        postgres_url, application_name=f"pipeledger {os.getpid()}@{here} x"
    ) as live:
        live.execute("SELECT pg_advisory_xact_lock(%s)", [key])
        started = time.monotonic()
        code, _, err = project.cli("run")
        assert code == 4 and time.monotonic() - started < 10, err
        assert f"(process {os.getpid()} on {here}" in err  # who holds it
    name = f"pipeledger {_dead_pid()}@{here} orders run 0b5e"
    with psycopg.connect(postgres_url, application_name=name) as dead:
        dead.execute("SELECT pg_advisory_xact_lock(%s)", [key])
        assert project.run()["rows_inserted"] == 1
        with pytest.raises(psycopg.OperationalError):  # its session was ended
            dead.execute("SELECT 1")
