"""Deletes: rows a source marks deleted, and keys a full snapshot no longer holds.

* **Delete markers** (``deleted = { column = "op", values = ["D"] }``, or ``deleted = {
  column = "is_deleted" }`` for a boolean): the marker column is read from the source and
  turned into a flag staged beside each row (:data:`~pipeledger.publish.merge_sql.DELETED_FLAG`);
  it is not a column of the target (a CDC feed's operation code is not data). Within a
  run, a key's rows resolve as usual, greatest cursor first, a delete winning at an equal
  cursor: a delete after an update deletes, an update after a delete inserts the key
  again. A marked row deletes its key's row under every ``on_conflict``, except that
  ``newer_wins`` ignores a delete older than the stored row. A marked row whose key the
  target lacks changes nothing. Marked rows are exempt from the row-level quality checks
  (a CDC delete often carries only its key), but not from the key's.
* **Full snapshots** (``sync = "full"``): the source is the whole truth for the rows it
  covers, so every incremental run reads the whole source (no watermark window; the
  watermark is still kept), and a backfill covers its range. The target rows in that
  scope whose key no staged row carries are deleted in the same transaction. In a
  backfill only target rows whose cursor is in the range are candidates (a key whose
  source row has since moved out of the range is deleted until the run that reads its
  new version loads it again). The keys are found right after staging, before the quality
  gate, so a row the gate sets aside does not look deleted.
* **The safety gate**: a snapshot that would delete more than ``max_delete_fraction``
  (default 0.5) of the target's rows in its scope halts the run (exit 3, nothing written):
  a truncated extract must not empty a table. It is the check ``delete_fraction`` of the
  run's quality report and the ledger's ``quality_results``; ``on_mass_delete = "warn"``
  only warns.
* **Soft deletes** (``soft_delete = true``): a delete sets ``_pipeledger_deleted_at`` (and
  the run id and time) and keeps the row; the key then behaves as if it were gone: a row
  for it arriving later brings it back (``_pipeledger_deleted_at`` NULL again, counted as
  updated), and deleting it again changes nothing.

Every delete keeps the deleted row's before-image when a model needs them
(:mod:`pipeledger.publish.before`), counts as ``rows_deleted`` and is recorded as a
``RECORD_DELETED`` audit event; a re-run deletes nothing more. Pipelines with deletes do
not take the backfill shortcut (:mod:`pipeledger.runs.load.known`): a marked row may carry the
same values as the row it deletes, and a snapshot must see every key.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pipeledger.config.model import DeleteMarker, PipelineConfig
from pipeledger.errors import ConfigError, GateFailed, SchemaError, SourceError
from pipeledger.publish import merge_sql as sql
from pipeledger.publish.before import delete_keeping_before, keep_before
from pipeledger.quality.report import CheckResult, CheckStatus, GateReport
from pipeledger.state.watermark import CursorValue
from pipeledger.warehouse.dialect import STAGE, STAGE_UNIQUE, quote
from pipeledger.warehouse.session import Session

if TYPE_CHECKING:  # Arrow and the sources only where a load splits a delete marker off:
    # the models' path (find_vanished) runs without importing them
    import pyarrow as pa

    from pipeledger.sources.base import SourceBatch

_TRUE = ("true", "t", "1", "yes", "y")
_FALSE = ("false", "f", "0", "no", "n", "")


# -- delete markers -----------------------------------------------------------------------
def split_marker(item: SourceBatch, marker: DeleteMarker) -> tuple[SourceBatch, pa.Array]:
    """The source batch without its marker column, and whether each row is a delete."""
    from pipeledger.sources.base import SourceBatch

    batch = item.batch
    index = batch.schema.get_field_index(marker.column)
    if index < 0:
        raise SchemaError(
            f"{item.origin}: the source has no column {marker.column!r} (deleted.column)"
        )
    flags = deleted_flags(item, batch.column(index), marker)
    rest = SourceBatch(
        batch=batch.remove_column(index), origin=item.origin, row_numbers=item.row_numbers
    )
    return rest, flags


def deleted_flags(item: SourceBatch, array: pa.Array, marker: DeleteMarker) -> pa.Array:
    """True where the marker says deleted: one of ``values`` (compared as text), or a true
    boolean (``true``/``false``, ``1``/``0``, ``yes``/``no``); NULL is not deleted."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if marker.values is not None:
        wanted = pa.array([_text(v) for v in marker.values], pa.string())
        return pc.fill_null(pc.is_in(array.cast(pa.string()), value_set=wanted), False)
    if pa.types.is_boolean(array.type):
        return pc.fill_null(array, False)
    if pa.types.is_integer(array.type):
        return pc.fill_null(pc.not_equal(array, 0), False)
    return _boolean_text(item, array, marker.column)


def _boolean_text(item: SourceBatch, array: pa.Array, column: str) -> pa.Array:
    """A boolean marker read as text: one of the words for true or false, else an error."""
    import pyarrow as pa
    import pyarrow.compute as pc

    text = pc.utf8_lower(pc.utf8_trim_whitespace(array.cast(pa.string())))
    true = pc.is_in(text, value_set=pa.array(_TRUE))
    known = pc.or_(true, pc.is_in(text, value_set=pa.array(_FALSE)))
    bad = pc.invert(pc.fill_null(known, True))
    if pc.any(bad).as_py():
        index = pc.index(bad, True).as_py()
        raise SourceError(
            f"{item.where(index)}, column {column!r}: {array[index].as_py()!r} is not "
            "a boolean (deleted.column without values: true/false, 1/0, yes/no)"
        )
    return pc.fill_null(true, False)


def _text(value: str | int | bool) -> str:
    if isinstance(value, bool):  # as Arrow casts a boolean to text
        return "true" if value else "false"
    return str(value)


def delete_marked(
    session: Session, spec: sql.MergeSpec, source: str, run_id: str, at: datetime
) -> int:
    """Delete (or soft-delete) the target rows that ``source``'s marked rows delete."""
    d = session.dialect
    lookup = sql.key_lookup(d, spec, STAGE_UNIQUE if source == d.stage_unique() else STAGE)
    if lookup:  # a marked row is looked up by key for the row it deletes
        session.execute(lookup)
    return _delete(session, spec, sql.marked_rows(d, spec, source), run_id, at)


# -- full snapshots ------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class Vanished:
    """What a full snapshot lacks, listed in :data:`~pipeledger.publish.merge_sql.VANISHED`: how
    many keys, of how many target rows in its scope, a few of them, and (SCD2) the time
    their versions end."""

    count: int
    present: int | None  # None: not counted (find_vanished's ``share``)
    sample: tuple[str, ...] = ()
    closed_at: CursorValue | None = None

    @property
    def share(self) -> float:
        return self.count / self.present if self.present else 0.0


def find_vanished(
    session: Session,
    spec: sql.MergeSpec,
    scope: tuple[str, Sequence[Any]],
    started_at: datetime,
    *,
    share: bool = True,
    among: str | None = None,
) -> Vanished:
    """List the keys of the target rows in ``scope`` (text over the target's columns, and
    its parameters) that the staged snapshot lacks. An SCD2 target closes their versions
    at ``started_at`` (a version that begins later than that is not a candidate). With
    ``share``, also count the target rows in the scope (the mass-delete gate's fraction:
    another pass over the scope, which a caller without that gate does not pay).
    ``among``: a table holding each key of the scope once (no SCD2 history): those of its
    keys that no staged row carries are looked up in the target, not the target matched to
    them (21k unstaged of 150k touched keys against an 857k-row target: 0.16-0.22 s ->
    0.12-0.14 s in a model's run; the planner, not knowing how few they are, had hashed
    the whole target)."""
    assert among is None or not spec.history
    d = session.dialect
    where, params = scope[0], list(scope[1])
    closed_at = _closing_time(spec, started_at) if spec.history else None
    if closed_at is not None:
        where = f"({where}) AND t.{quote(sql.VALID_FROM)} < {d.param}"
        params.append(closed_at)
    keys = [c for c in spec.columns if c.name in spec.key]
    lookup = sql.key_lookup(d, spec)
    for statement in [*sql.create_temp(d, sql.VANISHED, keys), *([lookup] if lookup else [])]:
        session.execute(statement)
    if among is None:
        session.execute(sql.find_vanished(d, spec, where), params)
    else:  # the few unstaged keys in a table of their own, analyzed: the planner probes
        among_keys = [
            *sql.create_temp(d, sql.UNSTAGED, keys),
            sql.unstaged_keys(d, spec, among),
            *d.analyze(d.temp(sql.UNSTAGED)),
            sql.find_vanished_among(d, spec),
        ]
        for statement in among_keys:
            session.execute(statement)
    present: int | None = None
    if share:
        found, count = session.query(sql.count_in_scope(d, spec, where), params)[0]
        present = int(found)
    else:
        count = session.query(sql.count_vanished(d))[0][0]
    sample = tuple(_key_text(row) for row in session.query(sql.sample_vanished(d, spec)))
    return Vanished(count=int(count), present=present, sample=sample, closed_at=closed_at)


def _closing_time(spec: sql.MergeSpec, started_at: datetime) -> CursorValue:
    """When an SCD2 version whose key a full snapshot lacks ends: the run's time, in the
    cursor's type (a snapshot has no cursor of its own for a row it does not hold)."""
    kind = spec.cursor_type
    if kind == "timestamptz":
        return started_at
    if kind == "timestamp":
        return started_at.replace(tzinfo=None)
    if kind == "date":
        return started_at.date()
    raise ConfigError(
        f"target {spec.target}: history = 'scd2' with sync = 'full' closes the version of a "
        f"key the snapshot lacks at the run's time, but the cursor {spec.cursor!r} is "
        f"{kind}: use a date or timestamp cursor, or delete markers"
    )


def delete_vanished(session: Session, spec: sql.MergeSpec, run_id: str, at: datetime) -> int:
    """Delete (or soft-delete) the target rows whose keys the snapshot lacks."""
    return _delete(session, spec, sql.vanished_rows(session.dialect, spec), run_id, at)


def judge_deletes(
    pipeline: str, config: PipelineConfig, vanished: Vanished, report: GateReport | None
) -> GateReport:
    """The safety gate: the check ``delete_fraction`` joins the run's quality report; the
    run halts (GateFailed, exit 3) when the snapshot would delete too much."""
    result = delete_check(vanished, config.max_delete_fraction, config.on_mass_delete == "warn")
    if report is None:
        report = GateReport(results=(), decision="publish")
    judged = GateReport(
        results=(*report.results, result),
        decision=report.decision,
        quarantined_rows=report.quarantined_rows,
        schema_changes=report.schema_changes,
        new_entries=report.new_entries,
    )
    if result.status != "fail":
        return judged
    halted = GateReport(
        results=(*report.results, result),
        decision="halt",
        quarantined_rows=0,
        schema_changes=report.schema_changes,
    )
    lines = [r.line() for r in halted.results if r.status in ("fail", "warn", "not_learned")]
    message = "\n  ".join(
        [f"pipeline {pipeline}: quality gate failed; nothing was published", *lines]
    )
    raise GateFailed(message, report=halted)


def delete_check(vanished: Vanished, max_fraction: float, warn: bool) -> CheckResult:
    share = vanished.share
    status: CheckStatus = "pass" if share <= max_fraction else ("warn" if warn else "fail")
    return CheckResult(
        name="delete_fraction",
        kind="delete_fraction",
        level="batch",
        status=status,
        observed=f"{vanished.count:,} of {vanished.present or 0:,} row(s) lacking ({share:.0%})",
        expected=f"at most {max_fraction:.0%} of the target's rows in scope (max_delete_fraction)",
        failing_rows=vanished.count if status != "pass" else 0,
        sample_keys=vanished.sample,
        warn_only=warn,
    )


def _key_text(row: Sequence[object]) -> str:
    return "(" + ", ".join(str(v) for v in row) + ")"


# -- deleting -------------------------------------------------------------------------------
def _delete(session: Session, spec: sql.MergeSpec, where: str, run_id: str, at: datetime) -> int:
    d = session.dialect
    if spec.before_images and not spec.soft_delete and d.writes_in_with:  # one pass
        return delete_keeping_before(
            session, spec.target, spec.columns, where, run_id, spec.fingerprints
        )
    if spec.before_images:
        keep_before(session, spec.target, spec.columns, where, run_id, spec.fingerprints)
    if spec.soft_delete:
        return session.execute(sql.soft_delete_where(d, spec.target, where), [run_id, at, at])
    return session.execute(sql.delete_where(d, spec.target, where))
