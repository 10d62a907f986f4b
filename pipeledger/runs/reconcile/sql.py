"""SQL text for reconciling a source with its target, built by pure functions.

The source's rows arrive in the stage as (key, cursor, partition, fingerprint) with the
side ``s``; target rows that have no stored fingerprint arrive there too, fingerprinted
by pipeledger, with the side ``t``. From there: the source's current version of each key
(:func:`current_source`; when a unique index proves every key staged once, the staged rows
themselves), per window a count and the sums of the fingerprints' two
32-bit halves on each side (:func:`source_windows`, :func:`target_windows`: the sums are
exact on both warehouses, and ``count`` with ``sum mod 2^64`` do not depend on row
order), then what differs in just the windows that differ (:func:`differences`; with every
key staged once, one join of the stage with the target: :func:`differences_once`). The
stage may hold just the source's rows of the fine windows whose sums differ: the target's
rows of those windows are then found by their bucket (:func:`create_fine_buckets`,
:func:`in_fine_buckets`) or by ranges of the cursor, and :func:`missing_held_elsewhere`
says whether those rows decide alone.
"""

from __future__ import annotations

from collections.abc import Sequence

from pipeledger.common.columns import ROW_HASH_COLUMN, TableName
from pipeledger.warehouse.dialect import STAGE, Dialect, quote

SIDE = "_pipeledger_side"  # 's': a source row; 't': a target row fingerprinted here
WINDOW = "_pipeledger_window"
PICK = "_pipeledger_pick"  # 1 on the one row per key that stands for the key's window
SOURCE = "_pipeledger_reconcile_source"
TARGET_ROWS = "_pipeledger_reconcile_target"
DIFFERENCES = "_pipeledger_reconcile_differences"
WINDOWS = "_pipeledger_reconcile_windows"  # the windows that differ
FINE = "_pipeledger_reconcile_fine"  # the buckets of the fine windows that differ
KINDS = ("missing", "changed", "extra")  # also the order samples are taken in
_H = quote(ROW_HASH_COLUMN)
_LOW = 4294967295  # 2^32 - 1


def _names(columns: Sequence[str], alias: str = "") -> str:
    prefix = f"{alias}." if alias else ""
    return ", ".join(f"{prefix}{quote(c)}" for c in columns)


def _same_key(key: Sequence[str], left: str, right: str) -> str:
    return " AND ".join(f"{left}.{quote(k)} = {right}.{quote(k)}" for k in key)


def _halves(expression: str) -> str:
    """The sums of a fingerprint's high (signed) and low 32 bits: exact in 64-bit sums for
    2^31 rows, where a sum of the fingerprints themselves would overflow."""
    return f"sum({expression} >> 32) AS high, sum({expression} & {_LOW}) AS low"


def current_source(
    d: Dialect, identity: Sequence[str], key: Sequence[str], cursor: str | None, label: str
) -> list[str]:
    """The source's current version of each key: its rows at the greatest cursor (several
    when different versions share it, or there is no cursor: any of them may stand in the
    target), labelled with their window; one of them per key is picked to be counted.
    ``label``: SQL over ``v.<cursor>``. Then an index on the key."""
    keys = _names(key)
    order = f" ORDER BY {quote(cursor)} DESC" if cursor else ""
    newest = f"{quote(cursor)} DESC, " if cursor else ""
    ranked = (
        f"SELECT {_names(identity)}, {_H}, rank() OVER (PARTITION BY {keys}{order}) "
        f"AS r, row_number() OVER (PARTITION BY {keys} ORDER BY {newest}{_H} DESC) AS n "
        f"FROM {d.stage()} WHERE {quote(SIDE)} = 's'"
    )
    return [
        f"CREATE TEMP TABLE {quote(SOURCE)}{d.on_commit_drop} AS SELECT {_names(identity, 'v')}, "
        f"v.{_H}, {label} AS {quote(WINDOW)}, CASE WHEN v.n = 1 THEN 1 ELSE 0 END AS {quote(PICK)} "
        f"FROM ({ranked}) AS v WHERE v.r = 1",
        f"CREATE INDEX {d.temp(SOURCE + '_key')} ON {quote(SOURCE)} ({keys})",
    ]


def unique_source_keys(d: Dialect, key: Sequence[str]) -> str:
    """Fails when the source holds a key twice; when it does not (the usual case), each
    staged row is its key's current version and needs no ranking."""
    return (
        f"CREATE UNIQUE INDEX {d.temp(SOURCE + '_unique')} ON {quote(STAGE)} ({_names(key)}) "
        f"WHERE {quote(SIDE)} = 's'"
    )


def source_windows(d: Dialect) -> str:
    """Per window of the source: keys, and the sums of their fingerprints' halves."""
    return (
        f"SELECT {quote(WINDOW)}, count(*), {_halves(_H)} FROM {d.temp(SOURCE)} "
        f"WHERE {quote(PICK)} = 1 GROUP BY {quote(WINDOW)}"
    )


def staged_source_windows(d: Dialect, label: str) -> str:
    """:func:`source_windows` straight from the stage, when each key is staged once.
    ``label``: SQL over ``v.<cursor>``."""
    return (
        f"SELECT {label}, count(*), {_halves('v.' + _H)} FROM {d.stage()} AS v "
        f"WHERE v.{quote(SIDE)} = 's' GROUP BY {label}"
    )


def target_rows(
    d: Dialect,
    target: TableName,
    identity: Sequence[str],
    key: Sequence[str],
    where: str,
    label: str | None,
    filled: bool,
) -> str:
    """The target's rows matching ``where`` (over the target's own columns), labelled with
    their window (unless ``label`` is None), each with its fingerprint: the stored one,
    else (``filled``) the one the stage holds for its key. ``label``: SQL over
    ``t.<cursor>``."""
    rows = f"(SELECT * FROM {d.table(target)} WHERE {where}) AS t"
    fingerprint = f"t.{_H}"
    if filled:
        staged = f"(SELECT {_names(key)}, {_H} FROM {d.stage()} WHERE {quote(SIDE)} = 't') AS f"
        rows += f" LEFT JOIN {staged} ON {_same_key(key, 'f', 't')}"
        fingerprint = f"coalesce(t.{_H}, f.{_H})"
    window = "" if label is None else f"{label} AS {quote(WINDOW)}, "
    return f"SELECT {_names(identity, 't')}, {window}{fingerprint} AS {_H} FROM {rows}"


def target_windows(d: Dialect, rows: str, label: str) -> str:
    """Per bucket of a window of the target: its label, the bucket itself, rows, and the
    sums of their fingerprints' halves. ``rows``: :func:`target_rows` with a bucket of the
    window in place of its label (a timestamp truncated, cheaper per row than its text),
    labelled once per bucket by ``label`` (SQL over ``b.b``); the bucket is kept so that
    the rows of some windows can be found again by it (:func:`create_fine_buckets`)."""
    buckets = (
        f"SELECT v.{quote(WINDOW)} AS b, count(*) AS n, {_halves('v.' + _H)} FROM ({rows}) "
        f"AS v GROUP BY v.{quote(WINDOW)}"
    )
    return f"SELECT {label}, b.b, b.n, b.high, b.low FROM ({buckets}) AS b"


def create_fine_buckets(d: Dialect, target: TableName, bucket: str) -> str:
    """A table for the buckets of some fine windows, typed as ``bucket`` (SQL over
    ``t.<cursor>``) types them."""
    return (
        f"CREATE TEMP TABLE {quote(FINE)}{d.on_commit_drop} AS SELECT {bucket} AS b "
        f"FROM {d.table(target)} AS t WHERE 1 = 0"
    )


def insert_fine_buckets(d: Dialect, count: int) -> str:
    return _insert_values(d, FINE, "b", count)


def in_fine_buckets(d: Dialect, bucket: str) -> str:
    """Rows (``bucket``: SQL over their cursor) in the fine windows of that table."""
    return f"{bucket} IN (SELECT b FROM {d.temp(FINE)})"


def missing_held_elsewhere(
    d: Dialect, target: TableName, key: Sequence[str], where: str, compared: str
) -> str:
    """One row when a key found missing is held by the target in reach (``where``) but
    outside the rows compared (``compared``, both over the target's own columns): the
    source then holds that key twice, once where the sums matched."""
    rows = f"(SELECT {_names(key)} FROM {d.table(target)} WHERE {where} AND NOT ({compared})) AS t"
    return (
        f"SELECT 1 FROM {rows} JOIN {d.temp(DIFFERENCES)} AS x ON {_same_key(key, 'x', 't')} "
        "WHERE x.kind = 'missing' LIMIT 1"
    )


def create_windows(d: Dialect) -> str:
    return f"CREATE TEMP TABLE {quote(WINDOWS)} ({quote(WINDOW)} text){d.on_commit_drop}"


def insert_windows(d: Dialect, count: int) -> str:
    return _insert_values(d, WINDOWS, quote(WINDOW), count)


def _insert_values(d: Dialect, table: str, column: str, count: int) -> str:
    """``count`` rows of one column (SQL: its name) into a temporary table, each value a
    parameter."""
    values = ", ".join([f"({d.param})"] * count)
    return f"INSERT INTO {d.temp(table)} ({column}) VALUES {values}"


def _differing(d: Dialect) -> str:
    return f"SELECT {quote(WINDOW)} FROM {d.temp(WINDOWS)}"


def keep_target_rows(d: Dialect, rows: str, key: Sequence[str]) -> list[str]:
    """The target's rows of the windows that differ as a temporary table, indexed on the
    key."""
    return [
        f"CREATE TEMP TABLE {quote(TARGET_ROWS)}{d.on_commit_drop} AS SELECT * FROM ({rows}) "
        f"AS v WHERE v.{quote(WINDOW)} IN ({_differing(d)})",
        f"CREATE INDEX {d.temp(TARGET_ROWS + '_key')} ON {quote(TARGET_ROWS)} ({_names(key)})",
    ]


def differences(d: Dialect, identity: Sequence[str], key: Sequence[str]) -> str:
    """Per window that differs, the keys that differ, with the source's version (the
    target's for extra rows):

    * missing: the source has the key in the window, the target has not;
    * extra: the target has the key in the window, the source has not;
    * changed: both have it there, and the target's fingerprint is none of the source's
      current versions."""
    source, target, w = d.temp(SOURCE), d.temp(TARGET_ROWS), quote(WINDOW)
    ids = _names(identity, "s")
    in_window = f"{_same_key(key, 't', 's')} AND t.{w} = s.{w}"
    missing = (
        f"SELECT 'missing' AS kind, s.{w} AS {w}, {ids}, s.{_H} FROM {source} AS s "
        f"WHERE s.{quote(PICK)} = 1 AND s.{w} IN ({_differing(d)}) "
        f"AND NOT EXISTS (SELECT 1 FROM {target} AS t WHERE {in_window})"
    )
    extra = (
        f"SELECT 'extra', t.{w}, {_names(identity, 't')}, t.{_H} FROM {target} AS t "
        f"WHERE NOT EXISTS (SELECT 1 FROM {source} AS s WHERE {in_window})"
    )
    changed = (
        f"SELECT 'changed', t.{w}, {ids}, s.{_H} FROM {target} AS t JOIN {source} AS s "
        f"ON {in_window} AND s.{quote(PICK)} = 1 WHERE NOT EXISTS (SELECT 1 FROM {source} "
        f"AS o WHERE {_same_key(key, 'o', 't')} AND o.{_H} = t.{_H})"
    )
    return (
        f"CREATE TEMP TABLE {quote(DIFFERENCES)}{d.on_commit_drop} AS "
        f"{missing} UNION ALL {extra} UNION ALL {changed}"
    )


def differences_once(
    d: Dialect,
    identity: Sequence[str],
    key: Sequence[str],
    labels: tuple[str, str],
    rows: str,
    source_filter: str | None = None,
) -> str:
    """:func:`differences` when each key is staged once (``labels``: the window, SQL over
    ``s.<cursor>`` and over ``t.<cursor>``; ``rows``: :func:`target_rows` without a
    label): one hash join of the stage with the target on the key, read for all three
    kinds, instead of copying both sides' rows of the differing windows into indexed
    tables and joining them three times. Only pairs whose fingerprints differ are kept,
    and only those are labelled: a fingerprint covers the cursor, so equal ones are in
    the same window. A key whose window moved is missing in the source's window and
    extra in the target's. ``source_filter``: SQL over the stage's columns, the source's
    rows compared (``rows`` the target's), to narrow the join to some windows; its
    parameters come first."""
    w = quote(WINDOW)
    sides = ", ".join(
        f"{side}.{quote(c)} AS {quote(side + '_' + c)}" for side in ("s", "t") for c in identity
    )
    source = f"SELECT {_names(identity)}, {_H} FROM {d.stage()} WHERE {quote(SIDE)} = 's'"
    if source_filter:
        source += f" AND {source_filter}"
    first = quote(key[0])  # NULL in a side only where the join found no row there
    source_label, target_label = labels
    joined = (
        f"SELECT {sides}, {source_label} AS sw, {target_label} AS tw, s.{_H} AS sh, "
        f"t.{_H} AS th FROM ({source}) AS s FULL JOIN ({rows}) AS t ON "
        f"{_same_key(key, 's', 't')} WHERE s.{first} IS NULL OR t.{first} IS NULL "
        f"OR s.{_H} <> t.{_H}"
    )
    s_ids = ", ".join(f"j.{quote('s_' + c)} AS {quote(c)}" for c in identity)
    t_ids = ", ".join(f"j.{quote('t_' + c)}" for c in identity)
    has_s, has_t = f"j.{quote('s_' + key[0])} IS NOT NULL", f"j.{quote('t_' + key[0])} IS NOT NULL"
    moved = "j.sw <> j.tw"
    missing = (
        f"SELECT 'missing' AS kind, j.sw AS {w}, {s_ids}, j.sh AS {_H} FROM j "
        f"WHERE {has_s} AND (NOT {has_t} OR {moved}) AND j.sw IN ({_differing(d)})"
    )
    extra = (
        f"SELECT 'extra', j.tw, {t_ids}, j.th FROM j "
        f"WHERE {has_t} AND (NOT {has_s} OR {moved}) AND j.tw IN ({_differing(d)})"
    )
    changed = (
        f"SELECT 'changed', j.sw, {_names(['s_' + c for c in identity], 'j')}, j.sh FROM j "
        f"WHERE {has_s} AND {has_t} AND j.sw = j.tw AND j.sh <> j.th "
        f"AND j.sw IN ({_differing(d)})"
    )
    return (
        f"CREATE TEMP TABLE {quote(DIFFERENCES)}{d.on_commit_drop} AS "
        f"WITH j AS MATERIALIZED ({joined}) {missing} UNION ALL {extra} UNION ALL {changed}"
    )


def count_differences(d: Dialect) -> str:
    w = quote(WINDOW)
    return f"SELECT {w}, kind, count(*) FROM {d.temp(DIFFERENCES)} GROUP BY {w}, kind"


def sample_keys(d: Dialect, key: Sequence[str], per_window: int) -> str:
    """Up to ``per_window`` keys of each window: missing first, then changed, then extra."""
    w, keys = quote(WINDOW), _names(key)
    order = "CASE kind WHEN 'missing' THEN 0 WHEN 'changed' THEN 1 ELSE 2 END"
    ranked = (
        f"SELECT {w}, {keys}, row_number() OVER (PARTITION BY {w} ORDER BY {order}, {keys}) "
        f"AS n FROM {d.temp(DIFFERENCES)}"
    )
    return (
        f"SELECT v.{w}, {_names(key, 'v')} FROM ({ranked}) AS v WHERE v.n <= {int(per_window)} "
        f"ORDER BY v.{w}, v.n"
    )


def unhashed_count(d: Dialect, target: TableName, where: str) -> str:
    return f"SELECT count(*) FROM {d.table(target)} WHERE {_H} IS NULL AND {where}"


def unhashed_rows(
    d: Dialect,
    target: TableName,
    columns: Sequence[str],
    key: Sequence[str],
    where: str,
    after: bool,
    limit: int,
) -> str:
    """Up to ``limit`` target rows without a fingerprint, in key order: the first page, or
    (``after``) the page after a key (parameters after those of ``where``)."""
    keys = _names(key)
    page = ""
    if after:
        left = keys if len(key) == 1 else f"({keys})"
        right = d.param if len(key) == 1 else f"({d.marks(len(key))})"
        page = f" AND {left} > {right}"
    return (
        f"SELECT {_names(columns)} FROM {d.table(target)} WHERE {_H} IS NULL AND {where}"
        f"{page} ORDER BY {keys} LIMIT {int(limit)}"
    )


def cap_predicate(d: Dialect, cursor: str, partition_by: str | None, partitions: int) -> str:
    """Rows at or before their partition's watermark: ``cursor <= ?``, or per partition
    (``partitions`` pairs of parameters: partition value, watermark)."""
    c = quote(cursor)
    if partition_by is None:
        return f"{c} <= {d.param}"
    part = f"CAST({quote(partition_by)} AS TEXT)"
    pairs = [f"({part} = {d.param} AND {c} <= {d.param})"] * partitions
    return "(" + (" OR ".join(pairs) or "1=0") + ")"
