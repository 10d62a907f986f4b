"""Publishing staged rows: a new target is created from them, an existing one merged with
them in one set-based statement under the pipeline's conflict policy, and every row counted.

The merge also applies the run's deletes (:mod:`pipeledger.publish.deletes`: marked rows,
and the keys a full snapshot lacks), and an SCD2 target's history is merged by
:mod:`pipeledger.publish.scd2`. ``mode = "append"`` needs nothing of its own: its key is
the pipeline's key and the cursor, so a new version is a new row and a version read again
is an unchanged one.

Every kind of run that publishes (a load, a quarantine replay, a model) ends here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from pipeledger.common.columns import (
    DELETED_AT_COLUMN,
    LOADED_AT_COLUMN,
    RUN_ID_COLUMN,
    Column,
    TableName,
)
from pipeledger.config.model import HISTORY_COLUMNS, PipelineConfig
from pipeledger.errors import ConflictError, SchemaError, WarehouseError
from pipeledger.publish import merge_sql as sql
from pipeledger.publish.before import META, ensure_before_table, keep_before_images, replaced_rows
from pipeledger.publish.counts import MergeCounts
from pipeledger.publish.deletes import Vanished, delete_marked, delete_vanished
from pipeledger.publish.scd2 import publish_history, start_history
from pipeledger.transform.shape import Shape, shape_from_table
from pipeledger.warehouse.dialect import quote
from pipeledger.warehouse.session import Session
from pipeledger.warehouse.stage import create_schema, unique_key_index


def pipeline_spec(
    pipeline: PipelineConfig,
    target: TableName,
    columns: tuple[Column, ...],
    fingerprints: bool,
    before_images: bool,
    markers: bool = True,
) -> sql.MergeSpec:
    """How a pipeline's rows merge into its target (``markers``: the stage carries the
    delete flag of a pipeline with a delete marker; a quarantine replay's does not)."""
    key = pipeline.identity if pipeline.mode == "append" else pipeline.key
    return sql.MergeSpec(
        target=target,
        columns=columns,
        key=tuple(key),
        cursor=pipeline.cursor or "",
        policy=pipeline.on_conflict,
        fingerprints=fingerprints,
        before_images=before_images,
        markers=markers and pipeline.deleted is not None,
        soft_delete=pipeline.soft_delete,
        history=pipeline.history is not None,
    )


def pipeline_shape(pipeline: PipelineConfig, rows: Sequence[tuple[str, str]]) -> Shape:
    """The shape of a pipeline's existing target from its catalog columns, without what
    pipeledger adds (an SCD2 target's validity, a soft delete's time). The shape's key is
    what identifies a staged row (with append and SCD2: the key and the cursor)."""
    names = {name for name, _ in rows}
    if pipeline.history and not set(HISTORY_COLUMNS) <= names:
        raise SchemaError(
            f"target {pipeline.target} has no {'/'.join(HISTORY_COLUMNS)} columns: it was "
            "not made with history = 'scd2'; load the history into a new target"
        )
    added = {DELETED_AT_COLUMN, *(HISTORY_COLUMNS if pipeline.history else ())}
    data = [(name, kind) for name, kind in rows if name not in added]
    return shape_from_table(
        data, pipeline.identity, pipeline.cursor, pipeline.partition_by, table=pipeline.target
    )


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
    violation). The primary key is built after the insert; a promotable stage
    simply becomes the target. Delete markers and SCD2 take the full merge into the new
    (empty) target: a marked row is no row to insert, and versions need their validity.
    SQLite's key is a unique index (:func:`~pipeledger.publish.merge_sql.add_primary_key`)."""
    d = session.dialect
    if spec.markers or spec.history:
        create_target(session, spec)
        if spec.history:
            start_history(session, spec)
        return merge_staged(session, spec, staged, run_id, loaded_at)
    if promotable:
        try:
            with session.savepoint():
                for statement in sql.promote_stage(d, spec, run_id, loaded_at):
                    session.execute(statement)
            return MergeCounts(inserted=staged)
        except WarehouseError as exc:
            if exc.sqlstate != WarehouseError.UNIQUE_VIOLATION or not resolve_duplicates:
                raise
        counts = first_load(session, spec, staged, run_id, loaded_at)
        for statement in sql.drop_promotable_stage(d, run_id):
            session.execute(statement)
        return counts
    deferred_key = d.deferred_primary_key
    if not d.partial_rollback and session.query(sql.duplicate_keys(d, spec)):
        create_target(session, spec)  # a failed insert would lose the transaction: merge
        return merge_staged(session, spec, staged, run_id, loaded_at)
    create_target(session, spec, primary_key=not deferred_key)
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


def create_target(session: Session, spec: sql.MergeSpec, primary_key: bool = True) -> None:
    schema = create_schema(session.dialect, spec.target)
    if schema:
        session.execute(schema)
    session.execute(sql.create_target(session.dialect, spec, primary_key=primary_key))


def merge_staged(
    session: Session,
    spec: sql.MergeSpec,
    staged: int,
    run_id: str,
    loaded_at: datetime,
    vanished: Vanished | None = None,
    filtered: bool = True,
) -> MergeCounts:
    """Merge the staged rows into the target under ``spec.policy``, apply the run's deletes
    (``vanished``: the keys a full snapshot lacks) and count what happened; ``filtered``:
    join the target first, for rows that are mostly unchanged (``sql.merge``)."""
    source, unique = _unique_source(session, spec, staged)
    if spec.policy == "error":
        _refuse_conflicts(session, spec, source)
    if spec.history:
        return publish_history(session, spec, source, (staged, unique), run_id, loaded_at, vanished)
    if spec.before_images:
        keep_replaced(session, spec, source, run_id)
    marked = delete_marked(session, spec, source, run_id, loaded_at) if spec.markers else 0
    counts = _upsert(session, spec, source, staged, unique, run_id, loaded_at, filtered=filtered)
    lacking = delete_vanished(session, spec, run_id, loaded_at) if vanished else 0
    deleted = marked + lacking
    return replace(
        counts,
        unchanged=counts.unchanged - marked,
        deleted=deleted,
        net_rows=counts.inserted if spec.soft_delete else counts.inserted - deleted,
    )


def keep_replaced(session: Session, spec: sql.MergeSpec, source: str, run_id: str) -> None:
    """Before the merge: the target rows it will replace, as before-images (load.before)."""
    d = session.dialect
    condition = sql.update_condition(d, spec, incoming="s", stored="t")
    if condition is None:  # the policy never replaces a row
        return
    ensure_before_table(session, spec.target, spec.columns)
    join = " AND ".join(f"t.{quote(k)} = s.{quote(k)}" for k in spec.key)
    live = spec.live("s")
    if live:  # a marked row deletes (load.deletes), it replaces nothing
        join = f"{join} AND {live}"
    meta = META if spec.fingerprints else (RUN_ID_COLUMN, LOADED_AT_COLUMN)
    where = replaced_rows(d, join, condition, source)
    # both sides unique on the key: merge-joined (or probed), not hashed (128k staged rows
    # against an 857k-row target: the hash spilled to disk, 0.52-0.56 s; merged 0.18-0.25 s)
    settings = sql.merge_planner(d, probe=False)
    for setting in settings:
        session.execute(setting)
    session.execute(keep_before_images(d, spec.target, spec.names, where, meta), [run_id])
    for setting in sql.MERGE_PLANNER_RESET if settings else ():
        session.execute(setting)


def _unique_source(session: Session, spec: sql.MergeSpec, staged: int) -> tuple[str, int]:
    """The staged rows with one row per key (SCD2: per key and cursor): the staging table
    itself when its keys are already unique (the usual case), else a deduplicated copy
    (greatest cursor wins, then a delete)."""
    d = session.dialect
    if d.proves_keys_by_index:
        try:
            with session.savepoint():
                session.execute(unique_key_index(d, spec.identity))
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
        session.execute(unique_key_index(d, spec.identity, source))
    return source, int(session.query(f"SELECT count(*) FROM {source}")[0][0])


def _upsert(
    session: Session,
    spec: sql.MergeSpec,
    source: str,
    staged: int,
    unique: int,
    run_id: str,
    loaded_at: datetime,
    *,
    filtered: bool,
) -> MergeCounts:
    d = session.dialect
    if d.merge_returns_counts:
        settings = sql.merge_planner(d, _small_beside(session, spec, unique)) if filtered else []
        for setting in settings:
            session.execute(setting)
        statement = sql.merge(d, spec, source, filtered)
        inserted, updated = session.query(statement, [run_id, loaded_at])[0]
        for setting in sql.MERGE_PLANNER_RESET if settings else ():
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


def _small_beside(session: Session, spec: sql.MergeSpec, rows: int) -> bool:
    """Whether ``rows`` staged rows are few beside the target's (by the catalog's estimate):
    then the merge probes the target's key rather than reading all of it."""
    estimate = estimated_rows(session, spec.target)
    return estimate is not None and rows <= sql.PROBE_SHARE * estimate


def estimated_rows(session: Session, table: TableName) -> float | None:
    """The catalog's estimate of ``table``'s rows; None where there is none, or it is not
    known yet (never analyzed, vacuumed or indexed)."""
    d = session.dialect
    statement = sql.estimated_rows(d)
    if statement is None:
        return None
    found = session.query(statement, [d.table(table)])
    estimate = float(found[0][0]) if found and found[0][0] is not None else -1.0
    return estimate if estimate > 0 else None


def _refuse_conflicts(session: Session, spec: sql.MergeSpec, source: str) -> None:
    rows = session.query(sql.conflicting_rows(session.dialect, spec, source))
    _refuse(spec, rows, "than the target holds")


def _refuse(spec: sql.MergeSpec, rows: list[tuple[object, ...]], versus: str) -> None:
    if not rows:
        return
    total = int(str(rows[0][-1]))
    keys = ", ".join(_key_text(spec.identity, row[:-1]) for row in rows)
    raise ConflictError(
        f"target {spec.target}: {total} key(s) arrived with different content {versus} "
        f"under on_conflict = 'error' (e.g. {keys})"
    )


def _key_text(names: Sequence[str], values: Sequence[object]) -> str:
    return "(" + ", ".join(f"{n}={v!r}" for n, v in zip(names, values, strict=True)) + ")"
