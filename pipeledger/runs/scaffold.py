"""One scaffold for every kind of run: each kind supplies only its body (a :class:`Job`).

::

    open the ledger run: ``running`` is committed, a heartbeat keeps its lease
    BEGIN                                              (the warehouse)
      job.execute(session, run)    the run's work, and what it tells the ledger
      the commit log's row         (load.state: the warehouse knows the run committed)
      the run's final record       (when the ledger lives in the warehouse: same commit)
    COMMIT                         (ROLLBACK: a dry run, or any error)
    the final record in a ledger of its own (or its spool)
    SLAs and alerts looked after, in the background (pipeledger.alerts)

On failure the job says what it left behind (a note on the error, e.g. "nothing was
written; the watermark stays at ..."), records how far it got, and the error is re-raised
unchanged. A connection lost during COMMIT leaves the outcome unknown (``CommitUnknown``):
nothing is recorded then, and the watchdog settles the run from the warehouse's commit log.
A dry run records nothing in the ledger.

A run can be stopped from outside while it works (:mod:`pipeledger.common.stop`): by its
pipeline's ``timeout`` (a timer), by ``pipeledger cancel`` (the heartbeat sees the
request), or with every run of the process by SIGTERM (:func:`interrupt_all`). Its
statement is cancelled on the server, it rolls back and releases its lock, and it ends
``timed_out`` or ``cancelled`` with what it left behind said, as any failure.

The run's warehouse sessions carry its name (``pipeledger.warehouse.clients``), so that a run that
finds its pipeline locked can tell a live holder from the session of a killed one.
"""

from __future__ import annotations

import getpass
import logging
import socket
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol, TypeVar

from pipeledger.alerts import after_run
from pipeledger.common.secrets import redact
from pipeledger.common.stop import Stop, running
from pipeledger.config.model import Config, ModelConfig, SqlSource
from pipeledger.errors import (
    CancelRequested,
    CommitUnknown,
    ConcurrentRunError,
    ConfigError,
    DuplicateRun,
    LedgerNotWritten,
    PipeledgerError,
    RunTimedOut,
    WarehouseError,
)
from pipeledger.ledger.ledger import Ledger, NullLedger, PipelineInfo, Run, RunCancelled
from pipeledger.ledger.store import Op
from pipeledger.state.tables import STATE, read_commits, record_commit
from pipeledger.warehouse.adapters import open_warehouse
from pipeledger.warehouse.clients import client_name
from pipeledger.warehouse.migrations import ensure_migrated
from pipeledger.warehouse.session import Session, Warehouse

log = logging.getLogger("pipeledger.run")

R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)


@dataclass(frozen=True)
class Trigger:
    """Why a run happens, as the ledger records it."""

    trigger_type: str = "manual"
    retry: bool = False  # the next attempt of the pipeline's latest failed logical run
    correlation_id: str | None = None  # e.g. the DAG run every node run of it shares
    triggered_by: str | None = None
    parent_run_id: str | None = None
    idempotency_key: str | None = None  # a second trigger with it does nothing (ledger.api)
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


@dataclass(frozen=True)
class RunSpec:
    """Which pipeline (or model) a run belongs to, and how the ledger files it."""

    pipeline: str
    trigger: Trigger = Trigger()
    trigger_type: str | None = None  # what the ledger records, when not the trigger's own
    data_interval: tuple[datetime, datetime] | None = None
    dry_run: bool = False  # roll back at the end; record nothing


def run_job(config: Config, spec: RunSpec, make: Callable[[str, Warehouse], Job[R]]) -> R:
    """Run ``make(run_id, warehouse)`` in the scaffold (module docstring). Once it ended,
    the process's watcher looks after SLAs and alerts, off the run's path (``alerts``)."""
    try:
        return _run_job(config, spec, make)
    finally:
        if not spec.dry_run:
            after_run(config)


def _run_job(config: Config, spec: RunSpec, make: Callable[[str, Warehouse], Job[R]]) -> R:
    warehouse = open_warehouse(config.warehouse_url)
    ledger = NullLedger() if spec.dry_run else ledger_for(config, warehouse)
    trigger = spec.trigger
    if trigger.idempotency_key and not ledger.records:
        raise ConfigError(
            f"pipeline {spec.pipeline}: an idempotency key needs the ledger ([ledger] "
            "enabled = false); nothing was run"
        )
    logical_run_id, attempt = (
        ledger.next_attempt(spec.pipeline, trigger.retry_of) if trigger.retry else (None, 1)
    )
    kind = "retry" if trigger.retry else (spec.trigger_type or trigger.trigger_type)
    setup = registration(ledger, config, spec.pipeline) if ledger.records else []
    stop = Stop()
    result: R | None = None
    working = False
    try:
        with ledger.run(
            spec.pipeline, trigger_type=kind, logical_run_id=logical_run_id, attempt=attempt,
            correlation_id=trigger.correlation_id, parent_run_id=trigger.parent_run_id,
            triggered_by=trigger.triggered_by or who(),
            data_interval=spec.data_interval or trigger.data_interval, setup=setup,
            idempotency_key=trigger.idempotency_key,
            on_cancel=lambda who: stop.stop(CancelRequested(f"cancelled by {who}")),
        ) as run, _stoppable(run.run_id, stop, config.node(spec.pipeline).timeout):  # fmt: skip
            if STATE not in ledger.components:  # in the run: a ledger of its own records
                ensure_migrated(warehouse, STATE)  # a warehouse it cannot reach
            named = open_warehouse(config.warehouse_url, client_name(spec.pipeline, run.run_id))
            job = make(run.run_id, named)
            working = True
            result = _in_transaction(named, job, run, spec.dry_run, stop)
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


def _in_transaction(warehouse: Warehouse, job: Job[R], run: Run, dry_run: bool, stop: Stop) -> R:
    try:
        with warehouse.session() as session, stop.hook(session.interrupt):
            result = job.execute(session, run)
            if dry_run:
                session.mark_rollback()
            else:
                _commit_records(session, job, run)
    except CommitUnknown as exc:  # the ledger leaves the run running (ledger.api)
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


_RUNS: dict[str, Stop] = {}  # run id -> its stop, while the run is open: interrupt_all
_RUNS_LOCK = threading.Lock()
_INTERRUPTED = threading.Event()


@contextmanager
def _stoppable(run_id: str, stop: Stop, timeout: timedelta | None) -> Iterator[None]:
    """The run can be stopped from here on: by its timeout, by interrupt_all (or a
    cancel request, through the ledger's heartbeat)."""
    timer = None
    if timeout is not None:
        error = RunTimedOut(
            f"run {run_id} was stopped after its timeout of {_words(timeout)} (timeout)"
        )
        timer = threading.Timer(timeout.total_seconds(), stop.stop, [error])
        timer.daemon = True
        timer.start()
    with _RUNS_LOCK:
        if _INTERRUPTED.is_set():  # interrupted while it waited to begin
            stop.stop(RunCancelled("cancelled while it ran"))
        _RUNS[run_id] = stop
    try:
        with running(stop):
            yield
    finally:
        if timer is not None:
            timer.cancel()
        with _RUNS_LOCK:
            _RUNS.pop(run_id, None)


def _words(duration: timedelta) -> str:
    seconds = duration.total_seconds()
    return f"{seconds:g} s" if seconds < 120 else f"{seconds / 60:g} min"


def interrupt_reset() -> None:
    """A new invocation: nothing is being interrupted."""
    _INTERRUPTED.clear()


def interrupt_all() -> None:
    """Stop every run of this process (from another thread): each rolls back and is
    recorded ``cancelled``, and no retry starts."""
    _INTERRUPTED.set()
    with _RUNS_LOCK:
        stops = list(_RUNS.values())
    for stop in stops:
        stop.stop(RunCancelled("cancelled while it ran"))


def pause(seconds: float) -> bool:
    """Wait ``seconds`` (before a retry); False when this process is being interrupted."""
    return not _INTERRUPTED.wait(seconds)


def _commit_records(session: Session, job: Job[R], run: Run) -> None:
    """The commit log's row, and the final record where the ledger shares the warehouse."""
    ledger_ops = None
    if not run.ledger.shares_transactions and run.ledger.records:
        ledger_ops = "\n".join(op.to_json() for op in run.final_record())
    record_commit(session, run.run_id, run.record.pipeline, job.target, ledger_ops)
    run.commit_with(session)


class WarehouseCommits:
    """The warehouse's commit log, as the ledger's watchdog asks it (``ledger.watchdog``)."""

    def __init__(self, warehouse: Warehouse) -> None:
        self.warehouse = warehouse

    def committed(self, run_ids: Sequence[str]) -> Mapping[str, list[Op]]:
        try:
            with self.warehouse.session(write=False) as session:
                found = read_commits(session, run_ids)
        except WarehouseError as exc:  # unknown for now: the lease decides
            log.warning("could not read the warehouse's commit log: %s", exc)
            return {}
        return {
            run_id: [Op.from_json(line) for line in text.splitlines() if line.strip()]
            for run_id, text in found.items()
            if text
        }


def ledger_for(config: Config, warehouse: Warehouse | None = None) -> Ledger:
    """The ledger a config describes; a :class:`NullLedger` when ``[ledger] enabled =
    false``. Sharing the warehouse, it also migrates the watermark state when it opens."""
    settings = config.ledger
    if not settings.enabled:
        return NullLedger()
    separate = config.separate_ledger
    commits = WarehouseCommits(warehouse or open_warehouse(config.warehouse_url))
    return Ledger(
        config.ledger_url, separate=separate,
        spool=config.resolve(settings.spool), on_unavailable=settings.on_unavailable,
        lease=settings.lease, heartbeat=settings.heartbeat, environment=settings.environment,
        components=() if separate else (STATE,), commits=commits if separate else None,
        write_timeout=settings.write_timeout,
    )  # fmt: skip


def _describe_source(config: Config, name: str) -> str:
    node = config.node(name)
    if isinstance(node, ModelConfig):
        return f"model {node.sql or 'query'} ({node.materialized})"
    source = node.source
    if isinstance(source, SqlSource):
        return f"{redact(source.url)} {source.table or 'query'}"
    return f"{source.kind} {source.path}"


def registration(ledger: Ledger, config: Config, name: str) -> list[Op]:
    """Ops putting the pipeline (or model), its config version and the nodes it reads
    from in the registry."""
    node = config.node(name)
    text = node.model_dump_json()
    if isinstance(node, ModelConfig):  # the query is part of what the model is
        text += config.model_sql(name).text
    return ledger.registration(
        PipelineInfo(
            name, config_text=redact(text), description=node.description, owner=node.owner,
            source_system=_describe_source(config, name),
            target_system=f"{redact(config.warehouse_url)} {node.target}",
            freshness_sla=node.freshness_sla, depends_on=config.upstreams(name),
            max_duration=node.max_duration,
        )
    )  # fmt: skip


def record_skip(config: Config, name: str, trigger: Trigger, reason: str, message: str) -> str:
    """A node that is not run (its upstream failed), recorded as a ``skipped`` run."""
    ledger = ledger_for(config)
    setup = registration(ledger, config, name) if ledger.records else []
    return ledger.record_skipped(
        name, reason=reason, message=message, trigger_type=trigger.trigger_type,
        correlation_id=trigger.correlation_id, triggered_by=trigger.triggered_by or who(),
        setup=setup,
    )  # fmt: skip


def who() -> str:
    """user@host of whoever started a run, for the ledger's ``triggered_by``."""
    try:
        return f"{getpass.getuser()}@{socket.gethostname()}"
    except (KeyError, OSError):
        return socket.gethostname()
