"""Late rows in a load: what the lateness buffer caught, what that cost, what it missed.

An incremental run measures, against the watermarks it started from (definitions in
:mod:`pipeledger.state.lateness`):

* **caught**: rows it read with ``cursor < watermark`` that the target did not hold as they
  are (new rows, new versions); their lateness goes into the run's histogram;
* **re-read**: rows it read below the watermark that the target held unchanged;
* **missed**, for file sources read by cursor window (``incremental = "files"`` reads every
  new file whole: it misses nothing): a file the pipeline's incremental runs have not read before
  (by path, size and modification time; ``pipeledger.files_read``, written in the run's
  transaction) is read whole, in the load's own read (``ReadSpec.outside``): its rows below
  the window that the target still lacks after the merge arrived later than the buffer.
  The run warns and records a ``LATE_ROW_DROPPED`` count instead of staying silent. The
  target "lacks" a row when it holds no row of its key with the same fingerprint, an
  unknown one (edited by hand: it cannot tell) or a newer cursor (then the row was
  superseded, not lost); so a file rewritten or appended to finds only what is really new.
  The rows below the window are held until the merge is done, up to ``HELD_ROWS`` (a few
  MB); beyond that the new files are read a second time after the merge instead.

A SQL source does not say when a row arrived, and every run reads only its window: there
a backfill counts the rows it stages below the live window that the target lacks, and
``pipeledger reconcile`` the rows it finds missing there. Whoever finds a late row first
counts it: ``pipeledger.late_rows`` remembers each by the fingerprint of its version.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeledger.common.columns import ROW_HASH, ROW_HASH_COLUMN, Column, TableName
from pipeledger.common.files import FileSeen
from pipeledger.config.model import PipelineConfig, SqlSource
from pipeledger.runs.load import late_sql as lsql
from pipeledger.runs.load.result import Mode
from pipeledger.sources import ReadSpec, Source
from pipeledger.sources.base import FileSource, SourceBatch
from pipeledger.sources.sql import window_predicate
from pipeledger.state.lateness import (
    RunLateness,
    histogram,
    late_by,
    late_by_array,
    seconds,
    stored_cursor,
)
from pipeledger.state.tables import watermark_moved_at
from pipeledger.state.watermark import (
    UNPARTITIONED,
    CursorValue,
    Window,
    incremental_window,
    to_text,
    window_mask,
)
from pipeledger.transform.conform import Shape
from pipeledger.transform.drift import as_stored
from pipeledger.warehouse.session import Session
from pipeledger.warehouse.stage import create_stage, handed_on

log = logging.getLogger("pipeledger.load")

Array = np.ndarray[Any, Any]
LATENESS = Column("_pipeledger_lateness", "bigint")
ORIGIN = Column("_pipeledger_origin", "text")
_CHUNK = 200  # rows per statement when counting late rows
# rows below the window held in memory (key, cursor, fingerprint, lateness, file: ~50 bytes
# each) until the merge is done; beyond, the new files are read again after it
HELD_ROWS = 131_072


def count_late(
    session: Session, pipeline: str, run_id: str, hashes: Array, lateness: Array
) -> Array:
    """Remember late rows (by fingerprint) not counted before; return the positions of
    those this call counted."""
    d, now = session.dialect, datetime.now(UTC)
    _, first = np.unique(hashes, return_index=True)
    fresh = []
    for start in range(0, len(first), _CHUNK):
        chunk = first[start : start + _CHUNK]
        values = [int(h) for h in hashes[chunk]]
        known = {
            int(r[0]) for r in session.query(lsql.counted_late(d, len(values)), [pipeline, *values])
        }
        new = [int(i) for i in chunk if int(hashes[i]) not in known]
        if new:
            params = [
                v for i in new for v in (pipeline, int(hashes[i]), int(lateness[i]), run_id, now)
            ]
            session.execute(lsql.count_late(d, len(new)), params)
        fresh += new
    return np.array(sorted(fresh), dtype=np.int64)


@dataclass(frozen=True)
class Missed:
    """Rows found later than the buffer: fingerprints, how late each is, cursors."""

    hashes: Array
    lateness: Array
    cursors: list[CursorValue]

    def count(self, session: Session, name: str, run_id: str) -> tuple[Array, list[CursorValue]]:
        """Count those not counted before (:func:`count_late`); return their lateness and
        cursors."""
        fresh = count_late(session, name, run_id, self.hashes, self.lateness)
        return self.lateness[fresh], [self.cursors[int(i)] for i in fresh]


def missed_rows(
    session: Session,
    buffer: timedelta | int,
    shape: Shape,
    target: TableName,
    marks: Mapping[str, CursorValue],
    rows: str,
    where: str = "1=1",
) -> Missed:
    """Rows of ``rows`` (a table with the target's key, cursor and partition columns and a
    fingerprint) matching ``where`` that lie below the live window (``watermark - buffer``
    of their partition) and that the target lacks (``late_sql.unheld_rows``)."""
    d, by, cursor = session.dialect, shape.partition_by, cursor_of(shape)
    live = incremental_window(marks, buffer, by is not None)
    inside, params = window_predicate(d, live, cursor, by)
    columns = [ROW_HASH_COLUMN, cursor, *([by] if by else [])]
    statement = lsql.unheld_rows(
        d, target, shape.key, cursor, rows, columns, f"{where} AND NOT ({inside})"
    )
    found = [r for r in session.query(statement, params) if _partition(r, by) in marks]
    cursors = [stored_cursor(r[1]) for r in found]
    late = [late_by(marks[_partition(r, by)], c) for r, c in zip(found, cursors, strict=True)]
    hashes = np.array([int(r[0]) for r in found], dtype=np.int64)
    return Missed(hashes, np.array(late, dtype=np.int64), cursors)


def cursor_of(shape: Shape) -> str:
    """The cursor of a shape that has one (nothing is late without: ``LateWatch.wanted``)."""
    assert shape.cursor, "late rows are measured against a cursor"
    return shape.cursor


def _partition(row: Sequence[Any], partition_by: str | None) -> str:
    return UNPARTITIONED if partition_by is None else str(row[2])


@dataclass(kw_only=True)
class LateWatch:
    """One run's view of its late rows (module docstring). The loader calls
    :meth:`prepare` before it stages, :meth:`observe` with every batch it stages,
    :meth:`before_merge` and :meth:`after_merge`; :meth:`result` is what it learned."""

    name: str
    run_id: str
    pipeline: PipelineConfig
    mode: Mode
    shape: Shape | None  # the target's (None: this run creates it)
    target: TableName
    marks: Mapping[str, CursorValue]  # the watermarks the run started from
    window: Window
    new_files: list[FileSeen] = field(default_factory=list)
    checked: list[FileSeen] = field(default_factory=list)  # new files whose late rows count
    source: FileSource | None = None
    held: list[pa.RecordBatch] = field(default_factory=list)  # their rows below the window
    held_rows: int = 0
    overflowed: bool = False  # more than HELD_ROWS: read again after the merge
    candidates: int = 0  # rows below the window in files new to the pipeline
    below_hashes: list[Array] = field(default_factory=list)
    below_lateness: list[Array] = field(default_factory=list)
    rows_new: int = 0
    reread: int = 0
    caught: Array = field(default_factory=lambda: np.zeros(0, np.int64))
    missed: Array = field(default_factory=lambda: np.zeros(0, np.int64))
    missed_cursors: tuple[str, str] | None = None
    missed_in: tuple[str, ...] = ()

    @classmethod
    def wanted(cls, mode: Mode, pipeline: PipelineConfig, marks: Mapping[str, Any]) -> bool:
        """Incremental runs always watch (they record which files they read); a backfill of
        a SQL source counts the late rows it finds, once there is a live window. Without a
        cursor nothing is late."""
        if pipeline.cursor is None:
            return False
        if mode == "incremental":
            return True
        return mode == "backfill" and isinstance(pipeline.source, SqlSource) and bool(marks)

    # -- before staging: files new to the pipeline ----------------------------------------
    def prepare(self, session: Session, source: Source) -> None:
        if self.mode != "incremental" or not isinstance(source, FileSource):
            return
        d = session.dialect
        seen = {
            FileSeen(str(p), int(s), int(m))
            for p, s, m in session.query(lsql.read_files(d), [self.name])
        }
        self.new_files = [f for f in map(FileSeen.of, source.files()) if f not in seen]
        checked = self.new_files
        if not seen and self.marks:
            # the first run that tracks an existing pipeline takes the files unchanged since
            # its watermark last moved as read (else that run would read all history twice)
            moved = session.query(watermark_moved_at(d), [self.name])[0][0]
            at = stored_cursor(moved) if moved is not None else None
            before = int(at.timestamp() * 1e9) if isinstance(at, datetime) else 0
            checked = [f for f in self.new_files if f.mtime_ns >= before]
        if self._measuring and checked:
            self.checked, self.source = checked, source

    @property
    def outside(self) -> frozenset[str]:
        """The files the load reads whole, handing on their rows outside its window too
        (:meth:`collect`)."""
        return frozenset(f.path for f in self.checked)

    def collect(self, item: SourceBatch) -> None:
        """Rows outside the load's window, of a file new to the pipeline: those below it
        are held (as candidates of late rows) until the merge is done."""
        if self.overflowed:
            return
        below = self._below_window(as_stored(item, self._shape))
        if not below.num_rows:
            return
        self.held.append(self._candidate_rows(below, item.origin))
        self.held_rows += below.num_rows
        if self.held_rows > HELD_ROWS:  # too many to hold: read the files again instead
            self.overflowed, self.held, self.held_rows = True, [], 0

    def _stage_candidates(self, session: Session, stage_taken: bool) -> None:
        """The rows below the window of the new files, with their fingerprints and how late
        they are, as a temporary table. The load's stage (``stage_taken``: there is one;
        what happens after the merge may read it) is set aside meanwhile."""
        if not self.checked:
            return
        d = session.dialect
        if stage_taken:
            session.execute(lsql.keep_stage_as(d, lsql.STAGE_ASIDE))
        session.execute(create_stage(d, [*self._identity, ROW_HASH, LATENESS, ORIGIN]))
        if self.overflowed and self.source is not None:
            session.stage(self._candidates_in(self.source, self.checked))
        else:
            self.candidates = self.held_rows
            session.stage(handed_on(self.held))
        statement = lsql.keep_stage_as(d, lsql.CANDIDATES) if self.candidates else None
        session.execute(statement or lsql.drop_stage_table(d))
        if stage_taken:
            session.execute(lsql.restore_stage(d, lsql.STAGE_ASIDE))

    @property
    def _measuring(self) -> bool:
        """There is a watermark to be late against, and a target to ask."""
        return bool(self.marks) and self.shape is not None

    @property
    def _shape(self) -> Shape:
        assert self.shape is not None, "measured only against an existing target"
        return self.shape

    @property
    def _identity(self) -> list[Column]:
        return list(self._shape.identity)

    def _candidates_in(
        self, source: FileSource, files: Sequence[FileSeen]
    ) -> Iterator[pa.RecordBatch]:
        types = {c.name: c.arrow for c in self._shape.columns}
        spec = ReadSpec(
            window=Window(),
            cursor=self._shape.cursor,
            partition_by=self._shape.partition_by,
            column_types=types,
        )
        for seen in files:
            for item in source.read_file(Path(seen.path), spec):
                below = self._below_window(as_stored(item, self._shape))
                if below.num_rows:
                    self.candidates += below.num_rows
                    yield self._candidate_rows(below, seen.path)

    def _below_window(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        inside = window_mask(self.window, batch, cursor_of(self._shape), self._shape.partition_by)
        if inside is None:
            return batch.slice(0, 0)
        return batch.filter(pc.invert(inside))

    def _candidate_rows(self, batch: pa.RecordBatch, origin: str) -> pa.RecordBatch:
        """Every row below the window is below its partition's watermark: how late it is."""
        _, lateness = self._below_marks(batch)
        arrays = [batch.column(c.name) for c in self._identity]
        arrays += [
            batch.column(ROW_HASH_COLUMN),
            pa.array(lateness, pa.int64()),
            pa.array([origin] * batch.num_rows, pa.string()),
        ]
        names = [c.name for c in self._identity] + [ROW_HASH_COLUMN, LATENESS.name, ORIGIN.name]
        return pa.RecordBatch.from_arrays(arrays, names=names)

    # -- while staging: rows caught below the watermark -----------------------------------
    def observe(self, batch: pa.RecordBatch) -> None:
        """A batch the run stages (in its window, conformed, fingerprinted)."""
        if self.mode != "incremental" or not self._measuring:
            return
        mask, lateness = self._below_marks(batch)
        self.rows_new += batch.num_rows - int(mask.sum())
        if mask.any():
            self.below_hashes.append(batch.column(ROW_HASH_COLUMN).to_numpy()[mask])
            self.below_lateness.append(lateness)

    def _below_marks(self, batch: pa.RecordBatch) -> tuple[Array, Array]:
        """Which rows have ``cursor < watermark`` of their partition, and how late those are
        (in row order)."""
        cursors = batch.column(cursor_of(self._shape))
        late = np.zeros(batch.num_rows, dtype=np.int64)
        mask = np.zeros(batch.num_rows, dtype=bool)
        for part, where in self._partitions(batch):
            mark = self.marks[part]
            behind = late_by_array(mark, cursors)
            hit = where & (behind > 0)
            mask |= hit
            late[hit] = behind[hit]
        return mask, late[mask]

    def _partitions(self, batch: pa.RecordBatch) -> Iterator[tuple[str, Array]]:
        by = self._shape.partition_by
        if by is None:
            if UNPARTITIONED in self.marks:
                yield UNPARTITIONED, np.ones(batch.num_rows, dtype=bool)
            return
        values = batch.column(by).cast(pa.string())
        for part in pc.unique(values).to_pylist():
            if part in self.marks:
                yield part, pc.equal(values, part).to_numpy(zero_copy_only=False)

    # -- around the merge -----------------------------------------------------------------
    def before_merge(self, session: Session) -> None:
        """Incremental: which rows below the watermark the target held as they are. A SQL
        source's backfill: the rows it stages below the live window that the target lacks."""
        if self.mode == "incremental" and self.below_hashes:
            hashes = np.concatenate(self.below_hashes)
            lateness = np.concatenate(self.below_lateness)
            statement = lsql.held_fingerprints(
                session.dialect, self.target, self._shape.key, cursor_of(self._shape)
            )
            held = session.fetch_int64(statement, [max(self.marks.values())])
            known = np.isin(hashes, held)
            self.reread, self.caught = int(known.sum()), lateness[~known]
        elif self.mode == "backfill" and self._measuring:
            self._found_in_stage(session)

    def _found_in_stage(self, session: Session) -> None:
        """Staged rows below the live window that the target lacks."""
        found = missed_rows(
            session,
            self.pipeline.lateness,
            self._shape,
            self.target,
            self.marks,
            session.dialect.stage(),
        )
        self._missed(*found.count(session, self.name, self.run_id))

    def after_merge(self, session: Session, stage_taken: bool) -> None:
        """Incremental: the rows of new files below the window that the target still lacks
        were dropped; then the files this run read are recorded as read."""
        if self.mode != "incremental":
            return
        d = session.dialect
        self._stage_candidates(session, stage_taken)
        if self.candidates:
            columns = [ROW_HASH_COLUMN, LATENESS.name, ORIGIN.name, cursor_of(self._shape)]
            statement = lsql.unheld_rows(
                d,
                self.target,
                self._shape.key,
                cursor_of(self._shape),
                d.temp(lsql.CANDIDATES),
                columns,
                "1=1",
            )
            rows = session.query(statement)
            hashes = np.array([int(r[0]) for r in rows], dtype=np.int64)
            lateness = np.array([int(r[1]) for r in rows], dtype=np.int64)
            fresh = count_late(session, self.name, self.run_id, hashes, lateness)
            self._missed(lateness[fresh], [stored_cursor(rows[int(i)][3]) for i in fresh])
            self.missed_in = tuple(sorted({str(rows[int(i)][2]) for i in fresh}))
        now = datetime.now(UTC)
        for seen in self.new_files:
            session.execute(
                lsql.record_file(d),
                [self.name, seen.path, seen.size, seen.mtime_ns, self.run_id, now],
            )

    def _missed(self, lateness: Array, cursors: Sequence[CursorValue]) -> None:
        self.missed = lateness
        if cursors:
            self.missed_cursors = (to_text(min(cursors)), to_text(max(cursors)))
            log.warning(
                "pipeline %s run %s: %d row(s) arrived later than the lateness buffer (%s)",
                self.name,
                self.run_id,
                len(cursors),
                self.pipeline.lateness,
            )

    # -- what it learned ------------------------------------------------------------------
    def result(self, after: Mapping[str, CursorValue]) -> RunLateness:
        moved = [late_by(after[p], mark) for p, mark in self.marks.items() if p in after]
        return RunLateness(
            buffer_s=seconds(self.pipeline.lateness),
            measured=self.mode == "incremental" and bool(self.marks),
            rows_caught=len(self.caught),
            rows_reread=self.reread,
            rows_missed=len(self.missed),
            caught=histogram(self.caught),
            missed=histogram(self.missed),
            max_caught_s=int(self.caught.max()) if len(self.caught) else None,
            rows_new=self.rows_new,
            advanced_s=sum(moved),
            missed_cursors=self.missed_cursors,
            missed_in=self.missed_in,
        )
