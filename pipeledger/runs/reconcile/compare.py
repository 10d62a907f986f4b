"""A reconciliation's body: does the target hold what the source holds? Run by
:meth:`Reconcile.execute` inside the run scaffold's transaction; it changes no target.

What "holds" means, stated once:

* The source's truth for a key is its **current version**: its row with the greatest
  cursor among the source's rows in the range (any of them, when several versions share
  that cursor), as a load of the whole source into an empty target would keep it. It is
  compared as a load stores it: aligned and cast to the target's columns, fingerprinted
  (:mod:`pipeledger.transform.fingerprint`).
* The target holds, per key, its one row. A target row without a stored fingerprint
  (edited by hand, which clears it; or written before fingerprints) is fingerprinted here
  from its values, so it differs only when its values do.
* Rows are compared where their cursor puts them, window by window
  (:mod:`pipeledger.runs.reconcile.windows`), over ``--start <= cursor <= --end`` (when given)
  and never past their partition's watermark: later rows are the next run's, not a
  difference. A key whose current version lies in another window than the target's row
  is missing in the one and extra in the other; a backfill of the first moves it.
* A key the source no longer holds is an extra row. A soft-deleted target row is not
  held: it is gone (:meth:`Reconcile._target_where` leaves it out).
* A pipeline without a cursor (``sync = "full"``, ``incremental = "files"``) is compared
  whole, as one window: every source row against every target row, with no watermark to
  stop at (its last run read the whole source, or every file).

How, in memory that does not grow with the source, reading it once: the warehouse sums
the target per fine window (:attr:`Grain.fine`: the hour, for a timestamp cursor) while
the source is read (on another thread where the session allows: PostgreSQL works while
this process parses), and the source's (key, cursor, partition, fingerprint) are summed
per fine window as they stream by (numpy, every row read) and set aside in a temporary
Arrow file (:class:`~pipeledger.common.spill.Spill`, ~24 bytes a row for one key and a
timestamp cursor). Both sides' sums are a row count and the sum of the fingerprints mod
2^64 (which no row order changes). When they are equal in every window, no key can have
had two versions (its other version would be one row more somewhere) and nothing is
staged. Otherwise only the source's rows of the fine windows that differ are staged (from
the file), and joined on the key with the target's rows of those windows (named by a few
ranges of the cursor, else found by their bucket): a key that moved differs in both its
windows, and a fingerprint covers the cursor. Those rows decide alone when the source
holds each of their keys once: a unique index on the staged keys proves it among them,
and a key found missing that the target holds where the sums matched shows a second
version there (that window's rows matched, so the source holds the key in it too). When
either fails, every row of the file is staged and the stage decides: the source's current
version of each key is ranked (several versions of one key), the windows are summed from
it, and the join reads the windows that differ. A window whose sums differ while every
key matches (a key with several current versions) is not reported.

For a SQL source, whose runs cannot see rows arriving late, the missing and changed rows
below the live window (each partition's ``watermark - lateness``) that the target lacks
are counted as missed by the buffer (``pipeledger.runs.load.late``), their lateness measured
from today's watermark. A file source's runs count those themselves.
"""

from __future__ import annotations

import contextvars
import functools
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeledger.common.columns import (
    DELETED_AT_COLUMN,
    ROW_HASH,
    ROW_HASH_COLUMN,
    Column,
    target_schema,
)
from pipeledger.common.spill import Spill
from pipeledger.config.model import Config, PipelineConfig, SqlSource
from pipeledger.errors import ConfigError, PipeledgerError, WarehouseError
from pipeledger.runs.load.late import Missed, missed_rows
from pipeledger.runs.reconcile import sql as rsql
from pipeledger.runs.reconcile.result import Reconciliation, WindowDiff
from pipeledger.runs.reconcile.windows import INTEGER_TYPES, WHOLE, Grain
from pipeledger.sources import ReadSpec, open_source
from pipeledger.sources.sql import window_predicate
from pipeledger.state.lateness import RunLateness, histogram, seconds
from pipeledger.state.tables import read_watermarks
from pipeledger.state.watermark import (
    UNPARTITIONED,
    CursorValue,
    Window,
    coerce,
    from_text,
    to_text,
    window_mask,
)
from pipeledger.transform.conform import Shape, shape_from_table
from pipeledger.transform.drift import as_stored
from pipeledger.transform.fingerprint import with_row_hash
from pipeledger.warehouse.dialect import Dialect, quote
from pipeledger.warehouse.session import Session
from pipeledger.warehouse.stage import create_stage, drop_stage

SIDE = Column(rsql.SIDE, "text")
PAGE_ROWS = 50_000  # target rows fingerprinted here per query
SAMPLE_KEYS = 10  # per window
_CHUNK = 500
# memory for the hash of the one join of source and target (the server's default, 4 MB,
# spilled a 1M-row join to disk in 8 batches)
JOIN_MEMORY_MB = 64
# at most this many ranges of the cursor narrow the join to the fine windows that differ
# (each range is two comparisons per row read)
MAX_NARROW_RANGES = 32
_U64 = 1 << 64


@dataclass(frozen=True, kw_only=True)
class ReconcileRequest:
    pipeline: str
    start: str | None = None  # closed bounds on the cursor; None: open
    end: str | None = None
    by: str | None = None  # hour | day | month, or a width for an integer cursor


Sums = dict[str, tuple[int, int]]  # window -> (rows, sum of fingerprints mod 2^64)


@dataclass(frozen=True, kw_only=True)
class _Frame:
    """What one comparison compares, known before either side is read."""

    shape: Shape
    grain: Grain
    span: Window
    marks: dict[str, CursorValue]
    where: str  # the target's rows in reach, SQL over its own columns
    params: list[Any]  # where's
    filled: bool  # target rows without a fingerprint have one made in the stage


class _TargetFine(NamedTuple):
    """The target's sums per fine window, and the warehouse's buckets of each window."""

    sums: Sums
    buckets: dict[str, list[Any]]

    @classmethod
    def of(cls, rows: Sequence[Sequence[Any]]) -> _TargetFine:
        """From :func:`~pipeledger.runs.reconcile.sql.target_windows`'s rows: per window,
        rows and the fingerprints' sum mod 2^64 (as :func:`_sums`), and its buckets."""
        sums: Sums = {}
        buckets: dict[str, list[Any]] = {}
        for window, bucket, count, high, low in rows:
            label = str(window)
            was_rows, was_sum = sums.get(label, (0, 0))
            total = _halves_sum(was_sum, int(high or 0), int(low or 0))
            sums[label] = (was_rows + int(count), total)
            buckets.setdefault(label, []).append(bucket)
        return cls(sums, buckets)


class _Undecided(Exception):
    """The rows staged from the fine windows that differ cannot decide alone."""


@dataclass
class Reconcile:
    """One reconciliation of one pipeline (module docstring)."""

    request: ReconcileRequest
    config: Config
    run_id: str
    began: float = field(default_factory=time.monotonic)
    started_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    rows_read: int = 0
    missed: Missed | None = None  # a SQL source's rows later than the buffer, not counted yet
    streamed: StreamedSums | None = None  # the source's sums as its rows were read
    fine_filter: str | None = None  # SQL: a row (unqualified cursor) in a fine window that differs
    fine_params: list[Any] = field(default_factory=list)  # fine_filter's

    @property
    def name(self) -> str:
        return self.request.pipeline

    @property
    def pipeline(self) -> PipelineConfig:
        return self.config.pipeline(self.name)

    def execute(self, session: Session) -> Reconciliation:
        """The comparison, in ``session``; it writes nothing but temporary tables. The late
        rows it finds are counted by :meth:`count_missed`."""
        d = session.dialect
        if d.snapshot_statement:  # the target and its watermark, as of one moment
            session.execute(d.snapshot_statement)
        frame = self._prepare(session)
        with closing(Spill()) as spill:
            unstaged, fine = self._both_sides(session, frame, spill)
            target = _coarse(frame.grain, fine.sums)
            streamed = self.streamed.sums_at(frame.grain) if self.streamed is not None else None
            windows: tuple[WindowDiff, ...] = ()
            if streamed == target:  # module docstring: every key once, every window equal
                sums = (target, target)
            elif unstaged:
                sums, windows = self._by_windows_or_stage(session, frame, fine, spill)
            else:
                sums, windows = self._by_stage(session, frame, fine.sums)
        shape = frame.shape
        if windows and shape.cursor and isinstance(self.pipeline.source, SqlSource):
            table = d.temp(rsql.DIFFERENCES)
            self.missed = missed_rows(
                session,
                self.pipeline.lateness,
                shape,
                self.pipeline.target_name,
                frame.marks,
                table,
                "kind IN ('missing', 'changed')",
            )
        return Reconciliation(
            pipeline=self.name,
            run_id=self.run_id,
            target=self.pipeline.target,
            grain=frame.grain,
            start=self.request.start,
            end=self.request.end,
            started_at=self.started_at,
            duration_s=time.monotonic() - self.began,
            rows_read=self.rows_read,
            windows_compared=len(sums[0].keys() | sums[1].keys()),
            source_rows=sum(n for n, _ in sums[0].values()),
            target_rows=sum(n for n, _ in sums[1].values()),
            windows=windows,
        )

    def _prepare(self, session: Session) -> _Frame:
        """What is compared, and an empty stage (holding the fingerprints made for target
        rows without one)."""
        d = session.dialect
        marks = read_watermarks(session, self.name)
        shape, deletes = self._shape(session, marks)
        span = self._span(shape)
        where, params = self._target_where(d, shape, span, marks)
        if deletes:
            where = f"{where} AND {quote(DELETED_AT_COLUMN)} IS NULL"
        for statement in [*drop_stage(d), create_stage(d, [*shape.identity, ROW_HASH, SIDE])]:
            session.execute(statement)
        filled = self._fingerprint_target_rows(session, shape, where, params)
        grain = self._grain(shape)
        return _Frame(
            shape=shape,
            grain=grain,
            span=span,
            marks=marks,
            where=where,
            params=params,
            filled=filled,
        )

    def _both_sides(
        self, session: Session, frame: _Frame, spill: Spill
    ) -> tuple[bool, _TargetFine]:
        """The source read (:meth:`_read_source`) and the target's sums per fine window
        (:meth:`_target_fine`): at once where the session can run a statement on another
        thread (the warehouse sums while this process parses the source)."""
        if not session.dialect.threaded_statements:
            target = self._target_fine(session, frame)
            return self._read_source(session, frame, spill), target
        with ThreadPoolExecutor(max_workers=1) as pool:
            summing = contextvars.copy_context().run
            pending = pool.submit(summing, self._target_fine, session, frame)
            unstaged = self._read_source(session, frame, spill)
            return unstaged, pending.result()

    def _target_fine(self, session: Session, frame: _Frame) -> _TargetFine:
        """The target's sums per fine window (:attr:`Grain.fine`), and the warehouse's
        buckets of each."""
        d, shape, fine = session.dialect, frame.shape, frame.grain.fine
        bucket = fine.bucket(d, f"t.{quote(shape.cursor or '')}")
        ids = [c.name for c in shape.identity]
        target = self.pipeline.target_name
        rows = rsql.target_rows(d, target, ids, shape.key, frame.where, bucket, frame.filled)
        statement = rsql.target_windows(d, rows, fine.bucket_label(d, "b.b"))
        return _TargetFine.of(session.query(statement, frame.params))

    def _read_source(self, session: Session, frame: _Frame, spill: Spill) -> bool:
        """The source's one read: its sums, counted as its rows stream by, and its rows
        (identity and fingerprint) set aside in ``spill``; True when nothing was staged.
        The rows are staged as they are read instead where the stage must decide anyway:
        fingerprints made for target rows are there, or a failed unique index would lose
        the transaction."""
        self.streamed = StreamedSums.of(frame.grain, frame.shape)
        if frame.filled or not session.dialect.partial_rollback:
            session.stage(self._sided_rows(frame))
            return False
        for batch in self._source_batches(frame):
            self._count(batch)
            spill.write(_identified(batch, frame.shape))
        if self.streamed is not None:
            return True
        _restage(session, frame.shape, spill)  # a cursor it could not count: the stage decides
        return False

    def _by_windows_or_stage(
        self,
        session: Session,
        frame: _Frame,
        fine: _TargetFine,
        spill: Spill,
    ) -> tuple[tuple[Sums, Sums], tuple[WindowDiff, ...]]:
        """The sums and what differs: from the source's rows of the fine windows that
        differ, staged alone from ``spill``, when they decide (:meth:`_by_windows`); else
        from every row of it, staged (:meth:`_by_stage`)."""
        try:
            with session.savepoint():
                return self._by_windows(session, frame, fine, spill)
        except _Undecided:
            self.fine_filter, self.fine_params = None, []
        _restage(session, frame.shape, spill)
        return self._by_stage(session, frame, fine.sums)

    def _by_windows(
        self,
        session: Session,
        frame: _Frame,
        fine: _TargetFine,
        spill: Spill,
    ) -> tuple[tuple[Sums, Sums], tuple[WindowDiff, ...]]:
        """The fine windows whose sums differ, compared alone (module docstring): the
        source's rows in them are staged from ``spill``, the target's are found by their
        bucket. Raises :class:`_Undecided` when those rows cannot decide alone: the source
        holds a key twice (the unique index fails, or a key found missing is held by the
        target where the sums matched)."""
        d, shape, grain = session.dialect, frame.shape, frame.grain
        streamed = self.streamed
        if grain.fine.is_whole or not shape.cursor or streamed is None:
            raise _Undecided  # one window: its rows are every row
        differing = _differing(streamed.sums_at(grain.fine), fine.sums)
        wanted = streamed.buckets_in(grain.fine, differing)
        session.stage(_rows_in(spill, streamed, wanted, shape))
        once = self._staged_once(session, shape, grain.label(d, f"v.{quote(shape.cursor)}"))
        if once is None:
            raise _Undecided
        self.fine_filter, self.fine_params = self._fine_target(session, frame, differing, fine)
        sums = (streamed.sums_at(grain), _coarse(grain, fine.sums))
        rows = self._target_rows(d, frame, f"{frame.where} AND {self.fine_filter}")
        windows = self._differences(session, frame, sums, rows, once, narrowed_source=False)
        target = self.pipeline.target_name
        held = rsql.missing_held_elsewhere(d, target, shape.key, frame.where, self.fine_filter)
        if session.query(held, [*frame.params, *self.fine_params]):
            raise _Undecided
        return sums, windows

    def _fine_target(
        self, session: Session, frame: _Frame, windows: set[str], fine: _TargetFine
    ) -> tuple[str, list[Any]]:
        """SQL over the target's unqualified cursor keeping its rows in these fine windows,
        with its parameters: a few ranges of the cursor (:meth:`_narrowed`), else their
        buckets, kept in a temporary table."""
        d, shape, grain = session.dialect, frame.shape, frame.grain.fine
        ranges = self._narrowed(d, shape, grain, sorted(windows))
        if ranges is not None:
            return ranges
        cursor = quote(shape.cursor or "")
        target = self.pipeline.target_name
        session.execute(rsql.create_fine_buckets(d, target, grain.bucket(d, f"t.{cursor}")))
        values = [b for w in sorted(windows) for b in fine.buckets.get(w, [])]
        _insert_chunks(session, functools.partial(rsql.insert_fine_buckets, d), values)
        return rsql.in_fine_buckets(d, grain.bucket(d, cursor)), []

    def _by_stage(
        self, session: Session, frame: _Frame, target_fine: Sums
    ) -> tuple[tuple[Sums, Sums], tuple[WindowDiff, ...]]:
        """The sums and what differs, from the whole source in the stage."""
        d, shape, grain = session.dialect, frame.shape, frame.grain
        target = _coarse(grain, target_fine)
        once = self._staged_once(session, shape, grain.label(d, f"v.{quote(shape.cursor or '')}"))
        narrow: list[str] | None = None  # the fine windows that differ
        if once and self.streamed is not None:  # the stage holds just the rows summed
            sums = (self.streamed.sums_at(grain), target)
            narrow = sorted(_differing(self.streamed.sums_at(grain.fine), target_fine))
        else:
            source = rsql.staged_source_windows(d, once) if once else rsql.source_windows(d)
            sums = (_sums(session.query(source)), target)
        narrowed = self._narrowed(d, shape, grain.fine, narrow)
        where = frame.where
        if narrowed is not None:
            self.fine_filter, self.fine_params = narrowed
            where = f"{where} AND {self.fine_filter}"
        rows = self._target_rows(d, frame, where)
        return sums, self._differences(session, frame, sums, rows, once, narrowed_source=True)

    def _target_rows(self, d: Dialect, frame: _Frame, bare_where: str) -> tuple[str, str]:
        """The target's rows in reach labelled with their window, and those matching
        ``bare_where`` without a label (:func:`rsql.target_rows`)."""
        shape, target = frame.shape, self.pipeline.target_name
        ids, cursor = [c.name for c in shape.identity], quote(shape.cursor or "")
        label = frame.grain.label(d, f"t.{cursor}")
        rows = rsql.target_rows(d, target, ids, shape.key, frame.where, label, frame.filled)
        bare = rsql.target_rows(d, target, ids, shape.key, bare_where, None, frame.filled)
        return rows, bare

    def _staged_once(self, session: Session, shape: Shape, label: str) -> str | None:
        """The source's current version of each key: when a unique index proves every key
        staged once (the usual case), the staged rows themselves, and ``label`` is returned
        (what labels them with their windows); else the ranked rows, kept as a table."""
        d = session.dialect
        if d.partial_rollback:  # else a failed index would lose the transaction: rank at once
            try:
                with session.savepoint():
                    session.execute(rsql.unique_source_keys(d, shape.key))
                return label
            except WarehouseError as exc:
                if exc.sqlstate != WarehouseError.UNIQUE_VIOLATION:
                    raise
        ids = [c.name for c in shape.identity]
        for statement in rsql.current_source(d, ids, shape.key, shape.cursor, label):
            session.execute(statement)
        return None

    # -- what is compared -----------------------------------------------------------------
    def _shape(self, session: Session, marks: dict[str, CursorValue]) -> tuple[Shape, bool]:
        """The target's shape, and whether it keeps soft-deleted rows."""
        p = self.pipeline
        columns = session.table_columns(p.target_name)
        if columns is None or (p.cursor is not None and not marks):
            raise ConfigError(f"pipeline {self.name} has loaded nothing yet: nothing to reconcile")
        names = {name for name, _ in columns}
        if ROW_HASH_COLUMN not in names:
            raise PipeledgerError(
                f"target {p.target} has no fingerprints yet (it was made before them): its next "
                f"run adds them; reconcile after that"
            )
        data = [(name, kind) for name, kind in columns if name != DELETED_AT_COLUMN]
        shape = shape_from_table(data, p.key, p.cursor, p.partition_by, table=p.target)
        return shape, DELETED_AT_COLUMN in names

    def _grain(self, shape: Shape) -> Grain:
        """Windows by ``--by``; one window, the whole snapshot, without a cursor."""
        r = self.request
        if shape.cursor:
            return Grain.parse(r.by, shape.cursor_type, self.name)
        if r.by is not None or r.start is not None or r.end is not None:
            raise ConfigError(
                f"pipeline {self.name} has no cursor: reconcile compares its whole snapshot "
                "(drop --start, --end and --by)"
            )
        return Grain.whole()

    def _span(self, shape: Shape) -> Window:
        """``--start``/``--end`` as closed bounds of the cursor's kind."""
        if not shape.cursor:
            return Window()
        try:
            lower, upper = (
                None if t is None else from_text(t) for t in (self.request.start, self.request.end)
            )
        except ValueError as exc:
            raise ConfigError(f"pipeline {self.name}: --start/--end: {exc}") from None
        integer = shape.cursor_type in INTEGER_TYPES
        for bound in (lower, upper):
            if bound is not None and isinstance(bound, int) != integer:
                kind = "integers" if integer else "dates or timestamps"
                raise ConfigError(f"pipeline {self.name}: --start/--end must be {kind}")
        return Window(lower=lower, upper=upper, backfill=True)

    def _target_where(
        self, d: Dialect, shape: Shape, span: Window, marks: dict[str, CursorValue]
    ) -> tuple[str, list[Any]]:
        """The target's rows in the span, at or before their partition's watermark (every
        row, without a cursor)."""
        if not shape.cursor:
            return "1=1", []
        inside, params = window_predicate(d, span, shape.cursor, None)
        parts = sorted(marks) if shape.partition_by else [UNPARTITIONED]
        cap = rsql.cap_predicate(d, shape.cursor, shape.partition_by, len(parts))
        if shape.partition_by is None:
            return f"{inside} AND {cap}", [*params, marks[UNPARTITIONED]]
        return f"{inside} AND {cap}", [*params, *(v for p in parts for v in (p, marks[p]))]

    # -- the two sides --------------------------------------------------------------------
    def _source_batches(self, frame: _Frame) -> Iterator[pa.RecordBatch]:
        """The source's rows in the span, at or before their partition's watermark, as the
        target would store them (fingerprinted)."""
        shape, span, marks = frame.shape, frame.span, frame.marks
        upper = span.upper
        if upper is None and shape.partition_by is None and shape.cursor:
            upper = marks[UNPARTITIONED]  # let the source skip what is past the watermark
        types = {c.name: c.arrow for c in shape.columns}
        read = ReadSpec(
            window=Window(span.lower, upper, backfill=True),
            cursor=shape.cursor,
            partition_by=shape.partition_by,
            column_types=types,
        )
        for item in open_source(self.pipeline, self.config).batches(read):
            batch = as_stored(item, shape)
            if shape.cursor:
                reach = self._in_reach(batch, span, marks, shape, shape.cursor, item.unfiltered)
                batch = batch.filter(reach)  # a null (not known) is dropped
            if batch.num_rows:
                yield batch

    def _count(self, batch: pa.RecordBatch) -> None:
        self.rows_read += batch.num_rows
        if self.streamed is not None:
            self.streamed = self.streamed.add(batch)

    def _sided_rows(self, frame: _Frame) -> Iterator[pa.RecordBatch]:
        """Every row of :meth:`_source_batches`, counted, as the stage takes it."""
        for batch in self._source_batches(frame):
            self._count(batch)
            yield _sided(batch, frame.shape, "s")

    @staticmethod
    def _in_reach(
        batch: pa.RecordBatch,
        span: Window,
        marks: dict[str, CursorValue],
        shape: Shape,
        name: str,
        unfiltered: bool,
    ) -> pa.Array | pa.ChunkedArray:
        """Which rows are in the span (when the source could not apply it) and at or before
        their partition's watermark (``name``: the cursor): compute kernels on the columns,
        as :func:`~pipeledger.state.watermark.window_mask` (an expression would load
        Arrow's query engine, ~20 MB resident)."""
        cursor = batch.column(name)
        kind = cursor.type
        if shape.partition_by is None:
            reach = pc.less_equal(cursor, coerce(marks[UNPARTITIONED], kind))
        else:
            part = pc.cast(batch.column(shape.partition_by), pa.string())
            reach = pa.repeat(pa.scalar(False), batch.num_rows)
            for value, mark in marks.items():
                here = pc.and_kleene(
                    pc.equal(part, value), pc.less_equal(cursor, coerce(mark, kind))
                )
                reach = pc.or_kleene(reach, here)
        inside = window_mask(span, batch, name, None) if unfiltered else None
        return reach if inside is None else pc.and_kleene(reach, inside)

    def _fingerprint_target_rows(
        self, session: Session, shape: Shape, where: str, params: list[Any]
    ) -> bool:
        """Stage a fingerprint for every target row in reach that has none (module
        docstring), a page at a time; False when there was none to make."""
        d, target = session.dialect, self.pipeline.target_name
        if not int(session.query(rsql.unhashed_count(d, target, where), params)[0][0]):
            return False
        names = [c.name for c in shape.columns]
        at = [names.index(k) for k in shape.key]
        after: list[Any] = []
        while True:
            statement = rsql.unhashed_rows(
                d, target, names, shape.key, where, bool(after), PAGE_ROWS
            )
            page = session.query(statement, [*params, *after])
            if not page:
                return True
            batch = with_row_hash(_arrow_rows(page, shape.columns), shape.columns)
            session.stage([_sided(batch, shape, "t")])
            after = [page[-1][i] for i in at]

    # -- what differs ---------------------------------------------------------------------
    def _narrowed(
        self, d: Dialect, shape: Shape, fine: Grain, differing: list[str] | None
    ) -> tuple[str, list[Any]] | None:
        """When the fine windows that differ are known (each key staged once) and few
        ranges of the cursor hold them: SQL over an unqualified cursor keeping just the
        rows in those ranges, with its parameters; the join of source and target then
        reads only those. None: the join takes every row (a per-row test of a fine
        window's membership would cost what a smaller join saves)."""
        if differing is None or fine.unit is None or not shape.cursor:
            return None
        ranges = fine.backfill_ranges(differing, None)
        if not ranges or len(ranges) > MAX_NARROW_RANGES:
            return None
        parts, params = [], []
        for start, end in ranges:
            span = Window(lower=from_text(start), upper=from_text(end), backfill=True)
            text, values = window_predicate(d, span, shape.cursor, None)
            parts.append(f"({text})")
            params.extend(values)
        return "(" + " OR ".join(parts) + ")", params

    def _differences(
        self,
        session: Session,
        frame: _Frame,
        sums: tuple[Sums, Sums],
        rows: tuple[str, str],
        once: str | None,
        *,
        narrowed_source: bool,
    ) -> tuple[WindowDiff, ...]:
        """The windows whose sums differ, with what differs in them: (key, fingerprint)
        pairs joined in just those windows (``once``: see :meth:`_staged_once`; ``rows``:
        the target's rows labelled with their windows, and bare, the bare ones narrowed by
        :attr:`fine_filter` when it is set, and the stage's too if ``narrowed_source``)."""
        grain, shape, params = frame.grain, frame.shape, frame.params
        source, target = sums
        differing = sorted(
            w for w in source.keys() | target.keys() if source.get(w) != target.get(w)
        )
        if not differing:
            return ()
        d, ids = session.dialect, [c.name for c in shape.identity]
        session.execute(rsql.create_windows(d))
        _insert_chunks(session, functools.partial(rsql.insert_windows, d), differing)
        if once is not None:  # each key staged once: one join says it all
            for statement in d.hash_memory(JOIN_MEMORY_MB):
                session.execute(statement)
            cursor = quote(shape.cursor or "")
            labels = (grain.label(d, f"s.{cursor}"), grain.label(d, f"t.{cursor}"))
            staged = self.fine_filter if narrowed_source else None
            joined = rsql.differences_once(d, ids, shape.key, labels, rows[1], staged)
            fine = self.fine_params  # the source's, then the target's after its own
            bare = [*params, *fine] if self.fine_filter else params
            session.execute(joined, [*fine, *bare] if staged else bare)
        else:
            keep, index = rsql.keep_target_rows(d, rows[0], shape.key)
            session.execute(keep, params)
            session.execute(index)
            session.execute(rsql.differences(d, ids, shape.key))
        kinds: dict[str, dict[str, int]] = {}
        for window, kind, count in session.query(rsql.count_differences(d)):
            kinds.setdefault(str(window), {})[str(kind)] = int(count)
        samples: dict[str, list[Any]] = {}
        for window, *key in session.query(rsql.sample_keys(d, shape.key, SAMPLE_KEYS)):
            samples.setdefault(str(window), []).append(_key_value(key))
        counted = [w for w in differing if w in kinds]  # else every key matched
        return tuple(
            WindowDiff.of(
                grain,
                w,
                (source.get(w, (0, 0))[0], target.get(w, (0, 0))[0]),
                kinds[w],
                tuple(samples.get(w, [])),
            )
            for w in counted
        )

    def count_missed(self, session: Session, result: Reconciliation) -> Reconciliation:
        """Count, in ``session`` (the run's own transaction), the rows later than the buffer
        that the comparison found (a SQL source's; module docstring)."""
        if self.missed is None:
            return result
        lateness, cursors = self.missed.count(session, self.name, self.run_id)
        span = (to_text(min(cursors)), to_text(max(cursors))) if cursors else None
        late = RunLateness(
            buffer_s=seconds(self.pipeline.lateness),
            rows_missed=len(lateness),
            missed=histogram(lateness),
            missed_cursors=span,
        )
        return replace(result, lateness=late)


@dataclass(frozen=True, kw_only=True)
class StreamedSums:
    """The source's rows and fingerprint sums per window, counted with numpy as its batches
    stream to the stage: per bucket of the cursor (its integer window, or the hour it
    falls in), kept as sorted arrays that each batch is merged into (rows sorted by
    bucket, each run of equal buckets summed; the sums in uint64, which wraps mod 2^64 as
    the comparison wants; Arrow's group_by would load its query engine, ~15 MB
    resident), named with a window's label (as ``Grain.label`` names it in SQL) only at
    the end, for the few buckets there are. A cursor it cannot bucket (NULLs in it, a type
    without an integer form) gives up (``add`` returns None): the stage then decides, as
    it always can."""

    grain: Grain
    cursor: str | None
    ids: np.ndarray[Any, Any] = field(default_factory=lambda: np.zeros(0, np.int64))
    rows: np.ndarray[Any, Any] = field(default_factory=lambda: np.zeros(0, np.int64))
    totals: np.ndarray[Any, Any] = field(default_factory=lambda: np.zeros(0, np.uint64))

    @classmethod
    def of(cls, grain: Grain, shape: Shape) -> StreamedSums:
        return cls(grain=grain, cursor=shape.cursor)

    def add(self, batch: pa.RecordBatch) -> StreamedSums | None:
        hashes = batch.column(ROW_HASH_COLUMN)
        bucket = self.buckets(batch)
        if bucket is None or hashes.null_count:
            return None
        values: np.ndarray[Any, Any] = hashes.to_numpy().view(np.uint64)
        ids = np.concatenate([self.ids, bucket])
        rows = np.concatenate([self.rows, np.ones(len(bucket), np.int64)])
        totals = np.concatenate([self.totals, values])
        order = np.argsort(ids, kind="stable")
        ids = ids[order]
        starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
        return replace(
            self,
            ids=ids[starts],
            rows=np.add.reduceat(rows[order], starts),
            totals=np.add.reduceat(totals[order], starts),
        )

    def buckets_in(self, grain: Grain, windows: set[str]) -> np.ndarray[Any, Any]:
        """The buckets counted that lie in these windows of ``grain``."""
        ids = [b for b in self.ids.tolist() if self._label(b, grain) in windows]
        return np.array(ids, np.int64)

    def buckets(self, batch: pa.RecordBatch) -> np.ndarray[Any, Any] | None:
        """Each row's bucket: 0 for the whole snapshot; the window's first value for an
        integer cursor; else the hour since the epoch, in UTC (what the finest window,
        :attr:`Grain.fine`, is made of)."""
        grain = self.grain
        if grain.is_whole or self.cursor is None:
            return np.zeros(batch.num_rows, np.int64)
        column = batch.column(self.cursor)
        if column.null_count:
            return None
        kind = column.type
        if grain.width is not None:
            if not pa.types.is_integer(kind):
                return None
            values: np.ndarray[Any, Any] = column.to_numpy().astype(np.int64)
            starts: np.ndarray[Any, Any] = np.floor_divide(values, grain.width) * grain.width
            return starts
        if pa.types.is_date32(kind):
            days: np.ndarray[Any, Any] = column.cast(pa.int32()).to_numpy().astype(np.int64)
            return days * 24
        if not pa.types.is_timestamp(kind):
            return None
        ticks: np.ndarray[Any, Any] = column.cast(pa.int64()).to_numpy()
        per_second = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}[kind.unit]
        buckets: np.ndarray[Any, Any] = np.floor_divide(ticks, per_second * 3600)
        return buckets

    def sums_at(self, grain: Grain) -> Sums:
        """Per window label of ``grain`` (this one's, or its :attr:`Grain.fine`): rows, and
        the fingerprints' sum mod 2^64 (as :func:`_sums`)."""
        found: dict[str, tuple[int, int]] = {}
        for key, rows, total in zip(
            self.ids.tolist(), self.rows.tolist(), self.totals.tolist(), strict=True
        ):
            label = self._label(key, grain)
            was_rows, was_sum = found.get(label, (0, 0))
            found[label] = (was_rows + rows, (was_sum + total) % _U64)
        return found

    def _label(self, bucket: int, grain: Grain) -> str:
        if grain.is_whole or self.cursor is None:
            return WHOLE
        if grain.width is not None:
            return str(bucket)
        moment = _EPOCH + timedelta(hours=bucket)
        return moment.strftime(_LABELS[grain.unit or "day"])


_EPOCH = datetime(1970, 1, 1)
_LABELS = {"hour": "%Y-%m-%dT%H", "day": "%Y-%m-%d", "month": "%Y-%m"}


def _coarse(grain: Grain, fine: Sums) -> Sums:
    """Sums per fine window (:attr:`Grain.fine`) added up per window of ``grain``."""
    found: dict[str, tuple[int, int]] = {}
    for label, (rows, total) in fine.items():
        window = grain.coarse(label)
        was_rows, was_sum = found.get(window, (0, 0))
        found[window] = (was_rows + rows, (was_sum + total) % _U64)
    return found


def _differing(source: Sums, target: Sums) -> set[str]:
    return {w for w in source.keys() | target.keys() if source.get(w) != target.get(w)}


def _insert_chunks(session: Session, insert: Callable[[int], str], values: Sequence[Any]) -> None:
    """``values`` inserted ``_CHUNK`` at a time by ``insert(count)``'s statement."""
    for start in range(0, len(values), _CHUNK):
        chunk = values[start : start + _CHUNK]
        session.execute(insert(len(chunk)), chunk)


def _sums(rows: Sequence[Sequence[Any]]) -> Sums:
    """Per window: rows, and the fingerprints' sum mod 2^64 from the sums of their halves."""
    return {
        str(window): (int(count), _halves_sum(0, int(high or 0), int(low or 0)))
        for window, count, high, low in rows
    }


def _halves_sum(total: int, high: int, low: int) -> int:
    """``total`` plus the fingerprints whose high and low 32-bit halves sum to ``high`` and
    ``low``, mod 2^64 (the same on both sides, whatever the order of the rows)."""
    return (total + (high << 32) + low) % _U64


def _identified(batch: pa.RecordBatch, shape: Shape) -> pa.RecordBatch:
    """The identity columns and the fingerprint of ``batch``."""
    columns = [*(c.name for c in shape.identity), ROW_HASH.name]
    return pa.RecordBatch.from_arrays([batch.column(c) for c in columns], names=columns)


def _restage(session: Session, shape: Shape, spill: Spill) -> None:
    """Stage every row the source's read set aside."""
    session.stage(_sided(batch, shape, "s") for batch in spill.batches())


def _rows_in(
    spill: Spill, streamed: StreamedSums, wanted: np.ndarray[Any, Any], shape: Shape
) -> Iterator[pa.RecordBatch]:
    """The rows set aside whose bucket (:meth:`StreamedSums.buckets`) is ``wanted``, as
    the stage takes them."""
    for batch in spill.batches():
        ids = streamed.buckets(batch)
        if ids is None:  # counted once already: not met
            raise _Undecided
        keep = np.isin(ids, wanted)
        if keep.any():
            yield _sided(batch.filter(pa.array(keep)), shape, "s")


def _sided(batch: pa.RecordBatch, shape: Shape, side: str) -> pa.RecordBatch:
    """The identity columns and the fingerprint of ``batch``, marked with their side."""
    columns = [*shape.identity, ROW_HASH]
    arrays = [batch.column(c.name) for c in columns]
    arrays.append(pa.repeat(pa.scalar(side, pa.string()), batch.num_rows))
    return pa.RecordBatch.from_arrays(arrays, names=[*(c.name for c in columns), SIDE.name])


def _arrow_rows(rows: Sequence[Sequence[Any]], columns: Sequence[Column]) -> pa.RecordBatch:
    """Rows a query returned, as Arrow columns of the target's types (SQLite returns dates,
    timestamps and exact decimals as their text, and booleans as integers)."""
    arrays = [_arrow_column([r[i] for r in rows], c) for i, c in enumerate(columns)]
    return pa.RecordBatch.from_arrays(arrays, schema=target_schema(tuple(columns)))


def _arrow_column(values: list[Any], column: Column) -> pa.Array:
    try:
        return pa.array(values, type=column.arrow)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        text = pa.array([None if v is None else str(v) for v in values], pa.string())
        return text.cast(column.arrow)


def _key_value(values: list[Any]) -> Any:
    """A key for JSON: the value of a one-column key, else the list of its values."""
    plain = [v if isinstance(v, int | float | str | bool) or v is None else str(v) for v in values]
    return plain[0] if len(plain) == 1 else plain
