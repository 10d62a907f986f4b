"""``observe_statements``: every statement a session runs is reported with its kind, its text
and its time, on both backends; staging's time leaves out producing the batches."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pyarrow as pa
import pytest

from pipeledger.common.columns import Column
from pipeledger.errors import WarehouseError
from pipeledger.warehouse.adapters import open_warehouse
from pipeledger.warehouse.session import StatementKind, observe_statements
from pipeledger.warehouse.stage import create_stage

Seen = list[tuple[StatementKind, str, float]]
COLUMNS = (Column("id", "bigint"), Column("note", "text"))
SLOW_BATCH_S = 0.3


def batches(count: int, pause: float = 0.0) -> Iterator[pa.RecordBatch]:
    """``count`` batches of two rows, each ``pause`` seconds in the making."""
    for n in range(count):
        time.sleep(pause)
        yield pa.record_batch({"id": [2 * n, 2 * n + 1], "note": ["a", None]})


def test_each_statement_is_reported_with_its_kind_text_and_time(warehouse_url: str) -> None:
    warehouse = open_warehouse(warehouse_url)
    seen: Seen = []
    with (
        observe_statements(lambda kind, sql, s: seen.append((kind, sql, s))),
        warehouse.session() as session,
    ):
        session.execute(create_stage(session.dialect, COLUMNS))
        session.stage(batches(2))
        rows = session.query("SELECT count(*) FROM _pipeledger_stage")
        ids = session.fetch_int64("SELECT id FROM _pipeledger_stage")
    assert rows == [(4,)] and sorted(ids.tolist()) == [0, 1, 2, 3]
    kinds = [kind for kind, _, _ in seen]
    staged = kinds.count("stage")
    # PostgreSQL stages with one COPY, SQLite with one INSERT per batch
    assert staged == (1 if session.dialect.name == "postgres" else 2)
    assert kinds == ["execute", *["stage"] * staged, "query", "fetch"]
    assert seen[0][1].startswith("CREATE TEMP TABLE")
    assert all("_pipeledger_stage" in sql for _, sql, _ in seen)
    assert seen[-2][1] == "SELECT count(*) FROM _pipeledger_stage"
    assert all(seconds >= 0 for _, _, seconds in seen)


def test_staging_time_leaves_out_producing_the_batches(warehouse_url: str) -> None:
    seen: Seen = []
    with (
        observe_statements(lambda kind, sql, s: seen.append((kind, sql, s))),
        open_warehouse(warehouse_url).session() as session,
    ):
        session.execute(create_stage(session.dialect, COLUMNS))
        began = time.perf_counter()
        session.stage(batches(3, pause=SLOW_BATCH_S))
        took = time.perf_counter() - began
    staging = sum(seconds for kind, _, seconds in seen if kind == "stage")
    assert took >= 3 * SLOW_BATCH_S
    assert 0 < staging < SLOW_BATCH_S


def test_a_failed_statement_is_reported_and_nothing_after_the_block(warehouse_url: str) -> None:
    warehouse = open_warehouse(warehouse_url)
    seen: Seen = []
    with (
        observe_statements(lambda kind, sql, s: seen.append((kind, sql, s))),
        pytest.raises(WarehouseError),
        warehouse.session() as session,
    ):
        session.execute("SELECT * FROM no_such_table")
    with warehouse.session() as session:
        session.query("SELECT 1")
    assert [(kind, sql) for kind, sql, _ in seen] == [("execute", "SELECT * FROM no_such_table")]


def test_observers_nest(warehouse_url: str) -> None:
    warehouse = open_warehouse(warehouse_url)
    outer: list[str] = []
    inner: list[str] = []
    with warehouse.session() as session:
        with observe_statements(lambda kind, sql, s: outer.append(sql)):
            session.query("SELECT 1")
            with observe_statements(lambda kind, sql, s: inner.append(sql)):
                session.query("SELECT 2")
            session.query("SELECT 3")
        session.query("SELECT 4")
    assert outer == ["SELECT 1", "SELECT 2", "SELECT 3"]
    assert inner == ["SELECT 2"]
