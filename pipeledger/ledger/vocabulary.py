"""The ledger's vocabulary: run states and their allowed transitions, trigger types, and
the immutable records a run leaves behind."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from pipeledger.errors import UsageError


class RunStatus(StrEnum):
    """A run's state. ``queued``: waiting for one of its tenant's ``max_concurrent_runs``
    slots; ``rejected``: refused before or while it worked (a full queue, a limit, a
    refused backfill range, a duplicate trigger), with its reason in ``extra.rejected``."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCESS = "success"
    FAILED = "failed"
    PARTIAL = "partial"
    CANCELLED = "cancelled"
    TIMED_OUT = "timed_out"
    SKIPPED = "skipped"
    ABANDONED = "abandoned"
    REJECTED = "rejected"

    @property
    def final(self) -> bool:
        return self not in (RunStatus.RUNNING, RunStatus.QUEUED)


# The only transitions there are. A final state never changes; the SQL that moves a run
# repeats the rule (``WHERE status = 'running'``, ``'queued'``) so a racing watchdog cannot
# break it. A queued run either gets its slot, or is refused, cancelled or waits too long
# (abandoned: its process died while it waited).
_LEAVING_QUEUE = frozenset(
    {
        RunStatus.RUNNING,
        RunStatus.REJECTED,
        RunStatus.CANCELLED,
        RunStatus.TIMED_OUT,
        RunStatus.ABANDONED,
    }
)
TRANSITIONS: dict[RunStatus, frozenset[RunStatus]] = {
    RunStatus.QUEUED: _LEAVING_QUEUE,
    RunStatus.RUNNING: frozenset(s for s in RunStatus if s.final),
    **{s: frozenset() for s in RunStatus if s.final},
}


def check_transition(old: RunStatus, new: RunStatus) -> None:
    """Refuse a move the table above does not allow (a final state never changes)."""
    if new not in TRANSITIONS[old]:
        raise UsageError(f"a run cannot go from {old} to {new}")


class TriggerType(StrEnum):
    SCHEDULED = "scheduled"
    MANUAL = "manual"
    BACKFILL = "backfill"
    RETRY = "retry"
    REPLAY = "replay"
    EVENT = "event"
    RECONCILE = "reconcile"  # a comparison of source and target; it loads nothing


class TaskStatus(StrEnum):
    RUNNING = "running"
    SUCCESS = "success"
    FAILED = "failed"
    SKIPPED = "skipped"
    INTERRUPTED = "interrupted"  # it had started when another step failed the run


@dataclass(kw_only=True)
class TaskRecord:
    """One step of a run. Mutable while the step runs (``t.rows_out = n``)."""

    task_run_id: str
    run_id: str
    name: str
    seq: int
    started_at: datetime
    ended_at: datetime | None = None
    duration_ms: int | None = None
    status: TaskStatus = TaskStatus.RUNNING
    rows_in: int | None = None
    rows_out: int | None = None
    rows_rejected: int | None = None
    bytes: int | None = None
    error_message: str | None = None


@dataclass(frozen=True, kw_only=True)
class AuditEvent:
    event_id: str
    run_id: str | None
    pipeline: str | None
    event_type: str
    created_at: datetime
    target_table: str | None = None
    record_count: int | None = None
    old_values: dict[str, Any] | None = None
    new_values: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None


@dataclass(frozen=True, kw_only=True)
class DatasetSnapshot:
    run_id: str
    target_table: str
    row_count: int
    max_cursor: str | None
    schema_fingerprint: str
    columns: list[dict[str, str]]
    created_at: datetime


@dataclass(kw_only=True)
class RunRecord:
    """One attempt of a logical run, as ``pipeline_runs`` stores it."""

    run_id: str
    logical_run_id: str
    attempt: int
    pipeline: str
    trigger_type: TriggerType
    status: RunStatus
    started_at: datetime
    triggered_by: str | None = None
    parent_run_id: str | None = None
    correlation_id: str | None = None
    environment: str | None = None
    ended_at: datetime | None = None
    duration_ms: int | None = None
    rows_read: int | None = None
    rows_inserted: int | None = None
    rows_updated: int | None = None
    rows_unchanged: int | None = None
    rows_rejected: int | None = None
    rows_deleted: int | None = None
    bytes_read: int | None = None
    watermark_before: str | None = None
    watermark_after: str | None = None
    data_interval_start: datetime | None = None
    data_interval_end: datetime | None = None
    error_code: str | None = None
    error_message: str | None = None
    code_version: str | None = None
    host: str | None = None
    pid: int | None = None
    heartbeat_at: datetime | None = None
    lease_expires_at: datetime | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    idempotency_key: str | None = None  # held while running and after success (schema)
