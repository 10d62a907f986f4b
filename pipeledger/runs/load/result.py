"""Immutable results of a load, as the CLI, the JSON output and the ledger see them."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal

from pipeledger.publish.counts import MergeCounts
from pipeledger.runs.steps import StepResult
from pipeledger.state.lateness import RunLateness
from pipeledger.state.snapshots import SnapshotState

Mode = Literal["incremental", "backfill", "check"]
Status = Literal["success", "partial", "failed"]
LEDGER_PATHS = 1000


@dataclass(frozen=True, kw_only=True)
class FilesRead:
    """What one run of an ``incremental = "files"`` pipeline did with its source's files."""

    read: tuple[str, ...] = ()  # new or changed: read whole, and taken
    touched: int = 0  # copied or touched (the same content): taken again, not read
    unchanged: int = 0  # as taken before: not opened

    def to_json(self) -> dict[str, Any]:
        return {"read": list(self.read), "touched": self.touched, "unchanged": self.unchanged}

    def ledger_json(self) -> dict[str, Any]:
        """As the ledger keeps it (``extra.files``): the counts, and the first
        ``LEDGER_PATHS`` files read (a folder of thousands would bloat every run's row)."""
        return {
            "read": len(self.read),
            "touched": self.touched,
            "unchanged": self.unchanged,
            "paths": list(self.read[:LEDGER_PATHS]),
        }


@dataclass(frozen=True, kw_only=True)
class LoadResult:
    pipeline: str
    run_id: str
    mode: Mode
    status: Status
    target: str
    started_at: datetime
    duration_s: float
    rows_read: int = 0
    rows_staged: int = 0  # compared in the warehouse; a backfill skips rows it knows
    counts: MergeCounts = field(default_factory=MergeCounts)
    watermark_before: dict[str, str] = field(default_factory=dict)
    watermark_after: dict[str, str] = field(default_factory=dict)
    partitioned: bool = False
    error: str | None = None
    steps: tuple[StepResult, ...] = ()
    bytes_read: int = 0
    target_created: bool = False
    window: tuple[str | None, str | None] = (None, None)
    quality: Any = None  # a GateReport when the pipeline has checks
    staged_max_cursor: str | None = None  # known without a query when nothing was held back
    covered: tuple[datetime, datetime] | None = None  # the cursor's stretch, as instants
    lateness: RunLateness | None = None  # late rows caught, re-read, missed (load.late)
    snapshot: SnapshotState | None = None  # sync = "full": the snapshot as this run left it
    files: FilesRead | None = None  # incremental = "files": the files it read or passed by
    ledger_error: str | None = None  # committed, but the ledger could not record it

    @property
    def changed_target(self) -> bool:
        """Whether the run left anything in its target for the models reading it."""
        return self.target_created or self.counts.wrote

    @property
    def late_rows_dropped(self) -> int:
        """Rows later than the lateness buffer that this run found (an incremental run: in
        files new to it, which it therefore did not load; a backfill: that it loads)."""
        return self.lateness.rows_missed if self.lateness else 0

    @property
    def exit_code(self) -> int:
        """0, or 5 when the rows committed but the ledger could not record the run."""
        return 5 if self.ledger_error else 0

    def with_ledger_error(self, message: str) -> LoadResult:
        return replace(self, ledger_error=message)

    def watermark(self, which: dict[str, str]) -> str | dict[str, str] | None:
        """One text value for an unpartitioned pipeline, a mapping for a partitioned one."""
        if self.partitioned:
            return dict(which)
        return which.get("")

    def to_json(self) -> dict[str, Any]:
        return {
            "pipeline": self.pipeline,
            "run_id": self.run_id,
            "mode": self.mode,
            "status": self.status,
            "target": self.target,
            "rows_read": self.rows_read,
            "rows_staged": self.rows_staged,
            "rows_inserted": self.counts.inserted,
            "rows_updated": self.counts.updated,
            "rows_unchanged": self.counts.unchanged,
            "rows_deleted": self.counts.deleted,
            "rows_superseded": self.counts.superseded,
            "watermark_before": self.watermark(self.watermark_before),
            "watermark_after": self.watermark(self.watermark_after),
            "started_at": self.started_at.isoformat(),
            "duration_s": round(self.duration_s, 3),
            "error": self.error,
            "ledger_error": self.ledger_error,
            "rows_rejected": self.quality.quarantined_rows if self.quality else 0,
            "late_rows_dropped": self.late_rows_dropped,
            "quality": self.quality.to_json() if self.quality else None,
            "snapshot": self.snapshot.to_json() if self.snapshot else None,
            "files": self.files.to_json() if self.files else None,
        }
