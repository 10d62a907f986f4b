"""One scaffold for every kind of run: each kind supplies only its body (a :class:`Job`).

::

    open the ledger run: ``running`` is committed, a heartbeat keeps its lease
    BEGIN                                              (the warehouse)
      job.execute(session, run)    the run's work, and what it tells the ledger
      the commit log's row         (state.tables: the warehouse knows the run committed)
      the run's final record       (when the ledger lives in the warehouse: same commit)
    COMMIT                         (ROLLBACK: a dry run, or any error)
    the final record in a ledger of its own (or its spool)
    SLAs and alerts looked after, in the background (pipeledger.alerts)

On failure the job says what it left behind (a note on the error, e.g. "nothing was
written; the watermark stays at ..."), records how far it got, and the error is re-raised
unchanged. A connection lost during COMMIT leaves the outcome unknown (``CommitUnknown``):
nothing is recorded then, and the watchdog settles the run from the warehouse's commit log.
A dry run records nothing in the ledger.

A run can be stopped from outside while it works (:mod:`pipeledger.runs.interrupt`): by its
pipeline's ``timeout`` (a timer), by ``pipeledger cancel`` (the heartbeat sees the
request), or with every run of the process by SIGTERM. Its statement is cancelled on the
server, it rolls back and releases its lock, and it ends ``timed_out`` or ``cancelled``
with what it left behind said, as any failure.

The run's warehouse sessions carry its name (:mod:`pipeledger.warehouse.clients`), so that a
run that finds its pipeline locked can tell a live holder from the session of a killed one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol, TypeVar

from pipeledger.common.stop import Stop
from pipeledger.errors import (
    CancelRequested,
    CommitUnknown,
    ConcurrentRunError,
    ConfigError,
    DuplicateRun,
    LedgerNotWritten,
    PipeledgerError,
)
from pipeledger.ledger.ledger import Ledger, NullLedger, RunFields
from pipeledger.ledger.run import Run
from pipeledger.ledger.vocabulary import TriggerType
from pipeledger.runs.interrupt import stoppable
from pipeledger.runs.site import Site, who
from pipeledger.state.tables import STATE, log_commit
from pipeledger.warehouse.clients import acting_for
from pipeledger.warehouse.migrations import ensure_migrated
from pipeledger.warehouse.session import Session, Warehouse

R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)


@dataclass(frozen=True, kw_only=True)
class Trigger:
    """Why a run happens, as the ledger records it."""

    trigger_type: TriggerType = TriggerType.MANUAL
    retry: bool = False  # the next attempt of the pipeline's latest failed logical run
    correlation_id: str | None = None  # e.g. the DAG run every node run of it shares
    triggered_by: str | None = None
    parent_run_id: str | None = None
    idempotency_key: str | None = None  # a second trigger with it does nothing (ledger)
    data_interval: tuple[datetime, datetime] | None = None  # a scheduled run's interval
    retry_of: str | None = None  # with retry: the failed attempt (else the latest run)


class Job(Protocol[R_co]):
    """The body of one kind of run."""

    @property
    def target(self) -> str | None:
        """The table the run publishes into (for the commit log), if any."""
        ...

    def execute(self, session: Session, run: Run) -> R_co:
        """The run's work inside the transaction, and what it records in ``run``."""
        ...

    def failed(self, run: Run, error: BaseException) -> None:
        """After a rollback: record in ``run`` how far the work got."""
        ...

    def consequence(self) -> str:
        """What a failure left behind, in words (added to the error as a note)."""
        ...


@dataclass(frozen=True, kw_only=True)
class RunSpec:
    """Which pipeline (or model) a run belongs to, and how the ledger files it."""

    pipeline: str
    trigger: Trigger = field(default_factory=Trigger)
    trigger_type: TriggerType | None = None  # what the ledger records, if not the trigger's
    data_interval: tuple[datetime, datetime] | None = None
    dry_run: bool = False  # roll back at the end; record nothing


def run_job(site: Site, spec: RunSpec, make: Callable[[str], Job[R]]) -> R:
    """Run the job ``make(run_id)`` in the scaffold (module docstring). Once it ended, the
    process's watcher looks after SLAs and alerts, off the run's path (``alerts``)."""
    try:
        return _run_job(site, spec, make)
    finally:
        if not spec.dry_run and site.config.looked_after:
            from pipeledger.alerts import after_run  # its readers: only when there is a look

            after_run(site.config)


def _run_job(site: Site, spec: RunSpec, make: Callable[[str], Job[R]]) -> R:
    ledger = NullLedger() if spec.dry_run else site.ledger
    trigger = spec.trigger
    if trigger.idempotency_key and not ledger.recording:
        raise ConfigError(
            f"pipeline {spec.pipeline}: an idempotency key needs the ledger ([ledger] "
            "enabled = false); nothing was run"
        )
    setup = site.registration(spec.pipeline) if ledger.recording else []
    stop = Stop()
    result: R | None = None
    working = False
    try:
        with (
            ledger.run(
                spec.pipeline,
                setup=setup,
                on_cancel=lambda who: stop.stop(CancelRequested(f"cancelled by {who}")),
                **_filing(ledger, spec),
            ) as run,
            stoppable(run.run_id, stop, site.config.node(spec.pipeline).timeout),
        ):
            if STATE not in ledger.components:  # in the run: a ledger of its own records
                ensure_migrated(site.warehouse, STATE)  # a warehouse it cannot reach
            with acting_for(spec.pipeline, run.run_id):
                job = make(run.run_id)
                working = True
                result = _in_transaction(site.warehouse, job, run, spec.dry_run, stop)
    except LedgerNotWritten as exc:
        exc.add_note(
            f"pipeline {spec.pipeline} (run {exc.run_id}): its rows and watermark are "
            "committed; the next run or `pipeledger watchdog` records the run in the ledger "
            "from the warehouse's commit log"
        )
        exc.result = result
        raise
    except Exception as exc:
        if not working and not isinstance(exc, ConcurrentRunError | DuplicateRun):
            exc.add_note(  # those two say so themselves
                f"pipeline {spec.pipeline}: the run could not start; nothing was read or written"
            )
        raise
    return result


def _filing(ledger: Ledger, spec: RunSpec) -> RunFields:
    """How the ledger files the run: a retry continues the failed attempt's logical run."""
    trigger = spec.trigger
    logical_run_id, attempt = (
        ledger.next_attempt(spec.pipeline, trigger.retry_of) if trigger.retry else (None, 1)
    )
    kind = TriggerType.RETRY if trigger.retry else (spec.trigger_type or trigger.trigger_type)
    return RunFields(
        trigger_type=kind,
        logical_run_id=logical_run_id,
        attempt=attempt,
        correlation_id=trigger.correlation_id,
        parent_run_id=trigger.parent_run_id,
        triggered_by=trigger.triggered_by or who(),
        data_interval=spec.data_interval or trigger.data_interval,
        idempotency_key=trigger.idempotency_key,
    )


def _in_transaction(warehouse: Warehouse, job: Job[R], run: Run, dry_run: bool, stop: Stop) -> R:
    try:
        with warehouse.session() as session, stop.hook(session.interrupt):
            result = job.execute(session, run)
            if dry_run:
                session.mark_rollback()
            else:
                _commit_records(session, job, run)
    except CommitUnknown as exc:  # the ledger leaves the run running (ledger.ledger)
        exc.run_id = run.run_id
        exc.add_note(
            f"pipeline {run.record.pipeline} (run {run.run_id}): the outcome is unknown; the "
            "next run or `pipeledger watchdog` settles it from the warehouse"
        )
        raise
    except Exception as exc:
        error = stop.reason or exc  # stopped on purpose: that is what the ledger says
        error.add_note(job.consequence())
        if isinstance(error, PipeledgerError):
            error.run_id = run.run_id
        job.failed(run, error)
        if error is exc:
            raise
        raise error from exc
    return result


def _commit_records(session: Session, job: Job[R], run: Run) -> None:
    """The commit log's row, and the final record where the ledger shares the warehouse."""
    ledger_ops = None
    if not run.ledger.shares_transactions and run.ledger.recording:
        ledger_ops = "\n".join(op.to_json() for op in run.final_record())
    log_commit(session, run.run_id, run.record.pipeline, job.target, ledger_ops)
    run.commit_with(session)


def record_skip(site: Site, name: str, trigger: Trigger, reason: str, message: str) -> str:
    """A node that is not run (its upstream failed), recorded as a ``skipped`` run."""
    ledger = site.ledger
    setup = site.registration(name) if ledger.recording else []
    return ledger.record_skipped(
        name,
        reason=reason,
        message=message,
        setup=setup,
        trigger_type=trigger.trigger_type,
        correlation_id=trigger.correlation_id,
        triggered_by=trigger.triggered_by or who(),
    )
