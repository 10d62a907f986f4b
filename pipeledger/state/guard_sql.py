"""SQL text of the fingerprint guard (:mod:`pipeledger.state.guard`): the trigger that clears
the fingerprint of a row updated outside pipeledger, and the table saying since when it has
guarded each target. Pure functions; the guard module executes them."""

from __future__ import annotations

from pipeledger.common.columns import LOADED_AT_COLUMN, ROW_HASH_COLUMN, TableName
from pipeledger.warehouse.dialect import POSTGRES, Dialect, quote
from pipeledger.warehouse.migrations import SCHEMA

FORGET_TRIGGER = "_pipeledger_forget_row_hash"
FORGET_FUNCTION = f"{quote(SCHEMA)}.{quote('forget_row_hash')}"
# per target: since when its trigger has guarded its fingerprints (load.known)
GUARDS_TABLE = TableName(SCHEMA, "fingerprint_guards")


def forget_hash_function() -> str:
    """PostgreSQL: the function of :func:`forget_hash_trigger` (state migrations 2 and 3)."""
    return (
        f"CREATE OR REPLACE FUNCTION {FORGET_FUNCTION}() RETURNS trigger LANGUAGE plpgsql "
        f"AS $$ BEGIN NEW.{quote(ROW_HASH_COLUMN)} := NULL; RETURN NEW; END $$"
    )


def _guards_columns(d: Dialect) -> str:
    since = f"since {d.instant_type} NOT NULL"
    return f"(target text PRIMARY KEY, trigger_version text NOT NULL, {since})"


def fingerprint_guard_table(d: Dialect) -> str:
    """State migration 3 (as first committed): per target (its oid on PostgreSQL), which
    trigger guards it and since when."""
    return f"CREATE TABLE IF NOT EXISTS {d.table(GUARDS_TABLE)} {_guards_columns(d)}"


def renewed_guard_table(d: Dialect) -> list[str]:
    """State migration 4: the guards table again, replacing one of an earlier shape that
    migration 3 kept (guards are rebuilt by the next runs; until then backfills compare
    every row)."""
    table = d.table(GUARDS_TABLE)
    return [f"DROP TABLE IF EXISTS {table}", f"CREATE TABLE {table} {_guards_columns(d)}"]


def _trigger_name(d: Dialect, target: TableName) -> str:
    """PostgreSQL names triggers per table; SQLite per database."""
    return FORGET_TRIGGER if d.triggers_per_table else f"{FORGET_TRIGGER}:{target}"


def forget_hash_trigger(d: Dialect, target: TableName) -> str:
    """An UPDATE that leaves a row's fingerprint as it was did not come from pipeledger
    (whose writes carry the new row's fingerprint): the stored fingerprint may no longer
    describe the row, so it is cleared, and the next backfill compares that row in full."""
    h, name = quote(ROW_HASH_COLUMN), quote(_trigger_name(d, target))
    if d.before_triggers_set_row:
        kept = f"NEW.{h} IS NOT NULL AND NEW.{h} IS NOT DISTINCT FROM OLD.{h}"
        return (
            f"CREATE TRIGGER {name} BEFORE UPDATE ON {d.table(target)} "
            f"FOR EACH ROW WHEN ({kept}) EXECUTE PROCEDURE {FORGET_FUNCTION}(); "
            f"{always_fire(target)}"
        )
    kept = f"NEW.{h} IS NOT NULL AND NEW.{h} IS OLD.{h}"
    return (
        f"CREATE TRIGGER IF NOT EXISTS {name} AFTER UPDATE ON {d.table(target)} FOR EACH ROW "
        f"WHEN {kept} BEGIN UPDATE {d.table(target)} SET {h} = NULL WHERE rowid = NEW.rowid; END"
    )


def always_fire(target: TableName) -> str:
    """PostgreSQL: fire also in replica mode (logical replication's apply workers and
    ``session_replication_role = replica`` skip triggers that are merely enabled)."""
    return f"ALTER TABLE {POSTGRES.table(target)} ENABLE ALWAYS TRIGGER {quote(FORGET_TRIGGER)}"


def trigger_version(d: Dialect) -> str:
    """The target's fingerprint trigger if it fires on every write: on PostgreSQL the
    trigger's oid and row version and its function's row version (any change to either,
    re-created, disabled, re-enabled or replaced, gives another version)."""
    if d.catalog_oids:
        return (
            "SELECT t.oid::text || ':' || t.xmin::text || ':' || p.xmin::text "
            "FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid "
            "WHERE t.tgrelid = to_regclass(%s) AND t.tgname = %s AND t.tgenabled = 'A'"
        )
    return "SELECT 'sqlite' FROM sqlite_master WHERE type = 'trigger' AND name = ? COLLATE NOCASE"


def trigger_params(d: Dialect, target: TableName) -> list[str]:
    return [d.table(target), FORGET_TRIGGER] if d.catalog_oids else [_trigger_name(d, target)]


def trigger_exists(d: Dialect) -> str:
    """PostgreSQL: whether the target has the trigger at all (enabled or not)."""
    return "SELECT count(*) FROM pg_trigger WHERE tgrelid = to_regclass(%s) AND tgname = %s"


def may_upgrade(d: Dialect) -> str:
    """PostgreSQL: whether this role owns the target and may upsert guards (parameters:
    the target, the guards table twice)."""
    return (
        "SELECT coalesce((SELECT pg_has_role(relowner, 'USAGE') FROM pg_class "
        "WHERE oid = to_regclass(%s)), false) "
        "AND has_table_privilege(%s, 'INSERT') AND has_table_privilege(%s, 'UPDATE')"
    )


def without_rowid() -> str:
    """SQLite: a row if the table has no rowid (parameter: its name)."""
    return "SELECT 1 FROM pragma_table_list WHERE name = ? COLLATE NOCASE AND wr = 1"


def guard_key(d: Dialect) -> str | None:
    """PostgreSQL: the target's oid, whatever name reaches it (SQLite: its lower-case name)."""
    return "SELECT to_regclass(%s)::oid::text" if d.catalog_oids else None


def read_guard_row(d: Dialect) -> str:
    table = d.table(GUARDS_TABLE)
    return f"SELECT trigger_version, since FROM {table} WHERE target = {d.param}"


def record_guard(d: Dialect) -> str:
    """Parameters: target key, trigger version, since."""
    p = d.param
    return (
        f"INSERT INTO {d.table(GUARDS_TABLE)} (target, trigger_version, since) "
        f"VALUES ({p}, {p}, {p}) ON CONFLICT (target) DO UPDATE SET "
        "trigger_version = excluded.trigger_version, since = excluded.since"
    )


def newest_load(d: Dialect, target: TableName) -> str:
    return f"SELECT max({quote(LOADED_AT_COLUMN)}) FROM {d.table(target)}"


def lock_against_writers(d: Dialect, target: TableName) -> str | None:
    """PostgreSQL: hold off other writers of the target until this transaction ends
    (self-exclusive, so two such transactions queue instead of deadlocking)."""
    if not d.concurrent_transactions:
        return None  # a write transaction already excludes every other writer
    return f"LOCK TABLE {d.table(target)} IN SHARE ROW EXCLUSIVE MODE"
