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
import os
import threading
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from pipeledger import __about__
from pipeledger.adapters import open_warehouse
from pipeledger.clients import this_host
from pipeledger.config import EMBEDDED_DIR, EMBEDDED_FILE
from pipeledger.errors import (
    CommitUnknown,
    ConcurrentRunError,
    LedgerNotWritten,
    NothingToRetry,
    PipeledgerError,
    RunAbandonedError,
    UsageError,
    WarehouseError,
)
from pipeledger.ledger import sql as lsql
from pipeledger.ledger import store as st
from pipeledger.ledger.model import (
    AuditEvent,
    DatasetSnapshot,
    RunRecord,
    RunStatus,
    TaskRecord,
    TaskStatus,
    TriggerType,
    check_transition,
)
from pipeledger.ledger.schema import LEDGER, RUNS, SNAPSHOTS
from pipeledger.ledger.watchdog import CommitLog, abandon_expired
from pipeledger.redact import redact
from pipeledger.warehouse.migrations import Component, is_migrated, mark_migrated, migrate
from pipeledger.warehouse.session import Session

MAX_MESSAGE = 2000


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
    def __init__(self, ledger: Ledger, run: Run) -> None:
        super().__init__(name=f"pipeledger-heartbeat-{run.run_id}", daemon=True)
        self.ledger = ledger
        self.run_ = run
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(self.ledger.heartbeat.total_seconds()):
            self.ledger.beat(self.run_.record)

    def stop(self) -> None:
        self.stopped.set()
        if self.is_alive():
            self.join(timeout=10)


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
    ) -> None:
        """``components``: other tables of the same database to migrate when the ledger
        opens its first run (one connection instead of two; pipeledger's loads pass their
        watermark state). ``commits`` tells which runs committed in the warehouse, so the
        watchdog settles a run the ledger could not hear finish (see ``ledger.watchdog``)."""
        self.url = url or f"sqlite:///{Path(EMBEDDED_DIR) / EMBEDDED_FILE}"
        self.lease = lease
        self.heartbeat = heartbeat
        self.environment = environment
        spool_path = Path(spool) if spool else Path(EMBEDDED_DIR) / "ledger-spool.jsonl"
        self.store = st.LedgerStore(
            open_warehouse(self.url), st.Spool(spool_path),
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
    ) -> Iterator[Run]:
        """Record one attempt of ``pipeline`` around the block. See the module docstring.
        ``setup`` ops (e.g. :meth:`registration`) commit together with the ``running`` row."""
        run = Run(self, self._new_record(pipeline, TriggerType(trigger_type), data_interval,
                                         logical_run_id, attempt, parent_run_id, correlation_id,
                                         triggered_by, extra))  # fmt: skip
        self._open([*setup, st.run_op(run.record)])
        beat = _Heartbeat(self, run)
        beat.start()
        try:
            yield run
        except BaseException as exc:
            beat.stop()
            self._record_failure(run, exc)
            raise
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
            extra=dict(extra or {}),
        )  # fmt: skip

    def _finish(self, run: Run, status: RunStatus, exc: BaseException | None) -> None:
        run._close(status, exc)
        self.store.write([st.run_op(run.record), *run._final_ops()])

    def beat(self, record: RunRecord) -> None:
        """Renew a running run's lease (best effort: a missed beat is not an error)."""
        now = _now()
        try:
            with self.store.database.session() as session:
                session.execute(
                    lsql.heartbeat(session.dialect), [now, now + self.lease, record.run_id]
                )
        except (PipeledgerError, OSError):
            return
        record.heartbeat_at, record.lease_expires_at = now, now + self.lease

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
            self.store.write(ops)  # spools them, or raises under on_unavailable = "fail"
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
                    st.apply(session, op)
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
        now, sla = _now(), info.freshness_sla
        version = hashlib.sha256(info.config_text.encode()).hexdigest()[:12]
        pipeline = st.Op("pipeline", {
            "name": info.name, "version": version, "description": info.description,
            "owner": info.owner, "source_system": info.source_system and redact(info.source_system),
            "target_system": info.target_system and redact(info.target_system),
            "freshness_sla_s": int(sla.total_seconds()) if sla else None,
            "created_at": now, "updated_at": now,
        })  # fmt: skip
        upstreams = list(info.depends_on)
        deps = st.Op("dependencies", {"downstream": info.name, "upstreams": upstreams, "at": now})
        return [pipeline, deps]

    def next_attempt(self, pipeline: str) -> tuple[str, int]:
        """(logical_run_id, attempt) for a retry of the pipeline's latest logical run.
        Refused unless that run's latest attempt ended in a failure-like state."""
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
        from pipeledger.ledger.queries import last_success

        with self.store.database.session(write=False) as session:
            return last_success(session, pipeline)


def _first_snapshot(session: Session, statement: str, target: str) -> tuple[int, str | None] | None:
    d = session.dialect
    rows = session.query(statement.format(table=d.table(SNAPSHOTS), p=d.param), [target])
    return (int(rows[0][0]), rows[0][1]) if rows else None


RETRYABLE = frozenset(
    {RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.TIMED_OUT, RunStatus.ABANDONED}
)


def _status_for(exc: BaseException) -> RunStatus:
    if isinstance(exc, KeyboardInterrupt | RunCancelled):
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
