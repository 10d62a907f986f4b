"""Whether a target's stored fingerprints can be trusted, and since when.

A backfill skips source rows whose fingerprint the target holds (``load.known``). That is
safe only for rows nobody changed behind pipeledger's back, so every target has a trigger
that clears the fingerprint of a row updated outside pipeledger (``gsql.forget_hash_trigger``;
pipeledger's own writes always set the new row's fingerprint), and the guards table says
since when, for which trigger: on PostgreSQL the guard names the trigger's oid and row
version, so a trigger re-created, disabled or re-enabled (by anyone) voids it, and the
target's oid, so every name that reaches the table shares it. Fingerprints are trusted only
on rows that pipeledger wrote since then (``_pipeledger_loaded_at >= since``): rows edited
while the trigger was missing or disabled are compared in full. Rows older than a guard
stay untrusted until pipeledger rewrites them (an unchanged row is never rewritten).

A new target gets its trigger and guard in the transaction that creates it, from the run's
start. A target made before fingerprints, or whose guard is void, is upgraded by
:func:`upgrade_target` in a short transaction of its own (PostgreSQL; lock timeout 5 s), so
that the table is not locked for a whole run; holding writers off, it starts the guard
after the newest row already there, so writers' clocks do not matter. A role that may
write the target but not alter it, a lock not granted in time, or another process
upgrading it at once leave it as it is: it keeps loading, its backfills compare every row.
A warehouse without triggers (DuckDB) guards nothing: its backfills always compare every row.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from pipeledger.common.columns import ROW_HASH, ROW_HASH_COLUMN, TableName
from pipeledger.errors import WarehouseError
from pipeledger.state import guard_sql as gsql
from pipeledger.warehouse.dialect import POSTGRES
from pipeledger.warehouse.session import Session
from pipeledger.warehouse.stage import add_column

log = logging.getLogger("pipeledger.load")

Sessions = Callable[[], AbstractContextManager[Session]]
_TOLERATED = {
    WarehouseError.INSUFFICIENT_PRIVILEGE: "this role may not alter it",
    WarehouseError.LOCK_NOT_AVAILABLE: "it stayed locked by another session",
    WarehouseError.DUPLICATE_COLUMN: "another process is upgrading it",
    WarehouseError.DUPLICATE_OBJECT: "its trigger exists but does not fire, or was just made",
    WarehouseError.WRONG_OBJECT_TYPE: "it cannot have row triggers (a partitioned table?)",
    WarehouseError.TOO_MANY_COLUMNS: "it has no room for one more column",
    WarehouseError.FEATURE_NOT_SUPPORTED: "this database does not support it",
}
_TICK = timedelta(microseconds=1)
_SKEW = timedelta(hours=1)  # how far ahead a writer's clock may be, when it cannot be measured


@dataclass(frozen=True)
class Guard:
    fingerprinted: bool  # rows store fingerprints (the column exists)
    since: datetime | None  # rows written since then have trustworthy fingerprints
    version: str | None = None  # of the trigger that guards them

    @property
    def complete(self) -> bool:
        return self.fingerprinted and self.since is not None


def read_guard(
    session: Session, target: TableName, columns: list[tuple[str, str]] | None = None
) -> Guard:
    """What ``target`` offers now: its guard counts only while the very trigger it was
    recorded for is in place and enabled (re-created, disabled or re-enabled: none).
    ``columns``: the target's, when the caller has just read them."""
    columns = (columns if columns is not None else session.table_columns(target)) or []
    if all(name != ROW_HASH_COLUMN for name, _ in columns):
        return Guard(False, None)
    if not session.dialect.has_triggers:  # nothing can guard its fingerprints
        return Guard(True, None)
    version = _trigger_version(session, target)
    if version is None:
        return Guard(True, None)
    try:
        with session.savepoint():  # a role without rights on the guards: no guard
            rows = session.query(gsql.read_guard_row(session.dialect), [_key(session, target)])
    except WarehouseError as exc:
        if exc.sqlstate != WarehouseError.INSUFFICIENT_PRIVILEGE:
            raise
        return Guard(True, None)
    if not rows or rows[0][0] != version:
        return Guard(True, None, version)
    return Guard(True, _instant(rows[0][1]), version)


def may_upgrade(session: Session, target: TableName) -> bool:
    """Whether this role could upgrade ``target`` (own it, record guards): checked in the
    run's transaction, so that a role that cannot opens no other connection, run after run.
    SQLite: yes, unless the table has no rowid (the trigger finds rows by rowid)."""
    d = session.dialect
    if not d.has_triggers:
        return False
    if not d.has_roles:
        try:
            with session.savepoint():
                return not session.query(gsql.without_rowid(), [str(target)])
        except WarehouseError:  # SQLite before 3.37 has no pragma_table_list
            return True
    guards = d.table(gsql.GUARDS_TABLE)
    allowed = session.query(gsql.may_upgrade(d), [d.table(target), guards, guards])[0][0]
    if not allowed:
        log.info("target %s: this role may not upgrade it; backfills compare every row", target)
    return bool(allowed)


def guard_new_target(session: Session, target: TableName, since: datetime) -> None:
    """In the transaction that creates ``target``: its trigger, guarding it from ``since``
    (the run's start, the load time of every row it writes). Without triggers: none."""
    if not session.dialect.has_triggers:
        return
    if attempt(session, gsql.forget_hash_trigger(session.dialect, target), [], target):
        _record(session, target, since)


def upgrade_target(sessions: Sessions, target: TableName) -> None:
    """Give an existing target what it lacks (the fingerprint column, the trigger, a guard
    for the trigger in place), in one transaction that holds its writers off, so that the
    guard's start is after every row already there, whatever the writers' clocks said."""
    with sessions() as session:  # the column: a moment of ACCESS EXCLUSIVE, then commit
        _limit(session)
        guard = read_guard(session, target)
        if guard.complete:
            return
        column = add_column(session.dialect, target, ROW_HASH, if_missing=True)
        if not guard.fingerprinted and not attempt(session, column, [], target):
            return
    with sessions() as session:  # the trigger and its guard: writers held off until commit
        _limit(session)
        if not attempt(session, _guarding_statement(session, target), [], target):
            return
        _record(session, target, _guard_start(session, target))


def _limit(session: Session) -> None:
    if session.dialect.concurrent_transactions:  # wait 5 s at most for a lock, 10 s to scan
        session.execute("SET LOCAL lock_timeout = '5s'")
        session.execute("SET LOCAL statement_timeout = '10s'")


def _guarding_statement(session: Session, target: TableName) -> str:
    """What puts a firing trigger on ``target`` and holds its writers off (both take
    SHARE ROW EXCLUSIVE): create it, make it fire always, or just lock."""
    d = session.dialect
    if _trigger_version(session, target) is not None:
        return gsql.lock_against_writers(d, target) or "SELECT 1"
    if not d.toggles_triggers:
        return gsql.forget_hash_trigger(d, target)
    params = gsql.trigger_params(d, target)
    if session.query(gsql.trigger_exists(d), params)[0][0]:  # there, but not firing always
        return gsql.always_fire(target)
    return gsql.forget_hash_trigger(d, target)


def _guard_start(session: Session, target: TableName) -> datetime:
    """Just after the newest load time in ``target`` (now, if it is empty). A table too big
    to scan in 10 s (writers are held off meanwhile) starts its guard at now plus
    :data:`_SKEW`: rows are trusted from then on if no writer's clock is further ahead."""
    try:
        with session.savepoint():
            newest = session.query(gsql.newest_load(session.dialect, target))[0][0]
    except WarehouseError as exc:
        if exc.sqlstate != WarehouseError.QUERY_CANCELED:
            raise
        log.info(
            "target %s: too big to scan for its newest row; guarded from now + %s", target, _SKEW
        )
        return datetime.now(UTC) + _SKEW
    return datetime.now(UTC) if newest is None else _instant(newest) + _TICK


def _record(session: Session, target: TableName, since: datetime) -> None:
    version = _trigger_version(session, target)
    if version is not None:
        params = [_key(session, target), version, since]
        attempt(session, gsql.record_guard(session.dialect), params, target)


def attempt(session: Session, statement: str, params: list[object], target: TableName) -> bool:
    """Run ``statement`` under a savepoint; False (and a warning) if it was refused for a
    reason that should not fail the run."""
    try:
        with session.savepoint():
            session.execute(statement, params)
        return True
    except WarehouseError as exc:
        reason = _TOLERATED.get(exc.sqlstate or "")
        if reason is None:
            raise
    log.warning("target %s: not upgraded (%s); its backfills compare every row", target, reason)
    return False


def _trigger_version(session: Session, target: TableName) -> str | None:
    d = session.dialect
    rows = session.query(gsql.trigger_version(d), gsql.trigger_params(d, target))
    return str(rows[0][0]) if rows else None


def _key(session: Session, target: TableName) -> str:
    statement = gsql.guard_key(session.dialect)
    if statement is None:
        return str(target).lower()  # SQLite: names are the identity, case-insensitive
    return str(session.query(statement, [POSTGRES.table(target)])[0][0])


def _instant(value: object) -> datetime:
    if isinstance(value, datetime):
        return value
    return datetime.fromisoformat(str(value))
