"""Running unattended, as a library: what is due on the schedules and running it
(``pipeledger run --due``), the long-running loop (``pipeledger serve``), the schedules'
status (``pipeledger schedule``) and cancelling a run from anywhere (``pipeledger
cancel``). Every run goes through :mod:`pipeledger.runs.runner` (retries included).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from pipeledger.common import clock
from pipeledger.common.secrets import redact
from pipeledger.config.model import Config
from pipeledger.dag.executor import execute
from pipeledger.dag.graph import Graph
from pipeledger.errors import ConfigError, PipeledgerError
from pipeledger.ledger.ledger import Ledger, RunCancelled
from pipeledger.ledger.vocabulary import RunRecord
from pipeledger.runs import runner
from pipeledger.runs.load.loader import ProgressCallback
from pipeledger.runs.runner import (
    Outcome,
    default_threads,
    did_not_publish,
    node_outcome,
    skipped_outcome,
)
from pipeledger.runs.scaffold import Trigger, interrupt_all, interrupt_reset, ledger_for, pause, who
from pipeledger.schedule.cron import Interval
from pipeledger.schedule.due import Plan, candidates, plan

__all__ = ["ScheduledOutcome", "cancel", "plans", "run_due", "schedule_status", "serve"]

log = logging.getLogger("pipeledger.run")


def cancel(config: Config, run_id: str, reason: str | None = None) -> RunRecord:
    """Ask a running run to stop, from any process or host (the id may be its first 8+
    characters); return it. The run sees the request at its next heartbeat, rolls back
    and ends ``cancelled``."""
    ledger = _scheduling_ledger(config, "`pipeledger cancel`")
    return ledger.request_cancel(run_id, requested_by=who(), reason=reason)


# -- schedules --------------------------------------------------------------------------


@dataclass(frozen=True)
class ScheduledOutcome:
    """One scheduled interval's run."""

    node: str
    interval: Interval
    outcome: Outcome

    @property
    def exit_code(self) -> int:
        return self.outcome.exit_code

    def to_json(self) -> dict[str, Any]:
        return {
            **self.outcome.to_json(),
            "data_interval_start": self.interval.start.isoformat(),
            "data_interval_end": self.interval.end.isoformat(),
        }


def _scheduling_ledger(config: Config, what: str) -> Ledger:
    ledger = ledger_for(config)
    if not ledger.records:
        raise ConfigError(f"{what} needs the ledger, and [ledger] enabled = false; nothing was run")
    return ledger


def plans(config: Config, selectors: Sequence[str] = (), now: datetime | None = None) -> list[Plan]:
    """Each selected node's schedule now (``pipeledger.common.clock``): what is due
    (:mod:`pipeledger.schedule.due`). Nodes without a ``schedule`` are left out."""
    ledger = _scheduling_ledger(config, "a schedule")
    moment = now or clock.now()
    out = []
    for name in Graph.of(config).select(selectors):
        node = config.node(name)
        if node.cron is None:
            continue
        among = candidates(node.cron, node.catchup, node.max_catchup, moment)
        history = ledger.scheduled_history(name, [i.key for i in among])
        out.append(plan(name, among, node.catchup, history.held_since, history.held_until,
                        history.held))  # fmt: skip
    return out


def run_due(
    config: Config,
    selectors: Sequence[str] = (),
    *,
    on_progress: ProgressCallback | None = None,
    threads: int | None = None,
    already: frozenset[str] = frozenset(),
) -> list[ScheduledOutcome]:
    """Run every interval that is due now (:func:`plans`), oldest first; intervals that
    end together run as one DAG run, in dependency order. Each is a run of its own with
    its ``data_interval`` and an idempotency key per pipeline and interval, so an interval
    another scheduler runs (or ran) is skipped as a duplicate. ``already``: keys
    (``node interval-key``) not to try again (``pipeledger serve`` tries each once)."""
    due = [(p.node, i) for p in plans(config, selectors) for i in p.due]
    due = [(n, i) for n, i in due if f"{n} {i.key}" not in already]
    order = {name: k for k, name in enumerate(Graph.of(config).select(()))}
    due.sort(key=lambda item: (item[1].end, order[item[0]]))
    interrupt_reset()
    outcomes: list[ScheduledOutcome] = []
    for end in sorted({i.end for _, i in due}):
        batch = {n: i for n, i in due if i.end == end}
        outcomes += _run_intervals(config, batch, on_progress, threads)
    return outcomes


def _run_intervals(
    config: Config,
    batch: dict[str, Interval],
    on_progress: ProgressCallback | None,
    threads: int | None,
) -> list[ScheduledOutcome]:
    graph = Graph.of(config)
    base = Trigger("scheduled", correlation_id=str(uuid.uuid4()))

    def trigger(name: str) -> Trigger:
        interval = batch[name]
        return replace(base, idempotency_key=interval.key,
                       data_interval=(interval.start, interval.end))  # fmt: skip

    results = execute(
        graph, list(batch),
        run_node=lambda name: node_outcome(config, name, on_progress, trigger(name)),
        skip_node=lambda name: skipped_outcome(config, name, trigger(name)),
        failed=did_not_publish, threads=threads or default_threads(config),
        interrupt=interrupt_all,
    )  # fmt: skip
    return [ScheduledOutcome(n, batch[n], o) for n, o in zip(batch, results, strict=True)]


def schedule_status(config: Config, now: datetime | None = None) -> list[dict[str, Any]]:
    """Each scheduled node: its schedule, next firing, latest scheduled run and what is
    overdue (``pipeledger schedule``)."""
    moment = now or clock.now()
    ledger = _scheduling_ledger(config, "a schedule")
    out = []
    for p in plans(config, now=moment):
        node = config.node(p.node)
        assert node.cron is not None
        latest = ledger.scheduled_history(p.node).latest
        out.append({
            "node": p.node, "kind": "model" if p.node in config.models else "load",
            "schedule": node.schedule, "timezone": node.timezone, "catchup": node.catchup,
            "next": node.cron.next_fire(moment).isoformat(),
            "last": {k: v.isoformat() if isinstance(v, datetime) else v
                     for k, v in latest.items()} or None,
            "due": [i.to_json() for i in p.due], "overdue": len(p.due),
            "left_behind": p.left_behind,
        })  # fmt: skip
    return out


def next_wake(config: Config, now: datetime) -> datetime | None:
    """The next firing of any node's schedule after ``now``; None without schedules."""
    fires = [node.cron.next_fire(now) for node in config.nodes.values() if node.cron]
    return min(fires, default=None)


def serve(
    config: Config,
    report: Callable[[list[ScheduledOutcome]], None],
    *,
    poll: timedelta = timedelta(minutes=1),
    threads: int | None = None,
) -> None:
    """Run what is due, then sleep until the next firing (at most ``poll``), and again,
    until interrupted: ``pipeledger serve``. Each wake-up first runs the watchdog. A run
    that fails is reported and the loop goes on; an interval this loop already tried is
    not tried again by it (its ``retries`` were made), a later ``run --due`` may."""
    tried: set[str] = set()
    while True:
        _upkeep(config)
        try:
            outcomes = run_due(config, threads=threads, already=frozenset(tried))
        except PipeledgerError as exc:  # e.g. the ledger is down: try again next time
            log.warning("could not run what is due: %s", redact(str(exc)))
            outcomes = []
        tried |= {f"{o.node} {o.interval.key}" for o in outcomes}
        tried &= {f"{p.node} {i.key}" for p in _plans_or_none(config) for i in p.candidates}
        report(outcomes)
        now = clock.now()
        wake = min(next_wake(config, now) or now + poll, now + poll)
        try:
            if not pause(max(0.0, (wake - now).total_seconds())):
                return
        except (KeyboardInterrupt, RunCancelled):  # stopped while it waited: nothing to undo
            return


def _plans_or_none(config: Config) -> list[Plan]:
    try:
        return plans(config)
    except PipeledgerError:
        return []


def _upkeep(config: Config) -> None:
    try:
        settled = runner.watchdog(config)
    except PipeledgerError as exc:
        log.warning("the watchdog could not run: %s", redact(str(exc)))
        return
    for run_id, status in settled.items():
        log.warning("run %s settled as %s (its lease expired or its process is gone)", run_id,
                    status)  # fmt: skip
