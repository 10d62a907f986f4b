"""Versioned migrations of pipeledger's own tables, each applied once with its bookkeeping row."""

from __future__ import annotations

from datetime import UTC, datetime

from pipeledger.adapters.base import Warehouse
from pipeledger.load import sql

_LOCK = 0x706C6467  # one migrator at a time on PostgreSQL ("pldg")


def migrate(warehouse: Warehouse) -> list[int]:
    """Apply pending migrations in one transaction; return the versions applied."""
    d = warehouse.dialect
    applied: list[int] = []
    with warehouse.session() as session:
        if d.name == "postgres":
            session.execute("SELECT pg_advisory_xact_lock(%s)", [_LOCK])
        for statement in sql.create_migrations_table(d):
            session.execute(statement)
        done = {row[0] for row in session.query(sql.applied_migrations(d))}
        for version, description, statements in sql.migrations(d):
            if version in done:
                continue
            for statement in statements:
                session.execute(statement)
            session.execute(sql.record_migration(d), [version, description, datetime.now(UTC)])
            applied.append(version)
    return applied
