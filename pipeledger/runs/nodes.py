"""Running nodes: one load or model run (retried after a transient failure as its
``retries`` allow), and a set of nodes as one DAG run in dependency order, independent
branches side by side (:mod:`pipeledger.dag.executor`). ``pipeledger run`` and ``run --due``
both run their nodes here."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from pipeledger.dag.executor import execute
from pipeledger.dag.graph import Graph
from pipeledger.ledger.reads.recent import volume_history
from pipeledger.ledger.vocabulary import TriggerType
from pipeledger.runs.interrupt import interrupt_all, interrupt_reset
from pipeledger.runs.outcome import Outcome, RunFailure, did_not_publish, failure, outcome_of
from pipeledger.runs.retry import should_retry
from pipeledger.runs.scaffold import RunSpec, Trigger, filing, record_skip, run_job
from pipeledger.runs.site import Site

# the loader and the models (and with them pyarrow, numpy and sqlglot) are imported by the
# functions that run them, so that reading state does not load them
if TYPE_CHECKING:
    from pipeledger.runs.load.request import LoadRequest, ProgressCallback
    from pipeledger.runs.load.result import LoadResult
    from pipeledger.runs.model.build import ModelMode, ModelResult
    from pipeledger.state.watermark import Window

log = logging.getLogger("pipeledger.run")


def run_load(
    site: Site,
    request: LoadRequest,
    spec: RunSpec,
    on_progress: ProgressCallback | None = None,
) -> LoadResult:
    """One load, recorded in the ledger (an incremental one learns its row-count band)."""
    from pipeledger.runs.load.job import LoadJob

    if request.mode == "incremental" and request.recent_counts is None:
        request = replace(request, recent_counts=recent_counts(site, request.pipeline))
    return run_job(site, spec, lambda run_id: LoadJob(request, site, run_id, on_progress))


def run_model(
    site: Site,
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

    site.config.model(name)
    request = ModelRequest(model=name, mode=mode, window=window)
    kind = TriggerType.BACKFILL if mode == "backfill" else None
    spec = RunSpec(pipeline=name, trigger=trigger or Trigger(), trigger_type=kind)
    return run_job(site, spec, lambda run_id: ModelJob(request, site, run_id))


def recent_counts(site: Site, name: str) -> list[int] | None:
    """Rows read by the pipeline's recent successful runs, for a learned row-count band."""
    checks = site.config.pipeline(name).checks
    if checks is None or checks.row_count is None or not checks.row_count.auto:
        return None
    if not site.ledger.recording:
        return None
    with site.ledger.reading() as session:
        return volume_history(session, name)


def node_outcome(
    site: Site,
    name: str,
    trigger: Trigger,
    *,
    mode: ModelMode = "incremental",
    on_progress: ProgressCallback | None = None,
) -> Outcome:
    """A node's run, retried after a transient failure as its ``retries`` allow; each
    attempt is a run of its own in the ledger (same ``logical_run_id``, next ``attempt``)."""
    from pipeledger.runs.load.request import LoadRequest

    attempt = 1
    while True:
        try:
            if name in site.config.models:
                return run_model(site, name, mode=mode, trigger=trigger)
            spec = RunSpec(pipeline=name, trigger=trigger)
            return run_load(site, LoadRequest(pipeline=name), spec, on_progress)
        except Exception as exc:  # every node's outcome is reported, whatever happened
            if not should_retry(site, name, exc, attempt):
                outcome = outcome_of(name, exc)
                if isinstance(outcome, RunFailure):
                    target = site.config.node(name).target
                    is_model = name in site.config.models
                    asked = mode if is_model else "incremental"
                    outcome = replace(outcome, attempt=attempt, mode=asked, target=target)
                return outcome
            failed_run = getattr(exc, "run_id", None) or record_unseen(site, name, trigger, exc)
        # the failed attempt's logical run goes on (one the ledger could not record even
        # now starts anew)
        trigger = replace(trigger, retry=failed_run is not None, retry_of=failed_run)
        attempt += 1


def record_unseen(site: Site, name: str, trigger: Trigger, exc: BaseException) -> str | None:
    """An attempt the ledger never saw (SQLite: the file that holds the ledger was busy
    with another load), recorded before the next attempt, which then continues its
    logical run as the next ``attempt``; its run id, or None if it cannot be recorded."""
    if not site.ledger.recording:
        return None
    try:
        fields = filing(site.ledger, RunSpec(pipeline=name, trigger=trigger))
        found = failure(name, exc)
        message = f"{found.error} (recorded when the next attempt started)"
        return site.ledger.record_skipped(name, reason=found.reason, message=message, **fields)
    except Exception as problem:  # the next attempt goes on, as a new logical run
        log.warning("pipeline %s: a failed attempt could not be recorded: %s", name, problem)
        return None


def skipped_outcome(site: Site, name: str, trigger: Trigger) -> RunFailure:
    message = f"{name} did not run: an upstream pipeline or model failed in this run"
    try:
        run_id: str | None = record_skip(site, name, trigger, "upstream_failed", message)
    except Exception as exc:  # the ledger's trouble must not hide what happened
        message += f" (the ledger could not record it: {exc})"
        run_id = None
    return RunFailure(
        pipeline=name,
        status="skipped",
        reason="upstream_failed",
        error=message,
        exit_code=0,
        run_id=run_id,
    )


def run_nodes(
    site: Site,
    selected: Sequence[str],
    trigger_for: Callable[[str], Trigger],
    *,
    mode: ModelMode = "incremental",
    on_progress: ProgressCallback | None = None,
    threads: int | None = None,
) -> list[Outcome]:
    """Run ``selected`` nodes as one DAG run: in dependency order, independent branches
    side by side on ``threads`` workers (default: :func:`default_threads`); a node whose
    upstream did not publish is recorded skipped (``upstream_failed``) and the other
    branches go on. ``trigger_for(name)``: why each node runs. One outcome per node.
    A model the warehouse cannot run as written (SQLite: a construct it cannot compute)
    stops it before any node runs (UntranslatableSql, exit 2)."""
    if any(name in site.config.models for name in selected):  # a load alone needs no SQL parser
        from pipeledger.runs.model.check import refuse_untranslatable

        refuse_untranslatable(site.config, site.warehouse, selected)
    interrupt_reset()
    return execute(
        Graph.of(site.config),
        list(selected),
        run_node=lambda name: node_outcome(
            site, name, trigger_for(name), mode=mode, on_progress=on_progress
        ),
        skip_node=lambda name: skipped_outcome(site, name, trigger_for(name)),
        failed=did_not_publish,
        threads=threads or default_threads(site),
        interrupt=interrupt_all,
    )


def default_threads(site: Site) -> int:
    """4 where the warehouse runs transactions side by side (PostgreSQL), else 1."""
    return 4 if site.warehouse.dialect.concurrent_transactions else 1


def dag_trigger(trigger: Trigger | None) -> Trigger:
    """The trigger every node run of one DAG run shares: one ``correlation_id``."""
    why = trigger or Trigger()
    return replace(why, correlation_id=why.correlation_id or str(uuid.uuid4()))
