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

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol, TypeVar, runtime_checkable

from pipeledger.common.columns import TableName
from pipeledger.common.stop import Stop
from pipeledger.errors import (
    CancelRequested,
    CommitUnknown,
    ConcurrentRunError,
    ConfigError,
    DuplicateRun,
    LedgerNotWritten,
    PipeledgerError,
    WarehouseError,
)
from pipeledger.ledger.ledger import Ledger, NullLedger, RunFields
from pipeledger.ledger.run import Run, RunObserver
from pipeledger.ledger.vocabulary import RunRecord, RunStatus, TriggerType
from pipeledger.publish.indexes import ensure_indexes
from pipeledger.runs.interrupt import stoppable
from pipeledger.runs.site import Site, who
from pipeledger.state.tables import STATE, log_commit
from pipeledger.warehouse.clients import acting_for
from pipeledger.warehouse.migrations import ensure_migrated
from pipeledger.warehouse.session import Session, Warehouse

log = logging.getLogger("pipeledger.run")

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
    attempt: int | None = None  # an orchestrator's try number of this task (see filing)
    lineage_parent: str | None = None  # OpenLineage parent run: "namespace/job/run_id"
    lineage_root: str | None = None  # OpenLineage root run (e.g. the Airflow DAG run)


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
    observer = None if spec.dry_run else site.observer
    opened: list[Run] = []
    try:
        with (
            ledger.run(
                spec.pipeline,
                setup=setup,
                on_cancel=lambda who: stop.stop(CancelRequested(f"cancelled by {who}")),
                **filing(ledger, spec),
            ) as run,
            stoppable(run.run_id, stop, site.config.node(spec.pipeline).timeout),
        ):
            opened.append(run)
            _tell(observer, "started", run)
            if STATE not in ledger.components:  # in the run: a ledger of its own records
                ensure_migrated(site.warehouse, STATE)  # a warehouse it cannot reach
            with acting_for(spec.pipeline, run.run_id):
                job = make(run.run_id)
                working = True
                indexes = getattr(site.config.node(spec.pipeline), "indexes", [])
                result = _in_transaction(site.warehouse, job, run, spec, stop, indexes)
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
    finally:
        if opened:  # the ledger has its final record (or left it running: outcome unknown)
            _tell(observer, "ended", opened[0])
    return result


def _tell(observer: RunObserver | None, moment: str, run: Run) -> None:
    """Tell the run's observer (lineage) that it started or ended: never the run's failure."""
    if observer is None:
        return
    try:
        getattr(observer, moment)(run)
    except Exception as exc:
        log.warning("pipeline %s: the run's observer failed: %s", run.record.pipeline, exc)


def filing(ledger: Ledger, spec: RunSpec) -> RunFields:
    """How the ledger files the run: a retry continues the failed attempt's logical run.

    An orchestrator's try number (``trigger.attempt``: Airflow's ``try_number``) is filed
    as follows. Try N > 1 of a task whose earlier try left a run in the ledger (the latest
    run of the pipeline with the same ``correlation_id``) that did not publish (failed,
    cancelled, timed out, abandoned, skipped, or still ``running`` because its worker was
    killed) continues that run's logical run: same ``logical_run_id``, ``parent_run_id``
    that run, trigger type ``retry``, and attempt N (or the next number after that run's,
    when the ledger has counted further). Otherwise the run starts a logical run of its own
    with attempt N: a try whose predecessors never reached the ledger says so by its
    number, and one after a published run is not filed as its retry (a logical run
    publishes at most once). ``extra.orchestrator_attempt`` keeps N when the ledger's
    number differs."""
    trigger = spec.trigger
    kind = spec.trigger_type or trigger.trigger_type
    parent_run_id = trigger.parent_run_id
    extra: dict[str, str | int] = {}
    if trigger.retry:
        logical_run_id, attempt = ledger.next_attempt(spec.pipeline, trigger.retry_of)
        kind = TriggerType.RETRY
    elif trigger.attempt is not None:
        earlier = _earlier_try(ledger, spec.pipeline, trigger)
        logical_run_id, attempt = None, trigger.attempt
        if earlier is not None:
            logical_run_id, parent_run_id = earlier.logical_run_id, earlier.run_id
            attempt, kind = max(trigger.attempt, earlier.attempt + 1), TriggerType.RETRY
        if attempt != trigger.attempt:
            extra["orchestrator_attempt"] = trigger.attempt
    else:
        logical_run_id, attempt = None, 1
    for name, value in (
        ("lineage_parent", trigger.lineage_parent),
        ("lineage_root", trigger.lineage_root),
    ):
        if value:
            extra[name] = value
    return RunFields(
        trigger_type=kind,
        logical_run_id=logical_run_id,
        attempt=attempt,
        correlation_id=trigger.correlation_id,
        parent_run_id=parent_run_id,
        triggered_by=trigger.triggered_by or who(),
        data_interval=spec.data_interval or trigger.data_interval,
        idempotency_key=trigger.idempotency_key,
        extra=extra or None,
    )


def _earlier_try(ledger: Ledger, pipeline: str, trigger: Trigger) -> RunRecord | None:
    """The run an earlier try of the same orchestrated task left, if it did not publish."""
    if not (trigger.attempt and trigger.attempt > 1 and trigger.correlation_id):
        return None
    if not ledger.recording:
        return None
    try:
        earlier = ledger.latest_correlated(pipeline, trigger.correlation_id)
    except WarehouseError as exc:  # a separate ledger that is down: a logical run of its own
        log.warning("pipeline %s: could not read the earlier tries of this task: %s", pipeline, exc)
        return None
    if earlier is None or earlier.status in (RunStatus.SUCCESS, RunStatus.PARTIAL):
        return None
    return earlier


def _in_transaction(
    warehouse: Warehouse,
    job: Job[R],
    run: Run,
    spec: RunSpec,
    stop: Stop,
    indexes: Sequence[Sequence[str]],
) -> R:
    try:
        with warehouse.session() as session, stop.hook(session.interrupt):
            result = job.execute(session, run)
            if spec.dry_run:
                session.mark_rollback()
            else:
                if job.target:  # the target's declared indexes (publish.indexes)
                    target = TableName.parse(job.target)
                    ensure_indexes(session, spec.pipeline, target, indexes)
                _commit_records(session, job, run, result)
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


@runtime_checkable
class Changes(Protocol):
    """A result that knows whether its run wrote anything into its target."""

    @property
    def changed_target(self) -> bool: ...


def _commit_records(session: Session, job: Job[R], run: Run, result: R) -> None:
    """The commit log's row, and the final record where the ledger shares the warehouse.
    A run that wrote nothing into its target logs no target: the models reading that
    target have nothing of it to consume, so a no-op run of a DAG stays a no-op all the
    way down (each model finds no pending run and stages nothing)."""
    ledger_ops = None
    if not run.ledger.shares_transactions and run.ledger.recording:
        ledger_ops = "\n".join(op.to_json() for op in run.final_record())
    changed = result.changed_target if isinstance(result, Changes) else True
    target = job.target if changed else None
    log_commit(session, run.run_id, run.record.pipeline, target, ledger_ops)
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


def record_rejection(site: Site, name: str, trigger: Trigger, error: PipeledgerError) -> None:
    """Work refused before it started (a backfill range past ``max_backfill``), recorded as
    a ``rejected`` run with its reason; a ledger that cannot record it says so on the
    error, which the caller raises either way."""
    ledger = site.ledger
    try:
        ledger.record_rejected(
            name,
            error,
            setup=site.registration(name) if ledger.recording else [],
            trigger_type=trigger.trigger_type,
            correlation_id=trigger.correlation_id,
            triggered_by=trigger.triggered_by or who(),
        )
    except (PipeledgerError, OSError) as problem:
        error.add_note(f"the ledger could not record this rejected work: {problem}")
