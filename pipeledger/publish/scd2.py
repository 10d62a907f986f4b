"""SCD2 (``history = "scd2"`` on a load, ``materialized = "scd2"`` on a model): the target
keeps every version of each key, with ``valid_from`` (the version's cursor), ``valid_to``
(NULL for the current version) and ``is_current``; its primary key is (key, valid_from).

The history of a key is a function of the rows seen for it, whatever order they came in:
put every row (and every delete) in cursor order, then

* one row per cursor: a delete wins; between two versions at the same cursor,
  ``on_conflict`` decides (``update``: the newly staged one, ``newer_wins``: the greater row
  text, ``ignore``: the stored one, ``error``: other content fails the run);
* a version whose content (every value but the cursor) equals the version before it is no
  change: it is a *repeat* and adds nothing; a delete that follows no version (the key is
  gone already) is a repeat too; an identical row read again (re-runs, retries, backfills)
  is the same row, never a second version;
* every other version is valid from its cursor until the next version or delete: a
  changed row closes the current version and opens a new one; a late change (older than
  the current version) goes in its place, the versions around it ending where the next
  begins; a delete closes the current version (markers at their cursor; a key a full
  snapshot lacks at the run's time, which needs a date or timestamp cursor);
* a full snapshot is the current truth: a key it holds at a cursor is not deleted at or
  after that cursor, so a deletion recorded since (the key had gone from an earlier
  snapshot) is withdrawn and the key's version is current again.

A run computes this in SQL, in the load's transaction, for the keys it touches only: their
stored versions, the deletes those imply (a closed version that no version follows was
closed by one), their repeats from the run's least cursor on (kept in
``pipeledger.repeats__<schema>__<table>``, so that a late change before a repeat ends where
the repeated content came back, and a backfill finds nothing to change) and the new rows.
Only rows that differ are rewritten (deleted and inserted again: the fingerprint trigger
sees no update from pipeledger). Before COMMIT the touched keys' invariants are checked:
valid_from is the cursor, a version is current exactly when valid_to is NULL, it ends after
it began and no later than the next begins (no overlaps, at most one current version). A
gap between two versions is the time the key was deleted. A violation fails the run.

Counts: ``inserted`` new versions; ``updated`` stored versions rewritten (closed by a newer
version or a delete, re-dated, corrected, or now a repeat); ``deleted`` deletes that closed
a version; ``unchanged`` staged rows that changed no version (repeats among them).
"""

from __future__ import annotations

from datetime import datetime

from pipeledger.common.columns import Column
from pipeledger.errors import HistoryError
from pipeledger.publish import merge_sql as sql
from pipeledger.publish import scd2_sql as hsql
from pipeledger.publish.before import keep_before
from pipeledger.publish.counts import MergeCounts
from pipeledger.publish.deletes import Vanished
from pipeledger.warehouse.session import Session


def publish_history(
    session: Session,
    spec: sql.MergeSpec,
    source: str,
    counts: tuple[int, int],
    run_id: str,
    loaded_at: datetime,
    vanished: Vanished | None = None,
) -> MergeCounts:
    """Merge ``source`` (one row per key and cursor) into the SCD2 target; ``counts``:
    (rows staged, rows in ``source``)."""
    d = session.dialect
    _collect(session, spec, source, vanished)
    for statement in (hsql.order_items, hsql.resolve_history, hsql.history_index):
        session.execute(statement(d, spec))
    new, changing, deletions = (int(n) for n in session.query(hsql.count_changes(d, spec))[0])
    removed, added = _rewrite(session, spec, run_id, loaded_at)
    for statement in (hsql.forget_repeats, hsql.keep_repeats):
        session.execute(statement(d, spec))
    check_history(session, spec)
    staged, unique = counts
    return MergeCounts(
        inserted=new,
        updated=removed,
        unchanged=unique - changing,
        superseded=staged - unique,
        deleted=deletions,
        net_rows=added - removed,
    )


def _rewrite(
    session: Session, spec: sql.MergeSpec, run_id: str, loaded_at: datetime
) -> tuple[int, int]:
    """The touched keys' stored rows that differ from the new history go (kept as
    before-images when a model needs them), its versions that the target lacks come:
    (rows removed, rows added)."""
    d = session.dialect
    where = hsql.rewritten(d, spec)
    if spec.before_images:
        columns = before_image_columns(spec)
        keep_before(session, spec.target, columns, where, run_id, spec.fingerprints)
    removed = session.execute(sql.delete_where(d, spec.target, where))
    return removed, session.execute(hsql.insert_versions(d, spec), [run_id, loaded_at])


def start_history(session: Session, spec: sql.MergeSpec) -> None:
    """A new SCD2 target: its repeats table, empty (a target made anew has none)."""
    d = session.dialect
    if session.table_columns(hsql.repeats_table(spec.target)) is None:
        session.execute(hsql.create_repeats(d, spec))
    else:
        session.execute(hsql.clear_repeats(d, spec))


def _collect(session: Session, spec: sql.MergeSpec, source: str, vanished: Vanished | None) -> None:
    """The touched keys, and every item of their history (module docstring)."""
    d = session.dialect
    if session.table_columns(hsql.repeats_table(spec.target)) is None:  # dropped by hand
        session.execute(hsql.create_repeats(d, spec))
    tables = (
        (hsql.AFFECTED, hsql.affected_columns(spec)),
        (hsql.ITEMS, hsql.item_columns(spec)),
        (hsql.ORDERED, hsql.ordered_columns(spec)),
        (hsql.HISTORY, hsql.history_columns(spec)),
    )
    for name, columns in tables:
        for statement in sql.create_temp(d, name, columns):
            session.execute(statement)
    session.execute(hsql.staged_items(d, spec, source))
    lacking = [vanished.closed_at] if vanished is not None else []
    session.execute(hsql.fill_affected(d, spec, vanished is not None), lacking)
    # every stored row and repeat of a touched key looks it up
    session.execute(sql.temp_index(d, hsql.AFFECTED, spec.key, unique=True))
    session.execute(hsql.stored_versions(d, spec))
    session.execute(hsql.stored_deletions(d, spec))
    session.execute(hsql.stored_repeats(d, spec))
    if vanished is None:
        return
    if not d.hash_joins:  # a stored deletion looks up the staged rows of its key
        session.execute(sql.temp_index(d, hsql.ITEMS, [*spec.key, spec.cursor]))
    session.execute(hsql.withdraw_deletions(d, spec))
    if vanished.count:
        session.execute(hsql.snapshot_deletions(d, spec), [vanished.closed_at])


def check_history(session: Session, spec: sql.MergeSpec) -> None:
    """Fail the run if a touched key's history breaks an invariant (module docstring)."""
    rows = session.query(hsql.broken_history(session.dialect, spec))
    if not rows:
        return
    keys = ", ".join(
        "(" + ", ".join(f"{k}={v!r}" for k, v in zip(spec.key, row[:-1], strict=True)) + ")"
        for row in rows
    )
    raise HistoryError(
        f"target {spec.target}: the history of {int(str(rows[0][-1]))} version(s) breaks "
        f"its invariants (e.g. {keys}): valid_from must be the cursor, a version current "
        "exactly when valid_to is NULL, and versions of a key must not overlap; was the "
        "target edited by hand?"
    )


def before_image_columns(spec: sql.MergeSpec) -> list[Column]:
    """The columns a before-image of an SCD2 target keeps: the data and the version's
    validity (a model reading the history filters on it)."""
    cursor = spec.cursor_type
    validity = [Column(sql.VALID_FROM, cursor), Column(sql.VALID_TO, cursor)]
    return [*spec.columns, *validity, Column(sql.IS_CURRENT, "boolean")]
