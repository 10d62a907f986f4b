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

How, in memory that does not grow with the source: the source's (key, cursor, partition,
fingerprint) stream into the stage; the warehouse keeps each key's current version,
compares per window the row count and the sum of the fingerprints (mod 2^64, which no row
order changes) on both sides, and joins (key, fingerprint) pairs only in the windows whose
sums differ. A window whose sums differ while every key matches (a key with several
current versions) is not reported. The source's sums are first counted as its rows stream
by (Arrow, every row read): when they equal the target's in every window, no key can have
had two versions (its other version would be one row more somewhere), so the comparison
ends there, without ranking or indexing the stage; otherwise the stage decides, as above.

For a SQL source, whose runs cannot see rows arriving late, the missing and changed rows
below the live window (each partition's ``watermark - lateness``) that the target lacks
are counted as missed by the buffer (``pipeledger.runs.load.late``), their lateness measured
from today's watermark. A file source's runs count those themselves.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

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
_U64 = 1 << 64


@dataclass(frozen=True, kw_only=True)
class ReconcileRequest:
    pipeline: str
    start: str | None = None  # closed bounds on the cursor; None: open
    end: str | None = None
    by: str | None = None  # hour | day | month, or a width for an integer cursor


Sums = dict[str, tuple[int, int]]  # window -> (rows, sum of fingerprints mod 2^64)


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
        marks = read_watermarks(session, self.name)
        shape, deletes = self._shape(session, marks)
        grain = self._grain(shape)
        span = self._span(shape)
        where, params = self._target_where(d, shape, span, marks)
        if deletes:
            where = f"{where} AND {quote(DELETED_AT_COLUMN)} IS NULL"
        for statement in [*drop_stage(d), create_stage(d, [*shape.identity, ROW_HASH, SIDE])]:
            session.execute(statement)
        filled = self._fingerprint_target_rows(session, shape, where, params)
        self.streamed = StreamedSums.of(grain, shape)
        session.stage(self._source_rows(shape, span, marks))
        ids, cursor = [c.name for c in shape.identity], quote(shape.cursor or "")
        target_name = self.pipeline.target_name
        label = grain.label(d, f"t.{cursor}")
        rows = rsql.target_rows(d, target_name, ids, shape.key, where, label, filled)
        bare = rsql.target_rows(d, target_name, ids, shape.key, where, None, filled)
        bucket = grain.bucket(d, f"t.{cursor}")
        bucketed = rsql.target_rows(d, target_name, ids, shape.key, where, bucket, filled)
        by_window = rsql.target_windows(d, bucketed, grain.bucket_label(d, "b.b"))
        target = _sums(session.query(by_window, params))
        streamed = self.streamed.sums if self.streamed is not None else None
        windows: tuple[WindowDiff, ...] = ()
        if streamed == target:  # module docstring: every key once, every window equal
            sums = (target, target)
        else:
            once = self._staged_once(session, shape, grain.label(d, f"v.{cursor}"))
            if once and streamed is not None:  # the stage holds just the rows summed
                sums = (streamed, target)
            else:
                source = rsql.staged_source_windows(d, once) if once else rsql.source_windows(d)
                sums = (_sums(session.query(source)), target)
            windows = self._differences(session, grain, sums, (rows, bare), params, shape, once)
        if windows and shape.cursor and isinstance(self.pipeline.source, SqlSource):
            table = d.temp(rsql.DIFFERENCES)
            self.missed = missed_rows(
                session,
                self.pipeline.lateness,
                shape,
                self.pipeline.target_name,
                marks,
                table,
                "kind IN ('missing', 'changed')",
            )
        return Reconciliation(
            pipeline=self.name,
            run_id=self.run_id,
            target=self.pipeline.target,
            grain=grain,
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
    def _source_rows(
        self, shape: Shape, span: Window, marks: dict[str, CursorValue]
    ) -> Iterator[pa.RecordBatch]:
        """The source's rows in the span as the target would store them: identity and
        fingerprint, streamed into the stage."""
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
            kept = batch
            if kept.num_rows:
                self.rows_read += kept.num_rows
                if self.streamed is not None:
                    self.streamed = self.streamed.add(kept)
                yield _sided(kept, shape, "s")

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
    def _differences(
        self,
        session: Session,
        grain: Grain,
        sums: tuple[Sums, Sums],
        rows: tuple[str, str],
        params: list[Any],
        shape: Shape,
        once: str | None,
    ) -> tuple[WindowDiff, ...]:
        """The windows whose sums differ, with what differs in them: (key, fingerprint)
        pairs joined in just those windows (``once``: see :meth:`_staged_once`; ``rows``:
        the target's rows labelled with their windows, and bare)."""
        source, target = sums
        differing = sorted(
            w for w in source.keys() | target.keys() if source.get(w) != target.get(w)
        )
        if not differing:
            return ()
        d, ids = session.dialect, [c.name for c in shape.identity]
        session.execute(rsql.create_windows(d))
        for start in range(0, len(differing), _CHUNK):
            chunk = differing[start : start + _CHUNK]
            session.execute(rsql.insert_windows(d, len(chunk)), chunk)
        if once is not None:  # each key staged once: one join says it all
            for statement in d.hash_memory(JOIN_MEMORY_MB):
                session.execute(statement)
            cursor = quote(shape.cursor or "")
            labels = (grain.label(d, f"s.{cursor}"), grain.label(d, f"t.{cursor}"))
            joined = rsql.differences_once(d, ids, shape.key, labels, rows[1])
            session.execute(joined, params)
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
    stream to the stage (rows sorted by bucket, each run of equal buckets summed: Arrow's
    group_by would load its query engine, ~15 MB resident): per bucket of the cursor (its
    integer window, or the hour or day it falls in), named with the window's label (as
    ``Grain.label`` names it in SQL) only at the end, for the few buckets there are. A
    cursor it cannot bucket (NULLs in it, a type without an integer form) gives up
    (``add`` returns None): the stage then decides, as it always can."""

    grain: Grain
    cursor: str | None
    buckets: dict[int, tuple[int, int, int]] = field(default_factory=dict)  # rows, high, low

    @classmethod
    def of(cls, grain: Grain, shape: Shape) -> StreamedSums:
        return cls(grain=grain, cursor=shape.cursor)

    def add(self, batch: pa.RecordBatch) -> StreamedSums | None:
        hashes = batch.column(ROW_HASH_COLUMN)
        bucket = self._buckets(batch)
        if bucket is None or hashes.null_count:
            return None
        values: np.ndarray[Any, Any] = hashes.to_numpy()
        order = np.argsort(bucket, kind="stable")
        ids = bucket[order]
        starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]]) if len(ids) else ids[:0]
        rows = np.diff(np.r_[starts, len(ids)])
        sorted_values = values[order]
        # the halves summed in int64, as SQL sums them: exact for 2^31 rows a bucket
        high = np.add.reduceat(np.right_shift(sorted_values, 32), starts)  # arithmetic, as >>
        low = np.add.reduceat(np.bitwise_and(sorted_values, (1 << 32) - 1), starts)
        found = dict(self.buckets)
        for key, n, h, lo in zip(
            ids[starts].tolist(), rows.tolist(), high.tolist(), low.tolist(), strict=True
        ):
            was = found.get(key, (0, 0, 0))
            found[key] = (was[0] + n, was[1] + h, was[2] + lo)
        return replace(self, buckets=found)

    def _buckets(self, batch: pa.RecordBatch) -> np.ndarray[Any, Any] | None:
        """Each row's bucket: 0 for the whole snapshot; the window's first value for an
        integer cursor; else the hour (``--by hour``) or day since the epoch, in UTC."""
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
            return days * 24 if grain.unit == "hour" else days
        if not pa.types.is_timestamp(kind):
            return None
        ticks: np.ndarray[Any, Any] = column.cast(pa.int64()).to_numpy()
        per_second = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}[kind.unit]
        width = per_second * (3600 if grain.unit == "hour" else 86_400)
        buckets: np.ndarray[Any, Any] = np.floor_divide(ticks, width)
        return buckets

    @property
    def sums(self) -> Sums:
        """Per window label: rows, and the fingerprints' sum mod 2^64 (as :func:`_sums`)."""
        found: dict[str, tuple[int, int]] = {}
        for key, (rows, high, low) in self.buckets.items():
            label = self._label(key)
            was_rows, was_sum = found.get(label, (0, 0))
            found[label] = (was_rows + rows, _halves_sum(was_sum, high, low))
        return found

    def _label(self, bucket: int) -> str:
        grain = self.grain
        if grain.is_whole or self.cursor is None:
            return WHOLE
        if grain.width is not None:
            return str(bucket)
        hours = bucket if grain.unit == "hour" else bucket * 24
        moment = _EPOCH + timedelta(hours=hours)
        return moment.strftime(_LABELS[grain.unit or "day"])


_EPOCH = datetime(1970, 1, 1)
_LABELS = {"hour": "%Y-%m-%dT%H", "day": "%Y-%m-%d", "month": "%Y-%m"}


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
