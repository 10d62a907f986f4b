"""Who read what, when: the access audit's rows (``access_reads``, written by
:mod:`pipeledger.ledger.access`), one per UTC minute and reader, newest first."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from pipeledger.ledger.access import minute_of
from pipeledger.ledger.reads.answers import Answer, _build, _columns
from pipeledger.ledger.tables import ACCESS
from pipeledger.warehouse.dialect import Dialect
from pipeledger.warehouse.session import Session

_TIMES = frozenset({"minute", "first_at", "last_at"})
_NONE_WHEN_EMPTY = ("pipeline", "db_role", "client")  # stored '' (a key column), said None


@dataclass(frozen=True, kw_only=True)
class AccessRow(Answer):
    """``reads`` reads by one reader in one minute: ``via`` the CLI, the API or the web
    dashboard, ``what`` (the command, the API function, the page path), about
    ``pipeline``, as database role ``db_role`` (None on SQLite, which has no roles) and
    operating-system user ``os_user``, from ``client`` (the dashboard's visitor)."""

    minute: datetime
    tenant: str
    via: str
    what: str
    pipeline: str | None
    db_role: str | None
    os_user: str
    client: str | None
    reads: int
    first_at: datetime
    last_at: datetime


def access_rows_sql(d: Dialect, pipeline: bool) -> str:
    """The tenant's rows from a minute on, newest first (parameters: the tenant, the
    minute, the pipeline when ``pipeline``, the limit): the primary key's range."""
    about = f" AND pipeline = {d.param}" if pipeline else ""
    return (
        f"SELECT {', '.join(_columns(AccessRow))} FROM {d.table(ACCESS)} "
        f"WHERE tenant = {d.param} AND minute >= {d.param}{about} "
        f"ORDER BY minute DESC, last_at DESC, what LIMIT {d.param}"
    )


def access_rows(
    session: Session, tenant: str, since: datetime, pipeline: str | None, limit: int
) -> list[AccessRow]:
    """The reads of ``tenant`` since ``since`` (the minute it falls in included)."""
    about = [pipeline] if pipeline is not None else []
    params = [tenant, minute_of(since), *about, limit]
    sql = access_rows_sql(session.dialect, pipeline is not None)
    return [_row(row) for row in session.query(sql, params)]


def _row(row: tuple[object, ...]) -> AccessRow:
    values = list(row)
    for index, name in enumerate(_columns(AccessRow)):
        if name in _NONE_WHEN_EMPTY and values[index] == "":
            values[index] = None
    found: AccessRow = _build(AccessRow, values, _TIMES)
    return found
