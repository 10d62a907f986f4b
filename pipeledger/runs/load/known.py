"""A backfill does not stage the source rows that the target already holds unchanged.

A backfill re-reads a range that is mostly loaded already. Before staging, it fetches the
fingerprints (:mod:`pipeledger.transform.fingerprint`) of the target's rows in the range.
A source row whose fingerprint is among them is identical to the target's row for its key
(the fingerprint covers the key), so staging it could only end in "unchanged": it is
counted as unchanged and not staged. Reprocessing identical data then costs a read of the
source instead of a copy of it into the warehouse and a join against the target.

One case needs such a row after all: a key that arrives in the same run in another,
different version, because the merge first resolves a key's versions among themselves
(greatest cursor wins). Those rows are staged again from the target before the merge, so
the merge sees exactly what it would have seen without this shortcut.

Only fingerprints the target's trigger has guarded are used (``load.guard``): a row edited
in the target by hand has none, so it is staged and compared in full, and the backfill
repairs the edit.

Memory is bounded: at most :data:`LIMIT` fingerprints are held (8 bytes each, and a flag).
A range with more target rows than that, up to twice as many, holds those in the lowest
slice of the fingerprint space that fits (fingerprints are uniform, so a slice of the space
is a share of the rows); source rows outside the slice are staged and compared in full. A
bigger range is compared in full: a slice of under half its rows saves less than finding
and checking it costs (10M rows: 185 s with a 10% slice, 131 s compared in full).

The shortcut is not taken, and every row is staged and compared, when quality checks are
configured (the gate judges every row a run reads), for ``backfill --full-compare`` (for
what the trigger cannot see, such as a fingerprint set by hand), for a target without a
guard, and for a range of over ``2 * LIMIT`` target rows.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
import pyarrow as pa

from pipeledger.common.columns import ROW_HASH_COLUMN, TableName
from pipeledger.publish import merge_sql as sql
from pipeledger.sources.sql import window_predicate
from pipeledger.state.watermark import Window
from pipeledger.warehouse.session import Session

log = logging.getLogger("pipeledger.load")

LIMIT = 1 << 20  # fingerprints held at most: 9 MB with their flags (+ 8 MB the driver read them in)
_SHARE = 0.95  # of LIMIT, expected in the slice of a bigger range (it may hold a few more)
_SPACE = 1 << 64
_CHUNK = 500


@dataclass
class KnownRows:
    """The sorted fingerprints of the target rows in a backfill's range (or in the lowest
    slice of them that fits in :data:`LIMIT`), and which of them a source row matched."""

    hashes: np.ndarray[Any, Any]
    scope: str  # SQL: the target rows they are of (sql.stored_scope)
    params: list[Any]  # the scope's parameters
    matched: np.ndarray[Any, Any] = field(init=False)
    skipped: int = 0

    def __post_init__(self) -> None:
        self.hashes.sort()  # in place: no second copy
        self.matched = np.zeros(len(self.hashes), dtype=bool)

    @classmethod
    def fetch(
        cls, session: Session, target: TableName, cursor: str, window: Window, since: datetime
    ) -> KnownRows | None:
        """The fingerprints of the target's rows in ``window`` written since ``since``
        (``load.guard``), or of the lowest slice of them that fits in :data:`LIMIT`; None
        for a range too big for a slice to pay (module docstring)."""
        d = session.dialect
        where, params = window_predicate(d, Window(window.lower, window.upper), cursor, None)
        scope, params = sql.stored_scope(d, where), [*params, since]
        hashes = session.fetch_int64(sql.stored_hashes(d, target, scope), [*params, LIMIT + 1])
        if len(hashes) <= LIMIT:
            return cls(hashes, scope, params)
        del hashes  # before the slice is fetched
        return cls._slice(session, target, where, params)

    @classmethod
    def _slice(
        cls, session: Session, target: TableName, where: str, params: list[Any]
    ) -> KnownRows | None:
        """The fingerprints in the lowest slice of the fingerprint space that holds at most
        :data:`LIMIT` of the range's rows: a share of the space a little under LIMIT's share
        of the rows (halved while it holds more). None when that is under half of them."""
        d = session.dialect
        scope = sql.stored_scope(d, where)
        counted = session.query(sql.count_stored(d, target, scope), [*params, 2 * LIMIT + 1])
        total = int(counted[0][0])
        if total > 2 * LIMIT:
            log.info("target %s: %d rows in range; every row is staged", target, total)
            return None
        scope, share = sql.stored_scope(d, where, below=True), _SHARE * LIMIT / total
        while True:
            sliced = [*params, -(1 << 63) + int(_SPACE * share)]  # the bound comes last
            hashes = session.fetch_int64(sql.stored_hashes(d, target, scope), [*sliced, LIMIT + 1])
            if len(hashes) <= LIMIT:
                log.info(
                    "target %s: %d rows in range; the lowest %d fingerprints are held, "
                    "source rows above them are staged",
                    target,
                    total,
                    len(hashes),
                )
                return cls(hashes, scope, sliced)
            del hashes
            share /= 2

    def _lookup(self, values: np.ndarray[Any, Any]) -> tuple[np.ndarray[Any, Any], ...]:
        at = np.minimum(np.searchsorted(self.hashes, values), len(self.hashes) - 1)
        return at, self.hashes[at] == values

    def unseen(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """The rows of ``batch`` that the target does not hold as they are."""
        if not len(self.hashes) or not batch.num_rows:
            return batch
        at, found = self._lookup(batch.column(ROW_HASH_COLUMN).to_numpy())
        if not found.any():
            return batch
        self.matched[at[found]] = True
        self.skipped += int(found.sum())
        return batch.filter(pa.array(~found))

    def restage_versions(self, session: Session, spec: sql.MergeSpec) -> int:
        """Stage again, from the target, each skipped row whose key was also staged (in
        another version); return how many rows that added to the stage."""
        if not self.skipped:
            return 0
        # only fingerprints in scope can have been matched: the fetch stays as small
        held = session.fetch_int64(
            sql.staged_key_hashes(session.dialect, spec, self.scope), self.params
        )
        if not len(held):
            return 0
        at, found = self._lookup(held)
        again = [int(v) for v in np.unique(held[found & self.matched[at]])]
        d, added = session.dialect, 0
        if again and d.array_params:  # one statement, the fingerprints as one array
            return session.execute(sql.restage_from_target(d, spec), [again])
        for start in range(0, len(again), _CHUNK):
            chunk = again[start : start + _CHUNK]
            added += session.execute(sql.restage_from_target(d, spec, len(chunk)), chunk)
        return added

    def counts(self, restaged: int) -> tuple[int, int]:
        """(unchanged, superseded) for the rows skipped, as a full comparison counts them:
        of n copies of a stored row one is unchanged (unless it was staged again, then the
        merge counts it) and n - 1 are superseded."""
        distinct = int(self.matched.sum())
        return distinct - restaged, self.skipped - distinct
