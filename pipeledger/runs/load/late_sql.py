"""SQL text for measuring late rows (:mod:`pipeledger.runs.load.late`), built by pure functions:
the queries that ask the target which rows it holds, and the bookkeeping of the tables of
state migration 7 (:mod:`pipeledger.state.tables`: files each pipeline has read; late rows
already counted)."""

from __future__ import annotations

from collections.abc import Sequence

from pipeledger.common.columns import ROW_HASH_COLUMN, TableName
from pipeledger.state.tables import FILES_TABLE, LATE_TABLE
from pipeledger.warehouse.dialect import STAGE, Dialect, quote

CANDIDATES = "_pipeledger_late"  # a run's rows below its window, from files new to it
STAGE_ASIDE = "_pipeledger_stage_aside"  # the load's stage while the candidates are staged


def read_files(d: Dialect) -> str:
    return f"SELECT path, size, mtime_ns FROM {d.table(FILES_TABLE)} WHERE pipeline = {d.param}"


def record_file(d: Dialect) -> str:
    """Parameters: pipeline, path, size, mtime_ns, run id, when."""
    return (
        f"INSERT INTO {d.table(FILES_TABLE)} (pipeline, path, size, mtime_ns, first_run_id, "
        f"read_at) VALUES ({d.marks(6)}) ON CONFLICT (pipeline, path, size, mtime_ns) DO NOTHING"
    )


def counted_late(d: Dialect, count: int) -> str:
    """Of ``count`` fingerprints (after the pipeline), those already counted as late."""
    return (
        f"SELECT row_hash FROM {d.table(LATE_TABLE)} WHERE pipeline = {d.param} "
        f"AND row_hash IN ({d.marks(count)})"
    )


def count_late(d: Dialect, rows: int) -> str:
    """Insert ``rows`` late rows: (pipeline, row_hash, lateness_s, run_id, found_at) each."""
    values = ", ".join([f"({d.marks(5)})"] * rows)
    return (
        f"INSERT INTO {d.table(LATE_TABLE)} (pipeline, row_hash, lateness_s, run_id, found_at) "
        f"VALUES {values} ON CONFLICT (pipeline, row_hash) DO NOTHING"
    )


def _same_key(key: Sequence[str], left: str, right: str) -> str:
    return " AND ".join(f"{left}.{quote(k)} = {right}.{quote(k)}" for k in key)


def held_fingerprints(d: Dialect, target: TableName, key: Sequence[str], cursor: str) -> str:
    """Fingerprints of staged rows below a cursor (the parameter) that the target holds as
    they are: what a run re-read for nothing."""
    h = quote(ROW_HASH_COLUMN)
    return (
        f"SELECT s.{h} FROM {d.stage()} AS s JOIN {d.table(target)} AS t "
        f"ON {_same_key(key, 't', 's')} WHERE t.{h} = s.{h} AND s.{quote(cursor)} < {d.param}"
    )


def unheld_rows(
    d: Dialect,
    target: TableName,
    key: Sequence[str],
    cursor: str,
    rows: str,
    columns: Sequence[str],
    where: str,
) -> str:
    """``columns`` of the ``rows`` (a table, aliased ``c``) matching ``where`` that the
    target lacks: it holds no row of their key with the same fingerprint, an unknown one
    (a row edited by hand, or made before fingerprints: it cannot tell) or a newer cursor
    (the row was superseded, not lost)."""
    h, c = quote(ROW_HASH_COLUMN), quote(cursor)
    selected = ", ".join(f"c.{quote(name)}" for name in columns)
    held = f"t.{h} IS NULL OR t.{h} = c.{h} OR t.{c} > c.{c}"
    return (
        f"SELECT {selected} FROM {rows} AS c WHERE {where} AND NOT EXISTS (SELECT 1 FROM "
        f"{d.table(target)} AS t WHERE {_same_key(key, 't', 'c')} AND ({held}))"
    )


def drop_stage_table(d: Dialect) -> str:
    """The stage, dropped (it held nothing worth keeping)."""
    return f"DROP TABLE IF EXISTS {d.stage()}"


def restore_stage(d: Dialect, name: str) -> str:
    """The table ``name`` (set aside by :func:`keep_stage_as`) becomes the stage again."""
    return f"ALTER TABLE {d.temp(name)} RENAME TO {quote(STAGE)}"


def keep_stage_as(d: Dialect, name: str) -> str:
    """The stage, renamed: what was staged stays for the transaction under ``name`` and the
    stage's own name is free for the load."""
    return f"ALTER TABLE {d.stage()} RENAME TO {quote(name)}"
