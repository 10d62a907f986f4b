"""A backfill does not stage the source rows that the target already holds unchanged.

A backfill re-reads a range that is mostly loaded already. A source row whose fingerprint
(:mod:`pipeledger.transform.fingerprint`) the target holds is identical to the target's row
for its key (the fingerprint covers the key), so staging it could only end in "unchanged".
Which rows those are is found in bounded memory, whatever the size of the range, by
comparing *buckets* of the fingerprint space instead of fingerprints:

1. the target's rows in the range are read in ranges of their storage (heap pages on
   PostgreSQL, rowids on SQLite: :data:`CHUNK_ROWS` fingerprints at most at a time) and
   counted into ``2 ** BITS`` buckets by their fingerprint's top bits: a count and a sum
   of the fingerprints per bucket, a few MB whatever the range holds (on PostgreSQL, a
   target of more than one such range is counted on another connection and thread while
   the source's first read goes on: :class:`KnownRows`);
2. the source is read once, and its rows are counted the same way; a row whose bucket
   the target has no row in cannot be unchanged and is staged at once;
3. a bucket whose count and sum (mod 2^64) are the target's holds exactly the target's
   rows of that bucket: its source rows are unchanged, not staged. Every other bucket
   (a changed row makes two differ: its old fingerprint's and its new one's) is read
   again from the source. When the target holds at most :data:`HELD` rows in those
   buckets (a range with few changes), their fingerprints are held, and only source rows
   not among them are staged; else every row of those buckets is. Unchanged data is never
   read twice; a range with changes is, and the second read must count every bucket as
   the first did (a source that changed in between fails the run: nothing is written).

The comparison errs one way only: whatever goes wrong (a row updated in the target while
it is read, a fingerprint collision of two rows in a bucket) makes a bucket differ, and
its rows are staged and compared in full by the merge.

One case needs a skipped row after all: a key that arrives in the same run in another,
different version, because the merge first resolves a key's versions among themselves
(greatest cursor wins). Those rows are staged again from the target before the merge, so
the merge sees exactly what it would have seen without this shortcut.

Only fingerprints the target's trigger has guarded are used (``load.guard``): a row edited
in the target by hand has none, so it is staged and compared in full, and the backfill
repairs the edit.

The shortcut is not taken, and every row is staged and compared, when quality checks are
configured (the gate judges every row a run reads), for ``backfill --full-compare`` (for
what the trigger cannot see, such as a fingerprint set by hand), and for a target without
a guard.
"""

from __future__ import annotations

import contextvars
import logging
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
import pyarrow as pa

from pipeledger.common.columns import ROW_HASH_COLUMN, TableName
from pipeledger.errors import SourceChanged
from pipeledger.publish import merge_sql as sql
from pipeledger.sources.sql import window_predicate
from pipeledger.state.watermark import Window
from pipeledger.warehouse.dialect import Dialect
from pipeledger.warehouse.session import Session

log = logging.getLogger("pipeledger.load")

BITS = 16  # 65,536 buckets: 1 MB of counts and sums per side, whatever the range holds
CHUNK_ROWS = 1 << 19  # target fingerprints read at most at once (4 MB, + the driver's copy)
HELD = 1 << 20  # target fingerprints of differing buckets held for the second read (8 MB)
_CHUNK = 500  # fingerprints restaged per statement where arrays are not parameters


@dataclass
class Buckets:
    """Rows counted by the top :data:`BITS` bits of their fingerprints: how many, and the
    sum of their fingerprints mod 2^64, per bucket."""

    bits: int
    counts: np.ndarray[Any, Any] = field(init=False)
    sums: np.ndarray[Any, Any] = field(init=False)

    def __post_init__(self) -> None:
        self.counts = np.zeros(1 << self.bits, dtype=np.int64)
        self.sums = np.zeros(1 << self.bits, dtype=np.uint64)

    def of(self, hashes: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        """The bucket of each fingerprint."""
        return (hashes.view(np.uint64) >> np.uint64(64 - self.bits)).astype(np.intp)

    def add(self, hashes: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        """Count ``hashes`` in; return their buckets."""
        at = self.of(hashes)
        self.counts += np.bincount(at, minlength=len(self.counts))
        np.add.at(self.sums, at, hashes.view(np.uint64))  # unsigned: wraps mod 2^64
        return at

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Buckets):
            return NotImplemented
        return bool(np.array_equal(self.counts, other.counts)) and bool(
            np.array_equal(self.sums, other.sums)
        )

    __hash__ = None  # type: ignore[assignment]


def storage_ranges(session: Session, target: TableName) -> list[tuple[int, int]]:
    """Ranges of the target's storage that hold at most :data:`CHUNK_ROWS` rows each (the
    most a page can hold decides how many pages a range spans)."""
    d = session.dialect
    extent_params = [d.table(target)] if d.reads_page_ranges else []
    extent = session.query(sql.table_extent(d, target), extent_params)[0]
    first, end, most = (int(v) for v in extent)
    step = max(1, CHUNK_ROWS // max(1, most))
    return [(start, min(end, start + step)) for start in range(first, end, step)]


def stored_chunks(
    session: Session, target: TableName, scope: str, params: list[Any]
) -> Iterator[np.ndarray[Any, Any]]:
    """The fingerprints of the target rows in ``scope``, read a range of the table's
    storage at a time (:func:`storage_ranges`), so memory stays bounded."""
    statement = sql.stored_hashes_within(session.dialect, target, scope)
    for start, end in storage_ranges(session, target):
        yield session.fetch_int64(statement, [*params, start, end])


def stored_buckets(
    session: Session, target: TableName, scope: str, params: list[Any], bits: int
) -> Buckets:
    """The target rows in ``scope`` counted into buckets (:func:`stored_chunks`)."""
    held = Buckets(bits)
    for hashes in stored_chunks(session, target, scope, params):
        held.add(hashes)
    return held


@dataclass
class KnownRows:
    """What the target holds of a backfill's range, by bucket (``fetched``: counted before
    the source's first read, or during it on another connection), and what the source's
    first read found; then which buckets it must read again (``pending``), and the
    target's fingerprints in those (``held``) when they are few enough to hold.

    A first read that runs while the target is counted (``blind``) cannot tell rows the
    target has no bucket for yet: it stages nothing, and every bucket it read that is not
    the target's is read again (the rows staged are the same; a range with new rows is
    read twice)."""

    fetched: Future[Buckets]
    scope: str  # SQL: the target rows counted (sql.stored_scope)
    params: list[Any]  # the scope's parameters
    blind: bool = False
    distrusted: bool = False  # every row read is staged (distrust())
    read: Buckets = field(init=False)
    pending: np.ndarray[Any, Any] | None = None  # buckets read again: set by finish()
    again: Buckets | None = None  # the second read's count
    held: np.ndarray[Any, Any] | None = None  # sorted: the target's in pending buckets
    matched: np.ndarray[Any, Any] | None = None  # which of ``held`` a source row matched
    skipped: int = 0  # rows not staged: of equal buckets, and matched in held
    matches: int = 0  # of them, matched in held

    def __post_init__(self) -> None:
        self.read = Buckets(BITS)

    @property
    def stored(self) -> Buckets:
        """The target's rows counted by bucket (waiting for the count, if it runs)."""
        return self.fetched.result()

    @classmethod
    def fetch(
        cls, session: Session, target: TableName, cursor: str, window: Window, since: datetime
    ) -> KnownRows:
        """The target's rows in ``window`` written since ``since`` (``load.guard``),
        counted by bucket."""
        scope, params = _scope(session.dialect, cursor, window, since)
        done: Future[Buckets] = Future()
        done.set_result(stored_buckets(session, target, scope, params, BITS))
        return cls(fetched=done, scope=scope, params=params)

    @classmethod
    def fetch_beside(
        cls,
        opened: Callable[[], AbstractContextManager[Session]],
        d: Dialect,
        target: TableName,
        cursor: str,
        window: Window,
        since: datetime,
    ) -> KnownRows:
        """:meth:`fetch`, counted on a thread of its own in a session ``opened`` there
        (another connection, which sees the target as the load does until it writes it),
        while the first read goes on, blind (class docstring)."""
        scope, params = _scope(d, cursor, window, since)
        counted: Future[Buckets] = Future()

        def count() -> None:
            try:
                with opened() as beside:
                    counted.set_result(stored_buckets(beside, target, scope, params, BITS))
            except BaseException as exc:  # handed to the load, which raises it
                counted.set_exception(exc)

        context = contextvars.copy_context()  # the client's name, the statement observers
        threading.Thread(
            target=context.run, args=(count,), name="pipeledger-known-rows", daemon=True
        ).start()
        return cls(fetched=counted, scope=scope, params=params, blind=True)

    def wait(self) -> None:
        """Until the target's rows are counted (raising what stopped the count)."""
        self.fetched.result()

    def distrust(self) -> None:
        """The target's fingerprints cannot be trusted (its guard changed while they were
        counted): every row read is staged, as without the shortcut."""
        done: Future[Buckets] = Future()
        done.set_result(Buckets(BITS))
        self.fetched, self.blind, self.distrusted = done, True, True

    def unseen(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """The first read: count ``batch`` in; return its rows the target cannot hold (in
        buckets where it has no row), to stage now."""
        if not batch.num_rows:
            return batch
        at = self.read.add(batch.column(ROW_HASH_COLUMN).to_numpy())
        if self.blind:
            return batch.slice(0, 0)
        new = self.stored.counts[at] == 0
        return batch if new.all() else batch.filter(pa.array(new))

    def _equal(self) -> np.ndarray[Any, Any]:
        """The buckets whose source rows are the target's (none of them staged)."""
        stored, read = self.stored, self.read
        same: np.ndarray[Any, Any] = (
            (stored.counts == read.counts) & (stored.sums == read.sums) & (stored.counts > 0)
        )
        return same

    def finish(self) -> None:
        """After the first read: the buckets whose source rows equal the target's are
        skipped; the others, but those staged already, are to be read again."""
        stored, read, equal = self.stored, self.read, self._equal()
        self.skipped = int(read.counts[equal].sum())
        staged = np.zeros(len(equal), dtype=bool) if self.blind else stored.counts == 0
        self.pending = ~equal & ~staged & (read.counts > 0)
        log.info(
            "backfill shortcut: %d of %d rows read are held unchanged; %d bucket(s) of %d "
            "differ and are read again",
            self.skipped,
            int(read.counts.sum()),
            int(self.pending.sum()),
            len(equal),
        )

    @property
    def rereads(self) -> bool:
        """The source must be read again: some of its rows are neither new nor skipped."""
        return self.pending is not None and bool(self.pending.any())

    def hold_pending(self, session: Session, target: TableName) -> None:
        """Before the second read: the target's fingerprints in the pending buckets, when
        there are at most :data:`HELD` of them (a range with few changes), so that the
        second read stages only the rows that differ; else it stages every row of those
        buckets and the merge compares them."""
        assert self.pending is not None, "finish() first"
        if self.distrusted or int(self.stored.counts[self.pending].sum()) > HELD:
            return
        parts = [
            hashes[self.pending[self.stored.of(hashes)]]
            for hashes in stored_chunks(session, target, self.scope, self.params)
        ]
        self.held = np.sort(np.concatenate(parts)) if parts else np.zeros(0, dtype=np.int64)
        self.matched = np.zeros(len(self.held), dtype=bool)

    def _lookup(self, values: np.ndarray[Any, Any]) -> tuple[np.ndarray[Any, Any], ...]:
        assert self.held is not None and len(self.held)
        at = np.minimum(np.searchsorted(self.held, values), len(self.held) - 1)
        return at, self.held[at] == values

    def reread(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """The second read: count ``batch`` in; return its rows of the pending buckets
        (those the target does not hold as they are, when ``held``)."""
        assert self.pending is not None, "finish() first"
        if self.again is None:
            self.again = Buckets(self.stored.bits)
        if not batch.num_rows:
            return batch
        hashes = batch.column(ROW_HASH_COLUMN).to_numpy()
        wanted = self.pending[self.again.add(hashes)]
        if self.held is not None and self.matched is not None and len(self.held):
            at, found = self._lookup(hashes)
            found &= wanted
            self.matched[at[found]] = True
            self.matches += int(found.sum())
            self.skipped += int(found.sum())
            wanted &= ~found
        return batch.filter(pa.array(wanted))

    def check_reread(self, pipeline: str, stopped: Callable[[], str]) -> None:
        """The second read found what the first did, bucket by bucket; else the source
        changed between them and the skipped rows cannot be trusted."""
        if self.again is not None and self.again == self.read:
            return
        raise SourceChanged(
            f"pipeline {pipeline!r}: the source changed while the backfill read it twice "
            f"(the second read differs from the first); {stopped()}. Run the backfill again "
            "once the source is still, or with --full-compare (read once, every row staged)"
        )

    def restage_versions(self, session: Session, spec: sql.MergeSpec) -> int:
        """Stage again, from the target, each skipped row whose key was also staged (in
        another version); return how many rows that added to the stage."""
        if not self.skipped:
            return 0
        # only fingerprints in scope can have been skipped: the fetch stays as small
        stored = session.fetch_int64(
            sql.staged_key_hashes(session.dialect, spec, self.scope), self.params
        )
        if not len(stored):
            return 0
        skipped = self._equal()[self.stored.of(stored)]
        if self.held is not None and self.matched is not None and len(self.held):
            at, found = self._lookup(stored)
            skipped |= found & self.matched[at]
        again = [int(v) for v in np.unique(stored[skipped])]
        d, added = session.dialect, 0
        if again and d.array_params:  # one statement, the fingerprints as one array
            return session.execute(sql.restage_from_target(d, spec), [again])
        for start in range(0, len(again), _CHUNK):
            chunk = again[start : start + _CHUNK]
            added += session.execute(sql.restage_from_target(d, spec, len(chunk)), chunk)
        return added

    def counts(self, restaged: int) -> tuple[int, int]:
        """(unchanged, superseded) for the rows skipped, as a full comparison counts them.
        An equal bucket holds each of its target rows once, so its rows are unchanged; of
        n copies of a held row one is unchanged and n - 1 are superseded; a row staged
        again is counted by the merge."""
        distinct = int(self.matched.sum()) if self.matched is not None else 0
        equal = self.skipped - self.matches
        return equal + distinct - restaged, self.matches - distinct


def _scope(d: Dialect, cursor: str, window: Window, since: datetime) -> tuple[str, list[Any]]:
    where, params = window_predicate(d, Window(window.lower, window.upper), cursor, None)
    return sql.stored_scope(d, where), [*params, since]


def reread_batches(known: KnownRows, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The second read's rows to stage: those of the pending buckets."""
    for batch in batches:
        rows = known.reread(batch)
        if rows.num_rows:
            yield rows
