"""What a full snapshot (``sync = "full"``) leaves in the warehouse, in its run's
transaction: the **fingerprint** of the pipeline's last snapshot, the sum mod 2^64 of the
fingerprints of its rows (:mod:`pipeledger.transform.fingerprint`; no row order changes
it) with its row count, which run read it, and since when the snapshot has been the same.

A pipeline without a cursor has no watermark: this is what ``pipeledger state`` shows in
its place. The comparison that decides what a run writes is the merge's, by key and row
fingerprint against the target (:mod:`pipeledger.publish.deletes`): an unchanged snapshot
writes nothing, whatever this table says.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pipeledger.common.columns import TableName
from pipeledger.warehouse.dialect import Dialect
from pipeledger.warehouse.migrations import SCHEMA
from pipeledger.warehouse.session import Session

SNAPSHOTS_TABLE = TableName(SCHEMA, "source_snapshots")
_U64 = 1 << 64


def snapshots_table(d: Dialect) -> str:
    """State migration 8: each full-snapshot pipeline's last snapshot."""
    big, at = d.int64_type, d.instant_type
    return (
        f"CREATE TABLE IF NOT EXISTS {d.table(SNAPSHOTS_TABLE)} (pipeline text PRIMARY KEY, "
        f"row_count {big} NOT NULL, fingerprint text NOT NULL, run_id text NOT NULL, "
        f"taken_at {at} NOT NULL, changed_at {at} NOT NULL, changed_by text NOT NULL)"
    )


def write_snapshot(d: Dialect) -> str:
    """Parameters: pipeline, row count, fingerprint, run id, when (twice), run id. The time
    and run of the last change stay while the snapshot stays the same."""
    same = "s.fingerprint = excluded.fingerprint AND s.row_count = excluded.row_count"
    return (
        f"INSERT INTO {d.table(SNAPSHOTS_TABLE)} AS s (pipeline, row_count, fingerprint, "
        f"run_id, taken_at, changed_at, changed_by) VALUES ({d.marks(7)}) "
        "ON CONFLICT (pipeline) DO UPDATE SET row_count = excluded.row_count, "
        "fingerprint = excluded.fingerprint, run_id = excluded.run_id, "
        "taken_at = excluded.taken_at, "
        f"changed_at = CASE WHEN {same} THEN s.changed_at ELSE excluded.changed_at END, "
        f"changed_by = CASE WHEN {same} THEN s.changed_by ELSE excluded.changed_by END"
    )


def read_snapshots(d: Dialect) -> str:
    return (
        "SELECT pipeline, row_count, fingerprint, run_id, taken_at, changed_at, changed_by "
        f"FROM {d.table(SNAPSHOTS_TABLE)} ORDER BY pipeline"
    )


def read_snapshot(d: Dialect) -> str:
    return (
        "SELECT pipeline, row_count, fingerprint, run_id, taken_at, changed_at, changed_by "
        f"FROM {d.table(SNAPSHOTS_TABLE)} WHERE pipeline = {d.param}"
    )


def fingerprint_text(total: int) -> str:
    """A snapshot's fingerprint (a sum mod 2^64) as 16 hex digits."""
    return f"{total % _U64:016x}"


@dataclass(frozen=True, kw_only=True)
class SnapshotState:
    """A pipeline's last full snapshot, as ``pipeledger state`` and ``run --json`` show it."""

    rows: int
    fingerprint: str
    run_id: str
    taken_at: str
    changed_at: str  # when the snapshot last differed from the one before it
    changed_by: str  # the run that read it so

    @property
    def unchanged(self) -> bool:
        """The run that took it read the same snapshot as the run before."""
        return self.changed_by != self.run_id

    def to_json(self) -> dict[str, Any]:
        return {
            "rows": self.rows,
            "fingerprint": self.fingerprint,
            "run_id": self.run_id,
            "taken_at": self.taken_at,
            "changed_at": self.changed_at,
            "changed_by": self.changed_by,
        }


def _state(row: tuple[Any, ...]) -> tuple[str, SnapshotState]:
    pipeline, rows, fingerprint, run_id, taken, changed, by = row
    return str(pipeline), SnapshotState(
        rows=int(rows),
        fingerprint=str(fingerprint),
        run_id=str(run_id),
        taken_at=_text(taken),
        changed_at=_text(changed),
        changed_by=str(by),
    )


def _text(value: object) -> str:
    return value.isoformat() if isinstance(value, datetime) else str(value)


def record_snapshot(
    session: Session, pipeline: str, rows: int, total: int, run_id: str, at: datetime
) -> SnapshotState:
    """This run read a full snapshot of ``rows`` rows whose fingerprints sum to ``total``
    (inside the run's transaction); returns the pipeline's snapshot state as it commits."""
    d = session.dialect
    fingerprint = fingerprint_text(total)
    session.execute(write_snapshot(d), [pipeline, rows, fingerprint, run_id, at, at, run_id])
    return _state(session.query(read_snapshot(d), [pipeline])[0])[1]


def snapshots(session: Session) -> dict[str, SnapshotState]:
    """Every pipeline's last snapshot, read without taking any lock."""
    if session.table_columns(SNAPSHOTS_TABLE) is None:
        return {}
    return dict(_state(tuple(row)) for row in session.query(read_snapshots(session.dialect)))
