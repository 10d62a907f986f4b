"""What a run's caller gets back: its result, or a :class:`RunFailure` saying why it did not
publish and which exit code it asks for (README: "Exit codes")."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from pipeledger.common.secrets import redact
from pipeledger.errors import (
    CancelRequested,
    CommitUnknown,
    ConcurrentRunError,
    DuplicateRun,
    GateFailed,
    LedgerNotWritten,
    LimitExceeded,
    PipeledgerError,
    QueueFull,
    QueueTimedOut,
    RunTimedOut,
    WarehouseBusy,
)
from pipeledger.ledger.run import rejection
from pipeledger.runs.load.result import LoadResult

if TYPE_CHECKING:
    from pipeledger.runs.model.build import ModelResult

FailureStatus = Literal["failed", "skipped", "unknown", "timed_out", "cancelled", "rejected"]
FailureReason = Literal[
    "error",  # a permanent failure: the input or the config must change
    "transient",  # a retry may succeed (after the node's retries, if any)
    "unexpected",  # an error that is not pipeledger's (a bug): its type is in `unexpected`
    "gate_halt",  # the quality gate halted the run
    "duplicate",  # its idempotency key is held by another run (`duplicate_of`)
    "locked",  # another run of the pipeline holds its lock
    "busy",  # SQLite: another load holds the file
    "commit_unknown",  # the connection was lost at COMMIT; the watchdog settles it
    "timeout",  # stopped by its timeout
    "cancel_requested",  # stopped by `pipeledger cancel`
    "upstream_failed",  # not run: an upstream node of this DAG run did not publish
    "limit_exceeded",  # max_rows / max_bytes passed while staging (`rejected` says which)
    "queue_full",  # the tenant's slots and queue are full (`rejected` says how full)
    "queue_timeout",  # it waited queued past queue_timeout
]
# what keeps a node's downstream from running: it did not publish, and may not have
DID_NOT_PUBLISH = frozenset({"failed", "unknown", "timed_out", "cancelled", "rejected"})


@dataclass(frozen=True, kw_only=True)
class RunFailure:
    """A run that did not publish: why, and the exit code it asks for."""

    pipeline: str
    status: FailureStatus
    reason: FailureReason
    error: str
    exit_code: int
    run_id: str | None = None
    notes: tuple[str, ...] = ()  # what happens next ("nothing was written; ...")
    unexpected: str | None = None  # the exception's type, when it was not pipeledger's
    cause: BaseException | None = field(default=None, compare=False, repr=False)
    duplicate_of: str | None = None  # reason duplicate: the run that holds the key
    attempt: int = 1  # the attempt that failed last (after retries)
    mode: str | None = None  # what the run was asked to do, where known
    target: str | None = None
    rejected: dict[str, Any] | None = None  # status rejected: the reason and its figures

    def to_json(self) -> dict[str, Any]:
        """The keys of a result's object (README: ``run --json``), so a reader need not
        tell the two apart: counts of what was written are 0 (nothing was), unknown ones
        (what was read before it failed, a COMMIT of unknown outcome) are null."""
        written = None if self.status == "unknown" else 0
        payload: dict[str, Any] = {
            "pipeline": self.pipeline,
            "run_id": self.run_id,
            "mode": self.mode,
            "status": self.status,
            "reason": self.reason,
            "target": self.target,
            "rows_read": None,
            "rows_staged": None,
            **dict.fromkeys(WRITTEN, written),
            "watermark_before": None,
            "watermark_after": None,
            "started_at": None,
            "duration_s": None,
            "error": " ".join([self.error, *self.notes]),
            "exit_code": self.exit_code,
            "attempt": self.attempt,
            "late_rows_dropped": None,
        }
        if self.duplicate_of is not None:
            payload["duplicate_of"] = self.duplicate_of
        if self.rejected is not None:
            payload["rejected"] = self.rejected
        return payload


WRITTEN = ("rows_inserted", "rows_updated", "rows_unchanged", "rows_deleted", "rows_superseded")


Outcome: TypeAlias = "LoadResult | ModelResult | RunFailure"


def failure(pipeline: str, exc: BaseException) -> RunFailure:
    """The outcome of a run that raised ``exc``."""
    ours = isinstance(exc, PipeledgerError)
    status, reason = _status_reason(exc)
    return RunFailure(
        pipeline=pipeline,
        status=status,
        reason=reason,
        error=redact(str(exc) or type(exc).__name__),
        exit_code=exc.exit_code if isinstance(exc, PipeledgerError) else 1,
        run_id=getattr(exc, "run_id", None),
        notes=tuple(redact(n) for n in getattr(exc, "__notes__", [])),
        unexpected=None if ours else type(exc).__name__,
        cause=exc,
        duplicate_of=exc.duplicate_of if isinstance(exc, DuplicateRun) else None,
        rejected=rejection(exc) if status == "rejected" else None,
    )


def _status_reason(exc: BaseException) -> tuple[FailureStatus, FailureReason]:
    if isinstance(exc, LimitExceeded):
        return "rejected", "limit_exceeded"
    if isinstance(exc, QueueFull):
        return "rejected", "queue_full"
    if isinstance(exc, QueueTimedOut):
        return "timed_out", "queue_timeout"
    if isinstance(exc, GateFailed):
        return "failed", "gate_halt"
    if isinstance(exc, DuplicateRun):
        return "skipped", "duplicate"
    if isinstance(exc, ConcurrentRunError):
        return "skipped", "busy" if isinstance(exc, WarehouseBusy) else "locked"
    if isinstance(exc, CommitUnknown):
        return "unknown", "commit_unknown"
    if isinstance(exc, RunTimedOut):
        return "timed_out", "timeout"
    if isinstance(exc, CancelRequested):
        return "cancelled", "cancel_requested"
    if not isinstance(exc, PipeledgerError):
        return "failed", "unexpected"
    return "failed", "transient" if exc.exit_code == 75 else "error"


def outcome_of(pipeline: str, exc: BaseException) -> Outcome:
    """The outcome of a run that raised ``exc``: a load that committed but that the ledger
    could not record is still a success (exit 5, with its ``ledger_error``)."""
    from pipeledger.runs.model.build import ModelResult

    if isinstance(exc, LedgerNotWritten) and isinstance(exc.result, LoadResult | ModelResult):
        notes = getattr(exc, "__notes__", [])
        return exc.result.with_ledger_error(redact("\n".join([str(exc), *notes])))
    return failure(pipeline, exc)


def did_not_publish(outcome: Outcome) -> bool:
    return isinstance(outcome, RunFailure) and outcome.status in DID_NOT_PUBLISH


# which code wins when one invocation has several outcomes: what a scheduler must act on first
_PRECEDENCE = (2, 1, 3, 124, 130, 6, 7, 8, 75, 5, 4, 0)


def exit_code(outcomes: Sequence[Outcome], strict: bool = False) -> int:
    """The process exit code for ``outcomes`` (README: exit codes); ``strict`` makes
    quarantined rows exit 3."""
    codes = {o.exit_code for o in outcomes}
    if strict and any(isinstance(o, LoadResult) and o.status == "partial" for o in outcomes):
        codes.add(3)
    for code in _PRECEDENCE:
        if code in codes:
            return code
    return max(codes, default=0)
