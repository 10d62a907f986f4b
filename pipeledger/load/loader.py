"""Load: stage, check, merge and advance the watermark in one transaction.

::

    BEGIN
      lock the pipeline; read its watermarks; plan the window
      stream source batches -> conform -> stage        (temporary staging table)
      run the quality gate on the staged rows           (halt, or quarantine bad rows)
      merge staged rows into the target                 (one set-based statement)
      advance the watermark to the greatest cursor staged (not for backfills)
    COMMIT                                              (or ROLLBACK on any error)

A crash anywhere before COMMIT leaves the target and the watermark as they were.
"""

from __future__ import annotations

import itertools
import logging
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Protocol

import pyarrow as pa

from pipeledger.adapters.base import Session, Warehouse
from pipeledger.config import ChecksConfig, Config, CsvSource, PipelineConfig
from pipeledger.errors import ConflictError, WarehouseError
from pipeledger.extract import ReadSpec, Source, SourceBatch, open_source
from pipeledger.ledger.schema import migrate_database
from pipeledger.load import sql
from pipeledger.load.guard import (
    Guard,
    Sessions,
    guard_new_target,
    may_upgrade,
    read_guard,
    upgrade_target,
)
from pipeledger.load.known import KnownRows
from pipeledger.load.result import LoadResult, MergeCounts, Mode, Status, StepResult
from pipeledger.load.steps import StepClock
from pipeledger.quality.gate import GateSpec, recheck_keys, run_gate
from pipeledger.quality.report import GateReport
from pipeledger.schema import arrow_type
from pipeledger.transform.conform import (
    Shape,
    check_lateness,
    conform,
    infer_shape,
    shape_from_table,
)
from pipeledger.transform.drift import Drift, align, detect_all, evolved
from pipeledger.transform.fingerprint import with_row_hash
from pipeledger.watermark import (
    CursorValue,
    WatermarkTracker,
    Window,
    arrow_filter,
    from_text,
    incremental_window,
    to_text,
)

log = logging.getLogger("pipeledger.load")


ProgressCallback = Callable[[str, int], None]


class LoadObserver(Protocol):
    """Sees a load from outside: the run ledger implements this."""

    def publishing(self, session: Session, result: LoadResult, shape: Shape | None) -> None:
        """Called inside the load's transaction, after merge and watermark, before COMMIT."""
        ...

    def failed(self, steps: Sequence[StepResult], error: BaseException) -> None:
        """Called after a failed load rolled back, with the steps as far as they got."""
        ...


def read_watermarks(session: Session, pipeline: str) -> dict[str, CursorValue]:
    rows = session.query(sql.read_state(session.dialect), [pipeline])
    return {str(part): from_text(str(mark)) for part, mark, _ in rows}


@dataclass
class _Run:
    name: str
    pipeline: PipelineConfig
    config: Config
    mode: Mode
    window: Window | None
    on_progress: ProgressCallback | None
    run_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    clock: StepClock = field(default_factory=StepClock)
    bytes_read: int = 0
    started_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    before: dict[str, CursorValue] = field(default_factory=dict)
    after: dict[str, CursorValue] = field(default_factory=dict)
    shape: Shape | None = None
    new_target: bool = False
    rows_read: int = 0
    counts: MergeCounts = field(default_factory=MergeCounts)
    history: Sequence[int] | None = None
    drift: Drift | None = None
    report: GateReport | None = None
    part_schemas: list[pa.Schema] = field(default_factory=list)
    tracker: WatermarkTracker | None = None
    promotable: bool = False  # staged into a table that becomes the new target
    full_compare: bool = False  # backfill: stage every row, even those the target holds
    guard: Guard | None = None  # the existing target's fingerprints (load.guard)
    sessions: Sessions | None = None  # opens other transactions (a target's upgrade)
    known: KnownRows | None = None  # backfill: what the target already holds
    restaged: int = 0  # rows the shortcut skipped that the merge needed after all

    @property
    def rows_staged(self) -> int:
        return self.rows_read - (self.known.skipped if self.known else 0)

    def execute(self, session: Session) -> None:
        session.lock_pipeline(self.name)
        self.before = read_watermarks(session, self.name)
        self.after = dict(self.before)
        columns = session.table_columns(self.pipeline.target_name)
        self.shape = self._existing_shape(columns)
        if columns is not None:
            self.guard = self._guard(session, columns)
        window = self.window or incremental_window(
            self.before, self.pipeline.lateness, self.pipeline.partition_by is not None
        )
        self.window = window
        tracker = self.tracker = WatermarkTracker(self.pipeline.cursor, self.pipeline.partition_by)
        self._stage(session, window, tracker)
        if self.rows_staged and self.shape is not None:
            with self.clock.measure("load"):
                self._publish(session, self.shape, tracker)
        if self.known is not None:
            unchanged, superseded = self.known.counts(self.restaged)
            c = self.counts
            self.counts = replace(
                c, unchanged=c.unchanged + unchanged, superseded=c.superseded + superseded
            )

    def _existing_shape(self, rows: list[tuple[str, str]] | None) -> Shape | None:
        if rows is None:
            return None
        p = self.pipeline
        shape = shape_from_table(rows, p.key, p.cursor, p.partition_by)
        check_lateness(shape, p.lateness)
        return shape

    def _guard(self, session: Session, columns: list[tuple[str, str]]) -> Guard:
        """What the existing target offers the backfill shortcut; a target that lacks the
        fingerprint column or a valid guard is upgraded first (not by a dry run)."""
        target = self.pipeline.target_name
        guard = read_guard(session, target, columns)
        if not guard.complete and self.mode != "check" and may_upgrade(session, target):
            if session.dialect.name == "postgres" and self.sessions is not None:
                upgrade_target(self.sessions, target)  # short transactions of their own
            else:  # SQLite: this transaction holds the database's write lock
                upgrade_target(lambda: nullcontext(session), target)
            guard = read_guard(session, target)
        return guard

    @property
    def fingerprinted(self) -> bool:
        """The target stores fingerprints (a new one always does)."""
        return self.guard is None or self.guard.fingerprinted

    def _read_spec(self, window: Window) -> ReadSpec:
        if self.shape is not None:
            types = {c.name: c.arrow for c in self.shape.columns}
        else:
            types = {name: arrow_type(kind) for name, kind in self.pipeline.columns.items()}
        return ReadSpec(window, self.pipeline.cursor, self.pipeline.partition_by, types)

    def _stage(self, session: Session, window: Window, tracker: WatermarkTracker) -> None:
        source = open_source(self.pipeline, self.config)
        checks = self.pipeline.checks
        if checks is not None:
            self.part_schemas = source.schemas(self._read_spec(window))
            if self.shape is not None and self.part_schemas:
                self.drift = self._resolve_drift(session, self.part_schemas, self.shape, checks)
        with self.clock.measure("load"):
            self.known = self._known_rows(session, window)
        batches = self._conformed(session, source, window, tracker)
        first = next(batches, None)
        if first is None or self.shape is None:
            return
        with self.clock.measure("load"):
            self.promotable = self.new_target and session.dialect.name == "postgres"
            _start_stage(session, self.shape, self, self.promotable)
            session.stage(itertools.chain([first], batches))

    def _conformed(
        self, session: Session, source: Source, window: Window, tracker: WatermarkTracker
    ) -> Iterator[pa.RecordBatch]:
        """Source batches in the window, conformed to the target's columns, counted."""
        items = iter(source.batches(self._read_spec(window)))
        while True:
            with self.clock.measure("extract"):
                item = next(items, None)
                self.bytes_read = source.bytes_read
            if item is None:
                return
            if item.batch.num_rows == 0:
                continue
            with self.clock.measure("transform"):
                batch = self._transform(session, item)
            tracker.observe(batch)
            self.rows_read += batch.num_rows
            if self.on_progress:
                self.on_progress(self.name, self.rows_read)
            if self.known is not None:
                batch = self.known.unseen(batch)
            staged, read = self.rows_staged, self.rows_read
            log.info(
                "pipeline %s run %s: staged %d of %d rows read",
                self.name,
                self.run_id,
                staged,
                read,
            )
            if batch.num_rows:
                yield batch

    def _known_rows(self, session: Session, window: Window) -> KnownRows | None:
        """A backfill's view of the target rows in its range (see ``load.known``)."""
        p = self.pipeline
        if self.mode != "backfill" or self.shape is None or self.new_target:
            return None
        if self.full_compare or not self.fingerprinted or p.checks is not None:
            return None
        before = self.guard
        if before is None or before.since is None:
            return None
        known = KnownRows.fetch(session, p.target_name, p.cursor, window, before.since)
        if read_guard(session, p.target_name) != before:  # its trigger changed meanwhile
            return None
        return known

    def _transform(self, session: Session, item: SourceBatch) -> pa.RecordBatch:
        checks = self.pipeline.checks
        if self.shape is None:
            self.shape = self._infer_shape(item.batch.schema)
        if checks is not None and self.drift is None:  # first load, or a source without parts
            schemas = self.part_schemas or [item.batch.schema]
            self.drift = self._resolve_drift(session, schemas, self.shape, checks)
        if checks is None:
            batch = conform(item, self.shape)
        else:
            aligned = SourceBatch(align(item.batch, self.shape), item.origin, item.row_numbers)
            batch = conform(aligned, self.shape, gated_keys=True)
        batch = self._window_filter(batch) if item.unfiltered else batch
        return with_row_hash(batch, self.shape.columns)

    def _window_filter(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        p, window = self.pipeline, self.window
        if window is None:
            return batch
        cursor_type = batch.schema.field(p.cursor).type
        expression = arrow_filter(window, p.cursor, cursor_type, p.partition_by)
        return batch if expression is None else batch.filter(expression)

    def _resolve_drift(
        self, session: Session, schemas: list[pa.Schema], shape: Shape, checks: ChecksConfig
    ) -> Drift:
        typed = not isinstance(self.pipeline.source, CsvSource)
        drift = detect_all(schemas, shape, typed)
        if drift.added and checks.schema_drift == "evolve" and not drift.retyped:
            if not self.new_target:  # a new target is created with every column anyway
                for column in drift.added:
                    statement = sql.add_column(session.dialect, self.pipeline.target_name, column)
                    session.execute(statement)
            self.shape = evolved(shape, drift)
        return drift

    def _infer_shape(self, schema: pa.Schema) -> Shape:
        p = self.pipeline
        shape = infer_shape(schema, p.columns, p.key, p.cursor, p.partition_by)
        check_lateness(shape, p.lateness)
        self.new_target = True
        return shape

    def _merge_spec(self, shape: Shape) -> sql.MergeSpec:
        p = self.pipeline
        return sql.MergeSpec(
            p.target_name, shape.columns, tuple(p.key), p.cursor, p.on_conflict, self.fingerprinted
        )

    def _publish(self, session: Session, shape: Shape, tracker: WatermarkTracker) -> None:
        spec = self._merge_spec(shape)
        checks = self.pipeline.checks
        if checks is None:
            if self.known is not None:
                self.restaged = self.known.restage_versions(session, spec)
            self.counts = self._merge(session, spec, self.rows_staged + self.restaged)
            return self._after_merge(session, shape, tracker)
        gate = self._gate_spec(shape, checks, session.dialect.name == "postgres")
        with self.clock.measure("quality"):
            self.report = run_gate(session, gate)
        kept = self.rows_staged - self.report.quarantined_rows
        if not gate.key_proven_by_target:
            self.counts = self._merge(session, spec, kept)
            return self._after_merge(session, shape, tracker)
        try:
            with session.savepoint():
                self.counts = first_load(
                    session, spec, kept, self.run_id, self.started_at, False, self.promotable
                )
        except WarehouseError as exc:
            if exc.sqlstate != WarehouseError.UNIQUE_VIOLATION:
                raise
            with self.clock.measure("quality"):
                self.report = recheck_keys(session, gate, self.report)
            kept = self.rows_staged - self.report.quarantined_rows
            self.counts = first_load(
                session, spec, kept, self.run_id, self.started_at, True, self.promotable
            )
        self._after_merge(session, shape, tracker)

    def _merge(self, session: Session, spec: sql.MergeSpec, kept: int) -> MergeCounts:
        if self.new_target:
            return first_load(
                session, spec, kept, self.run_id, self.started_at, True, self.promotable
            )
        return merge_staged(session, spec, kept, self.run_id, self.started_at)

    def _after_merge(self, session: Session, shape: Shape, tracker: WatermarkTracker) -> None:
        if self.new_target:
            guard_new_target(session, self.pipeline.target_name, self.started_at)
        if self.mode == "incremental":
            self._advance(session, shape, tracker)

    def _gate_spec(self, shape: Shape, checks: ChecksConfig, postgres: bool) -> GateSpec:
        drift = self.drift.changes() if self.drift else {}
        target, proven = self.pipeline.target_name, self.new_target and postgres
        return GateSpec(self.name, self.run_id, target, shape, checks, self.history, drift, proven)

    def _advance(self, session: Session, shape: Shape, tracker: WatermarkTracker) -> None:
        moved = tracker.advanced(self.before)
        now = datetime.now(UTC)
        for partition, value in sorted(moved.items()):
            session.execute(
                sql.write_state(session.dialect),
                [
                    self.name,
                    partition,
                    shape.cursor,
                    shape.cursor_type,
                    to_text(value),
                    self.run_id,
                    now,
                ],
            )
        self.after.update(moved)

    def steps(self) -> list[StepResult]:
        written = self.counts.inserted + self.counts.updated
        rejected = self.report.quarantined_rows if self.report else 0
        rows = {  # a backfill's skipped rows are the load's business (load.known)
            "extract": (None, self.rows_read),
            "transform": (self.rows_read, self.rows_read),
            "quality": (self.rows_read, self.rows_read - rejected),
            "load": (self.rows_read - rejected, written),
        }
        return self.clock.results(rows, self.bytes_read, {"quality": rejected})

    def result(self, duration: float, error: str | None = None) -> LoadResult:
        failed = error is not None
        return LoadResult(
            pipeline=self.name,
            run_id=self.run_id,
            mode=self.mode,
            status="failed" if failed else self._status(),
            target=self.pipeline.target,
            started_at=self.started_at,
            duration_s=duration,
            rows_read=0 if failed else self.rows_read,
            rows_staged=0 if failed else self.rows_staged,
            counts=MergeCounts() if failed else self.counts,
            watermark_before=_texts(self.before),
            watermark_after=_texts(self.before if failed else self.after),
            partitioned=self.pipeline.partition_by is not None,
            error=error,
            steps=tuple(self.steps()),
            bytes_read=self.bytes_read,
            target_created=self.new_target and not failed,
            window=_window_texts(self.window),
            quality=None if failed else self.report,
            staged_max_cursor=None if failed else self._staged_max(),
        )

    def _staged_max(self) -> str | None:
        """The greatest cursor among the rows this run published or left as they were; None
        when rows were held back (the greatest may be among them: ask the stage)."""
        if self.tracker is None or not self.tracker.seen:
            return None
        if self.report is not None and self.report.quarantined_rows:
            return None
        return to_text(max(self.tracker.seen.values()))

    def _status(self) -> Status:
        if self.report is not None and self.report.new_entries:
            return "partial"
        return "success"


def _window_texts(window: Window | None) -> tuple[str | None, str | None]:
    if window is None:
        return (None, None)
    lower = None if window.lower is None else to_text(window.lower)
    upper = None if window.upper is None else to_text(window.upper)
    return (lower, upper)


def _texts(marks: dict[str, CursorValue]) -> dict[str, str]:
    return {part: to_text(value) for part, value in sorted(marks.items())}


def _start_stage(session: Session, shape: Shape, run: _Run, promotable: bool) -> None:
    d = session.dialect
    columns = [*shape.columns, sql.ROW_HASH]
    if promotable:
        schema = sql.create_schema(d, run.pipeline.target_name)
        if schema:
            session.execute(schema)
        target = run.pipeline.target_name
        for statement in sql.create_promotable_stage(target, columns, shape.cursor):
            session.execute(statement)
        return
    if d.name == "sqlite":
        for statement in sql.drop_stage(d):
            session.execute(statement)
    session.execute(sql.create_stage(d, columns))


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
        session.execute(f"DROP TABLE {d.stage()}")
        return counts
    deferred_key = d.name == "postgres"
    schema = sql.create_schema(d, spec.target)
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
    return _upsert(session, spec, source, staged, unique, run_id, loaded_at)


def _unique_source(session: Session, spec: sql.MergeSpec, staged: int) -> tuple[str, int]:
    """The staged rows with one row per key: the staging table itself when its keys are
    already unique (the usual case), else a deduplicated copy (greatest cursor wins)."""
    d = session.dialect
    if d.name == "postgres":
        try:
            with session.savepoint():
                session.execute(sql.unique_key_index(d, spec.key))
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
    if d.name == "postgres":
        session.execute(sql.unique_key_index(d, spec.key, source))
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
    if d.name == "postgres":
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


def load_pipeline(
    name: str,
    config: Config,
    warehouse: Warehouse,
    *,
    mode: Mode = "incremental",
    window: Window | None = None,
    on_progress: ProgressCallback | None = None,
    observer: LoadObserver | None = None,
    run_id: str | None = None,
    history: Sequence[int] | None = None,
    full_compare: bool = False,
) -> LoadResult:
    """Run one pipeline once. On failure nothing is written and the error is re-raised
    unchanged, with a note saying what happened to the target and the watermark."""
    run = _Run(name, config.pipeline(name), config, mode, window, on_progress)
    run.run_id = run_id or run.run_id
    run.history = history
    run.full_compare = full_compare
    run.sessions = warehouse.session
    clock = time.monotonic()
    try:
        migrate_database(warehouse, "state")
        with warehouse.session() as session:
            run.execute(session)
            result = run.result(time.monotonic() - clock)
            if observer is not None:
                observer.publishing(session, result, run.shape)
            if mode == "check":
                session.mark_rollback()
    except Exception as exc:
        exc.add_note(_consequence(run))
        if observer is not None:
            observer.failed(run.steps(), exc)
        raise
    return run.result(time.monotonic() - clock)


def _consequence(run: _Run) -> str:
    marks = _texts(run.before)
    if not marks:
        where = "unset (no run has committed yet)"
    elif run.pipeline.partition_by is None:
        where = marks[""]
    else:
        where = ", ".join(f"{k}={v}" for k, v in marks.items())
    return (
        f"pipeline {run.name} (run {run.run_id}): nothing was written; "
        f"the watermark stays at {where}"
    )
