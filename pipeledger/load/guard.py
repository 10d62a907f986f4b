"""Whether a target's stored fingerprints can be trusted, and since when.

A backfill skips source rows whose fingerprint the target holds (``load.known``). That is
safe only for rows nobody changed behind pipeledger's back, so every target has a trigger
that clears the fingerprint of a row updated outside pipeledger (``sql.forget_hash_trigger``;
pipeledger's own writes always set the new row's fingerprint), and the guards table says
since when the trigger has been in place. Fingerprints are trusted only on rows that
pipeledger wrote since then (``_pipeledger_loaded_at >= since``): rows edited while the
trigger was missing, or disabled, are compared in full.

A new target gets its trigger in the transaction that creates it. A target made before
fingerprints existed, or whose trigger was dropped, is upgraded by :func:`upgrade_target`:
on PostgreSQL in short transactions of its own, with a lock timeout, so that the table is
not locked for a whole run. A role that may write the target but not alter it, a lock
that is not granted in time, or another process upgrading the same target at once leave
it as it is: it keeps loading, and its backfills compare every row.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime

from pipeledger.adapters.base import Session
from pipeledger.errors import WarehouseError
from pipeledger.load import sql
from pipeledger.schema import ROW_HASH_COLUMN, TableName

log = logging.getLogger("pipeledger.load")

Sessions = Callable[[], AbstractContextManager[Session]]
_TOLERATED = {
    WarehouseError.INSUFFICIENT_PRIVILEGE: "this role may not alter it",
    WarehouseError.LOCK_NOT_AVAILABLE: "it stayed locked by another session",
    WarehouseError.DUPLICATE_COLUMN: "another process is upgrading it",
    WarehouseError.DUPLICATE_OBJECT: "its trigger exists but is disabled",
}


@dataclass(frozen=True)
class Guard:
    fingerprinted: bool  # rows store fingerprints (the column exists)
    since: datetime | None  # rows written since then have trustworthy fingerprints

    @property
    def complete(self) -> bool:
        return self.fingerprinted and self.since is not None


def read_guard(session: Session, target: TableName) -> Guard:
    columns = session.table_columns(target) or []
    if all(name != ROW_HASH_COLUMN for name, _ in columns):
        return Guard(False, None)
    if not _has_trigger(session, target):
        return Guard(True, None)
    rows = session.query(sql.guarded_since(session.dialect), [str(target)])
    return Guard(True, _instant(rows[0][0]) if rows else None)


def guard_new_target(session: Session, target: TableName, since: datetime) -> None:
    """In the transaction that creates ``target``: its trigger, guarding it from ``since``
    (the run's start, the load time of every row it writes)."""
    if try_ddl(session, sql.forget_hash_trigger(session.dialect, target), target):
        session.execute(sql.record_guard(session.dialect), [str(target), since])


def upgrade_target(sessions: Sessions, target: TableName) -> None:
    """Add what an existing target lacks: the fingerprint column, the trigger, and (after
    the trigger took effect) the time from which it guards the target."""
    with sessions() as session:
        d = session.dialect
        if d.name == "postgres":
            session.execute("SET LOCAL lock_timeout = '5s'")
        guard = read_guard(session, target)
        column = sql.add_fingerprint_column(d, target)
        if not guard.fingerprinted and not try_ddl(session, column, target):
            return
        if not _has_trigger(session, target):
            if not try_ddl(session, sql.forget_hash_trigger(d, target), target):
                return
        elif guard.since is not None:
            return
    with sessions() as session:  # only rows loaded after this are known to be guarded
        session.execute(sql.record_guard(session.dialect), [str(target), datetime.now(UTC)])


def try_ddl(session: Session, statement: str, target: TableName) -> bool:
    """Run ``statement`` under a savepoint; False (and a warning) if it was refused for a
    reason that should not fail the run."""
    try:
        with session.savepoint():
            session.execute(statement)
        return True
    except WarehouseError as exc:
        reason = _TOLERATED.get(exc.sqlstate or "")
        if reason is None:
            raise
    log.warning("target %s: not upgraded (%s); its backfills compare every row", target, reason)
    return False


def _has_trigger(session: Session, target: TableName) -> bool:
    d = session.dialect
    return bool(session.query(sql.guarding_trigger(d), sql.trigger_params(d, target))[0][0])


def _instant(value: object) -> datetime:
    if isinstance(value, datetime):
        return value
    return datetime.fromisoformat(str(value))
