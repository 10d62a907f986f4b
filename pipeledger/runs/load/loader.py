"""A load: stage, check, merge and advance the watermark, inside the run's transaction.

::

    BEGIN                                               (the run scaffold holds it)
      lock the pipeline; read its watermarks; plan the window
      stream source batches -> conform -> stage        (temporary staging table)
      sync = "full": the target keys the snapshot lacks (load.deletes)
      run the quality gate on the staged rows           (halt, or quarantine bad rows)
      full snapshots: the delete_fraction safety gate   (halt a mass delete)
      merge staged rows into the target                 (one set-based statement;
                                                         deletes, SCD2 history)
      advance the watermark to the greatest cursor staged (not for backfills)
      incremental = "files": take the files read        (runs.load.files)
      sync = "full": the snapshot's fingerprint         (state.snapshots)
    COMMIT                                              (or ROLLBACK on any error)

A crash anywhere before COMMIT leaves the target and the watermark as they were. The load
knows nothing of the ledger: :mod:`pipeledger.run` records what it did.
"""

from __future__ import annotations

import functools
import itertools
import logging
import time
from collections import Counter
from collections.abc import Collection, Iterator
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, timedelta
from typing import Any

import numpy as np
import pyarrow as pa

from pipeledger.common.columns import (
    DELETED_AT_COLUMN,
    ROW_HASH,
    ROW_HASH_COLUMN,
    Column,
    TableName,
    arrow_type,
)
from pipeledger.config.model import (
    HISTORY_COLUMNS,
    ChecksConfig,
    Config,
    ParquetSource,
    PipelineConfig,
    SqlSource,
)
from pipeledger.errors import SchemaError, WarehouseError
from pipeledger.publish import merge_sql as sql
from pipeledger.publish.counts import MergeCounts
from pipeledger.publish.deletes import Vanished, find_vanished, judge_deletes, split_marker
from pipeledger.publish.merge import first_load, merge_staged, pipeline_shape, pipeline_spec
from pipeledger.quality.gate import GateSpec, recheck_keys, run_gate
from pipeledger.quality.report import GateReport
from pipeledger.runs.load.files import FilesPlan
from pipeledger.runs.load.known import KnownRows, reread_batches, storage_ranges
from pipeledger.runs.load.late import LateWatch
from pipeledger.runs.load.limits import RunLimits, check_limits
from pipeledger.runs.load.request import (
    LoadRequest,
    ProgressCallback,
    consequence,
    texts,
    watermarks_now,
)
from pipeledger.runs.load.result import LoadResult, Mode, Status
from pipeledger.runs.steps import StepClock, StepResult
from pipeledger.sources import ReadSpec, Source, SourceBatch, open_source
from pipeledger.sources.sql import window_predicate
from pipeledger.state.guard import Guard, guard_new_target, may_upgrade, read_guard, upgrade_target
from pipeledger.state.snapshots import SnapshotState, record_snapshot
from pipeledger.state.tables import read_watermarks, write_state
from pipeledger.state.watermark import (
    CursorValue,
    WatermarkTracker,
    Window,
    incremental_window,
    is_whole_day,
    to_text,
    window_mask,
)
from pipeledger.transform.conform import Shape, check_lateness, conform, infer_shape
from pipeledger.transform.drift import Drift, align, detect_all, evolved
from pipeledger.transform.fingerprint import with_row_hash
from pipeledger.warehouse.dialect import quote
from pipeledger.warehouse.session import Session, Warehouse
from pipeledger.warehouse.stage import (
    add_column,
    create_stage,
    drop_stage,
    ensure_schema,
    handed_on,
    qualified,
)

log = logging.getLogger("pipeledger.load")


@dataclass(kw_only=True)
class Load:
    """One load of one pipeline, run by :meth:`execute` inside the caller's transaction;
    the scaffold (:mod:`pipeledger.run`) opens it, records the load and commits."""

    request: LoadRequest
    config: Config
    warehouse: Warehouse  # opens short transactions beside the load's (schema, upgrades)
    run_id: str
    on_progress: ProgressCallback | None = None
    clock: StepClock = field(default_factory=StepClock)
    began: float = field(default_factory=time.monotonic)
    started_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    bytes_read: int = 0
    bytes_staged: int = 0  # of the Arrow batches read into the window (max_bytes)
    before: dict[str, CursorValue] | None = None  # None: not read yet
    after: dict[str, CursorValue] = field(default_factory=dict)
    window: Window | None = None
    shape: Shape | None = None
    new_target: bool = False
    rows_read: int = 0
    counts: MergeCounts = field(default_factory=MergeCounts)
    drift: Drift | None = None
    report: GateReport | None = None
    part_schemas: list[pa.Schema] = field(default_factory=list)
    tracker: WatermarkTracker | None = None
    promotable: bool = False  # staged into a table that becomes the new target
    stage_started: bool = False  # the staging table exists (created in this transaction)
    guard: Guard | None = None  # the existing target's fingerprints (load.guard)
    known: KnownRows | None = None  # backfill: what the target already holds
    restaged: int = 0  # rows the shortcut skipped that the merge needed after all
    vanished: Vanished | None = None  # sync = "full": the target keys the snapshot lacks
    late: LateWatch | None = None  # what the run learns about late rows (load.late)
    files: FilesPlan | None = None  # incremental = "files": the files this run reads
    file_rows: Counter[str] = field(default_factory=Counter)  # rows read, by file
    fingerprints: int = 0  # sync = "full": the sum of the rows' fingerprints read
    snapshot: SnapshotState | None = None  # sync = "full": as this run leaves it
    target: TableName = field(init=False)
    limits: RunLimits = field(init=False)

    def __post_init__(self) -> None:
        self.target = self.pipeline.target_name
        self.limits = RunLimits.of(self.config, self.name)
        self.window = self.request.window

    @property
    def name(self) -> str:
        return self.request.pipeline

    @property
    def pipeline(self) -> PipelineConfig:
        return self.config.pipeline(self.request.pipeline)

    @property
    def mode(self) -> Mode:
        return self.request.mode

    @property
    def rows_staged(self) -> int:
        return self.rows_read - (self.known.skipped if self.known else 0)

    def execute(self, session: Session) -> LoadResult:
        """The whole load in ``session``'s transaction; the caller commits."""
        session.lock_pipeline(self.name)
        self.before = read_watermarks(session, self.name)
        self.after = dict(self.before)
        columns = session.table_columns(self.target)
        self.shape = self._existing_shape(columns)
        if columns is not None:
            self.guard = self._guard(session, columns)
            self._add_deleted_at(session, columns)
        elif self.mode != "check":  # a dry run leaves no schema behind
            ensure_schema(self.warehouse, self.target)
        window = self.window or self._planned_window()
        self.window = window
        tracker = self.tracker = WatermarkTracker(self.pipeline.cursor, self.pipeline.partition_by)
        self._stage(session, window, tracker)
        if self.files is not None:
            self.files.check_unchanged(self.name)
        if (self.rows_staged or self._snapshot) and self.shape is not None:
            with self.clock.measure("load"):
                if self.late is not None:
                    self.late.before_merge(session)
                self._publish(session, self.shape, tracker)
        if self.late is not None:
            self.late.after_merge(session, self.stage_started)
        if self.mode == "incremental":
            self._keep_state(session)
        self.clock.finish("quality", "load")
        if self.known is not None:
            unchanged, superseded = self.known.counts(self.restaged)
            c = self.counts
            self.counts = replace(
                c, unchanged=c.unchanged + unchanged, superseded=c.superseded + superseded
            )
        return self.result()

    def _existing_shape(self, rows: list[tuple[str, str]] | None) -> Shape | None:
        if rows is None:
            return None
        shape = pipeline_shape(self.pipeline, rows)
        check_lateness(shape, self.pipeline.lateness)
        return shape

    def _add_deleted_at(self, session: Session, columns: list[tuple[str, str]]) -> None:
        """``soft_delete`` turned on for an existing target: it gains the column."""
        if self.pipeline.soft_delete and DELETED_AT_COLUMN not in {n for n, _ in columns}:
            added = Column(DELETED_AT_COLUMN, "timestamptz")
            session.execute(add_column(session.dialect, self.target, added))

    def _planned_window(self) -> Window:
        """An incremental run's window: from the watermarks, or the whole source for a
        full snapshot (``sync = "full"``: the source is the truth for every key) and for
        the new files of ``incremental = "files"`` (read whole, whatever their cursors)."""
        p = self.pipeline
        if p.sync == "full" or self.files is not None:
            return Window()
        return incremental_window(self.before or {}, p.lateness, p.partition_by is not None)

    @property
    def _snapshot(self) -> bool:
        """The run holds a full snapshot of an existing target: even with no row staged,
        it has keys to delete (and the safety gate to pass)."""
        return self.pipeline.sync == "full" and not self.new_target

    def _guard(self, session: Session, columns: list[tuple[str, str]]) -> Guard:
        """What the existing target offers the backfill shortcut; a target that lacks the
        fingerprint column or a valid guard is upgraded first (not by a dry run)."""
        target = self.target
        guard = read_guard(session, target, columns)
        if not guard.complete and self.mode != "check" and may_upgrade(session, target):
            if session.dialect.concurrent_transactions:
                upgrade_target(self.warehouse.session, target)  # short transactions of its own
            else:  # this transaction holds the database's write lock
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
        outside = self.late.outside if self.late is not None else frozenset()
        return ReadSpec(
            window=window,
            cursor=self.pipeline.cursor,
            partition_by=self.pipeline.partition_by,
            column_types=types,
            outside=outside,
        )

    def _stage(self, session: Session, window: Window, tracker: WatermarkTracker) -> None:
        only = None if self.files is None else self.files.paths
        source = open_source(self.pipeline, self.config, only)
        checks = self.pipeline.checks
        if checks is not None:
            schemas = source.schemas(self._read_spec(window))
            self.part_schemas = [self._data_schema(schema) for schema in schemas]
            if self.shape is not None and self.part_schemas:
                self.drift = self._resolve_drift(session, self.part_schemas, self.shape, checks)
        if LateWatch.wanted(self.mode, self.pipeline, self.before or {}):
            self.late = LateWatch(
                name=self.name,
                run_id=self.run_id,
                pipeline=self.pipeline,
                mode=self.mode,
                shape=self.shape,
                target=self.target,
                marks=self.before or {},
                window=window,
            )
            with self.clock.measure("extract"):
                self.late.prepare(session, source)
        with self.clock.measure("load"):
            self.known = self._known_rows(session, window)
        batches = self._conformed(session, source, window, tracker)
        head = list(itertools.islice(batches, 1))  # read to know the shape: held till staged
        if not head and self._snapshot and self.shape is not None:
            with self.clock.measure("load"):  # an empty snapshot: every key is lacking
                self._start_stage(session, self.shape)
        if head and self.shape is not None:
            with self.clock.measure("load"):
                self.promotable = self.new_target and session.dialect.promotes_stage and self._plain
                self._start_stage(session, self.shape)
                session.stage(itertools.chain(handed_on(head), batches))
        if self.known is not None:
            self._read_again(session, window, only)

    def _read_again(self, session: Session, window: Window, only: Collection[str] | None) -> None:
        """The backfill shortcut's second read (``load.known``): only when the first found
        buckets of rows that differ from the target's, and then only their rows staged."""
        known, shape = self.known, self.shape
        assert known is not None and shape is not None, "a backfill of an existing target"
        if known.blind:  # counted beside the first read: once the count is in, was the
            known.wait()  # target's trigger the same throughout?
            if read_guard(session, self.target) != self.guard:
                known.distrust()
        known.finish()
        if not known.rereads:
            return
        known.hold_pending(session, self.target)
        source = open_source(self.pipeline, self.config, only)
        rows = reread_batches(known, self._reconformed(session, source, window))
        head = list(itertools.islice(rows, 1))
        if head:
            with self.clock.measure("load"):
                if not self.stage_started:
                    self._start_stage(session, shape)
                session.stage(itertools.chain(handed_on(head), rows))
        known.check_reread(self.name, self.consequence)

    def _reconformed(
        self, session: Session, source: Source, window: Window
    ) -> Iterator[pa.RecordBatch]:
        """The source's batches in the window read again, conformed as the first read
        conformed them (counted, observed and watched by that read already)."""
        items = iter(source.batches(self._read_spec(window)))
        while True:
            with self.clock.measure("extract"):
                item = next(items, None)
            if item is None:
                return
            if item.batch.num_rows == 0 or item.outside:
                continue
            with self.clock.measure("transform"):
                yield self._transform(session, item)

    @property
    def _plain(self) -> bool:
        """Staged rows are the target's rows as they are: no delete flags, no versions to
        give a validity (a new PostgreSQL target may then be promoted from the stage)."""
        return self.pipeline.deleted is None and self.pipeline.history is None

    def _data_schema(self, schema: pa.Schema) -> pa.Schema:
        """A source part's columns, without the delete marker (it is not a data column)."""
        marker = self.pipeline.deleted
        if marker is None or marker.column not in schema.names:
            return schema
        return schema.remove(schema.get_field_index(marker.column))

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
                self.clock.finish("extract", "transform")
                return
            if item.batch.num_rows == 0:
                continue
            if item.outside:  # of a file new to the pipeline: maybe later than the buffer
                assert self.late is not None, "asked for by the late-row watch only"
                with self.clock.measure("transform"):
                    self.late.collect(item)
                continue
            with self.clock.measure("transform"):
                batch = self._transform(session, item)
            tracker.observe(batch)
            if self.late is not None:
                self.late.observe(batch)
            self._count(item.origin, batch)
            self.rows_read += batch.num_rows
            self.bytes_staged += batch.nbytes
            check_limits(self.limits, self.name, self.run_id, self.rows_read, self.bytes_staged)
            if self.on_progress:
                self.on_progress(self.name, self.rows_read)
            if self.known is not None:
                batch = self.known.unseen(batch)
            log.info(
                "pipeline %s run %s: staged %d of %d rows read",
                self.name,
                self.run_id,
                self.rows_staged,
                self.rows_read,
            )
            if batch.num_rows:
                yield batch

    def _count(self, origin: str, batch: pa.RecordBatch) -> None:
        """The rows read from each file (files taken), and a full snapshot's fingerprint:
        the sum mod 2^64 of its rows' (numpy's unsigned sums wrap around)."""
        if self.files is not None:
            self.file_rows[origin] += batch.num_rows
        if self.pipeline.sync == "full":
            hashes = batch.column(ROW_HASH_COLUMN).to_numpy().view(np.uint64)
            self.fingerprints += int(hashes.sum(dtype=np.uint64))

    def _keep_state(self, session: Session) -> None:
        """What an incremental run keeps beside the watermark, in its transaction: the
        files it took, the snapshot it read."""
        now = datetime.now(UTC)
        if self.files is not None:
            self.files.take(session, self.name, self.file_rows, self.run_id, now)
        if self.pipeline.sync == "full":
            self.snapshot = record_snapshot(
                session, self.name, self.rows_read, self.fingerprints, self.run_id, now
            )

    def _known_rows(self, session: Session, window: Window) -> KnownRows | None:
        """A backfill's view of the target rows in its range (see ``load.known``)."""
        p = self.pipeline
        if self.mode != "backfill" or self.shape is None or self.new_target or not p.cursor:
            return None
        if self.request.full_compare or not self.fingerprinted or p.checks is not None:
            return None
        if p.deletes:  # a marked row may match its row; a snapshot must see every key
            return None
        before = self.guard
        if before is None or before.since is None:
            return None
        d = session.dialect
        if d.concurrent_transactions and len(storage_ranges(session, self.target)) > 1:
            # counted beside the load (which has not written the target yet, so it sees
            # the same rows), on a thread while the source is read; the guard is read
            # again once the count is in (_read_again)
            opened = functools.partial(self.warehouse.session, write=False)
            return KnownRows.fetch_beside(opened, d, self.target, p.cursor, window, before.since)
        if d.concurrent_transactions:  # the driver's buffer goes with that connection
            with self.warehouse.session(write=False) as beside:
                known = KnownRows.fetch(beside, self.target, p.cursor, window, before.since)
        else:
            known = KnownRows.fetch(session, self.target, p.cursor, window, before.since)
        if read_guard(session, self.target) != before:  # its trigger changed meanwhile
            return None
        return known

    def _transform(self, session: Session, item: SourceBatch) -> pa.RecordBatch:
        checks = self.pipeline.checks
        marker = self.pipeline.deleted
        flags = None
        if marker is not None:  # a delete flag, staged beside the row (load.deletes)
            item, flags = split_marker(item, marker)
        if self.shape is None:
            self.shape = self._infer_shape(item.batch.schema)
        if checks is not None and self.drift is None:  # first load, or a source without parts
            schemas = self.part_schemas or [item.batch.schema]
            self.drift = self._resolve_drift(session, schemas, self.shape, checks)
        if checks is None:
            batch = conform(item, self.shape)
        else:
            aligned = SourceBatch(
                batch=align(item.batch, self.shape),
                origin=item.origin,
                row_numbers=item.row_numbers,
            )
            batch = conform(aligned, self.shape, gated_keys=True)
        if flags is not None:
            batch = batch.append_column(sql.DELETED_FLAG, flags)
        batch = self._window_filter(batch) if item.unfiltered else batch
        return with_row_hash(batch, self.shape.columns)

    def _window_filter(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        p, window = self.pipeline, self.window
        if window is None or p.cursor is None:
            return batch
        mask = window_mask(window, batch, p.cursor, p.partition_by)
        return batch if mask is None else batch.filter(mask)

    def _resolve_drift(
        self, session: Session, schemas: list[pa.Schema], shape: Shape, checks: ChecksConfig
    ) -> Drift:
        drift = detect_all(schemas, shape, self._typed_source)
        if drift.added and checks.schema_drift == "evolve" and not drift.retyped:
            if not self.new_target:  # a new target is created with every column anyway
                for column in drift.added:
                    statement = add_column(session.dialect, self.target, column)
                    session.execute(statement)
            self.shape = evolved(shape, drift)
        return drift

    def _infer_shape(self, schema: pa.Schema) -> Shape:
        p = self.pipeline
        clash = sorted(set(HISTORY_COLUMNS) & set(schema.names)) if p.history else []
        if clash:
            raise SchemaError(
                f"the source has column(s) {clash}, which history = 'scd2' adds to the "
                "target: rename them in the source"
            )
        shape = infer_shape(schema, p.columns, p.identity, p.cursor, p.partition_by)
        check_lateness(shape, p.lateness)
        self.new_target = True
        return shape

    def _merge_spec(self, shape: Shape) -> sql.MergeSpec:
        before_images = self.config.needs_before_images(self.target)
        return pipeline_spec(
            self.pipeline, self.target, shape.columns, self.fingerprinted, before_images
        )

    def _publish(self, session: Session, shape: Shape, tracker: WatermarkTracker) -> None:
        spec = self._merge_spec(shape)
        if self._snapshot:  # before the gate sets rows aside: those are not lacking
            self.vanished = find_vanished(session, spec, self._scope(session), self.started_at)
        checks = self.pipeline.checks
        if checks is None:
            if self.known is not None:
                self.restaged = self.known.restage_versions(session, spec)
            self._judge_deletes()
            self.counts = self._merge(session, spec, self.rows_staged + self.restaged)
            return self._after_merge(session, shape, tracker)
        gate = self._gate_spec(shape, checks, session.dialect.deferred_primary_key and self._plain)
        with self.clock.measure("quality"):
            self.report = run_gate(session, gate)
        self._judge_deletes()
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
        # an incremental batch is mostly new or changed rows: no join to filter them first;
        # a full snapshot is mostly rows the target holds as they are
        filtered = self.mode != "incremental" or self.pipeline.sync == "full"
        return merge_staged(
            session, spec, kept, self.run_id, self.started_at, self.vanished, filtered
        )

    def _scope(self, session: Session) -> tuple[str, list[Any]]:
        """The target rows a full snapshot speaks for: all of them, or a backfill's range."""
        window = self.window or Window()
        bounds = Window(window.lower, window.upper)  # a full read's window is empty
        return window_predicate(session.dialect, bounds, self.pipeline.cursor, None)

    def _judge_deletes(self) -> None:
        """The safety gate of a full snapshot (load.deletes): halts a mass delete."""
        if self.vanished is not None:
            self.report = judge_deletes(self.name, self.pipeline, self.vanished, self.report)

    def _after_merge(self, session: Session, shape: Shape, tracker: WatermarkTracker) -> None:
        if self.new_target:
            guard_new_target(session, self.target, self.started_at)
        if self.mode == "incremental":
            self._advance(session, shape, tracker)

    def _gate_spec(self, shape: Shape, checks: ChecksConfig, keyed_later: bool) -> GateSpec:
        """``keyed_later``: a new target gets its primary key after the insert, which
        proves the keys unique (the gate then checks them only if that fails)."""
        drift = self.drift.changes() if self.drift else {}
        counts, proven = self.request.recent_counts, self.new_target and keyed_later
        if self.pipeline.deleted and shape.cursor and shape.cursor not in shape.key:
            # a CDC feed carries several changes of a key in one run, at other cursors
            shape = replace(shape, key=(*shape.key, shape.cursor))
        return GateSpec(
            pipeline=self.name,
            run_id=self.run_id,
            target=self.target,
            shape=shape,
            checks=checks,
            recent_counts=counts,
            drift=drift,
            key_proven_by_target=proven,
            exempt=f"s.{quote(sql.DELETED_FLAG)}" if self.pipeline.deleted else None,
        )

    def _advance(self, session: Session, shape: Shape, tracker: WatermarkTracker) -> None:
        moved = tracker.advanced(self.before or {})
        now = datetime.now(UTC)
        for partition, value in sorted(moved.items()):
            params = [
                self.name,
                partition,
                shape.cursor,
                shape.cursor_type,
                to_text(value),
                self.run_id,
                now,
            ]
            session.execute(write_state(session.dialect), params)
        self.after.update(moved)

    @property
    def _typed_source(self) -> bool:
        """The source's own column types are meaningful (not CSV text, not SQLite's types
        that follow each value): a change of type there is drift."""
        source = self.pipeline.source
        if isinstance(source, SqlSource):
            return not source.url.lower().startswith("sqlite")
        return isinstance(source, ParquetSource)

    def _start_stage(self, session: Session, shape: Shape) -> None:
        self.stage_started = True
        d = session.dialect
        flag = [sql.DELETED] if self.pipeline.deleted else []
        columns = [*shape.columns, ROW_HASH, *flag]
        if not self.promotable:
            for statement in [*drop_stage(d), create_stage(d, columns)]:
                session.execute(statement)
            return
        self.target = qualified(session, self.target)
        ensure_schema(self.warehouse, self.target)
        updates = self._merge_spec(shape).updates
        promotable = sql.create_promotable_stage(
            d, self.run_id, columns, shape.cursor or "", loaded_at=self.started_at, updates=updates
        )
        for statement in promotable:
            session.execute(statement)

    def steps(self, failed: bool = False) -> list[StepResult]:
        written = self.counts.inserted + self.counts.updated
        rejected = self.report.quarantined_rows if self.report else 0
        rows = {  # a backfill's skipped rows are the load's business (load.known)
            "extract": (None, self.rows_read),
            "transform": (self.rows_read, self.rows_read),
            "quality": (self.rows_read, self.rows_read - rejected),
            "load": (self.rows_read - rejected, 0 if failed else written),
        }
        return self.clock.results(rows, self.bytes_read, {"quality": rejected})

    def result(self) -> LoadResult:
        """What the load did, when it has done it (before COMMIT)."""
        return LoadResult(
            pipeline=self.name,
            run_id=self.run_id,
            mode=self.mode,
            status=self._status(),
            target=self.pipeline.target,
            started_at=self.started_at,
            duration_s=time.monotonic() - self.began,
            rows_read=self.rows_read,
            rows_staged=self.rows_staged,
            counts=self.counts,
            watermark_before=texts(self.before or {}),
            watermark_after=texts(self.after),
            partitioned=self.pipeline.partition_by is not None,
            steps=tuple(self.steps()),
            bytes_read=self.bytes_read,
            target_created=self.new_target,
            window=_window_texts(self.window),
            quality=self.report,
            staged_max_cursor=self._staged_max(),
            covered=self._covered(),
            lateness=self.late.result(self.after) if self.late is not None else None,
            snapshot=self.snapshot,
            files=self.files.summary() if self.files is not None else None,
        )

    def failure(self, error: str) -> LoadResult:
        """What the load had done when it failed: nothing was written, but it read rows
        (the ledger records how far it got)."""
        return LoadResult(
            pipeline=self.name,
            run_id=self.run_id,
            mode=self.mode,
            status="failed",
            target=self.pipeline.target,
            started_at=self.started_at,
            duration_s=time.monotonic() - self.began,
            rows_read=self.rows_read,
            watermark_before=texts(self.before or {}),
            watermark_after=texts(self.before or {}),
            partitioned=self.pipeline.partition_by is not None,
            error=error,
            steps=tuple(self.steps(failed=True)),
            bytes_read=self.bytes_read,
            window=_window_texts(self.window),
        )

    def consequence(self) -> str:
        """What a failure left behind, in words: nothing written, the watermark where it is."""
        marks = self.before
        if marks is None:
            marks = watermarks_now(self.warehouse, self.name)
        return consequence(self.name, self.run_id, self.pipeline, marks)

    def _covered(self) -> tuple[datetime, datetime] | None:
        """The stretch of the cursor this run covered, for the ledger's data interval: from
        its window's lower bound (or the least cursor it read) to the greatest cursor
        staged or already covered; a backfill's is its range, to the end of a date-only
        end's day, as ``runner.backfill`` records it when the run starts (time cursors
        only)."""
        tracker, window = self.tracker, self.window
        if tracker is None or window is None:
            return None
        if self.mode == "backfill":  # a date-only end covers that whole day
            start, end = window.lower, window.upper
            if end is not None and is_whole_day(end):
                end = end + timedelta(days=1)  # type: ignore[operator]
        else:
            lows = [*window.partition_lower.values()] or ([window.lower] if window.lower else [])
            start = min(lows) if lows else tracker.least
            marks = [*self.after.values()]
            end = max(marks) if marks else None
        return _instants(start, end)

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


def _instants(
    start: CursorValue | None, end: CursorValue | None
) -> tuple[datetime, datetime] | None:
    """Two cursor values as UTC instants (dates at midnight); None for integer cursors."""
    if not isinstance(start, date) or not isinstance(end, date):
        return None
    return _instant(start), _instant(end)


def _instant(value: date) -> datetime:
    if not isinstance(value, datetime):
        return datetime(value.year, value.month, value.day, tzinfo=UTC)
    return value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)


def _window_texts(window: Window | None) -> tuple[str | None, str | None]:
    if window is None:
        return (None, None)
    lower = None if window.lower is None else to_text(window.lower)
    upper = None if window.upper is None else to_text(window.upper)
    return (lower, upper)
