"""A ledger of its own that hangs instead of failing is treated like one that is down: its
statements and its connections have a bounded wait, and the run's records are spooled."""

from __future__ import annotations

import json
import socket
import time

import psycopg
import pytest

from tests.helpers import Project, order, orders_pipeline
from tests.ledger.test_outages import LedgerDatabase, ledger_database  # noqa: F401  (fixture)

pytestmark = pytest.mark.slow  # ledgers that hang until their timeouts

RUNS = "pipeledger.pipeline_runs"


def _configure(project: Project, ledger_url: str) -> None:
    project.configure(
        orders=orders_pipeline(),
        raw=f'\n[ledger]\nurl = "{ledger_url}"\nwrite_timeout = "1s"\n'
        'lease = "5s"\nheartbeat = "200ms"\n',
    )


def test_a_ledger_whose_tables_are_locked_is_spooled_and_caught_up(
    project: Project,
    ledger_database: LedgerDatabase,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:
    _configure(project, ledger_database.url)
    project.write_csv("orders_0.csv", [order(1, "2024-01-01T10:00:00Z")])
    project.run()
    project.write_csv("orders_1.csv", [order(2, "2024-01-02T10:00:00Z")])
    with psycopg.connect(ledger_database.url) as holder:
        holder.execute(f"LOCK TABLE {RUNS} IN ACCESS EXCLUSIVE MODE")
        began = time.monotonic()
        code, out, err = project.cli("run", "--json")
        took = time.monotonic() - began
    assert code == 0, err
    (result,) = json.loads(out)
    assert result["status"] == "success" and result["rows_inserted"] == 1
    assert "spooled" in caplog.text and took < 20
    assert project.count() == 2
    project.run()  # the ledger answers again: the spool is replayed first
    statuses = ledger_database.query(f"SELECT status FROM {RUNS} ORDER BY started_at")
    assert [s for (s,) in statuses] == ["success"] * 3


def test_a_ledger_server_that_never_answers_is_spooled(
    project: Project, caplog: pytest.LogCaptureFixture
) -> None:
    with socket.socket() as silent:  # accepts connections, never says a word
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        _configure(project, f"postgresql://nobody@127.0.0.1:{port}/ledger?connect_timeout=1")
        project.write_csv("orders_0.csv", [order(1, "2024-01-01T10:00:00Z")])
        began = time.monotonic()
        code, out, err = project.cli("run", "--json")
        took = time.monotonic() - began
    assert code == 0, err
    assert json.loads(out)[0]["rows_inserted"] == 1
    assert "spooled" in caplog.text and took < 30
    spool = project.root / ".pipeledger" / "ledger-spool.jsonl"
    ops = [json.loads(line) for line in spool.read_text().splitlines()]
    assert [op["data"]["status"] for op in ops if op["kind"] == "run"] == ["running", "success"]
