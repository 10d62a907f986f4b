"""Publishing staged rows: a new target is created from them, an existing one merged with
them in one set-based statement under the pipeline's conflict policy, and every row counted.

Every kind of run that publishes (a load, a quarantine replay, a model) ends here.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from pipeledger.errors import ConflictError, WarehouseError
from pipeledger.load import sql
from pipeledger.load.before import (
    META,
    before_table,
    create_before_table,
    keep_before_images,
    replaced_rows,
)
from pipeledger.load.result import MergeCounts
from pipeledger.schema import LOADED_AT_COLUMN, RUN_ID_COLUMN, Column, TableName
from pipeledger.warehouse.dialect import quote
from pipeledger.warehouse.session import Session
from pipeledger.warehouse.stage import create_schema, unique_key_index


def first_load(
    session: Session,
    spec: sql.MergeSpec,
    staged: int,
    run_id: str,
    loaded_at: datetime,
    resolve_duplicates: bool = True,
    promotable: bool = False,
) -> MergeCounts:
    """Create the target and fill it with a plain insert; if the staged rows repeat a key,
    fall back to the full merge (or, with ``resolve_duplicates=False``, raise the unique
    violation). PostgreSQL builds the primary key after the insert; a promotable stage
    simply becomes the target."""
    d = session.dialect
    if promotable:
        try:
            with session.savepoint():
                for statement in sql.promote_stage(spec, run_id, loaded_at):
                    session.execute(statement)
            return MergeCounts(inserted=staged)
        except WarehouseError as exc:
            if exc.sqlstate != WarehouseError.UNIQUE_VIOLATION or not resolve_duplicates:
                raise
        counts = first_load(session, spec, staged, run_id, loaded_at)
        for statement in sql.drop_promotable_stage(run_id):
            session.execute(statement)
        return counts
    deferred_key = d.deferred_primary_key
    schema = create_schema(d, spec.target)
    if schema:
        session.execute(schema)
    session.execute(sql.create_target(d, spec, primary_key=not deferred_key))
    try:
        with session.savepoint():
            inserted = session.execute(sql.insert_new(d, spec, d.stage()), [run_id, loaded_at])
            if deferred_key:
                session.execute(sql.add_primary_key(d, spec))
        return MergeCounts(inserted=inserted)
    except WarehouseError as exc:
        if exc.sqlstate != WarehouseError.UNIQUE_VIOLATION or not resolve_duplicates:
            raise
    if deferred_key:
        session.execute(sql.add_primary_key(d, spec))
    return merge_staged(session, spec, staged, run_id, loaded_at)


def merge_staged(
    session: Session, spec: sql.MergeSpec, staged: int, run_id: str, loaded_at: datetime
) -> MergeCounts:
    """Merge the staged rows into the target under ``spec.policy`` and count what happened."""
    source, unique = _unique_source(session, spec, staged)
    if spec.policy == "error":
        _refuse_conflicts(session, spec, source)
    if spec.before_images:
        keep_replaced(session, spec, source, run_id)
    return _upsert(session, spec, source, staged, unique, run_id, loaded_at)


def keep_replaced(session: Session, spec: sql.MergeSpec, source: str, run_id: str) -> None:
    """Before the merge: the target rows it will replace, as before-images (load.before)."""
    d = session.dialect
    condition = sql.update_condition(d, spec, incoming="s", stored="t")
    if condition is None:  # the policy never replaces a row
        return
    ensure_before_table(session, spec.target, spec.columns)
    join = " AND ".join(f"t.{quote(k)} = s.{quote(k)}" for k in spec.key)
    meta = META if spec.fingerprints else (RUN_ID_COLUMN, LOADED_AT_COLUMN)
    where = replaced_rows(d, join, condition, source)
    session.execute(keep_before_images(d, spec.target, spec.names, where, meta), [run_id])


def ensure_before_table(session: Session, target: TableName, columns: Sequence[Column]) -> None:
    """The target's before-image table, with every column the target has now."""
    d = session.dialect
    session.execute(create_before_table(d, target, columns))
    have = {name for name, _ in session.table_columns(before_table(target)) or []}
    for column in columns:
        if column.name not in have:  # the target gained a column since
            session.execute(sql.add_column(d, before_table(target), column))


def _unique_source(session: Session, spec: sql.MergeSpec, staged: int) -> tuple[str, int]:
    """The staged rows with one row per key: the staging table itself when its keys are
    already unique (the usual case), else a deduplicated copy (greatest cursor wins)."""
    d = session.dialect
    if d.proves_keys_by_index:
        try:
            with session.savepoint():
                session.execute(unique_key_index(d, spec.key))
            return d.stage(), staged
        except WarehouseError as exc:
            if exc.sqlstate != WarehouseError.UNIQUE_VIOLATION:
                raise
    elif not session.query(sql.duplicate_keys(d, spec)):
        return d.stage(), staged
    if spec.policy == "error":
        _refuse(spec, session.query(sql.conflicting_duplicates(d, spec)), "in this run")
    session.execute(sql.dedupe_stage(d, spec))
    source = d.stage_unique()
    if d.proves_keys_by_index:  # lets the merge join the target by index
        session.execute(unique_key_index(d, spec.key, source))
    return source, int(session.query(f"SELECT count(*) FROM {source}")[0][0])


def _upsert(
    session: Session,
    spec: sql.MergeSpec,
    source: str,
    staged: int,
    unique: int,
    run_id: str,
    loaded_at: datetime,
) -> MergeCounts:
    d = session.dialect
    if d.merge_returns_counts:
        for setting in sql.MERGE_PLANNER_SETTINGS:
            session.execute(setting)
        inserted, updated = session.query(sql.merge(d, spec, source), [run_id, loaded_at])[0]
        for setting in sql.MERGE_PLANNER_RESET:
            session.execute(setting)
    else:
        inserted = int(session.query(sql.count_new_keys(d, spec, source))[0][0])
        updated = session.execute(sql.merge(d, spec, source), [run_id, loaded_at]) - inserted
    return MergeCounts(
        inserted=int(inserted),
        updated=int(updated),
        unchanged=unique - int(inserted) - int(updated),
        superseded=staged - unique,
    )


def _refuse_conflicts(session: Session, spec: sql.MergeSpec, source: str) -> None:
    rows = session.query(sql.conflicting_rows(session.dialect, spec, source))
    _refuse(spec, rows, "than the target holds")


def _refuse(spec: sql.MergeSpec, rows: list[tuple[object, ...]], versus: str) -> None:
    if not rows:
        return
    total = int(str(rows[0][-1]))
    keys = ", ".join(_key_text(spec.key, row[:-1]) for row in rows)
    raise ConflictError(
        f"target {spec.target}: {total} key(s) arrived with different content {versus} "
        f"under on_conflict = 'error' (e.g. {keys})"
    )


def _key_text(names: Sequence[str], values: Sequence[object]) -> str:
    return "(" + ", ".join(f"{n}={v!r}" for n, v in zip(names, values, strict=True)) + ")"
