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
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal, TypedDict

from typing_extensions import Unpack

from pipeledger.common.secrets import redact
from pipeledger.common.version import __version__
from pipeledger.config.locate import EMBEDDED_DIR, EMBEDDED_FILE
from pipeledger.errors import (
    CancelRequested,
    CommitUnknown,
    ConcurrentRunError,
    DuplicateRun,
    LedgerNotWritten,
    LimitExceeded,
    NothingToCancel,
    NothingToRetry,
    PipeledgerError,
    QueueFull,
    QueueTimedOut,
    RunAbandonedError,
    RunCancelled,
    RunTimedOut,
    TransientWarehouseError,
    UnknownRun,
    UsageError,
    WarehouseError,
)
from pipeledger.ledger import queue
from pipeledger.ledger import sql as lsql
from pipeledger.ledger import store as st
from pipeledger.ledger.cancel import CancelMailbox
from pipeledger.ledger.queue import Concurrency
from pipeledger.ledger.reads.recent import latest_snapshot
from pipeledger.ledger.run import (
    MAX_MESSAGE,
    CancelCallback,
    Heartbeat,
    Run,
    error_code,
    error_message,
)
from pipeledger.ledger.tables import LEDGER, RUNS, declared_tenant, stored_datetime
from pipeledger.ledger.vocabulary import (
    RunRecord,
    RunStatus,
    TriggerType,
    check_transition,
)
from pipeledger.ledger.watchdog import CommitLog, abandon_expired
from pipeledger.warehouse.adapters import open_warehouse
from pipeledger.warehouse.clients import this_host
from pipeledger.warehouse.migrations import Component, is_migrated, mark_migrated, migrate
from pipeledger.warehouse.session import Session, Warehouse

log = logging.getLogger("pipeledger.ledger")


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, kw_only=True)
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


class RunFields(TypedDict, total=False):
    """How a run is filed, as keywords of :meth:`Ledger.run` and :meth:`Ledger.start_run`
    (each described at :class:`RunOptions`)."""

    trigger_type: TriggerType | str
    data_interval: tuple[datetime, datetime] | None
    logical_run_id: str | None
    attempt: int
    parent_run_id: str | None
    correlation_id: str | None
    triggered_by: str | None
    extra: dict[str, Any] | None
    idempotency_key: str | None


@dataclass(frozen=True, kw_only=True)
class RunOptions:
    """How a run is filed in the ledger."""

    trigger_type: TriggerType = TriggerType.MANUAL
    data_interval: tuple[datetime, datetime] | None = None  # the data it covers
    logical_run_id: str | None = None  # an attempt of this logical run (default: a new one)
    attempt: int = 1
    parent_run_id: str | None = None  # e.g. the failed attempt a retry follows
    correlation_id: str | None = None  # e.g. the DAG run every node run of it shares
    triggered_by: str | None = None  # user@host, a scheduler, an event
    extra: dict[str, Any] = field(default_factory=dict)
    idempotency_key: str | None = None  # a second run with it does nothing (DuplicateRun)

    @classmethod
    def of(cls, **fields: Unpack[RunFields]) -> RunOptions:
        """Options from keywords; the trigger type may be its text."""
        return cls(
            trigger_type=TriggerType(fields.get("trigger_type", TriggerType.MANUAL)),
            data_interval=fields.get("data_interval"),
            logical_run_id=fields.get("logical_run_id"),
            attempt=fields.get("attempt", 1),
            parent_run_id=fields.get("parent_run_id"),
            correlation_id=fields.get("correlation_id"),
            triggered_by=fields.get("triggered_by"),
            extra=dict(fields.get("extra") or {}),
            idempotency_key=fields.get("idempotency_key"),
        )


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
        code_version: str | Callable[[], str] | None = None,
        components: Sequence[Component] = (),
        commits: CommitLog | None = None,
        write_timeout: timedelta = timedelta(seconds=10),
        database: Warehouse | None = None,
        tenant: str = "default",
        concurrency: Concurrency | None = None,
    ) -> None:
        """``components``: other tables of the same database to migrate when the ledger
        opens its first run (one connection instead of two; pipeledger's loads pass their
        watermark state). ``commits`` tells which runs committed in the warehouse, so the
        watchdog settles a run the ledger could not hear finish (see ``ledger.watchdog``).
        ``write_timeout`` bounds every statement of the ledger's own sessions (PostgreSQL):
        a ledger that hangs fails like one that is down, and is spooled the same way.
        ``database``: the ledger's database when the caller has it open already (one
        warehouse per URL in an invocation); else opened from ``url``. ``code_version``:
        what every run records as the version of the code that ran (pipeledger's loads: the
        project's git commit, else its config's hash); default pipeledger's own version.
        ``tenant``: whose runs these are; ``concurrency``: that tenant's slots and queue
        (:mod:`pipeledger.ledger.queue`; None: runs start at once)."""
        self.tenant = tenant
        self.concurrency = concurrency
        self.url = url or f"sqlite:///{Path(EMBEDDED_DIR) / EMBEDDED_FILE}"
        self.lease = lease
        self.heartbeat_every = heartbeat
        self.environment = environment
        self._code_version = code_version or f"pipeledger {__version__}"
        spool_path = Path(spool) if spool else Path(EMBEDDED_DIR) / "ledger-spool.jsonl"
        self.store = st.LedgerStore(
            database or open_warehouse(self.url, tenant=tenant),
            st.Spool(spool_path),
            separate=separate,
            on_unavailable=on_unavailable,
            wait=write_timeout,
        )
        self.cancels = CancelMailbox(self.store, self.url)
        self._prepared = False
        self._preparing = threading.Lock()  # one upkeep, whichever thread opens a run first
        self.components = (LEDGER, *components)
        self.commits = commits

    def code_version(self) -> str:
        """The version every run records (worked out once, when the first run opens)."""
        if callable(self._code_version):
            self._code_version = self._code_version()
        return self._code_version

    @property
    def shares_transactions(self) -> bool:
        """A run's final record commits in the transaction of the run's own writes."""
        return not self.store.separate

    @property
    def recording(self) -> bool:
        """Whether anything is recorded at all (a :class:`NullLedger` records nothing)."""
        return True

    # -- running ----------------------------------------------------------------------
    @contextmanager
    def run(
        self,
        pipeline: str,
        *,
        setup: Sequence[st.Op] = (),
        on_cancel: CancelCallback | None = None,
        **fields: Unpack[RunFields],
    ) -> Iterator[Run]:
        """Record one attempt of ``pipeline`` around the block. See the module docstring.
        ``setup`` ops (e.g. :meth:`registration`) commit together with the ``running`` row.
        ``idempotency_key``: claimed with that row; a run of the pipeline that holds it
        (running, or succeeded) makes this one raise DuplicateRun before the block runs.
        ``on_cancel(who)``: called from the heartbeat's thread when a cancel is requested
        (the block is not stopped otherwise). ``fields``: how the run is filed
        (:class:`RunOptions`)."""
        run = Run(self, self._new_record(pipeline, RunOptions.of(**fields)))
        try:
            if self.concurrency is None:
                self._open([*setup, st.run_op(run.record)])
            else:
                self._open(list(setup))  # the upkeep, and the pipeline before its run
                self._take_slot(run, self.concurrency)
        except DuplicateRun as exc:
            self._record_duplicate(run, exc)
            raise
        beat = Heartbeat(self, run, on_cancel)
        beat.start()
        try:
            yield run
        except BaseException as exc:
            beat.stop()
            self._record_failure(run, exc)
            raise
        finally:
            self.cancels.clear(run.run_id)
        beat.stop()
        if not run.committed_with_data:
            self._record_success(run)

    def _record_duplicate(self, run: Run, exc: DuplicateRun) -> None:
        """The refused trigger as a ``rejected`` run: its key stays with the run holding
        it (``extra.duplicate_key``)."""
        record = run.record
        record.extra = {**record.extra, "duplicate_key": record.idempotency_key}
        record.idempotency_key = None
        exc.run_id = record.run_id
        try:
            self._write_rejected(run, exc)
        except (PipeledgerError, OSError) as problem:
            exc.add_note(f"the ledger could not record this rejected trigger: {problem}")

    def record_rejected(
        self,
        pipeline: str,
        error: PipeledgerError,
        *,
        setup: Sequence[st.Op] = (),
        **fields: Unpack[RunFields],
    ) -> str:
        """Work refused before it started (e.g. a backfill range wider than
        ``max_backfill``), recorded ``rejected`` at once with ``error``'s reason in
        ``extra.rejected``; return its run id (also set on ``error``)."""
        run = Run(self, self._new_record(pipeline, RunOptions.of(**fields)))
        error.run_id = run.run_id
        self._write_rejected(run, error, setup)
        return run.run_id

    def _write_rejected(self, run: Run, error: BaseException, setup: Sequence[st.Op] = ()) -> None:
        run._close(RunStatus.REJECTED, error)
        self._open([*setup, st.run_op(run.record)])

    def _take_slot(self, run: Run, limits: Concurrency) -> None:
        """Start ``run`` in one of its tenant's slots, or queue it and wait for one, or
        record it ``rejected`` and raise QueueFull (:mod:`pipeledger.ledger.queue`)."""
        record = run.record
        error: QueueFull | None = None
        with self.store.session() as session:
            decision, seen, now = queue.admit(session, limits)
            record.started_at = record.heartbeat_at = now
            record.lease_expires_at = now + self.lease
            if decision == "rejected":
                error = _queue_full(record, limits, seen)
                run._close(RunStatus.REJECTED, error)
            else:
                record.status = RunStatus(decision)
            st.apply(session, st.run_op(record))
            if error is None:
                queue.hold_slot(session, limits, record.run_id, record.pipeline)
        if error is not None:
            raise error
        if decision == "queued":
            self._wait_queued(run, limits)

    def _wait_queued(self, run: Run, limits: Concurrency) -> None:
        """Wait for the run's turn (asking every ``queue_poll``); a wait past
        ``queue_timeout``, a cancel request or a SIGTERM ends it without running."""
        record, queued_at = run.record, run.record.started_at
        try:
            while True:
                self._end_wait_if_due(record, limits, queued_at)
                try:
                    with self.store.session() as session:
                        state, now = queue.turn(session, limits, record.run_id, self.lease)
                except (TransientWarehouseError, ConcurrentRunError) as exc:
                    # SQLite: a long load holds the write lock; a waiter asks again later
                    log.info("run %s: still queued (%s)", record.run_id, exc)
                    time.sleep(limits.queue_poll.total_seconds())
                    continue
                if state == "running":
                    waited = int((now - queued_at).total_seconds() * 1000)
                    record.status, record.started_at = RunStatus.RUNNING, now
                    record.heartbeat_at, record.lease_expires_at = now, now + self.lease
                    queued = {"queued_at": queued_at.isoformat(), "waited_ms": waited}
                    record.extra = {**record.extra, "queue": queued}
                    return
                if state != "queued":
                    raise RunAbandonedError(
                        f"run {record.run_id} of {record.pipeline} was {state} while it "
                        "waited queued; it did not run"
                    )
                time.sleep(limits.queue_poll.total_seconds())
        except (KeyboardInterrupt, RunCancelled) as exc:
            self._leave_queue(record, queued_at, RunStatus.CANCELLED, exc)
            raise

    def _end_wait_if_due(self, record: RunRecord, limits: Concurrency, since: datetime) -> None:
        """Raise (having recorded it) when the wait is over: timed out or cancelled."""
        error: PipeledgerError | None = None
        status = RunStatus.TIMED_OUT
        if _now() - since >= limits.queue_timeout:
            error = QueueTimedOut(
                f"pipeline {record.pipeline} (run {record.run_id}): it waited queued for "
                f"tenant {limits.tenant}'s max_concurrent_runs = "
                f"{limits.max_concurrent_runs} longer than queue_timeout = "
                f"{limits.queue_timeout}; it did not run"
            )
        elif (who := self.cancel_request(record.run_id)) is not None:
            error, status = CancelRequested(f"cancelled by {who} while queued"), RunStatus.CANCELLED
        if error is None:
            return
        error.run_id = record.run_id
        self._leave_queue(record, since, status, error)
        raise error

    def _leave_queue(
        self, record: RunRecord, since: datetime, status: RunStatus, exc: BaseException
    ) -> None:
        check_transition(RunStatus.QUEUED, status)
        with self.store.session() as session:
            queue.leave(session, record.run_id, status, since, error_code(exc), error_message(exc))
        record.status = status

    def record_skipped(
        self,
        pipeline: str,
        *,
        reason: str,
        message: str,
        setup: Sequence[st.Op] = (),
        **fields: Unpack[RunFields],
    ) -> str:
        """A run that did not start (e.g. its upstream failed), recorded ``skipped`` at once
        with ``reason`` in ``extra``; return its run id."""
        options = RunOptions.of(**fields)
        options = replace(options, extra={**options.extra, "reason": reason})
        record = self._new_record(pipeline, options)
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

    def _new_record(self, pipeline: str, options: RunOptions) -> RunRecord:
        run_id = str(uuid.uuid4())
        now = _now()
        start, end = options.data_interval or (None, None)
        return RunRecord(
            run_id=run_id,
            logical_run_id=options.logical_run_id or run_id,
            attempt=options.attempt,
            pipeline=pipeline,
            trigger_type=options.trigger_type,
            status=RunStatus.RUNNING,
            started_at=now,
            triggered_by=options.triggered_by,
            parent_run_id=options.parent_run_id,
            correlation_id=options.correlation_id,
            environment=self.environment,
            data_interval_start=start,
            data_interval_end=end,
            code_version=self.code_version(),
            host=this_host(),
            pid=os.getpid(),
            heartbeat_at=now,
            lease_expires_at=now + self.lease,
            extra=dict(options.extra),
            idempotency_key=options.idempotency_key,
        )

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
        with self.store.session() as session:
            changed = session.execute(
                lsql.heartbeat(session.dialect), [now, now + self.lease, run_id]
            )
        return changed == 1

    def _open(self, ops: Sequence[st.Op]) -> None:
        """One transaction (one connection) to start a run: on the first run of this
        process also migrate, replay the spool and run the watchdog; then ``ops``."""
        with self._preparing:  # the threads of a DAG run share the ledger
            if not self._prepared:
                self._prepared = self._prepare(ops)
                return
        self.store.write(ops)

    def _prepare(self, ops: Sequence[st.Op]) -> bool:
        """The first upkeep, with ``ops``; False when it could not be done and ``ops`` went
        to the spool instead (a separate ledger that is down)."""
        try:
            self._upkeep(ops)
        except (WarehouseError, ConcurrentRunError, OSError):  # OSError: the spool's lock
            if not self.store.separate:
                raise
            if not self.store.write(ops):  # spooled, or raised under on_unavailable = "fail"
                _unchecked_keys(ops)
            return False
        return True

    def _upkeep(self, ops: Sequence[st.Op] = ()) -> dict[str, str]:
        """Migrate (a transaction of its own), then replay the spool, settle runs whose
        lease expired and write ``ops``, in one transaction; return the ids of the runs the
        watchdog settled. The spool is replayed
        first: a run's final record waiting there must not be judged abandoned."""
        with self.store.spool.replaying() as spooled:
            # the migrations commit first: a session scopes itself to its tenant from the
            # tables it finds when it opens (SQLite's tagging triggers), so rows written
            # in the session that made the tables would miss their tenant
            with self.store.session() as session:
                for component in self.components:
                    migrate(session, component)
            with self.store.session() as session:
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
        pipeline = st.Op(
            "pipeline",
            {
                "name": info.name,
                "version": version,
                "description": info.description,
                "owner": info.owner,
                "source_system": info.source_system and redact(info.source_system),
                "target_system": info.target_system and redact(info.target_system),
                "freshness_sla_s": int(sla.total_seconds()) if sla else None,
                "max_duration_s": None if slow is None else int(slow.total_seconds()),
                "created_at": now,
                "updated_at": now,
            },
        )
        upstreams = list(info.depends_on)
        deps = st.Op("dependencies", {"downstream": info.name, "upstreams": upstreams, "at": now})
        return [pipeline, deps]

    def next_attempt(self, pipeline: str, retry_of: str | None = None) -> tuple[str, int]:
        """(logical_run_id, attempt) for a retry of the pipeline's latest logical run, or
        of the run ``retry_of``. Refused unless that attempt ended in a failure-like state
        (``retry_of`` may also be skipped: an attempt the embedded warehouse was too busy
        for, which a retry in the same process continues)."""
        if retry_of is not None:
            record = self.get_run(retry_of)
            status, logical_run_id, attempt = record.status, record.logical_run_id, record.attempt
        else:
            d = self.store.database.dialect
            with self.store.session(write=False) as session:
                rows = session.query(
                    f"SELECT logical_run_id, attempt, status FROM {d.table(RUNS)} "
                    f"WHERE tenant = {declared_tenant(d)} AND pipeline = {d.param} "
                    "ORDER BY started_at DESC LIMIT 1",
                    [pipeline],
                )
            if not rows:
                raise NothingToRetry(f"pipeline {pipeline} has no run to retry")
            logical_run_id, attempt, status = rows[0]
        allowed = RETRYABLE | {RunStatus.SKIPPED} if retry_of is not None else RETRYABLE
        if status not in allowed:
            raise NothingToRetry(
                f"pipeline {pipeline}: the latest run is {status}, not a failure; nothing to retry"
            )
        return str(logical_run_id), int(attempt) + 1

    def latest_correlated(self, pipeline: str, correlation_id: str) -> RunRecord | None:
        """The pipeline's latest run with ``correlation_id`` (an orchestrator's task
        instance: an earlier try of it), or None."""
        d = self.store.database.dialect
        with self.store.session(write=False) as session:
            if not is_migrated(session, LEDGER):
                return None
            rows = session.query(
                f"SELECT run_id FROM {d.table(RUNS)} WHERE tenant = {declared_tenant(d)} "
                f"AND pipeline = {d.param} AND correlation_id = {d.param} "
                "ORDER BY started_at DESC LIMIT 1",
                [pipeline, correlation_id],
            )
            if not rows:
                return None
            (row,) = session.query(lsql.read_run(session.dialect), [str(rows[0][0])])
        return _record_of(row)

    # -- by run id: for orchestrators, from any process ---------------------------------
    def start_run(self, pipeline: str, **fields: Unpack[RunFields]) -> str:
        """Record a run as ``running`` and return its id, for :meth:`finish_run` or
        :meth:`fail_run` to close later, from this process or another. Nothing renews its
        lease but :meth:`heartbeat`: past its lease the watchdog settles it ``abandoned``.
        A key that a run of the pipeline holds raises DuplicateRun (``duplicate_of``)."""
        record = self._new_record(pipeline, RunOptions.of(**fields))
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
        with self.store.session(write=False) as session:
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
        if record.status not in (RunStatus.RUNNING, RunStatus.QUEUED):
            raise NothingToCancel(
                f"run {record.run_id} of {record.pipeline} is {record.status}, not running; "
                "nothing to cancel"
            )
        self.cancels.post(record.run_id, requested_by or "someone", reason)
        return record

    def cancel_request(self, run_id: str) -> str | None:
        """Who asked to cancel the run (and why), or None (:mod:`pipeledger.ledger.cancel`)."""
        return self.cancels.request(run_id)

    # -- reads ------------------------------------------------------------------------
    def reading(self) -> AbstractContextManager[Session]:
        """A read session on the ledger's database, for :mod:`pipeledger.ledger.reads`."""
        return self.store.session(write=False)

    def previous_snapshot(
        self, target: str, warehouse_session: Session
    ) -> tuple[int, str | None] | None:
        """(row_count, max_cursor) of the target's latest snapshot, or None. Read in the
        load's own session when the ledger shares the warehouse; a separate ledger that
        cannot be reached gives None (the caller then counts the table)."""
        try:
            if not self.store.separate:
                return latest_snapshot(warehouse_session, target)
            with self.reading() as session:
                return latest_snapshot(session, target)
        except (WarehouseError, ConcurrentRunError):
            return None

    def last_successful_run(self, pipeline: str) -> datetime | None:
        """The ``data_interval_end`` of the pipeline's latest successful run."""
        from pipeledger.ledger.reads.queries import last_success

        with self.reading() as session:
            return last_success(session, pipeline)


def _match_run(session: Session, run_id: str) -> str:
    """The run id ``run_id`` names (``ledger.run_detail.match_run_id``), or UnknownRun."""
    from pipeledger.ledger.reads.detail import match_run_id  # a run's own path never asks

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


RETRYABLE = frozenset(
    {RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.TIMED_OUT, RunStatus.ABANDONED}
)


def _unchecked_keys(ops: Sequence[st.Op]) -> None:
    for op in ops:
        if op.kind == "run" and op.data.get("idempotency_key"):
            log.warning(
                "pipeline %s: the ledger is unreachable, so idempotency key %r could not be "
                "checked; the run goes on (its rows still land exactly once)",
                op.data["pipeline"],
                op.data["idempotency_key"],
            )


def _queue_full(record: RunRecord, limits: Concurrency, seen: queue.Occupancy) -> QueueFull:
    error = QueueFull(
        f"pipeline {record.pipeline} (run {record.run_id}): rejected: tenant "
        f"{limits.tenant} runs {seen.running} of max_concurrent_runs = "
        f"{limits.max_concurrent_runs} and {seen.queued} runs wait queued, "
        f"queue_capacity = {limits.queue_capacity}",
        tenant=limits.tenant,
        running=seen.running,
        queued=seen.queued,
    )
    error.run_id = record.run_id
    return error


def _status_for(exc: BaseException) -> RunStatus:
    if isinstance(exc, LimitExceeded | QueueFull):
        return RunStatus.REJECTED
    if isinstance(exc, RunTimedOut | QueueTimedOut):
        return RunStatus.TIMED_OUT
    if isinstance(exc, KeyboardInterrupt | RunCancelled | CancelRequested):
        return RunStatus.CANCELLED
    if isinstance(exc, ConcurrentRunError):
        return RunStatus.SKIPPED
    return RunStatus.FAILED


class NullLedger(Ledger):
    """A ledger that records nothing, with the same interface: for ``[ledger] enabled =
    false`` and for dry runs. Its runs still have a run id."""

    def __init__(self) -> None:
        super().__init__("sqlite:///:memory:")

    @property
    def recording(self) -> bool:
        return False

    @property
    def shares_transactions(self) -> bool:
        return False

    @contextmanager
    def run(
        self,
        pipeline: str,
        *,
        setup: Sequence[st.Op] = (),
        on_cancel: CancelCallback | None = None,
        **fields: Unpack[RunFields],
    ) -> Iterator[Run]:
        trigger_type = RunOptions.of(**fields).trigger_type
        run = Run(self, self._new_record(pipeline, RunOptions(trigger_type=trigger_type)))
        try:
            yield run
        except BaseException as exc:  # nothing is recorded; the run's observers see its end
            run._close(_status_for(exc), exc)
            raise

    def watchdog(self) -> dict[str, str]:
        return {}

    def record_rejected(
        self,
        pipeline: str,
        error: PipeledgerError,
        *,
        setup: Sequence[st.Op] = (),
        **fields: Unpack[RunFields],
    ) -> str:
        return self._new_record(pipeline, RunOptions()).run_id

    def record_skipped(
        self,
        pipeline: str,
        *,
        reason: str,
        message: str,
        setup: Sequence[st.Op] = (),
        **fields: Unpack[RunFields],
    ) -> str:
        return self._new_record(pipeline, RunOptions()).run_id
