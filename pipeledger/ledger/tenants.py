"""Readers of one tenant's ledger rows (``pipeledger ledger grant-reader ROLE --tenant T``).

A reader is keyed on role membership, never on a setting (any role may ``SET`` any custom
setting): the tenant's group role ``pipeledger_tenant_<T>`` (NOLOGIN) may read the ledger's
tables and views, and ledger migration 13's ``tenant_reader`` policy shows a role the rows
of each tenant whose group role it is a member of. PostgreSQL only: SQLite has no roles.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pipeledger.errors import ConfigError
from pipeledger.ledger.reads.answers import Answer
from pipeledger.ledger.tables import SECURITY_INVOKER_VIEWS, TENANT_ROLE_PREFIX, TENANT_TABLES
from pipeledger.warehouse.dialect import Dialect, quote
from pipeledger.warehouse.migrations import SCHEMA
from pipeledger.warehouse.session import Session

# a PostgreSQL role name as a user types it (quoted in every statement all the same)
_ROLE = re.compile(r"[A-Za-z_][A-Za-z0-9_$]{0,62}")


@dataclass(frozen=True)
class ReaderGrant(Answer):
    role: str
    tenant: str
    tenant_role: str
    created: bool  # the tenant's group role did not exist before
    tables: int  # the ledger tables and views it may read


def tenant_role(tenant: str) -> str:
    return f"{TENANT_ROLE_PREFIX}{tenant}"


def grant_statements(d: Dialect, role: str, tenant: str, views: list[str]) -> list[str]:
    """What makes ``role`` a reader of ``tenant``'s rows, its group role existing."""
    group = quote(tenant_role(tenant))
    readable = [d.table(t.name) for t in TENANT_TABLES] + views
    return [
        f"GRANT USAGE ON SCHEMA {quote(SCHEMA)} TO {group}",
        f"GRANT SELECT ON {', '.join(readable)} TO {group}",
        SECURITY_INVOKER_VIEWS,  # a view made since the migration reads as its reader too
        f"GRANT {group} TO {quote(role)}",
    ]


def grant_reader(session: Session, role: str, tenant: str) -> ReaderGrant:
    """Make ``role`` a reader of ``tenant``'s ledger rows, in ``session``'s transaction."""
    d = session.dialect
    if not d.row_security:
        raise ConfigError(
            "ledger grant-reader needs a PostgreSQL ledger: SQLite has no roles, and its "
            "tenant filter is a convenience, not isolation; nothing was granted"
        )
    if _ROLE.fullmatch(role) is None:
        raise ConfigError(
            f"role {role!r} is not a PostgreSQL role name (letters, digits, _ and $, "
            "starting with a letter or _); nothing was granted"
        )
    group = tenant_role(tenant)
    exists = session.query("SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = %s", [group])
    if not exists:
        session.execute(f"CREATE ROLE {quote(group)} NOLOGIN")
    views = [
        f"{quote(SCHEMA)}.{quote(str(name))}"
        for (name,) in session.query(
            "SELECT viewname FROM pg_catalog.pg_views WHERE schemaname = %s", [SCHEMA]
        )
    ]
    for statement in grant_statements(d, role, tenant, views):
        session.execute(statement)
    return ReaderGrant(
        role=role,
        tenant=tenant,
        tenant_role=group,
        created=not exists,
        tables=len(TENANT_TABLES) + len(views),
    )
