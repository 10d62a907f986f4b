"""Quarantine replay: the unresolved entries of ``<target>_quarantine`` (of one run,
optionally) go through today's column types and checks again, and the rows that pass are
published (a kind of run of its own: :class:`ReplayJob` below records it)::

    BEGIN
      lock the pipeline
      read the unresolved entries: one staged row per distinct row, beside its row id
      conform to the target's columns -> stage
      evaluate today's row-level checks    (row_count, schema drift and key uniqueness
                                            describe a source batch: not a replay; see below)
      rows still failing: their entries stay unresolved with today's reason(s) and
                          last_checked_run = this run; they leave the staging table
      merge the rest into the target        (the loader's merge and conflict policy)
      their entries: resolved_at, resolved_by_run = this run
    COMMIT       (with the run's ledger record when the ledger lives in the warehouse)

Key uniqueness is not checked among replayed rows: they come from several runs, or are the
versions of a key that one run staged together (which the gate quarantines all of). As in a
load without checks, the merge keeps a key's greatest cursor and counts the other versions
as superseded; their entries are resolved too. Under ``on_conflict = "error"`` two different
versions of one key fail the replay, as they fail a load.

The watermark does not move: replayed rows are old rows, not a new position in the source.
A replay only reads unresolved entries and the merge is keyed, so replaying again publishes
nothing twice. Every row is checked by today's checks whatever ``on_fail`` says now: a
replay publishes exactly the rows that pass and leaves the others where they are.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from pipeledger.common.columns import ROW_HASH, ROW_HASH_COLUMN, Column, TableName
from pipeledger.common.values import json_text
from pipeledger.config.model import ChecksConfig, Config, PipelineConfig
from pipeledger.errors import SchemaError
from pipeledger.ledger.run import Run
from pipeledger.ledger.vocabulary import RunStatus
from pipeledger.publish.counts import MergeCounts
from pipeledger.publish.merge import merge_staged, pipeline_shape, pipeline_spec
from pipeledger.quality import checks as q
from pipeledger.quality.gate import GateSpec, evaluate
from pipeledger.quality.quarantine import QuarantineEntry, read_entries
from pipeledger.runs.record import Written, take_snapshot, watermark_text
from pipeledger.runs.site import Site
from pipeledger.sources.base import SourceBatch
from pipeledger.state.tables import read_watermarks
from pipeledger.state.watermark import to_text
from pipeledger.transform.conform import Shape, conform
from pipeledger.transform.fingerprint import with_row_hash
from pipeledger.warehouse.dialect import Dialect, quote
from pipeledger.warehouse.session import Session
from pipeledger.warehouse.stage import create_stage, drop_stage

ROW_ID = "_pipeledger_quarantine_id"
_CHUNK = 500  # ids per IN (...) list: well under SQLite's bound-parameter limit


@dataclass(frozen=True, kw_only=True)
class ReplayResult:
    """What one replay did. ``replayed`` and ``still_failing`` count distinct rows (a row
    that failed two checks has two entries); ``resolved`` counts entries."""

    pipeline: str
    run_id: str
    target: str
    run_filter: str | None = None
    replayed: int = 0
    still_failing: int = 0
    resolved: int = 0
    counts: MergeCounts = field(default_factory=MergeCounts)
    failing_checks: tuple[tuple[str, int], ...] = ()
    duration_s: float = 0.0

    @property
    def published(self) -> int:
        return self.counts.inserted + self.counts.updated

    def to_json(self) -> dict[str, Any]:
        c = self.counts
        return {
            "pipeline": self.pipeline,
            "run_id": self.run_id,
            "target": self.target,
            "run_filter": self.run_filter,
            "replayed": self.replayed,
            "published": {
                "inserted": c.inserted,
                "updated": c.updated,
                "unchanged": c.unchanged,
                "superseded": c.superseded,
            },
            "still_failing": self.still_failing,
            "resolved": self.resolved,
            "failing_checks": dict(self.failing_checks),
            "duration_s": round(self.duration_s, 3),
        }


@dataclass(frozen=True)
class _Row:
    """One distinct quarantined row and the entries (one per failed check) that hold it."""

    row_id: str
    values: dict[str, Any]
    entries: tuple[str, ...]


def distinct_rows(entries: Sequence[QuarantineEntry]) -> list[_Row]:
    """Each distinct row once (staging it twice would fail the key's uniqueness check)."""
    grouped: dict[str, list[QuarantineEntry]] = {}
    for entry in entries:
        grouped.setdefault(json.dumps(entry.row, sort_keys=True, default=str), []).append(entry)
    return [
        _Row(same[0].quarantine_id, same[0].row, tuple(e.quarantine_id for e in same))
        for same in grouped.values()
    ]


def _text(value: Any, sql_type: str = "") -> str | None:
    """A stored JSON scalar as text; the transform then casts it to the column's type (a
    jsonb column's value, nested or not, as its JSON text)."""
    if value is None:
        return None
    if sql_type == "jsonb":
        return json_text(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def replay_batch(shape: Shape, rows: Sequence[_Row], origin: str) -> pa.RecordBatch:
    """The rows conformed to the target's columns, with their row id as one more column."""
    names = [c.name for c in shape.columns]
    raw = pa.RecordBatch.from_arrays(
        [
            pa.array([_text(r.values.get(c.name), c.sql_type) for r in rows], pa.string())
            for c in shape.columns
        ],
        names=names,
    )
    conformed = conform(SourceBatch(batch=raw, origin=origin), shape, gated_keys=True)
    conformed = with_row_hash(conformed, shape.columns)
    ids = pa.array([r.row_id for r in rows], pa.string())
    return conformed.append_column(ROW_ID, ids)


def failing_ids(d: Dialect, check: q.RowCheck) -> str:
    return f"SELECT s.{quote(ROW_ID)} FROM {d.stage()} AS s WHERE {check.predicate}"


def keep_entries(d: Dialect, target: TableName, count: int) -> str:
    """Still failing: today's reason, checked by this run (parameters: reason, run, ids)."""
    marks = ", ".join([d.param] * count)
    return (
        f"UPDATE {d.table(q.quarantine_table(target))} SET reason = {d.param}, "
        f"last_checked_run = {d.param} WHERE quarantine_id IN ({marks})"
    )


def resolve_entries(d: Dialect, target: TableName, count: int) -> str:
    """Published: resolved by this run (parameters: time, run, run, ids)."""
    marks = ", ".join([d.param] * count)
    return (
        f"UPDATE {d.table(q.quarantine_table(target))} SET resolved_at = {d.param}, "
        f"resolved_by_run = {d.param}, last_checked_run = {d.param} "
        f"WHERE quarantine_id IN ({marks}) AND resolved_at IS NULL"
    )


def _chunks(ids: Sequence[str]) -> Iterator[Sequence[str]]:
    for start in range(0, len(ids), _CHUNK):
        yield ids[start : start + _CHUNK]


def _shape(session: Session, name: str, pipeline: PipelineConfig) -> tuple[Shape, bool]:
    """The target's shape, and whether it stores fingerprints."""
    columns = session.table_columns(pipeline.target_name)
    if columns is None:
        raise SchemaError(
            f"pipeline {name}: target {pipeline.target} does not exist, so its quarantined "
            "rows have nowhere to go; nothing was replayed"
        )
    fingerprinted = any(column == ROW_HASH_COLUMN for column, _ in columns)
    # a target is upgraded by its next run, not by a replay
    return pipeline_shape(pipeline, columns), fingerprinted


def _stage(session: Session, shape: Shape, batch: pa.RecordBatch) -> None:
    """The loader's staging table, with the row id beside the target's columns (the gate's
    SQL and the merge name the target's columns only)."""
    d = session.dialect
    for statement in drop_stage(d):
        session.execute(statement)
    session.execute(create_stage(d, [*shape.columns, ROW_HASH, Column(ROW_ID, "text")]))
    session.stage([batch])


def _reasons(session: Session, failing: Sequence[q.RowCheck]) -> dict[str, str]:
    """Row id -> today's reason(s), in the words the gate uses when it quarantines."""
    found: dict[str, list[str]] = {}
    for check in failing:
        for (row_id,) in session.query(failing_ids(session.dialect, check), list(check.params)):
            found.setdefault(str(row_id), []).append(f"{check.name}: expected {check.expected}")
    return {row_id: "; ".join(reasons) for row_id, reasons in found.items()}


def _keep(
    session: Session, target: TableName, rows: Sequence[_Row], reasons: dict[str, str], run_id: str
) -> None:
    by_reason: dict[str, list[str]] = {}
    for row in rows:
        by_reason.setdefault(reasons[row.row_id], []).extend(row.entries)
    for reason, ids in by_reason.items():
        for chunk in _chunks(ids):
            statement = keep_entries(session.dialect, target, len(chunk))
            session.execute(statement, [reason, run_id, *chunk])


def _resolve(
    session: Session, target: TableName, rows: Sequence[_Row], run_id: str, now: datetime
) -> int:
    ids = [entry for row in rows for entry in row.entries]
    resolved = 0
    for chunk in _chunks(ids):
        statement = resolve_entries(session.dialect, target, len(chunk))
        resolved += session.execute(statement, [now, run_id, run_id, *chunk])
    return resolved


def _todays_failures(
    session: Session, spec: GateSpec
) -> tuple[list[q.RowCheck], tuple[tuple[str, int], ...]]:
    """The row checks the staged rows fail today, and how many rows each: the gate's own
    evaluation, less the batch-level checks and key uniqueness (module docstring)."""
    checks = spec.checks.model_copy(update={"row_count": None})
    report, failing = evaluate(session, replace(spec, checks=checks))
    duplicated = q.duplicate_predicate(session.dialect, spec.shape.key)
    failing = [c for c in failing if c.predicate != duplicated]
    names = {c.name for c in failing}
    return failing, tuple((r.name, r.failing_rows) for r in report.results if r.name in names)


def replay_in(
    session: Session, config: Config, name: str, run_id: str, run: str | None
) -> tuple[ReplayResult, Shape | None]:
    """The replay itself, inside the caller's transaction (see the module docstring)."""
    pipeline = config.pipeline(name)
    target = pipeline.target_name
    session.lock_pipeline(name)
    empty = ReplayResult(pipeline=name, run_id=run_id, target=pipeline.target, run_filter=run)
    rows = distinct_rows(read_entries(session, name, target, resolved=False, run=run))
    if not rows:
        return empty, None
    shape, fingerprinted = _shape(session, name, pipeline)
    _stage(session, shape, replay_batch(shape, rows, str(q.quarantine_table(target))))
    spec = GateSpec(
        pipeline=name,
        run_id=run_id,
        target=target,
        shape=shape,
        checks=pipeline.checks or ChecksConfig(),
    )
    failing, failed_checks = _todays_failures(session, spec)
    reasons = _reasons(session, failing)
    still = [r for r in rows if r.row_id in reasons]
    passed = [r for r in rows if r.row_id not in reasons]
    _keep(session, target, still, reasons, run_id)
    if failing:
        params = [p for check in failing for p in check.params]
        session.execute(q.delete_failing(session.dialect, [c.predicate for c in failing]), params)
    now = datetime.now(UTC)
    counts = MergeCounts()
    if passed:
        # a marked row is never set aside (load.deletes): what comes back is a row to load
        merge = pipeline_spec(
            pipeline,
            target,
            shape.columns,
            fingerprinted,
            config.needs_before_images(target),
            markers=False,
        )
        counts = merge_staged(session, merge, len(passed), run_id, now)
    return replace(
        empty,
        replayed=len(rows),
        still_failing=len(still),
        counts=counts,
        resolved=_resolve(session, target, passed, run_id, now),
        failing_checks=failed_checks,
    ), shape


def consequence(name: str, run_id: str) -> str:
    return (
        f"pipeline {name} (replay {run_id}): nothing was published and the quarantine is "
        "as it was; the watermark did not move"
    )


# -- the replay as a run: what the ledger keeps of it ---------------------------------


class ReplayJob:
    """Replay pipeline ``name``'s unresolved quarantined rows (of one run, if
    ``run_filter``), recorded with ``trigger_type = "replay"``."""

    def __init__(self, site: Site, name: str, run_id: str, run_filter: str | None) -> None:
        self.config = site.config
        self.name = name
        self.run_id = run_id
        self.run_filter = run_filter
        self.began = time.monotonic()

    @property
    def target(self) -> str:
        return self.config.pipeline(self.name).target

    def execute(self, session: Session, run: Run) -> ReplayResult:
        with run.task("replay") as task:
            result, shape = replay_in(session, self.config, self.name, self.run_id, self.run_filter)
            task.rows_in, task.rows_rejected = result.replayed, result.still_failing
            task.rows_out = result.published
        result = replace(result, duration_s=time.monotonic() - self.began)
        self._record(run, session, result, shape)
        return result

    def failed(self, run: Run, error: BaseException) -> None:
        """The replay task carries the error; nothing else was done."""

    def consequence(self) -> str:
        return consequence(self.name, self.run_id)

    def _record(
        self, run: Run, session: Session, result: ReplayResult, shape: Shape | None
    ) -> None:
        c = result.counts
        run.set_counts(
            rows_read=result.replayed,
            rows_inserted=c.inserted,
            rows_updated=c.updated,
            rows_unchanged=c.unchanged + c.superseded,
            rows_rejected=result.still_failing,
        )
        partitioned = self.config.pipeline(self.name).partition_by is not None
        marks = {p: to_text(v) for p, v in read_watermarks(session, self.name).items()}
        run.record.watermark_before = run.record.watermark_after = watermark_text(
            marks, partitioned
        )
        run.record.extra.update({"mode": "replay", "run_filter": result.run_filter})
        run.audit(
            "QUARANTINE_REPLAY",
            target_table=result.target,
            record_count=result.replayed,
            metadata=result.to_json(),
        )
        if c.inserted:
            run.audit("RECORD_INSERTED", target_table=result.target, record_count=c.inserted)
        if c.updated:
            run.audit("RECORD_UPDATED", target_table=result.target, record_count=c.updated)
        if shape is not None and run.ledger.recording:
            previous = run.ledger.previous_snapshot(result.target, session)
            written = Written(inserted=c.inserted, staged_rows=result.replayed)
            run.snapshots.append(
                take_snapshot(session, run.run_id, result.target, shape, written, previous)
            )
        if result.still_failing:
            run.mark(RunStatus.PARTIAL, f"{result.still_failing} row(s) still quarantined")
