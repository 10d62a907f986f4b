"""Migrating a new database: every migration applied and recorded once, its DDL in one round
trip where the dialect takes a script (PostgreSQL), one statement at a time elsewhere."""

from __future__ import annotations

from pipeledger.ledger.tables import LEDGER
from pipeledger.state.tables import STATE
from pipeledger.warehouse.adapters import open_warehouse
from pipeledger.warehouse.migrations import MIGRATIONS, migrate
from pipeledger.warehouse.session import observe_statements


def test_a_new_database_gets_every_migration_recorded_once(warehouse_url: str) -> None:
    warehouse = open_warehouse(warehouse_url)
    seen: list[str] = []
    with (
        observe_statements(lambda _kind, sql, _s: seen.append(sql)),
        warehouse.session() as session,
    ):
        applied = {c.name: migrate(session, c) for c in (STATE, LEDGER)}
    d = session.dialect
    with warehouse.session() as session:
        recorded = session.query(
            f"SELECT component, version FROM {d.table(MIGRATIONS)} ORDER BY component, version"
        )
        again = [migrate(session, c) for c in (STATE, LEDGER)]
    expected = {c.name: [v for v, _, _ in c.migrations(d)] for c in (STATE, LEDGER)}
    assert applied == expected
    assert recorded == sorted((name, v) for name, versions in expected.items() for v in versions)
    assert again == [[], []]  # a migrated database applies nothing
    ddl = sum(len(statements) for c in (STATE, LEDGER) for _, _, statements in c.migrations(d))
    # per component: lock, settings, the bookkeeping read, one script, one insert
    if d.runs_scripts:
        assert ddl > 100 and len(seen) <= 2 * 8
    else:
        assert len(seen) > ddl
