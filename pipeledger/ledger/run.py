"""One run while it works: its counters, tasks, audit events and snapshots (:class:`Run`),
the steps it measures (:class:`Task`), and the thread that renews its lease and hears a
cancel request (:class:`Heartbeat`). The ledger that opened the run writes what it holds
(:mod:`pipeledger.ledger.ledger`)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from pipeledger.common.secrets import redact
from pipeledger.errors import RunAbandonedError, UsageError
from pipeledger.ledger import store as st
from pipeledger.ledger.vocabulary import (
    AuditEvent,
    DatasetSnapshot,
    RunRecord,
    RunStatus,
    TaskRecord,
    TaskStatus,
    check_transition,
)
from pipeledger.warehouse.session import Session

MAX_MESSAGE = 2000

CancelCallback = Callable[[str], None]  # told who asked, from the heartbeat's thread


class Book(Protocol):
    """What a run and its heartbeat ask of the ledger that opened them
    (:class:`pipeledger.ledger.ledger.Ledger`)."""

    heartbeat_every: timedelta

    @property
    def shares_transactions(self) -> bool:
        """The run's final record commits in the transaction of its own writes."""
        ...

    @property
    def recording(self) -> bool:
        """Anything is recorded at all."""
        ...

    def beat(self, record: RunRecord) -> None:
        """Renew the run's lease (best effort)."""
        ...

    def cancel_request(self, run_id: str) -> str | None:
        """Who asked to cancel the run, if anyone."""
        ...

    def previous_snapshot(
        self, target: str, warehouse_session: Session
    ) -> tuple[int, str | None] | None:
        """(row_count, max_cursor) of the target's latest snapshot, if any."""
        ...


def _now() -> datetime:
    return datetime.now(UTC)


def _ms(start: datetime, end: datetime) -> int:
    return int((end - start).total_seconds() * 1000)


def error_code(exc: BaseException) -> str:
    """A stable, secret-free code for an exception: its class, and a SQLSTATE if any."""
    sqlstate = getattr(exc, "sqlstate", None)
    return f"{type(exc).__name__}:{sqlstate}" if sqlstate else type(exc).__name__


def rejection(exc: BaseException) -> dict[str, Any]:
    """Why work was refused, as ``extra.rejected`` keeps it: a ``reason`` and its figures
    (the limit, what was observed, the maximum; the queue's occupants)."""
    details = getattr(exc, "details", None)
    found = details() if callable(details) else {}
    return {"reason": getattr(exc, "reason", type(exc).__name__), **found}


def error_message(exc: BaseException) -> str:
    text = " ".join([str(exc), *getattr(exc, "__notes__", [])]).strip() or type(exc).__name__
    return redact(text)[:MAX_MESSAGE]


class Task:
    """A step being measured: set ``rows_in``, ``rows_out``, ``rows_rejected``, ``bytes``."""

    def __init__(self, record: TaskRecord) -> None:
        self.record = record

    def __setattr__(self, name: str, value: Any) -> None:
        if name != "record" and hasattr(self.record, name):
            setattr(self.record, name, value)
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.record, name)


class Run:
    """One attempt, while it runs. Counters are plain attributes on ``run.record``."""

    def __init__(self, ledger: Book, record: RunRecord) -> None:
        self.ledger = ledger
        self.record = record
        self.tasks: list[TaskRecord] = []
        self.events: list[AuditEvent] = []
        self.snapshots: list[DatasetSnapshot] = []
        self.quality: list[dict[str, Any]] = []
        self.reconciliations: list[dict[str, Any]] = []
        self.final_status: RunStatus = RunStatus.SUCCESS
        self.committed_with_data = False

    @property
    def run_id(self) -> str:
        return self.record.run_id

    @property
    def logical_run_id(self) -> str:
        return self.record.logical_run_id

    @property
    def attempt(self) -> int:
        return self.record.attempt

    def set_counts(self, **counts: int | None) -> None:
        """Set run counters, e.g. ``rows_read=10, rows_inserted=7``."""
        for name, value in counts.items():
            if not name.startswith(("rows_", "bytes_")):
                raise UsageError(f"{name} is not a run counter")
            setattr(self.record, name, value)

    def mark(self, status: RunStatus | str, message: str | None = None) -> None:
        """Finish with another status than success (``partial``, ``skipped``, ...)."""
        wanted = RunStatus(status)
        check_transition(RunStatus.RUNNING, wanted)
        self.final_status = wanted
        if message:
            self.record.error_message = redact(message)[:MAX_MESSAGE]

    @contextmanager
    def task(self, name: str) -> Iterator[Task]:
        record = TaskRecord(
            task_run_id=str(uuid.uuid4()),
            run_id=self.run_id,
            name=name,
            seq=len(self.tasks) + 1,
            started_at=_now(),
        )
        self.tasks.append(record)
        try:
            yield Task(record)
        except BaseException as exc:
            self._end_task(record, TaskStatus.FAILED, error_message(exc))
            raise
        self._end_task(record, TaskStatus.SUCCESS, None)

    def add_task(self, record: TaskRecord) -> None:
        """Record a step that was measured elsewhere (the loader's steps)."""
        record.seq = len(self.tasks) + 1
        self.tasks.append(record)

    @staticmethod
    def _end_task(record: TaskRecord, status: TaskStatus, message: str | None) -> None:
        record.ended_at = _now()
        record.duration_ms = _ms(record.started_at, record.ended_at)
        record.status = status
        record.error_message = message

    def audit(
        self,
        event_type: str,
        *,
        target_table: str | None = None,
        record_count: int | None = None,
        old_values: dict[str, Any] | None = None,
        new_values: dict[str, Any] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        """Record a discrete fact about this run (keep values surgical: keys and changes)."""
        self.events.append(
            AuditEvent(
                event_id=str(uuid.uuid4()),
                run_id=self.run_id,
                pipeline=self.record.pipeline,
                event_type=event_type.upper(),
                created_at=_now(),
                target_table=target_table,
                record_count=record_count,
                old_values=old_values,
                new_values=new_values,
                metadata=metadata,
            )
        )

    def _final_ops(self) -> list[st.Op]:
        ops = [st.task_op(t) for t in self.tasks]
        ops += [st.event_op(e) for e in self.events]
        ops += [st.snapshot_op(s) for s in self.snapshots]
        ops += [st.Op("quality", q) for q in self.quality]
        ops += [st.Op("reconciliation", r) for r in self.reconciliations]
        return ops

    def _close(self, status: RunStatus, exc: BaseException | None) -> None:
        end = _now()
        record = self.record
        record.status, record.ended_at = status, end
        record.duration_ms = _ms(record.started_at, end)
        if exc is not None:
            record.error_code = error_code(exc)
            record.error_message = error_message(exc)
            if status is RunStatus.REJECTED:
                record.extra = {**record.extra, "rejected": rejection(exc)}
        self._cancel_outcome(status)
        for task in self.tasks:
            if task.status is TaskStatus.RUNNING:
                self._end_task(task, TaskStatus.FAILED, record.error_message)

    def _cancel_outcome(self, status: RunStatus) -> None:
        """Whether a ``pipeledger cancel`` took effect, in ``extra.cancel``: a request that
        reaches a run after its last heartbeat, or while it commits, comes too late, and
        the run ends as it would have."""
        if status in (RunStatus.SKIPPED, RunStatus.REJECTED) or not self.ledger.recording:
            return
        request = self.ledger.cancel_request(self.run_id)
        if request is not None:
            took = status is RunStatus.CANCELLED
            self.record.extra = {
                **self.record.extra,
                "cancel": {"requested_by": request, "took_effect": took},
            }

    def final_record(self) -> list[st.Op]:
        """What finishing now would write to the ledger: the run's final row, then its
        tasks, events, snapshots and check results."""
        self._close(self.final_status, None)
        return [st.run_op(self.record), *self._final_ops()]

    def commit_with(self, session: Session) -> None:
        """Write the final record into the caller's open transaction (the load's), so the
        run's success, counts and snapshot commit together with the rows and watermark."""
        self._close(self.final_status, None)
        if not self.ledger.shares_transactions:
            return
        if not st.finish(session, self.record):
            raise RunAbandonedError(
                f"run {self.run_id} of {self.record.pipeline} was declared abandoned by the "
                "watchdog while it worked (its lease expired); its work is rolled back"
            )
        for op in self._final_ops():
            st.apply(session, op)
        self.committed_with_data = True


class Heartbeat(threading.Thread):
    """Renews the run's lease every ``heartbeat``, and tells ``on_cancel`` once when
    someone asked to cancel the run (``pipeledger cancel``): the run's latency to a cancel
    is one heartbeat. It reads before it writes, because on SQLite the write waits while
    the run's load holds the database; the read does not."""

    def __init__(self, ledger: Book, run: Run, on_cancel: CancelCallback | None) -> None:
        super().__init__(name=f"pipeledger-heartbeat-{run.run_id}", daemon=True)
        self.ledger = ledger
        self.run_ = run
        self.on_cancel = on_cancel
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(self.ledger.heartbeat_every.total_seconds()):
            if self.on_cancel is not None:
                request = self.ledger.cancel_request(self.run_.run_id)
                if request is not None:
                    self.on_cancel(request)
                    self.on_cancel = None
            self.ledger.beat(self.run_.record)

    def stop(self) -> None:
        self.stopped.set()
        if self.is_alive():
            self.join(timeout=10)


class RunObserver(Protocol):
    """Told by the run scaffold when a run has started (``running`` recorded) and when it
    has ended (its final record made): what :mod:`pipeledger.lineage` emits events from;
    defined beside the run it is told of, so the observer needs nothing above the ledger.
    Both calls must return at once (the work goes to a thread of the observer's own)."""

    def started(self, run: Run) -> None: ...

    def ended(self, run: Run) -> None: ...
