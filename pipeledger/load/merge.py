"""Publishing staged rows: a new target is created from them, an existing one merged with
them in one set-based statement under the pipeline's conflict policy, and every row counted.

Every kind of run that publishes (a load, a quarantine replay, a model) ends here.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from pipeledger.errors import ConflictError, WarehouseError
from pipeledger.load import sql
from pipeledger.load.result import MergeCounts
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
    session: Session,
    spec: sql.MergeSpec,
    staged: int,
    run_id: str,
    loaded_at: datetime,
    filtered: bool = True,
) -> MergeCounts:
    """Merge the staged rows into the target under ``spec.policy`` and count what happened;
    ``filtered``: join the target first, for rows that are mostly unchanged (``sql.merge``)."""
    if not filtered:
        counts = _merge_as_staged(session, spec, staged, run_id, loaded_at)
        if counts is not None:
            return counts
    source, unique = _unique_source(session, spec, staged)
    if spec.policy == "error":
        _refuse_conflicts(session, spec, source)
    return _upsert(session, spec, source, staged, unique, run_id, loaded_at, filtered=filtered)


def _merge_as_staged(
    session: Session, spec: sql.MergeSpec, staged: int, run_id: str, loaded_at: datetime
) -> MergeCounts | None:
    """The unfiltered merge straight from the stage, without first proving its keys unique
    (the index that does it costs a few % of an incremental run): where an upsert refuses
    to update a row twice, a key staged twice fails it, and then nothing was written and
    None says so. Not for policies that never update (nothing would fail)."""
    d = session.dialect
    if not d.upsert_refuses_repeats or sql.update_condition(d, spec) is None:
        return None
    try:
        with session.savepoint():
            return _upsert(
                session, spec, d.stage(), staged, staged, run_id, loaded_at, filtered=False
            )
    except WarehouseError as exc:
        if exc.sqlstate != WarehouseError.CARDINALITY_VIOLATION:
            raise
    return None


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
    *,
    filtered: bool,
) -> MergeCounts:
    d = session.dialect
    if d.merge_returns_counts:
        settings = sql.merge_planner(_small_beside(session, spec, unique)) if filtered else []
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
    d = session.dialect
    statement = sql.estimated_rows(d)
    if statement is None:
        return False
    found = session.query(statement, [d.table(spec.target)])
    estimate = float(found[0][0]) if found and found[0][0] is not None else -1.0
    return estimate > 0 and rows <= sql.PROBE_SHARE * estimate


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
