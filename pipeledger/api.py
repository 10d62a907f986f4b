"""The library face of pipeledger: every verb, and every question to the ledger.

::

    from pipeledger import api

    config = api.load_config("pipeledger.toml")
    outcomes = api.run(config)                    # every load and model, in dependency order
    api.backfill(config, "orders", "2024-03-01", "2024-03-07")
    api.status("pipeledger.toml")                 # health per pipeline, read from the ledger
    api.recent_runs("pipeledger.toml", "orders")  # its latest runs, newest first

The CLI (:mod:`pipeledger.cli`) is a thin face over these functions and nothing else: what
it prints with ``--json`` is what they return, as ``to_json()``.

A *verb* takes a validated :class:`~pipeledger.config.model.Config` (or the path of its
file) and builds what it works with once (:class:`~pipeledger.runs.site.Site`: the
warehouse and the ledger the config names), handed down to every run it makes. A *question*
(``recent_runs``, ``show``, ``status`` ...) takes a ``project``: a ``Config``, a located config
(:func:`locate`, which reads only where the warehouse and the ledger are, without
validating the rest: the quick commands' start-up), a path, or None for
``./pipeledger.toml``; it opens one read session on the ledger and answers as if nothing
had run while the ledger has no tables.

Nothing heavy is imported until a function needs it: ``import pipeledger.api`` loads
neither pyarrow, numpy, sqlglot nor pydantic.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Generic, TypeAlias, TypeVar

from pipeledger.common.durations import parse_duration as parse_duration
from pipeledger.common.durations import parse_moment as parse_moment
from pipeledger.common.durations import span as span
from pipeledger.common.secrets import redact as redact
from pipeledger.config.locate import Located as Located
from pipeledger.errors import ConfigError as ConfigError
from pipeledger.errors import GateFailed as GateFailed
from pipeledger.errors import PipeledgerError as PipeledgerError
from pipeledger.errors import RunCancelled as RunCancelled

# The answers' types, for annotations (``api.RunRow``): the faces import nothing else.
if TYPE_CHECKING:
    from pipeledger.alerts.outbox import AlertRow as AlertRow
    from pipeledger.config.model import Config as Config
    from pipeledger.ledger.access import Via
    from pipeledger.ledger.reads.access import AccessRow as AccessRow
    from pipeledger.ledger.reads.activity import VolumeDay as VolumeDay
    from pipeledger.ledger.reads.activity import WorkHour as WorkHour
    from pipeledger.ledger.reads.checks import CheckRow as CheckRow
    from pipeledger.ledger.reads.detail import AuditRow as AuditRow
    from pipeledger.ledger.reads.detail import RunDetail as RunDetail
    from pipeledger.ledger.reads.health import PipelineStatus as PipelineStatus
    from pipeledger.ledger.reads.health import VolumeAnomaly as VolumeAnomaly
    from pipeledger.ledger.reads.queries import Blocked as Blocked
    from pipeledger.ledger.reads.queries import PruneResult as PruneResult
    from pipeledger.ledger.reads.queries import TaskTrend as TaskTrend
    from pipeledger.ledger.reads.runs import RunRow as RunRow
    from pipeledger.ledger.reads.sla import Breach as Breach
    from pipeledger.ledger.reads.sla import Reliability as Reliability
    from pipeledger.ledger.reads.sla import SlaPage as SlaPage
    from pipeledger.ledger.reads.sla import SlaReport as SlaReport
    from pipeledger.ledger.tenants import ReaderGrant as ReaderGrant
    from pipeledger.ledger.vocabulary import RunRecord as RunRecord
    from pipeledger.ledger.vocabulary import RunStatus as RunStatus
    from pipeledger.ledger.vocabulary import TriggerType as TriggerType
    from pipeledger.quality.quarantine import QuarantineEntry as QuarantineEntry
    from pipeledger.runs.due import ScheduledOutcome as ScheduledOutcome
    from pipeledger.runs.load.request import ProgressCallback as ProgressCallback
    from pipeledger.runs.load.result import LoadResult as LoadResult
    from pipeledger.runs.model.build import ModelMode
    from pipeledger.runs.model.build import ModelResult as ModelResult
    from pipeledger.runs.model.check import ModelCheck as ModelCheck
    from pipeledger.runs.outcome import Outcome as Outcome
    from pipeledger.runs.outcome import RunFailure as RunFailure
    from pipeledger.runs.reconcile.result import Reconciliation as Reconciliation
    from pipeledger.runs.reconcile.result import WindowDiff as WindowDiff
    from pipeledger.runs.replay import ReplayResult as ReplayResult
    from pipeledger.runs.scaffold import Trigger as Trigger
    from pipeledger.runs.site import Site
    from pipeledger.state.lateness import LatenessReport as LatenessReport
    from pipeledger.state.snapshots import SnapshotState as SnapshotState
    from pipeledger.state.tables import WatermarkRow as WatermarkRow

__all__ = [
    "HEALTH_ORDER",
    "PAGE_LIMIT",
    "PAGE_MAX",
    "Page",
    "Project",
    "access_log",
    "accessing",
    "anomalies",
    "audit",
    "backfill",
    "blocked",
    "cancel",
    "check",
    "check_history",
    "check_models",
    "check_page",
    "count_runs",
    "exit_code",
    "graph",
    "has_ledger",
    "health_rank",
    "hold_ledger",
    "is_failure",
    "is_load",
    "lateness",
    "load_config",
    "locate",
    "migrate",
    "outcome_of",
    "page_of",
    "prune",
    "quarantine_counts",
    "quarantined",
    "query",
    "recent_alerts",
    "recent_runs",
    "reconcile",
    "replay",
    "run",
    "run_due",
    "run_model",
    "run_one",
    "schedule_status",
    "serve",
    "show",
    "sla",
    "status",
    "status_with_volumes",
    "tasks",
    "trigger",
    "volume_days",
    "wait_for_lineage",
    "watchdog",
    "watermarks",
    "work",
    "worst_first",
]

ConfigLike: TypeAlias = "Config | str | os.PathLike[str] | None"
Project: TypeAlias = "Config | Located | str | os.PathLike[str] | None"


# -- the project ------------------------------------------------------------------------


def load_config(path: str | os.PathLike[str] | None = None) -> Config:
    """Read and validate ``pipeledger.toml`` (or ``path``). Nothing else is touched."""
    from pipeledger.config.model import load_config as load

    return load(path)


def locate(path: str | os.PathLike[str] | None = None) -> Located:
    """Where ``pipeledger.toml``'s warehouse and ledger are, and the names of its nodes,
    read without validating the rest (no pydantic): what a question needs."""
    from pathlib import Path

    from pipeledger.config.locate import locate as locate_config

    return locate_config(None if path is None else Path(path))


def _config(config: ConfigLike) -> Config:
    from pipeledger.config.model import Config

    return config if isinstance(config, Config) else load_config(config)


def _site(config: ConfigLike) -> Site:
    from pipeledger.runs.site import Site

    return Site(_config(config))


def _located(project: Project) -> Located:
    if isinstance(project, Located):
        return project
    if project is None or isinstance(project, str | os.PathLike):
        return locate(project)
    return Located(
        source_file=project.source_file,
        warehouse_url=project.warehouse_url,
        ledger_url=project.ledger_url,
        pipelines=tuple(project.pipelines),
        models=tuple(project.models),
        tenant=project.ledger.tenant,
    )


def trigger(
    trigger_type: TriggerType | str = "manual",
    *,
    retry: bool = False,
    correlation_id: str | None = None,
    idempotency_key: str | None = None,
    triggered_by: str | None = None,
    data_interval: tuple[datetime | str, datetime | str] | None = None,
    attempt: int | None = None,
    lineage_parent: str | None = None,
    lineage_root: str | None = None,
) -> Trigger:
    """Why a run happens, as the ledger records it (``pipeledger run --trigger``).

    For an orchestrator (``pipeledger.airflow``, or ``run --data-interval-start ...``):
    ``data_interval`` is recorded as the run's interval (ISO 8601 text or datetimes; a time
    without an offset is UTC); an incremental run still reads from its watermark.
    ``attempt`` is the orchestrator's try number of its task, filed in the ledger as
    :func:`pipeledger.runs.scaffold.filing` says (a later try continues the logical run
    of an earlier one that did not publish). ``lineage_parent`` / ``lineage_root``:
    OpenLineage runs ``namespace/job/run_id`` the run's events name as parent and root."""
    from pipeledger.ledger.vocabulary import TriggerType
    from pipeledger.runs.scaffold import Trigger

    if retry and attempt is not None:
        raise ConfigError(
            "--retry lets the ledger number the attempt; --attempt gives the orchestrator's "
            "number: use one of them; nothing was run"
        )
    return Trigger(
        trigger_type=TriggerType(trigger_type),
        retry=retry,
        correlation_id=correlation_id,
        idempotency_key=idempotency_key,
        triggered_by=triggered_by,
        data_interval=None if data_interval is None else _interval(*data_interval),
        attempt=attempt,
        lineage_parent=lineage_parent,
        lineage_root=lineage_root,
    )


def _interval(start: datetime | str, end: datetime | str) -> tuple[datetime, datetime]:
    """A data interval from an orchestrator: aware instants, start <= end."""

    def instant(value: datetime | str, which: str) -> datetime:
        try:
            moment = value if isinstance(value, datetime) else datetime.fromisoformat(value)
        except ValueError:
            raise ConfigError(
                f"data interval {which} {value!r} is not an ISO 8601 time "
                "(e.g. 2024-06-01T03:00:00+00:00); nothing was run"
            ) from None
        return moment if moment.tzinfo else moment.replace(tzinfo=UTC)

    first, last = instant(start, "start"), instant(end, "end")
    if first > last:
        raise ConfigError(
            f"data interval start {first.isoformat()} is after its end {last.isoformat()}; "
            "nothing was run"
        )
    return first, last


# -- runs -------------------------------------------------------------------------------


def run(
    config: ConfigLike,
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
    ``full_refresh`` rebuilds the selected models from scratch. ``lineage`` events
    (``[lineage]``) are sent off the run's path: see :func:`wait_for_lineage`."""
    from pipeledger.dag.graph import Graph
    from pipeledger.runs.nodes import dag_trigger, run_nodes

    with _site(config) as site:
        selected = Graph.of(site.config).select(selectors)  # an unknown name: before anything runs
        why = dag_trigger(trigger)
        mode: ModelMode = "full_refresh" if full_refresh else "incremental"
        return run_nodes(
            site, selected, lambda _: why, mode=mode, on_progress=on_progress, threads=threads
        )


def run_one(
    config: ConfigLike,
    name: str,
    *,
    on_progress: ProgressCallback | None = None,
    trigger: Trigger | None = None,
) -> LoadResult:
    """One incremental run of load ``name``, recorded in the ledger (not retried).
    ``trigger.retry`` makes it the next attempt of the pipeline's latest logical run,
    which must have failed."""
    from pipeledger.runs.load.request import LoadRequest
    from pipeledger.runs.nodes import run_load
    from pipeledger.runs.scaffold import RunSpec, Trigger

    with _site(config) as site:
        site.config.pipeline(name)
        spec = RunSpec(pipeline=name, trigger=trigger or Trigger())
        return run_load(site, LoadRequest(pipeline=name), spec, on_progress)


def run_model(
    config: ConfigLike,
    name: str,
    *,
    full_refresh: bool = False,
    trigger: Trigger | None = None,
) -> ModelResult:
    """One run of model ``name`` (not retried): incremental (what its upstreams changed
    since it last ran), or rebuilt from scratch with ``full_refresh``."""
    from pipeledger.runs.model.check import refuse_untranslatable
    from pipeledger.runs.nodes import run_model as run_it

    mode: ModelMode = "full_refresh" if full_refresh else "incremental"
    with _site(config) as site:
        refuse_untranslatable(site.config, site.warehouse, [name])
        return run_it(site, name, mode=mode, trigger=trigger)


def backfill(
    config: ConfigLike,
    name: str,
    start: str,
    end: str,
    *,
    on_progress: ProgressCallback | None = None,
    full_compare: bool = False,
) -> LoadResult | ModelResult:
    """Reprocess exactly ``start <= cursor <= end`` with the same merge; the live
    watermark does not move. Source rows identical to the target's (by stored fingerprint)
    are not staged unless ``full_compare`` (see :mod:`pipeledger.runs.load.known`)."""
    with _site(config) as site:
        return _backfill(site, name, start, end, on_progress, full_compare)


def _backfill(
    site: Site,
    name: str,
    start: str,
    end: str,
    on_progress: ProgressCallback | None = None,
    full_compare: bool = False,
) -> LoadResult | ModelResult:
    from pipeledger.errors import BackfillRangeError
    from pipeledger.ledger.vocabulary import TriggerType
    from pipeledger.runs.load.request import LoadRequest
    from pipeledger.runs.nodes import run_load, run_model
    from pipeledger.runs.scaffold import RunSpec, Trigger, record_rejection
    from pipeledger.state.ranges import backfill_window, data_interval

    why = Trigger(trigger_type=TriggerType.BACKFILL)

    def window_of(max_backfill: timedelta | None) -> Any:
        try:
            return backfill_window(start, end, max_backfill, name)
        except BackfillRangeError as exc:  # refused work is recorded, not only said
            record_rejection(site, name, why, exc)
            raise

    if name in site.config.models:
        from pipeledger.runs.model.check import refuse_untranslatable

        refuse_untranslatable(site.config, site.warehouse, [name])
        window = window_of(None)
        return run_model(site, name, mode="backfill", window=window, trigger=why)
    pipeline = site.config.pipeline(name)
    if pipeline.cursor is None:
        raise ConfigError(
            f"pipeline {name} has no cursor, so no range to backfill: `pipeledger run {name}` "
            f"{_whole_read(pipeline.sync)}; nothing was run"
        )
    window = window_of(pipeline.max_backfill)
    request = LoadRequest(pipeline=name, mode="backfill", window=window, full_compare=full_compare)
    spec = RunSpec(pipeline=name, trigger=why, data_interval=data_interval(window))
    return run_load(site, request, spec, on_progress)


def _whole_read(sync: str) -> str:
    """What a run of a pipeline without a cursor reads, in words."""
    if sync == "full":
        return "compares the whole source with the target"
    return "reads every new or changed file whole"


def check(config: ConfigLike, name: str) -> LoadResult:
    """A dry run: extract, stage and run the quality gate, then roll everything back; the
    ledger records nothing. Raises GateFailed (with its report) when the gate would halt."""
    from pipeledger.runs.load.request import LoadRequest
    from pipeledger.runs.nodes import recent_counts, run_load
    from pipeledger.runs.scaffold import RunSpec

    with _site(config) as site:
        if site.config.pipeline(name).checks is None:
            raise ConfigError(f"pipeline {name} declares no [pipelines.{name}.checks]")
        request = LoadRequest(pipeline=name, mode="check", recent_counts=recent_counts(site, name))
        return run_load(site, request, RunSpec(pipeline=name, dry_run=True))


def check_models(config: ConfigLike, names: Sequence[str] = ()) -> list[ModelCheck]:
    """Check models without running them (``pipeledger check``; every model when ``names``
    is empty): each one's SQL in the warehouse's own SQL (translated for the embedded
    SQLite, or refused naming the construct and line), its output columns and types, and
    the database's plan of it (``EXPLAIN``). Nothing is written."""
    from pipeledger.runs.model.check import check_models as check_them

    with _site(config) as site:
        for name in names:
            site.config.model(name)
        return check_them(site.config, site.warehouse, list(names) or sorted(site.config.models))


def replay(config: ConfigLike, name: str, *, run: str | None = None) -> ReplayResult:
    """Push pipeline ``name``'s unresolved quarantined rows (of one run, if ``run``: a run
    id or its first 8+ characters) through today's config, in one transaction, recorded
    in the ledger with ``trigger_type = "replay"`` (see :mod:`pipeledger.runs.replay`)."""
    from pipeledger.ledger.vocabulary import TriggerType
    from pipeledger.quality.quarantine import check_run_filter
    from pipeledger.runs.replay import ReplayJob
    from pipeledger.runs.scaffold import RunSpec, Trigger, run_job

    with _site(config) as site:
        site.config.pipeline(name)
        check_run_filter(run)
        spec = RunSpec(pipeline=name, trigger=Trigger(trigger_type=TriggerType.REPLAY))
        return run_job(site, spec, lambda run_id: ReplayJob(site, name, run_id, run))


def reconcile(
    config: ConfigLike,
    name: str,
    *,
    start: str | None = None,
    end: str | None = None,
    by: str | None = None,
    repair: bool = False,
) -> Reconciliation:
    """Compare pipeline ``name``'s source with its target window by window (``by``: hour,
    day or month; a width for an integer cursor), over ``start <= cursor <= end`` when
    given, up to the watermark (see :mod:`pipeledger.runs.reconcile.compare`); recorded in
    the ledger with ``trigger_type = "reconcile"``. ``repair`` backfills exactly the
    windows that differ (in ranges no wider than ``max_backfill``), then compares again:
    the result is that second comparison, with what was found first in ``found``."""
    from pipeledger.runs.reconcile.compare import ReconcileRequest
    from pipeledger.runs.reconcile.job import reconciled
    from pipeledger.runs.reconcile.result import Repair

    with _site(config) as site:
        if name in site.config.models:
            raise ConfigError(f"{name} is a model: reconcile compares a load's source and target")
        at_most = site.config.pipeline(name).max_backfill
        request = ReconcileRequest(pipeline=name, start=start, end=end, by=by)
        found = reconciled(site, request)
        if not repair or found.status == "match":
            return found
        repairs: list[Repair] = []
        ranges: list[tuple[str | None, str | None]] = [(None, None)]  # no cursor: a whole run
        if not found.grain.is_whole:
            labels = [w.label for w in found.windows]
            ranges = [*found.grain.backfill_ranges(labels, at_most)]
        for first, last in ranges:
            try:
                done = _repair(site, name, first, last)
            except PipeledgerError as exc:
                exc.add_note(f"reconcile --repair: {len(repairs)} range(s) were backfilled first")
                raise
            c = done.counts
            repairs.append(
                Repair(
                    start=first,
                    end=last,
                    run_id=done.run_id,
                    rows_inserted=c.inserted,
                    rows_updated=c.updated,
                    rows_deleted=c.deleted,
                )
            )
        return replace(reconciled(site, request), found=found.windows, repairs=tuple(repairs))


def _repair(site: Site, name: str, first: str | None, last: str | None) -> LoadResult | ModelResult:
    """One repair of ``reconcile --repair``: a backfill of a range, or (no cursor) a run,
    which compares and applies the whole snapshot or reads the new files."""
    from pipeledger.runs.load.request import LoadRequest
    from pipeledger.runs.nodes import run_load
    from pipeledger.runs.scaffold import RunSpec

    if first is None or last is None:
        return run_load(site, LoadRequest(pipeline=name), RunSpec(pipeline=name))
    return _backfill(site, name, first, last)


def lateness(config: ConfigLike, name: str) -> LatenessReport:
    """Late rows over pipeline ``name``'s history (see :mod:`pipeledger.state.lateness`):
    caught by the buffer and how late, missed, what the buffer costs, and a buffer that
    would have caught 99.9 % of them."""
    from pipeledger.ledger.reads.queries import lateness_report
    from pipeledger.state.lateness import report, seconds

    config = _config(config)
    pipeline = config.pipeline(name)
    if pipeline.cursor is None:
        raise ConfigError(
            f"pipeline {name} has no cursor: no row can be late, since every run "
            f"{_whole_read(pipeline.sync)}"
        )
    buffer_s = seconds(pipeline.lateness)
    with _reading(config, "lateness", pipeline=name) as session:
        if session is None:
            return report(name, buffer_s, [])
        return lateness_report(session, name, buffer_s)


def watermarks(project: Project = None, name: str | None = None) -> list[WatermarkRow]:
    """Watermarks per pipeline and partition (``pipeledger state``), read without taking
    any lock."""
    from pipeledger.state.tables import watermarks as read
    from pipeledger.warehouse.adapters import open_warehouse

    located = _located(project)
    if name is not None:
        located.check_pipeline(name)
    warehouse = open_warehouse(located.warehouse_url, tenant=located.tenant)
    with warehouse.session(write=False) as session:
        rows = read(session, name)
    _answered_elsewhere(located, "watermarks", name)
    return rows


def quarantined(
    config: ConfigLike, name: str, *, run: str | None = None, include_resolved: bool = False
) -> list[QuarantineEntry]:
    """What the quality gate set aside for pipeline ``name`` (unresolved unless
    ``include_resolved``), oldest first; of one run with ``run``."""
    from pipeledger.quality.quarantine import quarantined as entries

    config = _config(config)
    found = entries(config, name, run=run, include_resolved=include_resolved)
    _answered_elsewhere(config, "quarantined", name)
    return found


def wait_for_lineage(timeout: float | None = None) -> None:
    """Wait (at most ``timeout`` s, default ``[lineage] timeout``) until this process's
    OpenLineage events are delivered, or spooled for the next run to send: for a process
    that ends without running its exit handlers (an Airflow task's)."""
    from pipeledger import lineage

    lineage.wait(timeout)


def quarantine_counts(config: ConfigLike) -> dict[str, int]:
    """Per pipeline with checks, how many of its quarantined rows are unresolved."""
    from pipeledger.quality.quarantine import open_counts

    return open_counts(_config(config))


def outcome_of(pipeline: str, exc: BaseException) -> Outcome:
    """The outcome of a run that raised ``exc`` (a :class:`RunFailure`, or the result of
    a run that committed but that the ledger could not record)."""
    from pipeledger.runs.outcome import outcome_of as of

    return of(pipeline, exc)


def exit_code(outcomes: Sequence[Outcome], strict: bool = False) -> int:
    """The process exit code for ``outcomes`` (README: exit codes); ``strict`` makes
    quarantined rows exit 3."""
    from pipeledger.runs.outcome import exit_code as code

    return code(outcomes, strict)


def health_rank(level: str) -> int:
    """The rank of a health word (``HEALTHY`` 0 .. ``CRITICAL`` 3), for ``--fail-on``."""
    from pipeledger.ledger.reads.answers import Health

    return Health(level.upper()).rank


def is_failure(outcome: object) -> bool:
    """Whether ``outcome`` is a :class:`RunFailure` (a run that did not publish)."""
    from pipeledger.runs.outcome import RunFailure

    return isinstance(outcome, RunFailure)


def is_load(outcome: object) -> bool:
    """Whether ``outcome`` is a load's result (else a model's, or a failure)."""
    from pipeledger.runs.load.result import LoadResult

    return isinstance(outcome, LoadResult)


_GRAPHS: dict[int, Any] = {}  # id(config) -> its Graph, while that config lives


def _graph_of(config: Config) -> Any:
    """The config's graph, made once per config object: its models' SQL is parsed to find
    what they read (a config of 100 models takes a third of a second), and a long-lived
    reader (the dashboard) asks again on every page with the same config."""
    import weakref

    from pipeledger.dag.graph import Graph

    key = id(config)
    if key not in _GRAPHS:
        _GRAPHS[key] = Graph.of(config)
        weakref.finalize(config, _GRAPHS.pop, key, None)
    return _GRAPHS[key]


def graph(config: ConfigLike) -> dict[str, Any]:
    """Loads and models as one graph (``pipeledger dag``): nodes, edges, each node's last
    run."""
    from pipeledger.ledger.reads.recent import latest_runs

    with _site(config) as site:
        last: dict[str, dict[str, Any]] = {}
        if site.ledger.recording:
            with _reading(site.config, "graph") as session:
                last = latest_runs(session, list(site.config.nodes)) if session else {}
        result: dict[str, Any] = _graph_of(site.config).to_json(last)
        return result


# -- running unattended -----------------------------------------------------------------


def watchdog(config: ConfigLike) -> dict[str, str]:
    """Replay the ledger's spool, then settle runs whose lease expired or whose process is
    gone: ``success`` when the warehouse shows they committed, else ``abandoned``. Then
    send the spooled OpenLineage events (with ``[lineage]``), look after SLAs and alerts
    and send the due alerts (:mod:`pipeledger.alerts`)."""
    with _site(config) as site:
        return _watchdog(site)


def _watchdog(site: Site) -> dict[str, str]:
    from pipeledger import alerts, lineage

    settled = site.ledger.watchdog()
    lineage.drain(site.config)
    if alerts.watching(site.config):
        alerts.look_after(site.config)
        alerts.deliver_pending(site.config)  # one round: bounded, never raises
    return settled


def _serve_upkeep(site: Site) -> dict[str, str]:
    """``serve``'s wake-up: the watchdog now, then SLAs and alerts in the background, so
    that no delivery is ever in the way of the runs that are due."""
    from pipeledger import alerts

    settled = site.ledger.watchdog()
    alerts.catch_up(site.config)
    return settled


def run_due(
    config: ConfigLike,
    selectors: Sequence[str] = (),
    *,
    on_progress: ProgressCallback | None = None,
    threads: int | None = None,
) -> list[ScheduledOutcome]:
    """Run every interval the schedules say is due now, oldest first (``pipeledger run
    --due``; see :func:`pipeledger.runs.due.run_due`)."""
    from pipeledger.runs.due import run_due as due

    with _site(config) as site:
        return due(site, selectors, on_progress=on_progress, threads=threads)


def schedule_status(
    config: ConfigLike, now: datetime | None = None, selectors: Sequence[str] = ()
) -> list[dict[str, Any]]:
    """Each scheduled node (of ``selectors``, default all): its schedule, next firing,
    latest scheduled run and what is overdue (``pipeledger schedule``)."""
    from pipeledger.runs.due import schedule_status as status

    with _site(config) as site:
        found = status(site, now, selectors)
        _answered_elsewhere(site.config, "schedule_status")
        return found


def serve(
    config: ConfigLike,
    report: Callable[[list[ScheduledOutcome]], None],
    *,
    poll: timedelta = timedelta(minutes=1),
    threads: int | None = None,
) -> None:
    """Run the schedules until interrupted (``pipeledger serve``): each wake-up runs the
    watchdog, then what is due, while SLAs and alerts are looked after and delivered in
    the background; ``report`` is told each round's outcomes."""
    from pipeledger.runs.due import serve as loop

    with _site(config) as site:
        loop(site, report, lambda: _serve_upkeep(site), poll=poll, threads=threads)


@contextmanager
def terminating() -> Iterator[Callable[[], None]]:
    """For the invocation in the block, the function a SIGTERM or Ctrl-C handler calls
    before it raises :class:`RunCancelled` or ``KeyboardInterrupt``: this invocation is
    being stopped, so no run starts or retries from then on and :func:`serve` returns
    instead of sleeping again, even when the exception is lost on its way out. It is safe
    in a signal handler (it imports nothing and takes no lock). Leaving the block undoes
    it, for a program that goes on (a test, an embedding application)."""
    from pipeledger.runs import interrupt

    try:
        yield interrupt.terminate
    finally:
        interrupt.terminate_reset()


def cancel(config: ConfigLike, run_id: str, reason: str | None = None) -> RunRecord:
    """Ask a running run to stop, from any process or host (the id may be its first 8+
    characters); return the run as the ledger has it just after the request. A run that
    is still ``running`` sees the request at its next heartbeat, rolls back and ends
    ``cancelled``, unless it commits first (then it ends as it would have, and its
    ``extra.cancel`` says the request did not take effect); one that ended meanwhile is
    returned with its status."""
    from pipeledger.runs.due import needs_ledger
    from pipeledger.runs.site import who

    with _site(config) as site:
        needs_ledger(site, "`pipeledger cancel`")
        record = site.ledger.request_cancel(run_id, requested_by=who(), reason=reason)
        try:
            return site.ledger.get_run(record.run_id)
        except PipeledgerError:  # the run's state cannot be read again: as it was a moment ago
            return record


# -- the ledger's questions -------------------------------------------------------------


@contextmanager
def _reading(
    project: Project,
    question: str,
    *,
    pipeline: str | None = None,
    current: bool = False,
    write: bool = False,
) -> Iterator[Any]:
    """A session on the project's ledger for ``question`` (about ``pipeline``), which the
    access audit records as a read unless it ``write``s."""
    from pipeledger.ledger.access import asking
    from pipeledger.ledger.reads import reading

    located = _located(project)
    with (
        asking(question, pipeline) as access,
        reading(
            located.ledger_url,
            current=current,
            write=write,
            access=None if write else access,
            tenant=located.tenant,
        ) as session,
    ):
        yield session


@contextmanager
def shared_reads() -> Iterator[None]:
    """The ledger questions asked in the block (on this thread) share one read session per
    ledger: one connection, not one per question (the dashboard: one per page)."""
    from pipeledger.ledger.reads import shared_reads as shared

    with shared():
        yield


def _answered_elsewhere(project: Project, question: str, pipeline: str | None = None) -> None:
    """Record a read that the warehouse answered (watermarks, quarantine) or the
    scheduler's own sessions did, in a ledger session of its own: a ledger that cannot
    be reached now (a separate one, down) leaves that read answered and unrecorded."""
    try:
        with _reading(project, question, pipeline=pipeline):
            pass
    except PipeledgerError as exc:
        import logging  # only then: `pipeledger state` imports no logging

        logging.getLogger("pipeledger.ledger.access").debug(
            "the ledger did not record this read (%s); the read answered all the same", exc
        )


@contextmanager
def accessing(
    what: str,
    *,
    via: Via = "api",
    pipeline: str | None = None,
    client: str | None = None,
    clock: Callable[[], datetime] | None = None,
) -> Iterator[None]:
    """The questions asked in the block are one read, recorded in the ledger's access audit
    as ``what`` (a command, a page path) through ``via`` (``cli``, ``api``, ``web``), about
    ``pipeline``, from ``client`` (an address), reckoned in ``clock``'s time (default the
    real UTC time). Without it each question is a read of its own (``api.status``)."""
    from pipeledger.ledger.access import Reader, utc_now
    from pipeledger.ledger.access import accessing as open_access

    reader = Reader(via=via, what=what, pipeline=pipeline, client=client, clock=clock or utc_now)
    with open_access(reader):
        yield


def access_log(
    project: Project = None,
    *,
    since: datetime | None = None,
    pipeline: str | None = None,
    limit: int = 1000,
    now: datetime | None = None,
) -> list[AccessRow]:
    """Who read what, when (``pipeledger ledger access``): the tenant's reads of the ledger
    per minute and reader since ``since`` (default: the last 24 hours), about ``pipeline``
    only when given, newest first, at most ``limit`` rows."""
    from pipeledger.ledger.reads.access import access_rows

    start = since or _now(now) - timedelta(days=1)
    located = _located(project)
    with _reading(located, "access_log", pipeline=pipeline) as session:
        if session is None:
            return []
        return access_rows(session, located.tenant, start, pipeline, limit)


def hold_ledger(project: Project = None) -> Callable[[], None]:
    """Keep one idle connection to the project's ledger database open until the returned
    function is called: for a long-lived reader (the dashboard). A SQLite file whose last
    connection closes syncs what was written to it meanwhile, the access audit's records
    of a page included: with a connection held, pages do not pay that sync (SQLite's own
    checkpoints, every 1000 pages of its log, and the last close still make them durable).
    On PostgreSQL it is one idle connection. A ledger that cannot be opened now is not
    held (nothing fails)."""
    from pipeledger.warehouse.adapters import open_warehouse

    try:
        warehouse = open_warehouse(_located(project).ledger_url)
    except PipeledgerError:  # a config being edited: the pages say what is wrong
        return lambda: None
    try:
        with warehouse.session(write=False) as session:
            session.mark_rollback()  # opened for its connection, not to read anything
    except PipeledgerError:
        warehouse.close()
    return warehouse.close


def _now(now: datetime | None) -> datetime:
    return now or datetime.now(UTC)


def has_ledger(project: Project = None) -> bool:
    """Whether the ledger has its tables (anything was ever recorded)."""
    with _reading(project, "has_ledger") as session:
        return session is not None


def recent_runs(
    project: Project = None,
    pipeline: str | None = None,
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    status: RunStatus | str | None = None,
    trigger_type: TriggerType | str | None = None,
    logical_run_id: str | None = None,
    correlation_id: str | None = None,
    before: str | None = None,
    limit: int = 50,
) -> list[RunRow]:
    """Recent runs (of ``pipeline``, default all), newest first (``pipeledger runs``):
    started in ``[since, until)``, in ``status``, of ``trigger_type``, the attempts of one
    logical run, the nodes of one DAG run (``correlation_id``); ``before`` (a run id, or
    its first 8+ characters): the page after that run."""
    from pipeledger.ledger.reads.runs import RunFilter, list_runs

    with _reading(project, "recent_runs", pipeline=pipeline) as session:
        if session is None:
            return []
        where = RunFilter(
            pipeline=pipeline,
            since=since,
            until=until,
            status=status,
            trigger_type=trigger_type,
            logical_run_id=logical_run_id,
            correlation_id=correlation_id,
            before=_page_start(session, before),
        )
        return list_runs(session, limit=limit, where=where)


def _page_start(session: Any, run_id: str | None) -> tuple[datetime, str] | None:
    if run_id is None:  # the first page: no run to look up
        return None
    from pipeledger.ledger.reads.detail import match_run_id
    from pipeledger.ledger.reads.runs import run_start

    full = match_run_id(session, run_id)
    start = run_start(session, full) if full else None
    if start is None:
        raise PipeledgerError(f"--before {run_id!r}: no run with that id in the ledger")
    return start


def count_runs(
    project: Project = None,
    pipeline: str | None = None,
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    status: RunStatus | str | None = None,
    trigger_type: TriggerType | str | None = None,
) -> int:
    """How many runs :func:`recent_runs` would list with these filters and no limit."""
    from pipeledger.ledger.reads.runs import RunFilter
    from pipeledger.ledger.reads.runs import count_runs as count

    where = RunFilter(
        pipeline=pipeline, since=since, until=until, status=status, trigger_type=trigger_type
    )
    with _reading(project, "count_runs", pipeline=pipeline) as session:
        return count(session, where) if session else 0


def show(project: Project, run_id: str) -> RunDetail:
    """One run with its tasks, audit events and snapshots (``run_id``: a run id, or its
    first 8+ characters); a PipeledgerError (exit 1) when the ledger has no such run."""
    from pipeledger.ledger.access import about
    from pipeledger.ledger.reads.detail import show_run

    with _reading(project, "show") as session:
        detail = show_run(session, run_id) if session else None
        about(detail.run.pipeline if detail else None)
    if detail is None:
        raise PipeledgerError(f"no run with id {run_id!r} in the ledger")
    return detail


def status(
    project: Project = None, *, now: datetime | None = None, pipeline: str | None = None
) -> list[PipelineStatus]:
    """Health per pipeline (or of ``pipeline`` only): 7-day success rate, freshness,
    volume anomaly."""
    from pipeledger.ledger.reads.health import pipeline_status

    with _reading(project, "status", pipeline=pipeline, current=True) as session:
        return pipeline_status(session, _now(now), pipeline=pipeline) if session else []


def anomalies(
    project: Project = None, pipeline: str | None = None, *, now: datetime | None = None
) -> list[VolumeAnomaly]:
    """Rows written in each pipeline's latest interval against its last 30 days."""
    from pipeledger.ledger.reads.health import volume_anomalies

    with _reading(project, "anomalies", pipeline=pipeline, current=True) as session:
        return volume_anomalies(session, _now(now), pipeline) if session else []


HEALTH_ORDER = ("CRITICAL", "DEGRADED", "UNKNOWN", "HEALTHY")  # worst first
PAGE_LIMIT = 50  # rows of a page of ``status`` (the dashboard's, and ``--limit``'s default)
PAGE_MAX = 1000  # the most rows one page may ask for


def worst_first(health: str, name: str) -> tuple[int, str]:
    """The overview's order: by health word, worst first, then by name."""
    return HEALTH_ORDER.index(health), name


def status_with_volumes(
    project: Project = None, *, now: datetime | None = None, pipeline: str | None = None
) -> list[tuple[PipelineStatus, VolumeAnomaly | None]]:
    """Health per pipeline (:func:`status`) with its volume verdict (what :func:`anomalies`
    answers for it; None before its first volume sample), worst first (:func:`worst_first`):
    both from one query, the overview's lines, ``pipeledger status`` and ``/api/status``."""
    from pipeledger.ledger.reads.health import status_with_volumes as both

    with _reading(project, "status", pipeline=pipeline, current=True) as session:
        found = both(session, _now(now), pipeline=pipeline) if session else []
    return sorted(found, key=lambda pair: worst_first(pair[0].health.value, pair[0].pipeline))


T = TypeVar("T")


@dataclass(frozen=True)
class Page(Generic[T]):
    """Page ``number`` (from 1) of ``limit`` items of an ordered answer of ``total``."""

    items: list[T]
    number: int
    limit: int
    total: int

    @property
    def pages(self) -> int:
        """How many pages the whole answer fills (at least 1, an empty one)."""
        return max(1, -(-self.total // self.limit))

    @property
    def first(self) -> int:
        """The index (from 0) of the page's first item in the whole answer."""
        return (self.number - 1) * self.limit

    @property
    def has_next(self) -> bool:
        return self.number * self.limit < self.total

    @property
    def has_prev(self) -> bool:
        return self.number > 1


def check_page(page: int, limit: int) -> None:
    """A ConfigError, naming the bad value, when ``page`` is below 1 or ``limit`` outside
    1..:data:`PAGE_MAX` (before anything is read)."""
    if not 1 <= limit <= PAGE_MAX:
        raise ConfigError(f"limit {limit}: a whole number from 1 to {PAGE_MAX}")
    if page < 1:
        raise ConfigError(f"page {page}: a whole number from 1")


def page_of(items: Sequence[T], page: int = 1, limit: int = PAGE_LIMIT) -> Page[T]:
    """Page ``page`` of ``limit`` of ``items`` (in their order); :func:`check_page`'s
    ConfigError for a bad one. A page past the last is empty (its total still counts
    every item)."""
    check_page(page, limit)
    start = (page - 1) * limit
    return Page(list(items[start : start + limit]), page, limit, len(items))


def sla(project: Project = None, *, now: datetime | None = None) -> SlaReport:
    """SLA breaches of the last 30 days (and open ones), and per pipeline its success rate,
    mean time to recovery and p95 duration over 7 and 30 days."""
    from pipeledger.ledger.reads.sla import SlaReport, sla_report

    with _reading(project, "sla", current=True) as session:
        return sla_report(session, _now(now)) if session else SlaReport((), ())


def sla_page(project: Project = None, *, now: datetime | None = None, limit: int = 50) -> SlaPage:
    """The dashboard's alerts page: the breaches of :func:`sla`, and its reliability rows
    of the ``limit`` least reliable pipelines (still failing first, then by the 7-day
    success rate), worst first, ranked from the daily rollup: the runs of those pipelines
    are read, not every pipeline's 30 days."""
    from pipeledger.ledger.reads.sla import SlaPage
    from pipeledger.ledger.reads.sla import sla_page as page

    with _reading(project, "sla", current=True) as session:
        return page(session, _now(now), limit) if session else SlaPage((), (), 0)


def recent_alerts(
    project: Project = None, *, since: datetime | None = None, run_id: str | None = None
) -> list[AlertRow]:
    """Alerts raised since ``since`` (default: 7 days ago) and whether each was delivered;
    only those about run ``run_id``, when given."""
    from pipeledger.alerts.outbox import recent

    start = since or datetime.now(UTC) - timedelta(days=7)
    with _reading(project, "recent_alerts", current=True) as session:
        return recent(session, start, run_id) if session else []


def check_history(
    project: Project, pipeline: str, *, since: datetime | None = None, limit: int = 500
) -> list[CheckRow]:
    """The quality gate's results for ``pipeline`` as the ledger recorded them, run by run
    (since ``since``), newest first (``pipeledger checks``)."""
    from pipeledger.ledger.reads.checks import check_history as history

    with _reading(project, "check_history", pipeline=pipeline) as session:
        return history(session, pipeline, since, limit) if session else []


def work(
    project: Project = None, *, now: datetime | None = None, hours: int = 24
) -> list[WorkHour]:
    """Runs per UTC hour of the last ``hours`` and the state each is in now (see
    :mod:`pipeledger.ledger.reads.activity`)."""
    from pipeledger.ledger.reads.activity import work_by_state

    with _reading(project, "work") as session:
        return work_by_state(session, _now(now), hours) if session else []


def volume_days(
    project: Project = None,
    pipeline: str | None = None,
    *,
    now: datetime | None = None,
    days: int = 30,
    among: Sequence[str] = (),
) -> list[VolumeDay]:
    """Per pipeline (or only ``pipeline``, or those ``among``) and UTC day of the last
    ``days``: its intervals and the rows they wrote (the days behind :func:`anomalies`)."""
    from pipeledger.ledger.reads.activity import volume_days as days_of

    with _reading(project, "volume_days", pipeline=pipeline, current=True) as session:
        return days_of(session, _now(now), pipeline, days, among) if session else []


TASK_DAYS = 14  # days of ``tasks``, today included
TASK_LIMIT = 100  # tasks (pipeline and task) in ``tasks``: those that took longest


def tasks(
    project: Project = None,
    pipeline: str | None = None,
    *,
    now: datetime | None = None,
    days: int = TASK_DAYS,
    limit: int | None = TASK_LIMIT,
) -> list[TaskTrend]:
    """Per task and day (``days`` days): runs, mean and longest duration, mean rows out;
    of the ``limit`` tasks whose longest run in the window took longest (None: every
    task), each with all its days, ordered by pipeline, task and day."""
    from pipeledger.ledger.reads.queries import task_trends

    if days < 1 or (limit is not None and limit < 1):
        raise ConfigError(
            f"tasks: days ({days}) and limit ({limit}) must each be at least 1; nothing was read"
        )
    with _reading(project, "tasks", pipeline=pipeline) as session:
        return task_trends(session, _now(now), pipeline, days, limit) if session else []


def audit(project: Project, table: str, *, since: datetime | None = None) -> list[AuditRow]:
    """Audit events about one target table, newest first."""
    from pipeledger.ledger.reads.detail import audit_trail

    with _reading(project, "audit") as session:
        return audit_trail(session, table, since) if session else []


def blocked(project: Project = None, *, now: datetime | None = None) -> list[Blocked]:
    """Pipelines waiting on an upstream that is not fresh."""
    from pipeledger.ledger.reads.queries import blocked_pipelines

    with _reading(project, "blocked") as session:
        return blocked_pipelines(session, _now(now)) if session else []


def query(
    project: Project, sql: str, params: Sequence[Any] = (), *, ledger: bool = False
) -> list[tuple[Any, ...]]:
    """The rows of ``sql`` (a read-only query with bound ``params``) on the warehouse, or on
    the ledger's database with ``ledger``: for checks of your own (the demo checks itself
    with it). Every row is returned: keep the result small."""
    from pipeledger.warehouse.adapters import open_warehouse

    located = _located(project)
    url = located.ledger_url if ledger else located.warehouse_url
    with open_warehouse(url, tenant=located.tenant).session(write=False) as session:
        session.mark_rollback()
        found = session.query(sql, params)
    if ledger:  # a read of the ledger like any other (its own session wrote nothing)
        _answered_elsewhere(located, "query")
    return found


# -- looking after the ledger -----------------------------------------------------------


def prune(project: Project, older_than: timedelta, *, dry_run: bool = False) -> PruneResult | None:
    """Delete runs that ended more than ``older_than`` ago, with their tasks, events,
    snapshots and check results (keeps running runs and each pipeline's last success);
    None while the ledger has no tables. ``dry_run``: count, then roll back."""
    from pipeledger.ledger.reads.queries import prune as delete

    with _reading(project, "prune", write=True) as session:
        if session is None:
            return None
        result = delete(session, older_than, datetime.now(UTC))
        if dry_run:
            session.mark_rollback()
        return result


def migrate(config: ConfigLike) -> dict[str, list[int]]:
    """Create or upgrade the ledger's tables (the ledger's database) and the watermark
    state (the warehouse); the versions each applied."""
    from pipeledger.ledger.tables import LEDGER
    from pipeledger.state.tables import STATE
    from pipeledger.warehouse.migrations import migrate as apply

    with _site(config) as site:
        applied: dict[str, list[int]] = {}
        for component, warehouse in ((LEDGER, site.ledger.store.database), (STATE, site.warehouse)):
            with warehouse.session() as session:
                applied[component.name] = apply(session, component)
        return applied


def grant_reader(config: ConfigLike, role: str, tenant: str) -> ReaderGrant:
    """Let PostgreSQL role ``role`` read ``tenant``'s ledger rows, and no other tenant's
    (``pipeledger ledger grant-reader``): its group role ``pipeledger_tenant_<tenant>`` is
    made when missing (NOLOGIN), may read the ledger's tables and views, and is granted to
    ``role``. Run it as the ledger's owner (or a role that may create roles and grant)."""
    from pipeledger.config.locate import check_tenant
    from pipeledger.ledger.tables import LEDGER
    from pipeledger.ledger.tenants import grant_reader as grant
    from pipeledger.warehouse.migrations import migrate as apply

    check_tenant(tenant, "--tenant")
    database = _site(config).ledger.store.database
    with database.session() as session:
        apply(session, LEDGER)  # the policies the grant relies on
        return grant(session, role, tenant)


_LAZY = {
    "LoadResult": "pipeledger.runs.load.result",
    "ModelResult": "pipeledger.runs.model.build",
    "ModelCheck": "pipeledger.runs.model.check",
    "RunFailure": "pipeledger.runs.outcome",
    "ScheduledOutcome": "pipeledger.runs.due",
    "Trigger": "pipeledger.runs.scaffold",
    "Config": "pipeledger.config.model",
    "RunStatus": "pipeledger.ledger.vocabulary",
    "TriggerType": "pipeledger.ledger.vocabulary",
}


def __getattr__(name: str) -> Any:
    """The result types, for code that checks what an outcome is: imported on first use."""
    homes = _LAZY
    if name not in homes:
        raise AttributeError(f"module 'pipeledger.api' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(homes[name]), name)
