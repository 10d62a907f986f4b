"""The Python API of the ledger, for pipeledger's own loader and for any Python pipeline.

::

    ledger = Ledger("postgresql://...")             # or Ledger(): the embedded default
    with ledger.run("orders_daily", trigger_type="scheduled",
                    data_interval=(start, end)) as run:    # run.run_id exists before any write
        with run.task("extract") as t:
            rows = extract(); t.rows_out = len(rows)
        run.audit("VALIDATION_FAILURE", target_table="fact_orders", record_count=3)
    ledger.last_successful_run("orders_daily")       # its data_interval_end

``running`` is committed before the block runs; a heartbeat renews the run's lease while
it works; leaving the block records ``success`` (or the status set with ``run.mark``); an
exception records ``failed`` (``cancelled`` for an interrupt, ``skipped`` when another run
held the lock) and is re-raised unchanged; if the ledger cannot record that, a note on the
exception says so. When the final record of a run that succeeded cannot be written (nor
spooled), :class:`~pipeledger.errors.LedgerNotWritten` is raised from the ledger's error.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from pipeledger.common import version as __about__
from pipeledger.common.secrets import redact
from pipeledger.config.locate import EMBEDDED_DIR, EMBEDDED_FILE
from pipeledger.errors import (
    CancelRequested,
    CommitUnknown,
    ConcurrentRunError,
    LedgerNotWritten,
    NothingToCancel,
    NothingToRetry,
    PipeledgerError,
    RunAbandonedError,
    RunTimedOut,
    UnknownRun,
    UsageError,
    WarehouseError,
)
from pipeledger.ledger import sql as lsql
from pipeledger.ledger import store as st
from pipeledger.ledger.reads.detail import match_run_id
from pipeledger.ledger.tables import LEDGER, RUNS, SNAPSHOTS, stored_datetime
from pipeledger.ledger.vocabulary import (
    AuditEvent,
    DatasetSnapshot,
    RunRecord,
    RunStatus,
    TaskRecord,
    TaskStatus,
    TriggerType,
    check_transition,
)
from pipeledger.ledger.watchdog import CommitLog, abandon_expired
from pipeledger.warehouse.adapters import open_warehouse
from pipeledger.warehouse.clients import this_host
from pipeledger.warehouse.migrations import Component, is_migrated, mark_migrated, migrate
from pipeledger.warehouse.session import Session

MAX_MESSAGE = 2000
log = logging.getLogger("pipeledger.ledger")

CancelCallback = Callable[[str], None]  # told who asked, from the heartbeat's thread


def _now() -> datetime:
    return datetime.now(UTC)


def _ms(start: datetime, end: datetime) -> int:
    return int((end - start).total_seconds() * 1000)


def error_code(exc: BaseException) -> str:
    """A stable, secret-free code for an exception: its class, and a SQLSTATE if any."""
    sqlstate = getattr(exc, "sqlstate", None)
    return f"{type(exc).__name__}:{sqlstate}" if sqlstate else type(exc).__name__


def error_message(exc: BaseException) -> str:
    text = " ".join([str(exc), *getattr(exc, "__notes__", [])]).strip() or type(exc).__name__
    return redact(text)[:MAX_MESSAGE]


@dataclass(frozen=True)
class PipelineInfo:
    """What the registry (``pipelines``, ``pipeline_dependencies``) knows of a pipeline."""

    name: str
    config_text: str  # hashed into the pipeline's version (secrets masked)
    description: str | None = None
    owner: str | None = None
    source_system: str | None = None
    target_system: str | None = None
    freshness_sla: timedelta | None = None
    depends_on: tuple[str, ...] = ()
    max_duration: timedelta | None = None


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

    def __init__(self, ledger: Ledger, record: RunRecord) -> None:
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
        record = TaskRecord(str(uuid.uuid4()), self.run_id, name, len(self.tasks) + 1, _now())
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
                str(uuid.uuid4()), self.run_id, self.record.pipeline, event_type.upper(), _now(),
                target_table, record_count, old_values, new_values, metadata,
            )
        )  # fmt: skip

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
        for task in self.tasks:
            if task.status is TaskStatus.RUNNING:
                self._end_task(task, TaskStatus.FAILED, record.error_message)

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


class _Heartbeat(threading.Thread):
    """Renews the run's lease every ``heartbeat``, and tells ``on_cancel`` once when
    someone asked to cancel the run (``pipeledger cancel``): the run's latency to a cancel
    is one heartbeat. It reads before it writes, because on SQLite the write waits while
    the run's load holds the database; the read does not."""

    def __init__(self, ledger: Ledger, run: Run, on_cancel: CancelCallback | None) -> None:
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


@dataclass(frozen=True)
class ScheduledHistory:
    """What the ledger knows of a pipeline's scheduled runs (``pipeledger.schedule``)."""

    held_since: datetime | None = None  # end of the first interval whose run holds its key
    held_until: datetime | None = None  # end of the latest one
    held: frozenset[str] = frozenset()  # which of the asked keys a run holds
    latest: dict[str, Any] = field(default_factory=dict)  # the latest scheduled run


class Ledger:
    """The book of record of pipeline runs, in SQL."""

    def __init__(
        self,
        url: str | None = None,
        *,
        separate: bool = True,
        spool: Path | str | None = None,
        on_unavailable: Literal["spool", "fail"] = "spool",
        lease: timedelta = timedelta(minutes=5),
        heartbeat: timedelta = timedelta(seconds=30),
        environment: str | None = None,
        components: Sequence[Component] = (),
        commits: CommitLog | None = None,
        write_timeout: timedelta = timedelta(seconds=10),
    ) -> None:
        """``components``: other tables of the same database to migrate when the ledger
        opens its first run (one connection instead of two; pipeledger's loads pass their
        watermark state). ``commits`` tells which runs committed in the warehouse, so the
        watchdog settles a run the ledger could not hear finish (see ``ledger.watchdog``).
        ``write_timeout`` bounds every statement of the ledger's own sessions (PostgreSQL):
        a ledger that hangs fails like one that is down, and is spooled the same way."""
        self.url = url or f"sqlite:///{Path(EMBEDDED_DIR) / EMBEDDED_FILE}"
        self.lease = lease
        self.heartbeat_every = heartbeat
        self.environment = environment
        spool_path = Path(spool) if spool else Path(EMBEDDED_DIR) / "ledger-spool.jsonl"
        self.store = st.LedgerStore(
            open_warehouse(self.url, wait=write_timeout), st.Spool(spool_path),
            separate=separate, on_unavailable=on_unavailable,
        )  # fmt: skip
        self._prepared = False
        self.components = (LEDGER, *components)
        self.commits = commits

    @property
    def shares_transactions(self) -> bool:
        """A run's final record commits in the transaction of the run's own writes."""
        return not self.store.separate

    @property
    def records(self) -> bool:
        """Whether anything is recorded at all (a :class:`NullLedger` records nothing)."""
        return True

    # -- running ----------------------------------------------------------------------
    @contextmanager
    def run(
        self,
        pipeline: str,
        *,
        trigger_type: TriggerType | str = TriggerType.MANUAL,
        data_interval: tuple[datetime, datetime] | None = None,
        logical_run_id: str | None = None,
        attempt: int = 1,
        parent_run_id: str | None = None,
        correlation_id: str | None = None,
        triggered_by: str | None = None,
        extra: dict[str, Any] | None = None,
        setup: Sequence[st.Op] = (),
        idempotency_key: str | None = None,
        on_cancel: CancelCallback | None = None,
    ) -> Iterator[Run]:
        """Record one attempt of ``pipeline`` around the block. See the module docstring.
        ``setup`` ops (e.g. :meth:`registration`) commit together with the ``running`` row.
        ``idempotency_key``: claimed with that row; a run of the pipeline that holds it
        (running, or succeeded) makes this one raise DuplicateRun before the block runs.
        ``on_cancel(who)``: called from the heartbeat's thread when a cancel is requested
        (the block is not stopped otherwise)."""
        record = self._new_record(pipeline, TriggerType(trigger_type), data_interval,
                                  logical_run_id, attempt, parent_run_id, correlation_id,
                                  triggered_by, extra, idempotency_key)  # fmt: skip
        run = Run(self, record)
        self._open([*setup, st.run_op(run.record)])
        beat = _Heartbeat(self, run, on_cancel)
        beat.start()
        try:
            yield run
        except BaseException as exc:
            beat.stop()
            self._record_failure(run, exc)
            raise
        finally:
            self._clear_mailbox(run.run_id)
        beat.stop()
        if not run.committed_with_data:
            self._record_success(run)

    def record_skipped(
        self,
        pipeline: str,
        *,
        reason: str,
        message: str,
        trigger_type: TriggerType | str = TriggerType.MANUAL,
        correlation_id: str | None = None,
        triggered_by: str | None = None,
        setup: Sequence[st.Op] = (),
    ) -> str:
        """A run that did not start (e.g. its upstream failed), recorded ``skipped`` at once
        with ``reason`` in ``extra``; return its run id."""
        record = self._new_record(
            pipeline, TriggerType(trigger_type), None, None, 1, None, correlation_id,
            triggered_by, {"reason": reason},
        )  # fmt: skip
        run = Run(self, record)
        run.mark(RunStatus.SKIPPED, message)
        run._close(RunStatus.SKIPPED, None)
        self.store.write([*setup, st.run_op(record)])
        return run.run_id

    def _record_failure(self, run: Run, exc: BaseException) -> None:
        """The failed run's final record; the run's own error stays the one raised."""
        if isinstance(exc, CommitUnknown):  # it may have committed: the watchdog will know
            return
        try:
            self._finish(run, _status_for(exc), exc)
        except (PipeledgerError, OSError) as problem:
            exc.add_note(f"the ledger could not record this failure either: {problem}")

    def _record_success(self, run: Run) -> None:
        try:
            self._finish(run, run.final_status, None)
        except (PipeledgerError, OSError) as problem:
            error = LedgerNotWritten(
                f"run {run.run_id} of {run.record.pipeline} committed, but its final record "
                f"could not be written to the ledger: {problem}"
            )
            error.run_id = run.run_id
            raise error from problem

    def _new_record(
        self,
        pipeline: str,
        trigger_type: TriggerType,
        data_interval: tuple[datetime, datetime] | None,
        logical_run_id: str | None,
        attempt: int,
        parent_run_id: str | None,
        correlation_id: str | None,
        triggered_by: str | None,
        extra: dict[str, Any] | None,
        idempotency_key: str | None = None,
    ) -> RunRecord:
        run_id = str(uuid.uuid4())
        now = _now()
        start, end = data_interval or (None, None)
        return RunRecord(
            run_id=run_id, logical_run_id=logical_run_id or run_id, attempt=attempt,
            pipeline=pipeline, trigger_type=trigger_type, status=RunStatus.RUNNING,
            started_at=now, triggered_by=triggered_by, parent_run_id=parent_run_id,
            correlation_id=correlation_id, environment=self.environment,
            data_interval_start=start, data_interval_end=end,
            code_version=__about__.__version__, host=this_host(),
            pid=os.getpid(), heartbeat_at=now, lease_expires_at=now + self.lease,
            extra=dict(extra or {}), idempotency_key=idempotency_key,
        )  # fmt: skip

    def _finish(self, run: Run, status: RunStatus, exc: BaseException | None) -> None:
        run._close(status, exc)
        self.store.write([st.run_op(run.record), *run._final_ops()])

    def beat(self, record: RunRecord) -> None:
        """Renew a running run's lease (best effort: a missed beat is not an error)."""
        now = _now()
        try:
            self._renew(record.run_id, now)
        except (PipeledgerError, OSError):
            return
        record.heartbeat_at, record.lease_expires_at = now, now + self.lease

    def _renew(self, run_id: str, now: datetime) -> bool:
        """Move the lease of a running run on; False when the run is not running."""
        with self.store.database.session() as session:
            changed = session.execute(
                lsql.heartbeat(session.dialect), [now, now + self.lease, run_id]
            )
        return changed == 1

    def _open(self, ops: Sequence[st.Op]) -> None:
        """One transaction (one connection) to start a run: on the first run of this
        process also migrate, replay the spool and run the watchdog; then ``ops``."""
        if self._prepared:
            self.store.write(ops)
            return
        try:
            self._upkeep(ops)
        except (WarehouseError, ConcurrentRunError, OSError):  # OSError: the spool's lock
            if not self.store.separate:
                raise
            if not self.store.write(ops):  # spooled, or raised under on_unavailable = "fail"
                _unchecked_keys(ops)
            return
        self._prepared = True

    def _upkeep(self, ops: Sequence[st.Op] = ()) -> dict[str, str]:
        """Migrate, replay the spool, settle runs whose lease expired, then ``ops``, in one
        transaction; return the ids of the runs the watchdog settled. The spool is replayed
        first: a run's final record waiting there must not be judged abandoned."""
        with self.store.spool.replaying() as spooled:
            with self.store.database.session() as session:
                for component in self.components:
                    migrate(session, component)
                for op in spooled:
                    st.apply_replayed(session, op)
                settled = abandon_expired(session, self.commits)
                for op in ops:
                    st.apply(session, op)
            if spooled:
                self.store.spool.clear(len(spooled))
        self.store._migrated = True
        mark_migrated(self.url, *self.components)
        return settled

    # -- upkeep -----------------------------------------------------------------------
    def watchdog(self) -> dict[str, str]:
        """Replay the spool, then settle every run whose lease expired (or whose process is
        gone from this host): ``success`` if the warehouse shows it committed, else
        ``abandoned``. Return each settled run's id and status."""
        return self._upkeep()

    def register(self, info: PipelineInfo) -> None:
        """Add or update a pipeline in the registry, with its upstream dependencies."""
        self.store.write(self.registration(info))

    def registration(self, info: PipelineInfo) -> list[st.Op]:
        """The ops that add or update a pipeline and its dependencies in the registry."""
        now, sla, slow = _now(), info.freshness_sla, info.max_duration
        version = hashlib.sha256(info.config_text.encode()).hexdigest()[:12]
        pipeline = st.Op("pipeline", {
            "name": info.name, "version": version, "description": info.description,
            "owner": info.owner, "source_system": info.source_system and redact(info.source_system),
            "target_system": info.target_system and redact(info.target_system),
            "freshness_sla_s": int(sla.total_seconds()) if sla else None,
            "max_duration_s": None if slow is None else int(slow.total_seconds()),
            "created_at": now, "updated_at": now,
        })  # fmt: skip
        upstreams = list(info.depends_on)
        deps = st.Op("dependencies", {"downstream": info.name, "upstreams": upstreams, "at": now})
        return [pipeline, deps]

    def next_attempt(self, pipeline: str, retry_of: str | None = None) -> tuple[str, int]:
        """(logical_run_id, attempt) for a retry of the pipeline's latest logical run, or
        of the run ``retry_of``. Refused unless that attempt ended in a failure-like state."""
        if retry_of is not None:
            record = self.get_run(retry_of)
            status, logical_run_id, attempt = record.status, record.logical_run_id, record.attempt
        else:
            d = self.store.database.dialect
            with self.store.database.session(write=False) as session:
                rows = session.query(
                    f"SELECT logical_run_id, attempt, status FROM {d.table(RUNS)} "
                    f"WHERE pipeline = {d.param} ORDER BY started_at DESC LIMIT 1",
                    [pipeline],
                )
            if not rows:
                raise NothingToRetry(f"pipeline {pipeline} has no run to retry")
            logical_run_id, attempt, status = rows[0]
        if status not in RETRYABLE:
            raise NothingToRetry(
                f"pipeline {pipeline}: the latest run is {status}, not a failure; nothing to retry"
            )
        return str(logical_run_id), int(attempt) + 1

    # -- by run id: for orchestrators, from any process ---------------------------------
    def start_run(
        self,
        pipeline: str,
        *,
        trigger_type: TriggerType | str = TriggerType.MANUAL,
        data_interval: tuple[datetime, datetime] | None = None,
        idempotency_key: str | None = None,
        logical_run_id: str | None = None,
        attempt: int = 1,
        parent_run_id: str | None = None,
        correlation_id: str | None = None,
        triggered_by: str | None = None,
        extra: dict[str, Any] | None = None,
    ) -> str:
        """Record a run as ``running`` and return its id, for :meth:`finish_run` or
        :meth:`fail_run` to close later, from this process or another. Nothing renews its
        lease but :meth:`heartbeat`: past its lease the watchdog settles it ``abandoned``.
        A key that a run of the pipeline holds raises DuplicateRun (``duplicate_of``)."""
        record = self._new_record(
            pipeline, TriggerType(trigger_type), data_interval, logical_run_id, attempt,
            parent_run_id, correlation_id, triggered_by, extra, idempotency_key,
        )  # fmt: skip
        self._open([st.run_op(record)])
        return record.run_id

    def finish_run(
        self, run_id: str, status: RunStatus | str = RunStatus.SUCCESS, **counts: int | None
    ) -> RunRecord:
        """Close a running run (read back from the ledger by id) with ``status`` and
        counters (``rows_read=...``). A run that is no longer running is refused."""
        run = Run(self, self._running(run_id))
        run.set_counts(**counts)
        wanted = RunStatus(status)
        check_transition(RunStatus.RUNNING, wanted)
        self._finish(run, wanted, None)
        return run.record

    def fail_run(self, run_id: str, error: BaseException | str) -> RunRecord:
        """Close a running run as ``failed`` (``timed_out`` or ``cancelled`` for those
        errors), with the error's code and message."""
        run = Run(self, self._running(run_id))
        if isinstance(error, BaseException):
            self._finish(run, _status_for(error), error)
        else:
            run.record.error_message = redact(error)[:MAX_MESSAGE]
            self._finish(run, RunStatus.FAILED, None)
        return run.record

    def heartbeat(self, run_id: str) -> bool:
        """Renew a running run's lease; True when someone asked to cancel it. Raises
        RunAbandonedError when it is not running any more (the watchdog settled it)."""
        if not self._renew(run_id, _now()):
            raise RunAbandonedError(
                f"run {run_id} is not running any more (finished, or settled by the watchdog "
                "when its lease expired)"
            )
        return self.cancel_request(run_id) is not None

    def get_run(self, run_id: str) -> RunRecord:
        """A run as the ledger has it; ``run_id`` may be its first 8+ characters."""
        with self.store.database.session(write=False) as session:
            if not is_migrated(session, LEDGER):
                raise UnknownRun(f"no run {run_id} in the ledger (it has no runs yet)")
            full = _match_run(session, run_id)
            (row,) = session.query(lsql.read_run(session.dialect), [full])
        return _record_of(row)

    def _running(self, run_id: str) -> RunRecord:
        record = self.get_run(run_id)
        if record.status is not RunStatus.RUNNING:
            raise UsageError(
                f"run {record.run_id} of {record.pipeline} is {record.status}, not running; "
                "a final state never changes"
            )
        return record

    # -- cancel -----------------------------------------------------------------------
    def request_cancel(
        self, run_id: str, *, requested_by: str | None = None, reason: str | None = None
    ) -> RunRecord:
        """Ask a running run to stop, from any process or host: its heartbeat sees the
        request and the run rolls back, recorded ``cancelled``. Return the run."""
        record = self.get_run(run_id)
        if record.status is not RunStatus.RUNNING:
            raise NothingToCancel(
                f"run {record.run_id} of {record.pipeline} is {record.status}, not running; "
                "nothing to cancel"
            )
        who = requested_by or "someone"
        mailbox = self._mailbox(record.run_id)
        if mailbox is not None:  # the run's load may hold the database: see _mailbox
            mailbox.parent.mkdir(parents=True, exist_ok=True)
            mailbox.write_text(f"{who}: {reason}" if reason else who, encoding="utf-8")
            return record
        with self.store.database.session() as session:
            session.execute(
                lsql.request_cancel(session.dialect), [record.run_id, _now(), who, reason]
            )
        return record

    def cancel_request(self, run_id: str) -> str | None:
        """Who asked to cancel the run (and why), or None. Never raises: a ledger it
        cannot read has no request to give."""
        mailbox = self._mailbox(run_id)
        try:
            if mailbox is not None:
                return mailbox.read_text(encoding="utf-8") if mailbox.exists() else None
            with self.store.database.session(write=False) as session:
                rows = session.query(lsql.cancel_request(session.dialect), [run_id])
        except (PipeledgerError, OSError):
            return None
        if not rows:
            return None
        who, reason = rows[0]
        return f"{who}: {reason}" if reason else str(who)

    def _mailbox(self, run_id: str) -> Path | None:
        """Where a cancel request waits when the ledger's database lets one writer in at
        a time (SQLite): a file beside it, since the run's load holds its write lock for
        the whole transaction. None where the request is a row in the ledger."""
        if self.store.database.dialect.heartbeat_while_loading:
            return None
        path = Path(self.url.removeprefix("sqlite:///"))
        return path.with_name(path.name + "-cancel") / run_id

    def _clear_mailbox(self, run_id: str) -> None:
        mailbox = self._mailbox(run_id)
        if mailbox is not None:
            mailbox.unlink(missing_ok=True)

    # -- schedules and retries ----------------------------------------------------------
    def scheduled_history(self, pipeline: str, keys: Sequence[str] = ()) -> ScheduledHistory:
        """The pipeline's scheduled runs: the span of intervals held, which of ``keys``
        runs hold, and its latest scheduled run. Empty before the ledger has runs."""
        with self.store.database.session(write=False) as session:
            d = session.dialect
            columns = session.table_columns(RUNS) or []
            if "idempotency_key" not in {name for name, _ in columns}:
                return ScheduledHistory()
            since, until = session.query(lsql.scheduled_span(d), [pipeline])[0]
            held = session.query(lsql.held_keys(d, len(keys)), [pipeline, *keys]) if keys else []
            latest = session.query(lsql.latest_scheduled(d), [pipeline])
        last: dict[str, Any] = {}
        if latest:
            run_id, status, start, end = latest[0]
            last = {"run_id": str(run_id), "status": str(status),
                    "start": stored_datetime(start), "end": stored_datetime(end)}  # fmt: skip
        return ScheduledHistory(
            stored_datetime(since), stored_datetime(until), frozenset(str(r[0]) for r in held),
            last,
        )  # fmt: skip

    def attempts_since(self, pipeline: str, since: datetime) -> int:
        """Attempts the pipeline made since ``since`` (a retry budget counts them)."""
        with self.store.database.session(write=False) as session:
            rows = session.query(lsql.attempts_since(session.dialect), [pipeline, since])
        return int(rows[0][0])

    def previous_snapshot(
        self, target: str, warehouse_session: Session
    ) -> tuple[int, str | None] | None:
        """(row_count, max_cursor) of the target's latest snapshot, or None. Read in the
        load's own session when the ledger shares the warehouse; a separate ledger that
        cannot be reached gives None (the caller then counts the table)."""
        statement = (
            "SELECT row_count, max_cursor FROM {table} WHERE target_table = {p} "
            "ORDER BY created_at DESC LIMIT 1"
        )
        try:
            if not self.store.separate:
                return _first_snapshot(warehouse_session, statement, target)
            with self.store.database.session(write=False) as session:
                return _first_snapshot(session, statement, target)
        except (WarehouseError, ConcurrentRunError):
            return None

    def volume_history(self, pipeline: str, runs: int = 30) -> list[int]:
        """rows_read of the pipeline's latest successful (or partial) incremental runs."""
        d = self.store.database.dialect
        with self.store.database.session(write=False) as session:
            if not is_migrated(session, LEDGER):
                return []
            rows = session.query(
                f"SELECT rows_read FROM {d.table(RUNS)} WHERE pipeline = {d.param} "
                "AND status IN ('success', 'partial') "
                "AND trigger_type NOT IN ('backfill', 'replay', 'reconcile') "
                f"AND rows_read IS NOT NULL ORDER BY started_at DESC LIMIT {int(runs)}",
                [pipeline],
            )
        return [int(r[0]) for r in rows]

    def latest_runs(self, pipelines: Sequence[str]) -> dict[str, dict[str, Any]]:
        """Of each pipeline that has runs, its latest: status, run id, start."""
        d = self.store.database.dialect
        out: dict[str, dict[str, Any]] = {}
        with self.store.database.session(write=False) as session:
            if not is_migrated(session, LEDGER):
                return out
            for name in pipelines:
                rows = session.query(
                    f"SELECT run_id, status, started_at FROM {d.table(RUNS)} "
                    f"WHERE pipeline = {d.param} ORDER BY started_at DESC LIMIT 1",
                    [name],
                )
                if rows:
                    run_id, status, started = rows[0]
                    out[name] = {"run_id": str(run_id), "status": str(status),
                                 "started_at": str(started)}  # fmt: skip
        return out

    def last_successful_run(self, pipeline: str) -> datetime | None:
        """The ``data_interval_end`` of the pipeline's latest successful run."""
        from pipeledger.ledger.reads.queries import last_success

        with self.store.database.session(write=False) as session:
            return last_success(session, pipeline)


def _match_run(session: Session, run_id: str) -> str:
    """The run id ``run_id`` names (``ledger.run_detail.match_run_id``), or UnknownRun."""
    found = match_run_id(session, run_id)
    if found is None:
        raise UnknownRun(f"no run {run_id} in the ledger")
    return found


def _record_of(row: Sequence[Any]) -> RunRecord:
    """A ``pipeline_runs`` row (every column, in order) as a RunRecord."""
    data = dict(zip(lsql.RUN_COLUMNS, row, strict=True))
    for name, value in data.items():
        if name.endswith("_at") or name.startswith("data_interval_"):
            data[name] = stored_datetime(value)
    extra = data["extra"]
    data["extra"] = json.loads(extra) if isinstance(extra, str) else dict(extra or {})
    data["trigger_type"] = TriggerType(data["trigger_type"])
    data["status"] = RunStatus(data["status"])
    return RunRecord(**data)


def _first_snapshot(session: Session, statement: str, target: str) -> tuple[int, str | None] | None:
    d = session.dialect
    rows = session.query(statement.format(table=d.table(SNAPSHOTS), p=d.param), [target])
    return (int(rows[0][0]), rows[0][1]) if rows else None


RETRYABLE = frozenset(
    {RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.TIMED_OUT, RunStatus.ABANDONED}
)


def _unchecked_keys(ops: Sequence[st.Op]) -> None:
    for op in ops:
        if op.kind == "run" and op.data.get("idempotency_key"):
            log.warning(
                "pipeline %s: the ledger is unreachable, so idempotency key %r could not be "
                "checked; the run goes on (its rows still land exactly once)",
                op.data["pipeline"], op.data["idempotency_key"],
            )  # fmt: skip


def _status_for(exc: BaseException) -> RunStatus:
    if isinstance(exc, RunTimedOut):
        return RunStatus.TIMED_OUT
    if isinstance(exc, KeyboardInterrupt | RunCancelled | CancelRequested):
        return RunStatus.CANCELLED
    if isinstance(exc, ConcurrentRunError):
        return RunStatus.SKIPPED
    return RunStatus.FAILED


class RunCancelled(BaseException):
    """Raised in the main thread on SIGTERM, so the run rolls back and says ``cancelled``."""


class NullLedger(Ledger):
    """A ledger that records nothing, with the same interface: for ``[ledger] enabled =
    false`` and for dry runs. Its runs still have a run id."""

    def __init__(self) -> None:
        super().__init__("sqlite:///:memory:")

    @property
    def records(self) -> bool:
        return False

    @property
    def shares_transactions(self) -> bool:
        return False

    @contextmanager
    def run(self, pipeline: str, **options: Any) -> Iterator[Run]:
        record = self._new_record(pipeline, TriggerType(options.get("trigger_type", "manual")),
                                  None, None, 1, None, None, None, None)  # fmt: skip
        yield Run(self, record)

    def watchdog(self) -> dict[str, str]:
        return {}

    def record_skipped(self, pipeline: str, **options: Any) -> str:
        return self._new_record(pipeline, TriggerType.MANUAL, None, None, 1, None, None, None,
                                None).run_id  # fmt: skip
