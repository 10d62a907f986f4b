"""The ledger's foreign keys (migration 4): an old ledger with orphans migrates, nothing
can break the chain pipeline -> run -> task/event/snapshot/result afterwards, and every
writer (a Python pipeline that never registered, prune) keeps the order."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from functools import partial

import pytest

from pipeledger import Ledger
from pipeledger.common.columns import TableName
from pipeledger.errors import WarehouseError
from pipeledger.ledger import store as st
from pipeledger.ledger.ledger import PipelineInfo
from pipeledger.ledger.reads import queries as q
from pipeledger.ledger.tables import (
    AUDIT,
    LEDGER,
    PIPELINES,
    QUALITY,
    RUNS,
    SNAPSHOTS,
    TASKS,
    ledger_migrations,
)
from pipeledger.warehouse.adapters import open_warehouse
from pipeledger.warehouse.migrations import Component, migrate
from pipeledger.warehouse.session import Session
from tests.ledger_fixtures import NOW, ledger, reading

THEN = datetime(2024, 1, 1, tzinfo=UTC)
# the ledger as releases before migration 4 made it, and as migration 4 left it
OLD_LEDGER = Component("ledger", lambda d: ledger_migrations(d)[:3], RUNS)
# up to migration 4 (later migrations add tables and indexes of their own)
KEYED_LEDGER = Component("ledger", lambda d: ledger_migrations(d)[:4], RUNS)


@contextmanager
def writing(url: str) -> Iterator[Session]:
    with open_warehouse(url).session() as session:
        yield session


def insert(session: Session, table: TableName, **values: object) -> None:
    d = session.dialect
    names = ", ".join(values)
    session.execute(
        f"INSERT INTO {d.table(table)} ({names}) VALUES ({d.marks(len(values))})",
        list(values.values()),
    )


def run_row(run_id: str, pipeline: str) -> dict[str, object]:
    return {
        "run_id": run_id, "logical_run_id": run_id, "attempt": 1, "pipeline": pipeline,
        "trigger_type": "manual", "status": "success", "started_at": THEN,
    }  # fmt: skip


def children(session: Session, table: TableName, run_id: str | None, key: str) -> None:
    """One record of ``table`` for ``run_id`` (keyed by ``key``)."""
    values: dict[str, object] = {"run_id": run_id, "created_at": THEN}
    if table == TASKS:
        values = {"task_run_id": key, "run_id": run_id, "name": "load", "seq": 1,
                  "status": "success", "started_at": THEN}  # fmt: skip
    elif table == AUDIT:
        values |= {"event_id": key, "event_type": "RECORD_INSERTED"}
    elif table == SNAPSHOTS:
        values |= {"target_table": key, "row_count": 1, "schema_fingerprint": "f", "columns": "[]"}
    else:
        values |= {"result_id": key, "pipeline": "orders", "check_name": "c", "kind": "range",
                   "level": "fail", "status": "pass"}  # fmt: skip
    insert(session, table, **values)


def count(session: Session, table: TableName, where: str = "1 = 1") -> int:
    return int(
        session.query(f"SELECT count(*) FROM {session.dialect.table(table)} WHERE {where}")[0][0]
    )


RECORDS = (TASKS, AUDIT, SNAPSHOTS, QUALITY)


def test_an_old_ledger_with_orphans_migrates_and_then_refuses_them(warehouse_url: str) -> None:
    with writing(warehouse_url) as session:
        migrate(session, OLD_LEDGER)
        insert(session, PIPELINES, name="orders", version="v1", created_at=THEN, updated_at=THEN)
        insert(session, RUNS, **run_row("kept", "orders"))
        insert(session, RUNS, **run_row("legacy-run", "legacy"))  # its pipeline never registered
        for table in RECORDS:
            children(session, table, "kept", f"of-kept-{table.table}")
            children(session, table, "pruned", f"orphan-{table.table}")  # its run is gone
        children(session, AUDIT, None, "about-no-run")

    with writing(warehouse_url) as session:
        assert migrate(session, LEDGER) == [4, 5, 6, 7, 8, 9, 11, 12, 13, 14, 15, 16, 17]

    with reading(warehouse_url) as session:
        registry = session.query(
            f"SELECT name, version FROM {session.dialect.table(PIPELINES)} ORDER BY name"
        )
        assert [tuple(r) for r in registry] == [("legacy", "unregistered"), ("orders", "v1")]
        for table in RECORDS:
            assert count(session, table, "run_id = 'kept'") == 1, table
            assert count(session, table, "run_id = 'pruned'") == 0, table
        assert count(session, AUDIT, "run_id IS NULL") == 1  # an event about no run stays
        assert count(session, RUNS) == 2
        assert q.show_run(session, "kept") is not None  # the rebuilt tables answer as before

    violations: list[Callable[[Session], object]] = [
        lambda s: insert(s, RUNS, **run_row("stray", "nowhere")),
        *(partial(children, table=table, run_id="nowhere", key="stray") for table in RECORDS),
        lambda s: s.execute(f"DELETE FROM {s.dialect.table(RUNS)} WHERE run_id = 'kept'"),
        lambda s: s.execute(f"DELETE FROM {s.dialect.table(PIPELINES)} WHERE name = 'legacy'"),
    ]
    for violate in violations:
        with pytest.raises(WarehouseError, match=r"(?i)foreign key"), writing(warehouse_url) as s:
            violate(s)


def test_the_rebuilt_tables_keep_their_indexes(warehouse_url: str) -> None:
    with writing(warehouse_url) as session:
        migrate(session, OLD_LEDGER)
        before = _indexes(session)
        migrate(session, KEYED_LEDGER)
        assert _indexes(session) == before
        assert "task_runs_started" in before and "quality_results_pipeline" in before


def _indexes(session: Session) -> set[str]:
    if session.dialect.has_schemas:
        rows = session.query("SELECT indexname FROM pg_indexes WHERE schemaname = 'pipeledger'")
    else:
        rows = session.query("SELECT name FROM sqlite_master WHERE type = 'index'")
    return {str(r[0]) for r in rows}


def test_a_pipeline_that_never_registered_is_added_to_the_registry(warehouse_url: str) -> None:
    ledger_ = Ledger(warehouse_url)
    with ledger_.run("hand_made") as run, run.task("extract") as task:
        task.rows_out = 3
    with reading(warehouse_url) as session:
        d = session.dialect
        rows = session.query(f"SELECT version FROM {d.table(PIPELINES)} WHERE name = 'hand_made'")
        assert rows == [("unregistered",)]
        assert count(session, TASKS, f"run_id = '{run.run_id}'") == 1
    ledger_.register(PipelineInfo(name="hand_made", config_text="{}", owner="data team"))
    with reading(warehouse_url) as session:
        d = session.dialect
        rows = session.query(
            f"SELECT version, owner FROM {d.table(PIPELINES)} WHERE name = 'hand_made'"
        )
        assert rows[0][0] != "unregistered" and rows[0][1] == "data team"


def test_prune_deletes_a_runs_records_before_the_run(warehouse_url: str) -> None:
    with ledger(warehouse_url) as b:
        old = b.run("orders", NOW - timedelta(days=200), status="failed")
        b.task(old, "load", 1)
        b.snapshot(old, "t", 10)
        st.apply(b.session, st.Op("quality", {
            "result_id": "r1", "run_id": old.run_id, "pipeline": "orders", "check_name": "c",
            "kind": "range", "level": "fail", "status": "fail", "created_at": old.started_at,
        }))  # fmt: skip
        b.run("orders", NOW - timedelta(days=1))
    with ledger(warehouse_url) as b:
        result = q.prune(b.session, timedelta(days=90), NOW)
    assert (result.pipeline_runs, result.task_runs, result.dataset_snapshots) == (1, 1, 1)
    assert result.quality_results == 1


def test_prune_keeps_the_run_last_successful_run_reads(warehouse_url: str) -> None:
    """A backfill after the last incremental run does not make that run prunable."""
    frontier_end = datetime(2024, 1, 5, tzinfo=UTC)
    with ledger(warehouse_url) as b:
        b.run(
            "orders", NOW - timedelta(days=300), data_interval_end=datetime(2024, 1, 1, tzinfo=UTC)
        )
        frontier = b.run("orders", NOW - timedelta(days=200), data_interval_end=frontier_end)
        backfill = b.run("orders", NOW - timedelta(days=150), trigger="backfill",
                         data_interval_end=datetime(2023, 6, 1, tzinfo=UTC))  # fmt: skip
    with ledger(warehouse_url) as b:
        assert q.prune(b.session, timedelta(days=90), NOW).pipeline_runs == 1
    with reading(warehouse_url) as session:
        left = {r.run_id for r in q.list_runs(session, limit=10)}
        assert left == {frontier.run_id, backfill.run_id}
        assert q.last_success(session, "orders") == frontier_end
