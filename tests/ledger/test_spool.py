"""A ledger of its own, on either backend, and a spool with a corrupt line (a crash
mid-write, a hand edit): the run goes on, a warning names the line, the other records
replay, and the line is kept aside."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from pipeledger.ledger import store as st
from pipeledger.ledger.tables import RUNS, TASKS
from pipeledger.ledger.vocabulary import RunRecord, RunStatus, TaskRecord, TaskStatus, TriggerType
from pipeledger.warehouse.adapters import open_warehouse
from tests.helpers import Project, order, orders_pipeline


@pytest.fixture
def ledger_url(
    backend: str, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[str]:
    """A ledger database of its own, on the test's backend."""
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path_factory.mktemp('ledger') / 'ledger.db'}"
        return
    server = str(request.getfixturevalue("postgres_server"))
    name = f"l_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield server.rsplit("/", 1)[0] + f"/{name}"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def spooled_records() -> list[str]:
    """A Python pipeline's run and its task, as a spool keeps them."""
    start = datetime.now(UTC) - timedelta(hours=1)
    run = RunRecord(
        run_id="spooled-run",
        logical_run_id="spooled-run",
        attempt=1,
        pipeline="python_job",
        trigger_type=TriggerType.MANUAL,
        status=RunStatus.SUCCESS,
        started_at=start,
        ended_at=start + timedelta(minutes=1),
        rows_inserted=5,
    )
    task = TaskRecord(
        task_run_id="spooled-task",
        run_id="spooled-run",
        name="extract",
        seq=1,
        started_at=start,
        status=TaskStatus.SUCCESS,
        rows_out=5,
    )
    return [st.run_op(run).to_json(), st.task_op(task).to_json()]


def test_a_corrupt_spool_line_is_set_aside_and_the_rest_replays(
    project: Project, ledger_url: str
) -> None:
    project.configure(orders=orders_pipeline(), raw=f'\n[ledger]\nurl = "{ledger_url}"\n')
    project.write_csv("orders_0.csv", [order(i, "2024-01-01T10:00:00Z") for i in range(1, 4)])
    spool = project.root / ".pipeledger" / "ledger-spool.jsonl"
    spool.parent.mkdir(exist_ok=True)
    run, task = spooled_records()
    torn = '{"kind": "run", "data": {"run_id": "torn-'
    spool.write_text(f"{run}\n{torn}\n{task}\n")

    process = project.spawn("run", "--json")
    out, err = process.communicate()
    assert process.returncode == 0, err
    (result,) = json.loads(out)
    assert result["rows_inserted"] == 3  # the run went on
    assert f"ledger spool {spool} line 2 is not a whole record" in err
    assert spool.with_suffix(".rejected").read_text() == torn + "\n"
    assert not spool.exists()  # everything else replayed
    with open_warehouse(ledger_url).session(write=False) as session:
        d = session.dialect
        runs = session.query(
            f"SELECT run_id, status, rows_inserted FROM {d.table(RUNS)} ORDER BY started_at"
        )
        tasks = session.query(
            f"SELECT task_run_id FROM {d.table(TASKS)} WHERE run_id = 'spooled-run'"
        )
    assert [tuple(r) for r in runs] == [
        ("spooled-run", "success", 5),
        (result["run_id"], "success", 3),
    ]
    assert [tuple(t) for t in tasks] == [("spooled-task",)]
