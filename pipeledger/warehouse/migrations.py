"""Versioned migrations of pipeledger's own tables, per component.

A :class:`Component` is a set of tables that lives in one database and migrates on its
own: ``state`` (watermarks and fingerprint guards, always in the warehouse, so they commit
with the rows) and ``ledger`` (the run ledger: in the warehouse by default, or in a
database of its own). Each migration and its bookkeeping row commit in one transaction,
under a lock timeout; a committed migration never changes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from pipeledger.common.columns import TableName
from pipeledger.errors import InsufficientPrivilege
from pipeledger.warehouse.dialect import Dialect
from pipeledger.warehouse.session import Session, Warehouse

SCHEMA = "pipeledger"
MIGRATIONS = TableName(SCHEMA, "schema_migrations")

Migration = tuple[int, str, list[str]]  # version, description, statements


@dataclass(frozen=True)
class Component:
    """A component's name, its migrations for a dialect, and a table whose presence says
    the component is installed (readers must not create anything)."""

    name: str
    migrations: Callable[[Dialect], list[Migration]]
    probe: TableName


def create_schema(d: Dialect) -> list[str]:
    """The statement that makes pipeledger's schema, where the dialect has schemas."""
    return [f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}"] if d.has_schemas else []


_LOCK = 0x706C6467  # one migrator at a time on PostgreSQL ("pldg")


def migrate(session: Session, component: Component) -> list[int]:
    """Apply the component's pending migrations in this session's transaction."""
    d = session.dialect
    if d.has_schemas:  # PostgreSQL: serialise migrators (SQLite's writer already is alone)
        session.execute("SELECT pg_advisory_xact_lock(%s)", [_LOCK])
    done: set[int] = set()
    if session.table_columns(MIGRATIONS) is not None:
        query = f"SELECT version FROM {d.table(MIGRATIONS)} WHERE component = {d.param}"
        done = {int(row[0]) for row in session.query(query, [component.name])}
    pending = [m for m in component.migrations(d) if m[0] not in done]
    if not pending:  # nothing to create: a role that may not create anything runs too
        return []
    try:
        return _apply(session, component.name, pending)
    except InsufficientPrivilege as exc:
        versions = ", ".join(str(version) for version, _, _ in pending)
        raise InsufficientPrivilege(
            f"pipeledger's {component.name} tables need migration {versions}, which this "
            "role may not apply: run `pipeledger ledger migrate` once as a role that may "
            f"create objects (the owner), then run again; nothing was written ({exc})",
            sqlstate=exc.sqlstate,
        ) from None


def _apply(session: Session, component: str, pending: list[Migration]) -> list[int]:
    d = session.dialect
    bookkeeping, p = d.table(MIGRATIONS), d.param
    if d.has_schemas:
        # a migration waits at most 30 s for a table that a long run still uses (the run
        # that needs it then fails and says so), instead of queueing every run behind it
        session.execute("SET LOCAL lock_timeout = '30s'")
        # ... and, once it has them, takes as long as it needs (a ledger's sessions bound
        # their statements: see ``adapters.open_warehouse``)
        session.execute("SET LOCAL statement_timeout = 0")
    ddl = [
        *create_schema(d),
        f"CREATE TABLE IF NOT EXISTS {bookkeeping} (component text NOT NULL, "
        "version integer NOT NULL, description text NOT NULL, applied_at timestamptz NOT NULL, "
        "PRIMARY KEY (component, version))",
        *(statement for _, _, statements in pending for statement in statements),
    ]
    _run_all(session, ddl)
    now = datetime.now(UTC)
    rows = ", ".join([f"({p}, {p}, {p}, {p})"] * len(pending))
    session.execute(
        f"INSERT INTO {bookkeeping} (component, version, description, applied_at) VALUES {rows}",
        [value for v, description, _ in pending for value in (component, v, description, now)],
    )
    return [version for version, _, _ in pending]


def _run_all(session: Session, statements: list[str]) -> None:
    """``statements`` in order, in the session's transaction: in one round trip where the
    dialect takes a script (a new PostgreSQL database: ~290 statements, 0.20 -> 0.11 s of
    a 1M-row first load)."""
    if session.dialect.runs_scripts:
        session.execute(";\n".join(statements))
        return
    for statement in statements:
        session.execute(statement)


def is_migrated(session: Session, component: Component) -> bool:
    """Whether the component's tables exist."""
    return session.table_columns(component.probe) is not None


_MIGRATED: set[tuple[str, str]] = set()  # (database url, component) checked by this process


def mark_migrated(url: str, *components: Component) -> None:
    _MIGRATED.update((url, component.name) for component in components)


def ensure_migrated(warehouse: Warehouse, *components: Component) -> dict[str, list[int]]:
    """Apply pending migrations of ``components`` in one short transaction (once per
    process and database: a second call costs nothing)."""
    pending = [c for c in components if (warehouse.url, c.name) not in _MIGRATED]
    if not pending:
        return {}
    with warehouse.session() as session:
        applied = {c.name: migrate(session, c) for c in pending}
    mark_migrated(warehouse.url, *pending)
    return applied
