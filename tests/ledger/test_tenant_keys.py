"""Pipeline names per tenant: from ledger migration 16 every primary key, unique constraint
and foreign key leads with the tenant, so two tenants of one ledger may each have a
pipeline ``orders``, with its runs, DAG edges, rollups and alerts; a ledger with history
moves to the new keys with nothing lost.

The PostgreSQL tests that read as a tenant connect as an ordinary login role (the suite's
superuser would bypass every policy); see tests/ledger/test_tenants.py."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from pipeledger.alerts.events import Event
from pipeledger.alerts.outbox import record
from pipeledger.errors import WarehouseError
from pipeledger.ledger import sql as lsql
from pipeledger.ledger.tables import (
    ALERTS,
    DAYS,
    DEPENDENCIES,
    LEDGER,
    PIPELINES,
    RUNS,
    TASK_DAYS,
    TENANT_TABLES,
    ledger_migrations,
)
from pipeledger.warehouse.adapters import open_warehouse
from pipeledger.warehouse.migrations import MIGRATIONS, Component, migrate
from pipeledger.warehouse.session import Session
from tests.helpers import Project, orders_pipeline
from tests.ledger.test_rollup import mixed_runs
from tests.ledger.test_tenants import as_role, roles, tenant_project
from tests.ledger_fixtures import NOW, LedgerBuilder, as_earlier

__all__ = ["roles"]  # the fixture, imported for these tests

# the ledger as the release before tenant keys left it (migrations 1 to 15)
BEFORE_KEYS = Component("ledger", lambda d: [m for m in ledger_migrations(d) if m[0] < 16], RUNS)


def alert(pipeline: str) -> Event:
    return Event(
        kind="failed",
        pipeline=pipeline,
        subject="run-1",
        reason="it failed",
        occurred_at=NOW,
    )


def add_edge_and_alert(url: str, tenant: str) -> None:
    """The DAG edge customers -> orders and a failure alert of key failed:orders:run-1,
    as ``tenant`` writes them."""
    with open_warehouse(url, tenant=tenant).session() as session:
        LedgerBuilder(session).depends("orders", "customers")
        assert record(session, alert("orders"), ["ops"], NOW) == 1


def both_tenants_own_orders(tmp_path: Path, url: str | None, a: str, b: str) -> list[Project]:
    """Two projects on one ledger, each a tenant's, each with a pipeline ``orders`` that
    runs twice (a load, then nothing new)."""
    projects = [tenant_project(tmp_path / t, url, t, "orders") for t in (a, b)]
    for project in projects:
        for _ in range(2):
            assert project.run("orders")["status"] == "success"
    return projects


def seen_by(project: Project) -> list[str]:
    return sorted(row["pipeline"] for row in project.run_json("runs"))


def test_on_sqlite_two_tenants_each_have_a_pipeline_called_orders(tmp_path: Path) -> None:
    first, second = both_tenants_own_orders(tmp_path, None, "a", "b")
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    for tenant in ("a", "b"):
        add_edge_and_alert(url, tenant)
    assert seen_by(first) == ["orders", "orders"] and seen_by(second) == ["orders", "orders"]
    with open_warehouse(url).session(write=False) as raw:  # 'default': sees no rows
        assert raw.query(f'SELECT count(*) FROM "{PIPELINES.schema}.{PIPELINES.table}"') == [(0,)]
    every = every_tenants_rows(url)
    assert every[PIPELINES.table] == [("a", "orders"), ("b", "orders")]
    assert every[DEPENDENCIES.table] == [("a", "customers", "orders"), ("b", "customers", "orders")]
    assert every[ALERTS.table] == [("a", "failed:orders:run-1"), ("b", "failed:orders:run-1")]
    assert every[RUNS.table] == [("a", "orders", 2), ("b", "orders", 2)]
    for tenant in ("a", "b"):
        with open_warehouse(url, tenant=tenant).session(write=False) as session:
            assert session.query(
                f'SELECT tenant, upstream FROM "pipeledger.{DEPENDENCIES.table}"'
            ) == [(tenant, "customers")]
            assert session.query(f'SELECT tenant FROM "pipeledger.{ALERTS.table}"') == [(tenant,)]


def every_tenants_rows(url: str) -> dict[str, list[tuple[Any, ...]]]:
    """The pipelines, edges, alerts and runs per tenant, read past the tenant filter."""
    import sqlite3

    conn = sqlite3.connect(url.removeprefix("sqlite:///"))
    try:
        return {
            name: [tuple(row) for row in conn.execute(sql)] for name, sql in _EVERY_TENANT.items()
        }
    finally:
        conn.close()


_EVERY_TENANT = {
    PIPELINES.table: 'SELECT tenant, name FROM "pipeledger.pipelines" ORDER BY 1',
    DEPENDENCIES.table: "SELECT tenant, upstream, downstream "
    'FROM "pipeledger.pipeline_dependencies" ORDER BY 1',
    ALERTS.table: 'SELECT tenant, alert_key FROM "pipeledger.alerts" ORDER BY 1',
    RUNS.table: "SELECT tenant, pipeline, count(*) FROM "
    '"pipeledger.pipeline_runs" GROUP BY 1, 2 ORDER BY 1',
}


def test_on_postgres_two_tenants_each_have_a_pipeline_called_orders(
    tmp_path: Path, postgres_url: str, roles: dict[str, str]
) -> None:
    """As an ordinary role under row security: the second tenant's registration of
    ``orders`` used to meet the first one's row, which its policy hides."""
    writer_url = as_role(postgres_url, roles["writer"])
    a, b = roles["a"], roles["b"]
    first, second = both_tenants_own_orders(tmp_path, writer_url, a, b)
    for tenant in (a, b):
        add_edge_and_alert(writer_url, tenant)
    assert seen_by(first) == ["orders", "orders"] and seen_by(second) == ["orders", "orders"]
    with psycopg.connect(postgres_url) as superuser:  # bypasses row security: every row
        every = {
            name: [tuple(row) for row in superuser.execute(sql)]
            for name, sql in _PG_EVERY_TENANT.items()
        }
    assert every[PIPELINES.table] == [(a, "orders"), (b, "orders")]
    assert every[DEPENDENCIES.table] == [(a, "customers", "orders"), (b, "customers", "orders")]
    assert every[ALERTS.table] == [(a, "failed:orders:run-1"), (b, "failed:orders:run-1")]
    assert every[RUNS.table] == [(a, "orders", 2), (b, "orders", 2)]
    for tenant in (a, b):
        with open_warehouse(writer_url, tenant=tenant).session(write=False) as session:
            assert session.query(
                f"SELECT tenant, upstream FROM pipeledger.{DEPENDENCIES.table}"
            ) == [(tenant, "customers")]
            assert session.query(f"SELECT tenant FROM pipeledger.{ALERTS.table}") == [(tenant,)]


_PG_EVERY_TENANT = {
    PIPELINES.table: "SELECT tenant, name FROM pipeledger.pipelines ORDER BY 1",
    DEPENDENCIES.table: "SELECT tenant, upstream, downstream "
    "FROM pipeledger.pipeline_dependencies ORDER BY 1",
    ALERTS.table: "SELECT tenant, alert_key FROM pipeledger.alerts ORDER BY 1",
    RUNS.table: "SELECT tenant, pipeline, count(*)::int FROM pipeledger.pipeline_runs "
    "GROUP BY 1, 2 ORDER BY 1",
}


# -- the catalog ----------------------------------------------------------------------


def keys_not_led_by_tenant(session: Session) -> tuple[list[str], int]:
    """What the ledger's database says of its keys: each primary key, unique constraint
    or index and foreign key (and the parent key it references) whose first column is
    not the tenant; and how many foreign keys there are."""
    if session.dialect.row_security:
        rows = session.query(
            "SELECT t.relname, k.conname, k.contype::text, a.attname, p.attname "
            "FROM pg_catalog.pg_constraint k JOIN pg_catalog.pg_class t ON t.oid = k.conrelid "
            "JOIN pg_catalog.pg_namespace n ON n.oid = t.relnamespace "
            "JOIN pg_catalog.pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.conkey[1] "
            "LEFT JOIN pg_catalog.pg_attribute p ON p.attrelid = k.confrelid "
            "AND p.attnum = k.confkey[1] "
            "WHERE n.nspname = 'pipeledger' AND t.relname <> %s AND k.contype IN ('p', 'u', 'f')",
            [MIGRATIONS.table],
        )
        unique = session.query(
            "SELECT t.relname, i.relname, a.attname FROM pg_catalog.pg_index x "
            "JOIN pg_catalog.pg_class i ON i.oid = x.indexrelid "
            "JOIN pg_catalog.pg_class t ON t.oid = x.indrelid "
            "JOIN pg_catalog.pg_namespace n ON n.oid = t.relnamespace "
            "JOIN pg_catalog.pg_attribute a ON a.attrelid = t.oid AND a.attnum = x.indkey[0] "
            "WHERE n.nspname = 'pipeledger' AND t.relname <> %s AND x.indisunique",
            [MIGRATIONS.table],
        )
    else:
        keys = session.query(
            "SELECT m.name, l.name, l.origin, i.name, NULL FROM sqlite_master m, "
            "pragma_index_list(m.name) l, pragma_index_info(l.name) i "
            "WHERE m.type = 'table' AND m.name LIKE 'pipeledger.%' AND m.name <> ? "
            "AND l.origin IN ('pk', 'u') AND i.seqno = 0",
            [f"pipeledger.{MIGRATIONS.table}"],
        )
        foreign = session.query(
            'SELECT m.name, f.id, \'f\', f."from", f."to" FROM sqlite_master m, '
            "pragma_foreign_key_list(m.name) f "
            "WHERE m.type = 'table' AND m.name LIKE 'pipeledger.%' AND f.seq = 0"
        )
        rows = keys + foreign
        unique = session.query(
            "SELECT m.name, l.name, i.name FROM sqlite_master m, pragma_index_list(m.name) l, "
            "pragma_index_info(l.name) i WHERE m.type = 'table' AND m.name LIKE 'pipeledger.%' "
            'AND m.name <> ? AND l."unique" AND i.seqno = 0',
            [f"pipeledger.{MIGRATIONS.table}"],
        )
    problems = [
        f"{table}: {kind} {name} leads with {column}" + (f" -> {parent}" if kind == "f" else "")
        for table, name, kind, column, parent in rows
        if column != "tenant" or (kind == "f" and parent != "tenant")
    ]
    problems += [f"{t}: unique index {i} leads with {c}" for t, i, c in unique if c != "tenant"]
    tables = {str(row[0]) for row in rows}
    missing = {t.name.table for t in TENANT_TABLES} - {
        t.removeprefix("pipeledger.") for t in tables
    }
    problems += [f"{name}: no key found" for name in sorted(missing)]
    return problems, sum(1 for row in rows if row[2] == "f")


@pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)
def test_every_key_of_every_ledger_table_leads_with_the_tenant(warehouse_url: str) -> None:
    """From the catalog, on a new ledger and on one migrated from 15: the same keys."""
    database = open_warehouse(warehouse_url)
    with database.session() as session:
        migrate(session, BEFORE_KEYS)
        problems, _ = keys_not_led_by_tenant(session)
        assert any("pipelines" in p for p in problems)  # the check sees the old keys
    with database.session() as session:
        assert migrate(session, LEDGER) == [16, 17]
        assert keys_not_led_by_tenant(session) == ([], 7)
        migrated = catalog(session)
    with fresh_database(warehouse_url) as fresh, open_warehouse(fresh).session() as session:
        migrate(session, LEDGER)
        assert keys_not_led_by_tenant(session) == ([], 7)
        assert catalog(session) == migrated


@contextmanager
def fresh_database(url: str) -> Iterator[str]:
    """Another empty database beside ``url``'s (dropped after, on PostgreSQL)."""
    if url.startswith("sqlite:"):
        yield url.replace("warehouse.db", "fresh.db")
        return
    base, _, name = url.rpartition("/")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}_fresh"')
    try:
        yield f"{base}/{name}_fresh"
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}_fresh" WITH (FORCE)')


def catalog(session: Session) -> list[tuple[Any, ...]]:
    """Every table's, key's, index's and trigger's definition."""
    if session.dialect.row_security:
        return session.query(
            "SELECT t.relname, k.conname, pg_catalog.pg_get_constraintdef(k.oid) "
            "FROM pg_catalog.pg_constraint k JOIN pg_catalog.pg_class t ON t.oid = k.conrelid "
            "JOIN pg_catalog.pg_namespace n ON n.oid = t.relnamespace "
            "WHERE n.nspname = 'pipeledger' UNION ALL "
            "SELECT tablename, indexname, indexdef FROM pg_catalog.pg_indexes "
            "WHERE schemaname = 'pipeledger' UNION ALL "
            "SELECT event_object_table, trigger_name, action_statement "
            "FROM information_schema.triggers WHERE trigger_schema = 'pipeledger' "
            "ORDER BY 1, 2, 3"
        )
    return session.query(
        "SELECT type, name, sql FROM sqlite_master WHERE name LIKE 'pipeledger.%' "
        "OR tbl_name LIKE 'pipeledger.%' ORDER BY type, name"
    )


# -- migrating a ledger with history ---------------------------------------------------


def history(session: Session) -> None:
    """Runs of every kind (rolled up by the triggers), tasks, events, snapshots, a
    dependency and an alert, written as the release before migration 16 wrote."""
    b = LedgerBuilder(as_earlier(session))
    mixed_runs(b)
    run = b.run("orders", NOW - timedelta(hours=1))
    b.task(run, "extract", 1)
    b.task(run, "load", 2)
    b.event(run, "LOAD", NOW, target_table="analytics.orders")
    b.event(None, "NOTE", NOW)
    b.snapshot(run, "analytics.orders", 10)
    b.depends("orders", "customers")
    record(as_earlier(session), alert("orders"), ["ops"], NOW)


def contents(url: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every ledger table, in a fixed order (as its tenant reads them)."""
    with open_warehouse(url).session(write=False) as session:
        d = session.dialect
        return {
            t.name.table: sorted(
                (
                    tuple(str(v) for v in row)
                    for row in session.query(
                        f"SELECT {', '.join(t.column_names)} FROM {d.table(t.name)}"
                    )
                ),
            )
            for t in TENANT_TABLES
        }


@pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)
def test_a_ledger_with_history_moves_to_tenant_keys_with_nothing_lost(
    project: Project, warehouse_url: str
) -> None:
    database = open_warehouse(warehouse_url)
    with database.session() as session:
        migrate(session, BEFORE_KEYS)
        history(session)
        indexes = index_names(session)
    before = contents(warehouse_url)
    assert len(before[RUNS.table]) > 10 and len(before[DAYS.table]) > 3
    assert before[TASK_DAYS.table] and before[ALERTS.table]
    project.configure(pipelines={"orders": orders_pipeline()})
    code, out, err = project.cli("ledger", "migrate", "--json")
    assert code == 0, err
    assert json.loads(out)["ledger"] == [16, 17]
    assert contents(warehouse_url) == before
    with open_warehouse(warehouse_url).session(write=False) as session:
        assert index_names(session) == indexes  # SQLite made each table again: all of them
    # the rollups' triggers work on the new keys: one more run and task roll up once
    with open_warehouse(warehouse_url).session() as session:
        b = LedgerBuilder(session)
        run = b.run("orders", NOW, run_id="after-the-migration")
        b.task(run, "extract", 1)
    # the foreign keys hold, now per tenant: another tenant's task of this run is refused
    with (
        pytest.raises(WarehouseError, match=r"(?i)foreign key"),
        open_warehouse(warehouse_url, tenant="other").session() as session,
    ):
        LedgerBuilder(session).task(run, "extract", 1)
    after = contents(warehouse_url)
    assert len(after[RUNS.table]) == len(before[RUNS.table]) + 1
    assert sum(int(row[2]) for row in after[DAYS.table]) == 1 + sum(
        int(row[2]) for row in before[DAYS.table]
    )
    assert sum(int(row[3]) for row in after[TASK_DAYS.table]) == 1 + sum(
        int(row[3]) for row in before[TASK_DAYS.table]
    )


def index_names(session: Session) -> list[tuple[str, str]]:
    """The ledger's indexes and triggers by table (not the keys' own indexes)."""
    ledger = {t.name.table for t in TENANT_TABLES}
    return [
        (table, name)
        for table, name in _index_names(session)
        if str(table).removeprefix("pipeledger.") in ledger
    ]


def _index_names(session: Session) -> list[tuple[str, str]]:
    if session.dialect.row_security:
        return session.query(
            "SELECT tablename, indexname FROM pg_catalog.pg_indexes WHERE schemaname = "
            "'pipeledger' AND indexname NOT LIKE '%%_pkey' AND indexname NOT LIKE '%%_key' "
            "UNION ALL SELECT event_object_table, trigger_name FROM information_schema.triggers "
            "WHERE trigger_schema = 'pipeledger' ORDER BY 1, 2"
        )
    return session.query(
        "SELECT tbl_name, name FROM sqlite_master WHERE type IN ('index', 'trigger') "
        "AND name NOT LIKE 'sqlite_autoindex%' ORDER BY 1, 2"
    )


# -- a ledger of 100k runs -------------------------------------------------------------


@pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)
def test_probes_by_run_id_use_the_tenant_key_at_thousands_of_runs(warehouse_url: str) -> None:
    """A run's row, heartbeat, cancel request and abandonment probe (tenant, run_id)."""
    database = open_warehouse(warehouse_url)
    with database.session() as session:
        migrate(session, LEDGER)
        b = LedgerBuilder(session)
        start = datetime(2024, 1, 1, tzinfo=UTC)
        for i in range(3000):
            b.run("orders", start + timedelta(minutes=i), run_id=f"run-{i}")
    with database.session() as session:
        d = session.dialect
        if d.row_security:
            session.execute("ANALYZE pipeledger.pipeline_runs")
        at = datetime(2024, 6, 1, tzinfo=UTC)
        probes: list[tuple[str, list[Any]]] = [
            (lsql.read_run(d), ["run-7"]),
            (lsql.heartbeat(d), [at, at, "run-7"]),
            (lsql.cancel_request(d), ["run-7"]),
            (lsql.abandon_run(d), [at, 1, "gone", "run-7"]),
        ]
        explain = "EXPLAIN" if d.row_security else "EXPLAIN QUERY PLAN"
        for statement, params in probes:
            plan = session.query(f"{explain} {statement}", params)
            text = "\n".join(str(row[-1]) for row in plan)
            if d.row_security:
                # the key, or (a run still running: none here) the status index
                assert "Seq Scan" not in text, text
                assert re.search(r"Index Cond: \(\(tenant = ", text), text
            else:
                assert "SEARCH" in text and "(tenant=? AND run_id=?)" in text, text
