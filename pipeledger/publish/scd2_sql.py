"""SQL text of an SCD2 target (:mod:`pipeledger.publish.scd2`), built by pure functions.

The run's temporary tables: :data:`AFFECTED` (the keys this run touches, each with the
least cursor it brings), :data:`ITEMS` (everything known of those keys: the stored
versions, the deletions the stored history implies, the stored repeats from that least
cursor on, the staged rows, the deletions a full snapshot found), :data:`ORDERED` (one
item per key and cursor, each marked kept or a repeat) and :data:`HISTORY` (the kept
items, each version with its ``valid_to``). The repeats persist in :func:`repeats_table`.
"""

from __future__ import annotations

from pipeledger.common.columns import LOADED_AT_COLUMN, ROW_HASH, RUN_ID_COLUMN, Column, TableName
from pipeledger.publish.before import side_table
from pipeledger.publish.merge_sql import (
    DELETED_FLAG,
    IS_CURRENT,
    VALID_FROM,
    VALID_TO,
    VANISHED,
    MergeSpec,
    keys_in,
)
from pipeledger.warehouse.dialect import Dialect, quote

AFFECTED = "_pipeledger_affected"
ITEMS = "_pipeledger_items"
ORDERED = "_pipeledger_ordered"
HISTORY = "_pipeledger_history"
HISTORY_INDEX = "_pipeledger_history_key"
SINCE = "_pipeledger_since"  # the least cursor a run brings for a key
TOMBSTONE = "_pipeledger_tombstone"  # 1: the key was deleted at this cursor
ORIGIN = "_pipeledger_origin"  # where an item comes from:
STORED, STAGED, SNAPSHOT = 0, 1, 2  # the target, this run's stage, a full snapshot's lack
KEPT = "_pipeledger_kept"  # 1: a version or deletion of the history; 0: a repeat


def repeats_table(target: TableName) -> TableName:
    """The rows an SCD2 target absorbed: a version equal to its key's version before it,
    a delete of a key already deleted. Kept (key, cursor, whether a delete) so that a late
    change arriving before one of them ends where the repeated content came back."""
    return side_table("repeats", target)


def _names(columns: list[str], alias: str = "") -> str:
    prefix = f"{alias}." if alias else ""
    return ", ".join(f"{prefix}{quote(c)}" for c in columns)


def _join(spec: MergeSpec, left: str, right: str) -> str:
    return " AND ".join(f"{left}.{quote(k)} = {right}.{quote(k)}" for k in spec.key)


def _at(spec: MergeSpec, left: str, right: str) -> str:
    """``left``'s stored version that begins at ``right``'s cursor."""
    begins = f"{left}.{quote(VALID_FROM)} = {right}.{quote(spec.cursor)}"
    return f"{_join(spec, left, right)} AND {begins}"


def _content(d: Dialect, spec: MergeSpec, alias: str) -> str:
    """A version's content as text: its values but the cursor (when it began)."""
    columns = [c for c in spec.values if c != spec.cursor]
    return d.row_text(alias, columns) if columns else "''"


def key_columns(spec: MergeSpec) -> list[Column]:
    return [c for c in spec.columns if c.name in spec.key]


def affected_columns(spec: MergeSpec) -> list[Column]:
    return [*key_columns(spec), Column(SINCE, spec.cursor_type)]


def item_columns(spec: MergeSpec) -> list[Column]:
    hashed = [ROW_HASH] if spec.fingerprints else []
    return [*spec.columns, *hashed, Column(TOMBSTONE, "integer"), Column(ORIGIN, "integer")]


def ordered_columns(spec: MergeSpec) -> list[Column]:
    return [*item_columns(spec), Column(KEPT, "integer")]


def history_columns(spec: MergeSpec) -> list[Column]:
    return [*item_columns(spec), Column(VALID_TO, spec.cursor_type)]


def create_repeats(d: Dialect, spec: MergeSpec) -> str:
    columns = [*key_columns(spec), Column(spec.cursor, spec.cursor_type)]
    body = ", ".join(f"{quote(c.name)} {d.column_type(c.sql_type)}" for c in columns)
    keys = _names([*spec.key, spec.cursor])
    return (
        f"CREATE TABLE IF NOT EXISTS {d.table(repeats_table(spec.target))} ({body}, "
        f"{quote(TOMBSTONE)} integer NOT NULL, PRIMARY KEY ({keys}))"
    )


def clear_repeats(d: Dialect, spec: MergeSpec) -> str:
    """A new target (made anew, or by --full-refresh) has no repeats yet."""
    return f"DELETE FROM {d.table(repeats_table(spec.target))}"


def fill_affected(d: Dialect, spec: MergeSpec, vanished: bool) -> str:
    """The keys this run touches (staged items, or lacking from a full snapshot: those at
    the time bound), each with the least cursor it brings."""
    keys, cursor = _names(list(spec.key)), quote(spec.cursor)
    staged = f"SELECT {keys}, {cursor} FROM {d.temp(ITEMS)} WHERE {quote(ORIGIN)} = {STAGED}"
    lacking = f" UNION ALL SELECT {keys}, {d.param} FROM {d.temp(VANISHED)}" if vanished else ""
    return (
        f"INSERT INTO {d.temp(AFFECTED)} ({keys}, {quote(SINCE)}) "
        f"SELECT {keys}, min(n.{cursor}) FROM ({staged}{lacking}) AS n GROUP BY {keys}"
    )


def stored_versions(d: Dialect, spec: MergeSpec) -> str:
    """Items: every stored version of the affected keys."""
    stored = _names(spec.stored)
    return (
        f"INSERT INTO {d.temp(ITEMS)} ({stored}, {quote(TOMBSTONE)}, {quote(ORIGIN)}) "
        f"SELECT {_names(spec.stored, 't')}, 0, {STORED} FROM {d.table(spec.target)} AS t "
        f"WHERE {keys_in('t', spec.key, d.temp(AFFECTED))}"
    )


def stored_deletions(d: Dialect, spec: MergeSpec) -> str:
    """Items: the deletions the stored history implies. A closed version that no version
    follows at its ``valid_to`` was closed by a delete, which a late change must not undo."""
    keys = _names(list(spec.key))
    successor = (
        f"SELECT 1 FROM {d.table(spec.target)} AS n WHERE {_join(spec, 'n', 't')} "
        f"AND n.{quote(VALID_FROM)} = t.{quote(VALID_TO)}"
    )
    return (
        f"INSERT INTO {d.temp(ITEMS)} ({keys}, {quote(spec.cursor)}, {quote(TOMBSTONE)}, "
        f"{quote(ORIGIN)}) SELECT {_names(list(spec.key), 't')}, t.{quote(VALID_TO)}, 1, "
        f"{STORED} FROM {d.table(spec.target)} AS t WHERE t.{quote(VALID_TO)} IS NOT NULL "
        f"AND {keys_in('t', spec.key, d.temp(AFFECTED))} AND NOT EXISTS ({successor})"
    )


def _repeats_since(d: Dialect, spec: MergeSpec) -> str:
    """The stored repeats ``r`` of the affected keys ``a`` from the least new cursor on
    (earlier ones stay repeats: nothing new comes before them)."""
    return (
        f"FROM {d.table(repeats_table(spec.target))} AS r JOIN {d.temp(AFFECTED)} AS a "
        f"ON {_join(spec, 'a', 'r')} AND r.{quote(spec.cursor)} >= a.{quote(SINCE)}"
    )


def stored_repeats(d: Dialect, spec: MergeSpec) -> str:
    """Items: the stored repeats that a new item may come before, a repeated version with
    the content of the version it repeats (no fingerprint: it was never stored as a row)."""
    columns = [c for c in spec.names if c != spec.cursor]
    values = [f"r.{quote(c)}" if c in spec.key else f"t.{quote(c)}" for c in columns]
    within = (
        f"{_join(spec, 't', 'r')} AND t.{quote(VALID_FROM)} <= r.{quote(spec.cursor)} "
        f"AND (t.{quote(VALID_TO)} IS NULL OR r.{quote(spec.cursor)} < t.{quote(VALID_TO)})"
    )
    return (
        f"INSERT INTO {d.temp(ITEMS)} ({_names(columns)}, {quote(spec.cursor)}, "
        f"{quote(TOMBSTONE)}, {quote(ORIGIN)}) SELECT {', '.join(values)}, "
        f"r.{quote(spec.cursor)}, r.{quote(TOMBSTONE)}, {STORED} {_repeats_since(d, spec)} "
        f"LEFT JOIN {d.table(spec.target)} AS t ON r.{quote(TOMBSTONE)} = 0 AND {within}"
    )


def staged_items(d: Dialect, spec: MergeSpec, source: str) -> str:
    """Items: the staged rows (one per key and cursor), a marked row as a deletion; not a
    row that is its key's current version as it is (re-runs: it cannot change anything,
    and its key need not be touched)."""
    stored = _names(spec.stored)
    flag = f"s.{quote(DELETED_FLAG)}"
    deleted = f"CASE WHEN {flag} THEN 1 ELSE 0 END" if spec.markers else "0"
    current = (
        f"NOT EXISTS (SELECT 1 FROM {d.table(spec.target)} AS t WHERE {_at(spec, 't', 's')} "
        f"AND t.{quote(IS_CURRENT)} AND NOT ({d.differs('t', 's', spec.values)}))"
    )
    news = f"{flag} OR {current}" if spec.markers else current
    return (
        f"INSERT INTO {d.temp(ITEMS)} ({stored}, {quote(TOMBSTONE)}, {quote(ORIGIN)}) "
        f"SELECT {_names(spec.stored, 's')}, {deleted}, {STAGED} FROM {source} AS s "
        f"WHERE {news}"
    )


def snapshot_deletions(d: Dialect, spec: MergeSpec) -> str:
    """Items: a deletion of every key a full snapshot lacks, at the time bound."""
    keys = _names(list(spec.key))
    return (
        f"INSERT INTO {d.temp(ITEMS)} ({keys}, {quote(spec.cursor)}, {quote(TOMBSTONE)}, "
        f"{quote(ORIGIN)}) SELECT {_names(list(spec.key), 'v')}, {d.param}, 1, {SNAPSHOT} "
        f"FROM {d.temp(VANISHED)} AS v"
    )


def withdraw_deletions(d: Dialect, spec: MergeSpec) -> str:
    """A full snapshot is the current truth: a key it holds at a cursor is not deleted at or
    after that cursor, so the stored deletions saying so are withdrawn (the key had gone
    from a snapshot and came back; its version is current again)."""
    cursor, tomb, origin = quote(spec.cursor), quote(TOMBSTONE), quote(ORIGIN)
    held = (
        f"SELECT 1 FROM {d.temp(ITEMS)} AS s WHERE s.{origin} = {STAGED} AND s.{tomb} = 0 "
        f"AND {_join(spec, 's', 'i')} AND s.{cursor} <= i.{cursor}"
    )
    return (
        f"DELETE FROM {d.temp(ITEMS)} AS i WHERE i.{tomb} = 1 AND i.{origin} = {STORED} "
        f"AND EXISTS ({held})"
    )


def _preference(d: Dialect, spec: MergeSpec) -> str:
    """Which item one key's cursor keeps when several claim it: a deletion (the stored one
    first: it is no news), then a version as ``on_conflict`` says (``update``: the staged
    one; ``newer_wins``: the greater row text; ``ignore``, ``error``: the stored one)."""
    first = f"{quote(TOMBSTONE)} DESC, {quote(TOMBSTONE)} * {quote(ORIGIN)}"
    if spec.policy == "update":
        return f"{first}, {quote(ORIGIN)} DESC"
    if spec.policy == "newer_wins":
        return f"{first}, {d.row_text('i', spec.values)} DESC, {quote(ORIGIN)}"
    return f"{first}, {quote(ORIGIN)}"


def order_items(d: Dialect, spec: MergeSpec) -> str:
    """Fill :data:`ORDERED`: per key in cursor order, one item per cursor
    (:func:`_preference`), kept unless it is a repeat: a version whose content equals the
    version before it, or a deletion that follows no version (nothing to close)."""
    columns = [c.name for c in item_columns(spec)]
    keys, cursor, tomb = _names(list(spec.key)), quote(spec.cursor), quote(TOMBSTONE)
    ranked = (
        f"SELECT i.*, row_number() OVER (PARTITION BY {keys}, {cursor} "
        f"ORDER BY {_preference(d, spec)}) AS pick FROM {d.temp(ITEMS)} AS i"
    )
    neighbours = (
        f"SELECT {_names(columns, 'c')}, {_content(d, spec, 'c')} AS this_text, "
        f"lag(c.{tomb}) OVER w AS prev_tomb, lag({_content(d, spec, 'c')}) OVER w AS prev_text "
        f"FROM ({ranked}) AS c WHERE c.pick = 1 "
        f"WINDOW w AS (PARTITION BY {_names(list(spec.key), 'c')} ORDER BY c.{cursor})"
    )
    kept = (
        f"CASE WHEN (m.{tomb} = 1 AND m.prev_tomb = 0) OR (m.{tomb} = 0 AND (m.prev_tomb "
        "IS NULL OR m.prev_tomb = 1 OR m.prev_text <> m.this_text)) THEN 1 ELSE 0 END"
    )
    return (
        f"INSERT INTO {d.temp(ORDERED)} ({_names(columns)}, {quote(KEPT)}) "
        f"SELECT {_names(columns, 'm')}, {kept} FROM ({neighbours}) AS m"
    )


def resolve_history(d: Dialect, spec: MergeSpec) -> str:
    """Fill :data:`HISTORY`: the kept items, each version valid until the next kept item's
    cursor (NULL: the current version)."""
    columns = [c.name for c in item_columns(spec)]
    cursor = quote(spec.cursor)
    return (
        f"INSERT INTO {d.temp(HISTORY)} ({_names(columns)}, {quote(VALID_TO)}) "
        f"SELECT {_names(columns, 'o')}, lead(o.{cursor}) OVER (PARTITION BY "
        f"{_names(list(spec.key), 'o')} ORDER BY o.{cursor}) FROM {d.temp(ORDERED)} AS o "
        f"WHERE o.{quote(KEPT)} = 1"
    )


def history_index(d: Dialect, spec: MergeSpec) -> str:
    """Lets the sync find a target row's version in :data:`HISTORY` by index."""
    keys = _names([*spec.key, spec.cursor])
    return f"CREATE INDEX {d.temp(HISTORY_INDEX)} ON {quote(HISTORY)} ({keys})"


def count_changes(d: Dialect, spec: MergeSpec) -> str:
    """(new versions, staged rows that change the history, deletions that took effect)."""
    target, tomb, origin = d.table(spec.target), quote(TOMBSTONE), quote(ORIGIN)
    stored_at = f"SELECT 1 FROM {target} AS t WHERE {_at(spec, 't', 'h')}"
    same = f"{stored_at} AND NOT ({d.differs('t', 'h', spec.values)})"
    new = d.count_where(f"h.{tomb} = 0 AND NOT EXISTS ({stored_at})")
    changing = d.count_where(f"h.{origin} = {STAGED} AND (h.{tomb} = 1 OR NOT EXISTS ({same}))")
    deletions = d.count_where(f"h.{tomb} = 1 AND h.{origin} <> {STORED}")
    return f"SELECT {new}, {changing}, {deletions} FROM {d.temp(HISTORY)} AS h"


def rewritten(d: Dialect, spec: MergeSpec) -> str:
    """Stored rows ``t`` of the affected keys that the new history does not hold as they
    are (closed, re-dated, corrected, or now a repeat of the version before them)."""
    same = (
        f"SELECT 1 FROM {d.temp(HISTORY)} AS h WHERE h.{quote(TOMBSTONE)} = 0 "
        f"AND {_at(spec, 't', 'h')} "
        f"AND NOT (h.{quote(VALID_TO)} {d.distinct_operator} t.{quote(VALID_TO)}) "
        f"AND NOT ({d.differs('h', 't', spec.values)})"
    )
    return f"{keys_in('t', spec.key, d.temp(AFFECTED))} AND NOT EXISTS ({same})"


def insert_versions(d: Dialect, spec: MergeSpec) -> str:
    """The new history's versions that the target lacks, by this run (parameters: its id
    and time)."""
    stored = _names(spec.stored)
    history = f"{quote(VALID_FROM)}, {quote(VALID_TO)}, {quote(IS_CURRENT)}"
    meta = f"{quote(RUN_ID_COLUMN)}, {quote(LOADED_AT_COLUMN)}"
    there = f"SELECT 1 FROM {d.table(spec.target)} AS t WHERE {_at(spec, 't', 'h')}"
    return (
        f"INSERT INTO {d.table(spec.target)} ({stored}, {history}, {meta}) "
        f"SELECT {_names(spec.stored, 'h')}, h.{quote(spec.cursor)}, h.{quote(VALID_TO)}, "
        f"h.{quote(VALID_TO)} IS NULL, {d.param}, {d.param} FROM {d.temp(HISTORY)} AS h "
        f"WHERE h.{quote(TOMBSTONE)} = 0 AND NOT EXISTS ({there})"
    )


def forget_repeats(d: Dialect, spec: MergeSpec) -> str:
    """The stored repeats this run reconsidered (:func:`stored_repeats`) go ..."""
    reconsidered = (
        f"SELECT 1 FROM {d.temp(AFFECTED)} AS a WHERE {_join(spec, 'a', 'x')} "
        f"AND x.{quote(spec.cursor)} >= a.{quote(SINCE)}"
    )
    return f"DELETE FROM {d.table(repeats_table(spec.target))} AS x WHERE EXISTS ({reconsidered})"


def keep_repeats(d: Dialect, spec: MergeSpec) -> str:
    """... and this run's repeats are kept (the reconsidered ones that still are, and new)."""
    keys = _names([*spec.key, spec.cursor])
    return (
        f"INSERT INTO {d.table(repeats_table(spec.target))} ({keys}, {quote(TOMBSTONE)}) "
        f"SELECT {_names([*spec.key, spec.cursor], 'o')}, o.{quote(TOMBSTONE)} "
        f"FROM {d.temp(ORDERED)} AS o WHERE o.{quote(KEPT)} = 0"
    )


def broken_history(d: Dialect, spec: MergeSpec) -> str:
    """Versions of the affected keys that break the invariants (up to 5, with how many):
    ``valid_from`` is the cursor; a version is current exactly when ``valid_to`` is NULL;
    it ends after it began; it ends no later than the next version begins (so versions
    never overlap, and only the last can be current). A gap between two versions is the
    time the key was deleted."""
    keys = _names(list(spec.key), "t")
    vf, vt, now = quote(VALID_FROM), quote(VALID_TO), quote(IS_CURRENT)
    versions = (
        f"SELECT {keys}, t.{quote(spec.cursor)} AS cursor_value, t.{vf}, t.{vt}, t.{now}, "
        f"lead(t.{vf}) OVER (PARTITION BY {keys} ORDER BY t.{vf}) AS next_from "
        f"FROM {d.table(spec.target)} AS t WHERE {keys_in('t', spec.key, d.temp(AFFECTED))}"
    )
    broken = (
        f"v.{vf} <> v.cursor_value OR (v.{vt} IS NULL) <> v.{now} OR v.{vt} <= v.{vf} "
        f"OR (v.next_from IS NOT NULL AND (v.{vt} IS NULL OR v.{vt} > v.next_from))"
    )
    return (
        f"SELECT {_names(list(spec.key), 'v')}, count(*) OVER () FROM ({versions}) AS v "
        f"WHERE {broken} LIMIT 5"
    )
