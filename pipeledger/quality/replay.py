"""Quarantine: list the rows the quality gate set aside, and replay them through today's config.

Under ``on_fail = "quarantine"`` the gate copies each failing row to ``<target>_quarantine``,
one entry per (check, row). :func:`quarantined` lists the entries; :func:`replay` pushes the
unresolved ones (of one run, optionally) through today's column types and checks again::

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
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pyarrow as pa

from pipeledger import runner
from pipeledger.adapters import open_warehouse
from pipeledger.adapters.base import Session
from pipeledger.config import ChecksConfig, Config, PipelineConfig
from pipeledger.errors import ConfigError, SchemaError
from pipeledger.extract.base import SourceBatch
from pipeledger.ledger.api import Run
from pipeledger.ledger.model import RunStatus, TriggerType
from pipeledger.ledger.recorder import Written, take_snapshot, watermark_text
from pipeledger.ledger.schema import migrate_database
from pipeledger.load import sql
from pipeledger.load.loader import merge_staged, read_watermarks
from pipeledger.load.result import MergeCounts
from pipeledger.quality import checks as q
from pipeledger.quality.gate import GateSpec, evaluate
from pipeledger.schema import ROW_HASH_COLUMN, Column, TableName
from pipeledger.transform.conform import Shape, conform, shape_from_table
from pipeledger.transform.fingerprint import with_row_hash
from pipeledger.transform.values import json_text
from pipeledger.watermark import to_text

ROW_ID = "_pipeledger_quarantine_id"
MIN_RUN_PREFIX = 8
_CHUNK = 500  # ids per IN (...) list: well under SQLite's bound-parameter limit


# -- what is set aside ------------------------------------------------------------------


@dataclass(frozen=True)
class QuarantineEntry:
    """One row set aside by one check. ``reason`` is the latest verdict on the row (today's
    failing checks after a replay); ``check`` is the check that set it aside."""

    quarantine_id: str
    run_id: str
    pipeline: str
    check: str
    reason: str
    key_values: dict[str, Any]
    row: dict[str, Any]
    quarantined_at: str
    resolved_at: str | None
    resolved_by_run: str | None
    last_checked_run: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "quarantine_id": self.quarantine_id,
            "run_id": self.run_id,
            "pipeline": self.pipeline,
            "check": self.check,
            "reason": self.reason,
            "key_values": self.key_values,
            "row": self.row,
            "quarantined_at": self.quarantined_at,
            "resolved_at": self.resolved_at,
            "resolved_by_run": self.resolved_by_run,
            "last_checked_run": self.last_checked_run,
        }


def select_entries(d: sql.Dialect, target: TableName, *, resolved: bool, run: str | None) -> str:
    """The pipeline's entries, oldest first (parameters: pipeline, then the run prefix)."""
    where = [f"pipeline = {d.param}"]
    if not resolved:
        where.append("resolved_at IS NULL")
    if run is not None:
        where.append(f"substr(run_id, 1, {len(run):d}) = {d.param}")
    return (
        "SELECT quarantine_id, run_id, pipeline, check_name, reason, CAST(key_values AS text), "
        "CAST(row_data AS text), quarantined_at, resolved_at, resolved_by_run, last_checked_run "
        f"FROM {d.table(q.quarantine_table(target))} WHERE {' AND '.join(where)} "
        "ORDER BY quarantined_at, quarantine_id"
    )


def _json(text: object) -> dict[str, Any]:
    """JSON as stored; decimals stay exact (PostgreSQL keeps numeric values as numbers)."""
    value: dict[str, Any] = json.loads(str(text), parse_float=Decimal) if text else {}
    return value


def _time(value: object) -> str | None:
    if value is None:
        return None
    return value.isoformat() if isinstance(value, datetime) else str(value)


def _entry(row: Sequence[Any]) -> QuarantineEntry:
    qid, run_id, pipeline, check, reason, keys, data, at, resolved, by, checked = row
    return QuarantineEntry(
        str(qid), str(run_id), str(pipeline), str(check), str(reason), _json(keys), _json(data),
        _time(at) or "", _time(resolved), by and str(by), checked and str(checked),
    )  # fmt: skip


def _check_run(run: str | None) -> None:
    if run is not None and len(run) < MIN_RUN_PREFIX:
        raise ConfigError(f"--run {run!r}: give a run id or its first {MIN_RUN_PREFIX}+ characters")


def read_entries(
    session: Session, pipeline: str, target: TableName, *, resolved: bool, run: str | None
) -> list[QuarantineEntry]:
    """Entries of ``pipeline`` in ``target``'s quarantine table ([] if it does not exist)."""
    if session.table_columns(q.quarantine_table(target)) is None:
        return []
    params = [pipeline] if run is None else [pipeline, run]
    rows = session.query(select_entries(session.dialect, target, resolved=resolved, run=run),
                         params)  # fmt: skip
    return [_entry(r) for r in rows]


def quarantined(
    config: Config, name: str, *, run: str | None = None, include_resolved: bool = False
) -> list[QuarantineEntry]:
    """What the gate set aside for pipeline ``name``: unresolved entries unless
    ``include_resolved``; ``run`` (a run id or its first 8+ characters) picks one run."""
    pipeline = config.pipeline(name)
    _check_run(run)
    warehouse = open_warehouse(config.warehouse_url)
    with warehouse.session(write=False) as session:
        return read_entries(session, name, pipeline.target_name, resolved=include_resolved,
                            run=run)  # fmt: skip


# -- replay -----------------------------------------------------------------------------


@dataclass(frozen=True)
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
    conformed = conform(SourceBatch(raw, origin), shape, gated_keys=True)
    conformed = with_row_hash(conformed, shape.columns)
    ids = pa.array([r.row_id for r in rows], pa.string())
    return conformed.append_column(ROW_ID, ids)


def failing_ids(d: sql.Dialect, check: q.RowCheck) -> str:
    return f"SELECT s.{sql.quote(ROW_ID)} FROM {d.stage()} AS s WHERE {check.predicate}"


def keep_entries(d: sql.Dialect, target: TableName, count: int) -> str:
    """Still failing: today's reason, checked by this run (parameters: reason, run, ids)."""
    marks = ", ".join([d.param] * count)
    return (
        f"UPDATE {d.table(q.quarantine_table(target))} SET reason = {d.param}, "
        f"last_checked_run = {d.param} WHERE quarantine_id IN ({marks})"
    )


def resolve_entries(d: sql.Dialect, target: TableName, count: int) -> str:
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
    shape = shape_from_table(columns, pipeline.key, pipeline.cursor, pipeline.partition_by)
    return shape, fingerprinted  # a target is upgraded by its next run, not by a replay


def _stage(session: Session, shape: Shape, batch: pa.RecordBatch) -> None:
    """The loader's staging table, with the row id beside the target's columns (the gate's
    SQL and the merge name the target's columns only)."""
    d = session.dialect
    if d.name == "sqlite":
        for statement in sql.drop_stage(d):
            session.execute(statement)
    session.execute(sql.create_stage(d, [*shape.columns, sql.ROW_HASH, Column(ROW_ID, "text")]))
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


def _replay_in(
    session: Session, config: Config, name: str, run_id: str, run: str | None
) -> tuple[ReplayResult, Shape | None]:
    """The replay itself, inside the caller's transaction (see the module docstring)."""
    pipeline = config.pipeline(name)
    target = pipeline.target_name
    session.lock_pipeline(name)
    empty = ReplayResult(name, run_id, pipeline.target, run)
    rows = distinct_rows(read_entries(session, name, target, resolved=False, run=run))
    if not rows:
        return empty, None
    shape, fingerprinted = _shape(session, name, pipeline)
    _stage(session, shape, replay_batch(shape, rows, str(q.quarantine_table(target))))
    spec = GateSpec(name, run_id, target, shape, pipeline.checks or ChecksConfig())
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
        merge = sql.MergeSpec(target, shape.columns, tuple(pipeline.key), pipeline.cursor,
                              pipeline.on_conflict, fingerprinted)  # fmt: skip
        counts = merge_staged(session, merge, len(passed), run_id, now)
    return replace(
        empty, replayed=len(rows), still_failing=len(still), counts=counts,
        resolved=_resolve(session, target, passed, run_id, now), failing_checks=failed_checks,
    ), shape  # fmt: skip


def _consequence(name: str, run_id: str) -> str:
    return (
        f"pipeline {name} (replay {run_id}): nothing was published and the quarantine is "
        "as it was; the watermark did not move"
    )


def _record(
    run: Run, session: Session, result: ReplayResult, shape: Shape | None, partitioned: bool
) -> None:
    """The replay in the run ledger: counts, the watermark (unmoved), audit events and a
    snapshot of the target, like a load's record."""
    c = result.counts
    run.set_counts(
        rows_read=result.replayed, rows_inserted=c.inserted, rows_updated=c.updated,
        rows_unchanged=c.unchanged + c.superseded, rows_rejected=result.still_failing,
    )  # fmt: skip
    marks = {p: to_text(v) for p, v in read_watermarks(session, result.pipeline).items()}
    run.record.watermark_before = run.record.watermark_after = watermark_text(marks, partitioned)
    run.record.extra.update({"mode": "replay", "run_filter": result.run_filter})
    run.audit("QUARANTINE_REPLAY", target_table=result.target, record_count=result.replayed,
              metadata=result.to_json())  # fmt: skip
    if c.inserted:
        run.audit("RECORD_INSERTED", target_table=result.target, record_count=c.inserted)
    if c.updated:
        run.audit("RECORD_UPDATED", target_table=result.target, record_count=c.updated)
    if shape is not None:
        previous = run.ledger.previous_snapshot(result.target, session)
        written = Written(c.inserted, result.replayed)
        run.snapshots.append(
            take_snapshot(session, run.run_id, result.target, shape, written, previous)
        )
    if result.still_failing:
        run.mark(RunStatus.PARTIAL, f"{result.still_failing} row(s) still quarantined")


def replay(config: Config, name: str, *, run: str | None = None) -> ReplayResult:
    """Push pipeline ``name``'s unresolved quarantined rows (of one run, if ``run``: a run
    id or its first 8+ characters) through today's config, in one transaction. See the
    module docstring. Recorded in the run ledger with ``trigger_type = "replay"``."""
    partitioned = config.pipeline(name).partition_by is not None
    _check_run(run)
    clock = time.monotonic()
    warehouse = open_warehouse(config.warehouse_url)
    migrate_database(warehouse, "state")
    ledger = runner.ledger_for(config)
    if ledger is None:
        run_id = str(uuid.uuid4())
        try:
            with warehouse.session() as session:
                result, _ = _replay_in(session, config, name, run_id, run)
        except Exception as exc:
            exc.add_note(_consequence(name, run_id))
            raise
        return replace(result, duration_s=time.monotonic() - clock)
    setup = runner.registration(ledger, config, name)
    with ledger.run(
        name, trigger_type=TriggerType.REPLAY, triggered_by=runner.who(), setup=setup
    ) as record:
        try:
            with warehouse.session() as session:
                with record.task("replay") as task:
                    result, shape = _replay_in(session, config, name, record.run_id, run)
                    task.rows_in, task.rows_rejected = result.replayed, result.still_failing
                    task.rows_out = result.published
                result = replace(result, duration_s=time.monotonic() - clock)
                _record(record, session, result, shape, partitioned)
                record.commit_with(session)
        except Exception as exc:
            exc.add_note(_consequence(name, record.run_id))
            raise
    return result
