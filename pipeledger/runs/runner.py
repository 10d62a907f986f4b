"""The library face of pipeledger: run, backfill, check, replay and read state. The CLI is a
thin layer on it; every run goes through the one scaffold (:mod:`pipeledger.runs.scaffold`).
"""

from __future__ import annotations

import logging
import os
import random
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from pipeledger import alerts
from pipeledger.common.secrets import redact
from pipeledger.config.model import Config
from pipeledger.dag.executor import execute
from pipeledger.dag.graph import Graph
from pipeledger.errors import (
    BackfillRangeError,
    CancelRequested,
    CommitUnknown,
    ConcurrentRunError,
    ConfigError,
    DuplicateRun,
    GateFailed,
    LedgerNotWritten,
    PipeledgerError,
    RunTimedOut,
    Transient,
    WarehouseBusy,
)
from pipeledger.ledger.reads.queries import lateness_report
from pipeledger.ledger.tables import LEDGER
from pipeledger.runs.load.result import LoadResult
from pipeledger.runs.scaffold import (
    RunSpec,
    Trigger,
    interrupt_all,
    interrupt_reset,
    ledger_for,
    pause,
    record_skip,
    run_job,
)
from pipeledger.state.lateness import LatenessReport, report, seconds
from pipeledger.state.tables import WatermarkRow, watermarks
from pipeledger.state.watermark import Window, from_text, is_whole_day
from pipeledger.warehouse.adapters import open_warehouse
from pipeledger.warehouse.migrations import is_migrated

# The loader, the models and reconciliation (and with them pyarrow, numpy and sqlglot) are
# imported by the functions that run them, so that reading state (``pipeledger state``)
# does not load them.
if TYPE_CHECKING:
    from pipeledger.runs.load.loader import LoadRequest, ProgressCallback
    from pipeledger.runs.model.build import ModelMode, ModelResult
    from pipeledger.runs.reconcile.compare import ReconcileRequest
    from pipeledger.runs.reconcile.result import Reconciliation
    from pipeledger.runs.replay import ReplayResult

__all__ = [
    "Outcome",
    "RunFailure",
    "Trigger",
    "WatermarkRow",
    "backfill",
    "check",
    "exit_code",
    "lateness",
    "outcome_of",
    "reconcile",
    "replay",
    "run",
    "run_model",
    "run_one",
    "state",
    "watchdog",
]

log = logging.getLogger("pipeledger.run")


def prefer_system_allocator() -> None:
    """Use the C library's allocator for Arrow buffers unless ARROW_DEFAULT_MEMORY_POOL
    says otherwise. The ``pipeledger`` command calls this: streaming many short-lived
    batches, the default mimalloc pool kept 30% more memory resident (1M rows: 236 MB
    peak for a backfill against 166 MB) at the same speed."""
    if "ARROW_DEFAULT_MEMORY_POOL" not in os.environ:
        import pyarrow as pa

        pa.set_memory_pool(pa.system_memory_pool())


# -- outcomes ---------------------------------------------------------------------------

FailureStatus = Literal["failed", "skipped", "unknown", "timed_out", "cancelled"]
# what keeps a node's downstream from running: it did not publish, and may not have
DID_NOT_PUBLISH = frozenset({"failed", "unknown", "timed_out", "cancelled"})


@dataclass(frozen=True)
class RunFailure:
    """A run that did not publish: why, and the exit code it asks for."""

    pipeline: str
    status: FailureStatus
    reason: str  # error | locked | gate_halt | commit_unknown | upstream_failed | ...
    error: str
    exit_code: int
    run_id: str | None = None
    notes: tuple[str, ...] = ()  # what happens next ("nothing was written; ...")
    unexpected: str | None = None  # the exception's type, when it was not pipeledger's
    cause: BaseException | None = field(default=None, compare=False, repr=False)
    duplicate_of: str | None = None  # reason duplicate: the run that holds the key
    attempt: int = 1  # the attempt that failed last (after retries)

    def to_json(self) -> dict[str, Any]:
        payload = {
            "pipeline": self.pipeline,
            "run_id": self.run_id,
            "status": self.status,
            "reason": self.reason,
            "error": " ".join([self.error, *self.notes]),
            "exit_code": self.exit_code,
            "attempt": self.attempt,
        }
        if self.duplicate_of is not None:
            payload["duplicate_of"] = self.duplicate_of
        return payload


Outcome: TypeAlias = "LoadResult | ModelResult | RunFailure"


def failure(pipeline: str, exc: BaseException) -> RunFailure:
    """The outcome of a run that raised ``exc``."""
    ours = isinstance(exc, PipeledgerError)
    code = exc.exit_code if isinstance(exc, PipeledgerError) else 1
    status, reason = _status_reason(exc)
    return RunFailure(
        pipeline, status, reason, redact(str(exc) or type(exc).__name__), code,
        getattr(exc, "run_id", None), tuple(redact(n) for n in getattr(exc, "__notes__", [])),
        None if ours else type(exc).__name__, exc,
        duplicate_of=exc.duplicate_of if isinstance(exc, DuplicateRun) else None,
    )  # fmt: skip


def _status_reason(exc: BaseException) -> tuple[FailureStatus, str]:
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
    return "failed", _reason(exc)


def _reason(exc: BaseException) -> str:
    if not isinstance(exc, PipeledgerError):
        return "unexpected"
    return "transient" if exc.exit_code == 75 else "error"


# which code wins when one invocation has several outcomes: what a scheduler must act on first
_PRECEDENCE = (2, 1, 3, 124, 130, 6, 75, 5, 4, 0)


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


# -- runs -------------------------------------------------------------------------------


def run(
    config: Config,
    selectors: Sequence[str] = (),
    *,
    on_progress: ProgressCallback | None = None,
    trigger: Trigger | None = None,
    threads: int | None = None,
    full_refresh: bool = False,
) -> list[Outcome]:
    """Run the selected loads and models (every one when none is selected; selectors as in
    :mod:`pipeledger.dag.graph`) in dependency order, independent branches side by side on
    ``threads`` workers (default 4 on PostgreSQL, 1 on SQLite). A node whose upstream
    failed is recorded skipped (``upstream_failed``) and the other branches go on; every
    node's outcome is returned. All node runs share one ``correlation_id`` (the DAG run).
    ``full_refresh`` rebuilds the selected models from scratch."""
    graph = Graph.of(config)
    selected = graph.select(selectors)  # an unknown name is refused before anything runs
    why = trigger or Trigger()
    why = replace(why, correlation_id=why.correlation_id or str(uuid.uuid4()))
    mode: ModelMode = "full_refresh" if full_refresh else "incremental"
    interrupt_reset()
    return execute(
        graph, selected,
        run_node=lambda name: node_outcome(config, name, on_progress, why, mode),
        skip_node=lambda name: skipped_outcome(config, name, why),
        failed=did_not_publish, threads=threads or default_threads(config),
        interrupt=interrupt_all,
    )  # fmt: skip


def did_not_publish(outcome: Outcome) -> bool:
    return isinstance(outcome, RunFailure) and outcome.status in DID_NOT_PUBLISH


def default_threads(config: Config) -> int:
    return 4 if open_warehouse(config.warehouse_url).dialect.concurrent_transactions else 1


def node_outcome(
    config: Config,
    name: str,
    on_progress: ProgressCallback | None,
    trigger: Trigger,
    mode: ModelMode = "incremental",
) -> Outcome:
    """A node's run, retried after a transient failure as its ``retries`` allow; each
    attempt is a run of its own in the ledger (same ``logical_run_id``, next ``attempt``)."""
    attempt = 1
    while True:
        try:
            if name in config.models:
                return run_model(config, name, mode=mode, trigger=trigger)
            return run_one(config, name, on_progress=on_progress, trigger=trigger)
        except Exception as exc:  # every node's outcome is reported, whatever happened
            if not _retry(config, name, exc, attempt):
                outcome = outcome_of(name, exc)
                if isinstance(outcome, RunFailure):
                    outcome = replace(outcome, attempt=attempt)
                return outcome
            failed_run = getattr(exc, "run_id", None)
        # the failed attempt's logical run goes on; one the ledger never saw starts anew
        trigger = replace(trigger, retry=failed_run is not None, retry_of=failed_run)
        attempt += 1


def retryable(exc: BaseException) -> bool:
    """Transient failures only (a connection lost, a serialization failure, a deadlock, a
    lock or statement timeout, the database busy). Never: a data or config error, a gate
    halt, a run skipped for a held lock (its holder loads the rows), a COMMIT of unknown
    outcome (the watchdog settles it first), a run stopped on purpose."""
    if isinstance(exc, WarehouseBusy):
        return True
    return isinstance(exc, Transient) and not isinstance(exc, ConcurrentRunError | CommitUnknown)


def _retry(config: Config, name: str, exc: BaseException, attempt: int) -> bool:
    """Whether to make another attempt after ``exc``; waits the delay first."""
    node = config.node(name)
    if attempt > node.retries or not retryable(exc):
        return False
    if node.max_attempts_per_day is not None:
        spent = ledger_for(config).attempts_since(name, datetime.now(UTC) - timedelta(days=1))
        if spent >= node.max_attempts_per_day:
            exc.add_note(
                f"no retry: pipeline {name} made {spent} attempts in the last 24 hours "
                f"(max_attempts_per_day = {node.max_attempts_per_day})"
            )
            return False
    delay = retry_delay(node.retry_delay, node.max_retry_delay, attempt)
    log.warning(
        "pipeline %s: attempt %d failed (%s); retrying in %.1f s (attempt %d of %d)",
        name, attempt, redact(str(exc)), delay, attempt + 1, node.retries + 1,
    )  # fmt: skip
    return pause(delay)


def retry_delay(base: timedelta, cap: timedelta, attempt: int) -> float:
    """Seconds before attempt ``attempt + 1``: ``base * 2**(attempt-1)``, +-25% jitter (so
    that pipelines that failed together do not retry together), at most ``cap``."""
    seconds: float = base.total_seconds() * 2.0 ** (attempt - 1) * random.uniform(0.75, 1.25)
    return min(seconds, cap.total_seconds())


def outcome_of(pipeline: str, exc: BaseException) -> Outcome:
    """The outcome of a run that raised ``exc``: a load that committed but that the ledger
    could not record is still a success (exit 5, with its ``ledger_error``)."""
    from pipeledger.runs.model.build import ModelResult

    if isinstance(exc, LedgerNotWritten) and isinstance(exc.result, LoadResult | ModelResult):
        notes = getattr(exc, "__notes__", [])
        return exc.result.with_ledger_error(redact("\n".join([str(exc), *notes])))
    return failure(pipeline, exc)


def skipped_outcome(config: Config, name: str, trigger: Trigger) -> RunFailure:
    message = f"{name} did not run: an upstream pipeline or model failed in this run"
    try:
        run_id: str | None = record_skip(config, name, trigger, "upstream_failed", message)
    except Exception as exc:  # the ledger's trouble must not hide what happened
        message += f" (the ledger could not record it: {exc})"
        run_id = None
    return RunFailure(name, "skipped", "upstream_failed", message, 0, run_id)


def run_model(
    config: Config,
    name: str,
    *,
    mode: ModelMode = "incremental",
    window: Window | None = None,
    trigger: Trigger | None = None,
) -> ModelResult:
    """One run of model ``name``: incremental (what its upstreams changed since it last
    ran), ``full_refresh`` (rebuilt from scratch) or ``backfill`` (``window``)."""
    from pipeledger.runs.model.build import ModelRequest
    from pipeledger.runs.model.job import ModelJob

    config.model(name)
    request = ModelRequest(name, mode, window)
    kind = "backfill" if mode == "backfill" else None
    spec = RunSpec(name, trigger or Trigger(), trigger_type=kind)
    return run_job(config, spec, lambda run_id, _: ModelJob(request, config, run_id))


def run_one(
    config: Config,
    name: str,
    *,
    on_progress: ProgressCallback | None = None,
    trigger: Trigger | None = None,
) -> LoadResult:
    """One incremental run of ``name``, recorded in the ledger. ``trigger.retry`` makes it
    the next attempt of the pipeline's latest logical run, which must have failed."""
    from pipeledger.runs.load.loader import LoadRequest

    return _load(config, LoadRequest(name), RunSpec(name, trigger or Trigger()), on_progress)


def backfill(
    config: Config,
    name: str,
    start: str,
    end: str,
    *,
    on_progress: ProgressCallback | None = None,
    full_compare: bool = False,
) -> LoadResult | ModelResult:
    """Reprocess exactly ``start <= cursor <= end`` with the same merge; the live
    watermark does not move. Source rows identical to the target's (by stored fingerprint)
    are not staged unless ``full_compare`` (see ``pipeledger.runs.load.known``)."""
    from pipeledger.runs.load.loader import LoadRequest

    if name in config.models:
        window = backfill_window(start, end, None, name)
        return run_model(config, name, mode="backfill", window=window, trigger=Trigger("backfill"))
    pipeline = config.pipeline(name)
    window = backfill_window(start, end, pipeline.max_backfill, name)
    request = LoadRequest(name, "backfill", window, full_compare)
    spec = RunSpec(name, Trigger("backfill"), data_interval=_interval(window))
    return _load(config, request, spec, on_progress)


def check(config: Config, name: str) -> LoadResult:
    """A dry run: extract, stage and run the quality gate, then roll everything back; the
    ledger records nothing. Raises GateFailed (with its report) when the gate would halt."""
    from pipeledger.runs.load.loader import LoadRequest

    pipeline = config.pipeline(name)
    if pipeline.checks is None:
        raise ConfigError(f"pipeline {name} declares no [pipelines.{name}.checks]")
    history = _history(config, name)
    spec = RunSpec(name, dry_run=True)
    return _load(config, LoadRequest(name, "check", history=history), spec, None)


def replay(config: Config, name: str, *, run: str | None = None) -> ReplayResult:
    """Push pipeline ``name``'s unresolved quarantined rows (of one run, if ``run``: a run
    id or its first 8+ characters) through today's config, in one transaction, recorded
    in the ledger with ``trigger_type = "replay"`` (see :mod:`pipeledger.runs.replay`)."""
    from pipeledger.quality.quarantine import check_run_filter
    from pipeledger.runs.replay_job import ReplayJob

    config.pipeline(name)
    check_run_filter(run)
    spec = RunSpec(name, Trigger("replay"))
    return run_job(config, spec, lambda run_id, _: ReplayJob(config, name, run_id, run))


def reconcile(
    config: Config,
    name: str,
    *,
    start: str | None = None,
    end: str | None = None,
    by: str | None = None,
    repair: bool = False,
) -> Reconciliation:
    """Compare pipeline ``name``'s source with its target window by window (``by``: hour,
    day or month; a width for an integer cursor), over ``start <= cursor <= end`` when
    given, up to the watermark (see :mod:`pipeledger.runs.reconcile.compare`); recorded in the
    ledger with ``trigger_type = "reconcile"``. ``repair`` backfills exactly the windows
    that differ (in ranges no wider than ``max_backfill``), then compares again: the
    result is that second comparison, with what was found first in ``found``."""
    from pipeledger.runs.reconcile.compare import ReconcileRequest
    from pipeledger.runs.reconcile.result import Repair

    if name in config.models:
        raise ConfigError(f"{name} is a model: reconcile compares a load's source and target")
    at_most = config.pipeline(name).max_backfill
    request = ReconcileRequest(name, start, end, by)
    found = _reconcile(config, request)
    if not repair or found.status == "match":
        return found
    repairs: list[Repair] = []
    for first, last in found.grain.backfill_ranges([w.label for w in found.windows], at_most):
        try:
            done = backfill(config, name, first, last)
        except PipeledgerError as exc:
            exc.add_note(f"reconcile --repair: {len(repairs)} range(s) were backfilled first")
            raise
        c = done.counts
        repairs.append(Repair(first, last, done.run_id, c.inserted, c.updated))
    return replace(_reconcile(config, request), found=found.windows, repairs=tuple(repairs))


def _reconcile(config: Config, request: ReconcileRequest) -> Reconciliation:
    from pipeledger.runs.reconcile.job import ReconcileJob

    spec = RunSpec(request.pipeline, Trigger("reconcile"))
    return run_job(
        config, spec, lambda run_id, warehouse: ReconcileJob(request, config, run_id, warehouse)
    )


def lateness(config: Config, name: str) -> LatenessReport:
    """Late rows over pipeline ``name``'s history (see :mod:`pipeledger.state.lateness`): caught
    by the buffer and how late, missed, what the buffer costs, and a buffer that would
    have caught 99.9 % of them."""
    pipeline = config.pipeline(name)
    buffer_s = seconds(pipeline.lateness)
    warehouse = open_warehouse(config.ledger_url)
    with warehouse.session(write=False) as session:
        if not is_migrated(session, LEDGER):
            return report(name, buffer_s, [])
        return lateness_report(session, name, buffer_s)


def _load(
    config: Config, request: LoadRequest, spec: RunSpec, on_progress: ProgressCallback | None
) -> LoadResult:
    from pipeledger.runs.load.job import LoadJob
    from pipeledger.runs.load.loader import LoadRequest

    if request.mode == "incremental" and request.history is None:
        request = LoadRequest(request.pipeline, history=_history(config, request.pipeline))
    return run_job(
        config, spec,
        lambda run_id, warehouse: LoadJob(request, config, warehouse, run_id, on_progress),
    )  # fmt: skip


def _history(config: Config, name: str) -> list[int] | None:
    """Rows read by the pipeline's recent successful runs, for a learned row-count band."""
    checks = config.pipeline(name).checks
    if checks is None or checks.row_count is None or not checks.row_count.auto:
        return None
    ledger = ledger_for(config)
    return ledger.volume_history(name) if ledger.records else None


def graph(config: Config) -> Graph:
    """Loads and models as one graph (``pipeledger dag``)."""
    return Graph.of(config)


def last_runs(config: Config) -> dict[str, dict[str, Any]]:
    """Each node's latest run in the ledger: status, run id, start (empty without one)."""
    ledger = ledger_for(config)
    return ledger.latest_runs(list(config.nodes)) if ledger.records else {}


def watchdog(config: Config) -> dict[str, str]:
    """Replay the ledger's spool, then settle runs whose lease expired or whose process is
    gone: ``success`` when the warehouse shows they committed, else ``abandoned``. Then
    look after SLAs and alerts and send the due alerts (:mod:`pipeledger.alerts`)."""
    settled = ledger_for(config).watchdog()
    if alerts.watching(config):
        alerts.look_after(config)
        alerts.deliver_pending(config)
    return settled


# -- backfill ranges --------------------------------------------------------------------


def _interval(window: Window) -> tuple[datetime, datetime] | None:
    lower, upper = window.lower, window.upper
    if not isinstance(lower, date) or not isinstance(upper, date):
        return None
    end = _utc_naive(upper) + (timedelta(days=1) if is_whole_day(upper) else timedelta())
    return (_utc_naive(lower).replace(tzinfo=UTC), end.replace(tzinfo=UTC))


def backfill_window(start: str, end: str, max_backfill: timedelta | None, pipeline: str) -> Window:
    """``start <= cursor <= end``; refused when inverted or wider than ``max_backfill``. A
    date-only end covers that whole day."""
    try:
        lower, upper = from_text(start), from_text(end)
    except ValueError as exc:
        raise BackfillRangeError(
            f"pipeline {pipeline}: --start/--end must be ISO dates, timestamps or integers ({exc})"
        ) from None
    if isinstance(lower, int) != isinstance(upper, int):
        raise BackfillRangeError(f"pipeline {pipeline}: --start and --end are of different kinds")
    if isinstance(lower, int) and isinstance(upper, int):
        if lower > upper:
            raise BackfillRangeError(f"pipeline {pipeline}: --start {start} is after --end {end}")
        if max_backfill is not None:
            raise BackfillRangeError(
                f"pipeline {pipeline}: max_backfill is a duration but the range is integers"
            )
        return Window(lower=lower, upper=upper, backfill=True)
    assert isinstance(lower, date) and isinstance(upper, date)
    first, last = _utc_naive(lower), _utc_naive(upper)
    inverted = first >= last + timedelta(days=1) if is_whole_day(upper) else first > last
    if inverted:  # a date-only end covers that whole day
        raise BackfillRangeError(f"pipeline {pipeline}: --start {start} is after --end {end}")
    span = _utc_naive(upper) - _utc_naive(lower)
    if max_backfill is not None and span > max_backfill:
        raise BackfillRangeError(
            f"pipeline {pipeline}: range {start} .. {end} spans {span}, more than "
            f"max_backfill = {max_backfill}; split it into smaller backfills"
        )
    return Window(lower=lower, upper=upper, backfill=True)


def _utc_naive(value: date) -> datetime:
    """A date or timestamp as a naive UTC timestamp, so bounds of any kind compare."""
    moment = value if isinstance(value, datetime) else datetime(value.year, value.month, value.day)
    return moment.astimezone(UTC).replace(tzinfo=None) if moment.tzinfo else moment


# -- state ------------------------------------------------------------------------------


def state(config: Config, name: str | None = None) -> list[WatermarkRow]:
    """Watermarks per pipeline and partition, read without taking any lock."""
    if name is not None:
        config.pipeline(name)
    with open_warehouse(config.warehouse_url).session(write=False) as session:
        return watermarks(session, name)
