"""What a run did, told to the ledger through the same ``Run`` API that any Python pipeline
uses: counts, tasks, audit events, quality results and a snapshot of the target. Called
by the run's job inside its transaction (the scaffold then commits the final record)."""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from pipeledger.common.columns import TableName
from pipeledger.ledger.run import Run
from pipeledger.ledger.vocabulary import DatasetSnapshot, RunStatus, TaskRecord, TaskStatus
from pipeledger.publish.counts import MergeCounts
from pipeledger.quality.report import GateReport
from pipeledger.runs.load.result import LoadResult
from pipeledger.runs.steps import StepResult
from pipeledger.state.lateness import RunLateness
from pipeledger.state.watermark import from_text, to_text
from pipeledger.warehouse.session import Session

if TYPE_CHECKING:  # a run that read nothing records itself without pyarrow (runs.load.files)
    from pipeledger.transform.conform import Shape


def watermark_text(marks: dict[str, str], partitioned: bool) -> str | None:
    """One value for an unpartitioned pipeline, a JSON object for a partitioned one."""
    if partitioned:
        return json.dumps(marks, sort_keys=True) if marks else None
    return marks.get("")


def schema_hash(shape: Shape) -> str:
    """A short hash of the target's column names and types (the snapshot's schema)."""
    text = ",".join(f"{c.name}:{c.sql_type}" for c in shape.columns)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _cursor_text(value: object) -> str | None:
    if value is None:
        return None
    return to_text(from_text(value) if isinstance(value, str) else value)  # type: ignore[arg-type]


def _greatest(a: str | None, b: str | None) -> str | None:
    if a is None or b is None:
        return a or b
    return a if from_text(a) >= from_text(b) else b  # type: ignore[operator]


@dataclass(frozen=True, kw_only=True)
class Written:
    """What a run did to its target, as far as the snapshot needs to know."""

    inserted: int
    staged_rows: int
    target_created: bool = False
    staged_max_cursor: str | None = None  # when the loader knows it already
    deleted: int = 0
    growth: int | None = None  # the row count's change, where not inserted - deleted

    @property
    def added(self) -> int:
        return self.inserted - self.deleted if self.growth is None else self.growth


def measure_target(
    session: Session,
    target: str,
    shape: Shape,
    written: Written,
    previous: tuple[int, str | None] | None,
) -> tuple[int, str | None]:
    """(row count, greatest cursor) of the target after this run, in O(rows staged).

    The count is the previous snapshot's plus this run's inserts less its deletes, and the
    greatest cursor the greater of the previous one and the staged rows' (staged rows that
    were not written are never newer than the row they lost to). Without a previous
    snapshot of an existing table, the table is counted once. A target without a cursor
    (a model that has none) has no greatest cursor.
    """
    d = session.dialect
    if not shape.cursor:
        return _counted(session, target, written, previous), None
    cursor = '"' + shape.cursor + '"'
    if previous is None and not written.target_created:
        count, high = session.query(
            f"SELECT count(*), max({cursor}) FROM {d.table(TableName.parse(target))}"
        )[0]
        return int(count), _cursor_text(high)
    count, high = previous or (0, None)
    if written.staged_max_cursor is not None:
        high = _greatest(high, written.staged_max_cursor)
    elif written.staged_rows:
        # a new target holds exactly this run's rows (and its stage may have become it)
        where = d.table(TableName.parse(target)) if written.target_created else d.stage()
        staged_high = session.query(f"SELECT max({cursor}) FROM {where}")[0][0]
        high = _greatest(high, _cursor_text(staged_high))
    return count + written.added, high


def _counted(
    session: Session, target: str, written: Written, previous: tuple[int, str | None] | None
) -> int:
    if previous is not None or written.target_created:
        return (previous or (0, None))[0] + written.added
    table = session.dialect.table(TableName.parse(target))
    return int(session.query(f"SELECT count(*) FROM {table}")[0][0])


def take_snapshot(
    session: Session,
    run_id: str,
    target: str,
    shape: Shape,
    written: Written,
    previous: tuple[int, str | None] | None,
) -> DatasetSnapshot:
    """Row count, greatest cursor and schema of the target as this transaction leaves it."""
    count, high = measure_target(session, target, shape, written, previous)
    return DatasetSnapshot(
        run_id=run_id,
        target_table=target,
        row_count=count,
        max_cursor=high,
        schema_fingerprint=schema_hash(shape),
        columns=[{"name": c.name, "type": c.sql_type} for c in shape.columns],
        created_at=datetime.now(UTC),
    )


_TASK_STATUS = {
    "success": TaskStatus.SUCCESS,
    "failed": TaskStatus.FAILED,
    "interrupted": TaskStatus.INTERRUPTED,
}


def task_from(run_id: str, step: StepResult) -> TaskRecord:
    return TaskRecord(
        task_run_id=str(uuid.uuid4()),
        run_id=run_id,
        name=step.name,
        seq=0,
        started_at=step.started_at,
        ended_at=step.ended_at,
        duration_ms=step.duration_ms,
        status=_TASK_STATUS[step.status],
        rows_in=step.rows_in,
        rows_out=step.rows_out,
        rows_rejected=step.rows_rejected,
        bytes=step.bytes,
    )


def record_load(run: Run, session: Session, result: LoadResult, shape: Shape | None) -> None:
    """A load that is about to commit: everything the ledger keeps of it."""
    _counts(run, result)
    record_lateness(run, result.lateness, result.target)
    if result.quality is not None:
        record_quality(run, result.quality, result.target)
        if result.status == "partial":
            q = result.quality
            run.mark(RunStatus.PARTIAL, f"{q.quarantined_rows} row(s) quarantined")
    if not run.ledger.recording:
        return
    if shape is not None and session.table_columns(TableName.parse(result.target)):
        previous = run.ledger.previous_snapshot(result.target, session)
        c = result.counts
        written = Written(
            inserted=c.inserted,
            staged_rows=result.rows_staged,
            target_created=result.target_created,
            staged_max_cursor=result.staged_max_cursor,
            deleted=c.deleted,
            growth=c.growth,
        )
        run.snapshots.append(
            take_snapshot(session, run.run_id, result.target, shape, written, previous)
        )
        if result.target_created:
            run.audit(
                "SCHEMA_CHANGE",
                target_table=result.target,
                new_values={"columns": [f"{c.name} {c.sql_type}" for c in shape.columns]},
                metadata={"change": "table_created"},
            )


def record_lateness(run: Run, lateness: RunLateness | None, target: str) -> None:
    """Late rows (``pipeledger.state.lateness``) in the run's ``extra``, where ``pipeledger
    lateness`` sums them over history; rows the buffer missed also as a
    ``LATE_ROW_DROPPED`` event."""
    if lateness is None or not (lateness.measured or lateness.rows_missed):
        return
    run.record.extra["lateness"] = lateness.to_json()
    if lateness.rows_missed:
        start, end = lateness.missed_cursors or (None, None)
        run.audit(
            "LATE_ROW_DROPPED",
            target_table=target,
            record_count=lateness.rows_missed,
            metadata={
                "buffer_s": lateness.buffer_s,
                "cursor_from": start,
                "cursor_to": end,
                "files": list(lateness.missed_in),
            },
        )


def record_load_failure(run: Run, result: LoadResult, error: BaseException) -> None:
    """A load that failed: how far it got (rows read, steps) and, for a gate that halted
    it, every check's result."""
    run.set_counts(rows_read=result.rows_read, bytes_read=result.bytes_read)
    for step in result.steps:
        run.add_task(task_from(run.run_id, step))
    report = getattr(error, "report", None)
    if isinstance(report, GateReport):
        record_quality(run, report, result.target)


def record_quality(run: Run, report: GateReport, target: str) -> None:
    """Every check result, and failures also as audit events."""
    now = datetime.now(UTC)
    for r in report.results:
        run.quality.append(
            {
                "result_id": str(uuid.uuid4()),
                "run_id": run.run_id,
                "pipeline": run.record.pipeline,
                "target_table": target,
                "check_name": r.name,
                "kind": r.kind,
                "level": r.level,
                "status": r.status,
                "observed": r.observed,
                "expected": r.expected,
                "failing_rows": r.failing_rows,
                "sample_keys": list(r.sample_keys),
                "created_at": now,
            }
        )
        if r.status in ("fail", "warn"):
            kind = "THRESHOLD_BREACH" if r.kind == "row_count" else "VALIDATION_FAILURE"
            run.audit(
                kind,
                target_table=target,
                record_count=r.failing_rows or None,
                metadata={
                    "check": r.name,
                    "status": r.status,
                    "observed": r.observed,
                    "expected": r.expected,
                    "sample_keys": list(r.sample_keys),
                },
            )
    if report.schema_changes:
        run.audit(
            "SCHEMA_CHANGE",
            target_table=target,
            new_values=report.schema_changes,
            metadata={"change": "drift"},
        )


def _counts(run: Run, result: LoadResult) -> None:
    c = result.counts
    rejected = result.quality.quarantined_rows if result.quality else 0
    run.set_counts(
        rows_read=result.rows_read,
        rows_inserted=c.inserted,
        rows_updated=c.updated,
        rows_unchanged=c.unchanged + c.superseded,
        rows_rejected=rejected,
        rows_deleted=c.deleted,
        bytes_read=result.bytes_read,
    )
    run.record.watermark_before = watermark_text(result.watermark_before, result.partitioned)
    run.record.watermark_after = watermark_text(result.watermark_after, result.partitioned)
    # the interval the run was started for (a schedule's, a backfill's range), else the
    # stretch of the cursor it covered
    if result.covered is not None and run.record.data_interval_end is None:
        run.record.data_interval_start, run.record.data_interval_end = result.covered
    run.record.extra.update(
        mode=result.mode, rows_superseded=c.superseded, rows_staged=result.rows_staged
    )
    if result.files is not None:  # which files it read: the state's files_taken has each
        run.record.extra["files"] = result.files.ledger_json()
    if result.snapshot is not None:
        shot = result.snapshot
        run.record.extra["snapshot"] = {"rows": shot.rows, "fingerprint": shot.fingerprint}
    for step in result.steps:
        run.add_task(task_from(run.run_id, step))
    _events(run, result)


def record_events(run: Run, target: str, counts: MergeCounts) -> None:
    """One audit event per kind of write that happened: rows inserted, updated, deleted."""
    for kind, count in (
        ("RECORD_INSERTED", counts.inserted),
        ("RECORD_UPDATED", counts.updated),
        ("RECORD_DELETED", counts.deleted),
    ):
        if count:
            run.audit(kind, target_table=target, record_count=count)


def _events(run: Run, result: LoadResult) -> None:
    c, target = result.counts, result.target
    record_events(run, target, c)
    if result.mode == "backfill":
        start, end = result.window
        # rows_staged < record_count: rows recognised by fingerprint were not compared
        window = {"start": start, "end": end, "rows_staged": result.rows_staged}
        run.audit("BACKFILL", target_table=target, record_count=result.rows_read, metadata=window)
    before, after = result.watermark_before, result.watermark_after
    moved = sorted(p for p, mark in after.items() if before.get(p) != mark)
    if moved:  # surgical: only the partitions that moved
        run.audit(
            "WATERMARK_ADVANCED",
            target_table=target,
            old_values={p or "watermark": before.get(p) for p in moved},
            new_values={p or "watermark": after[p] for p in moved},
        )
