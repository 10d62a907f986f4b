"""Running unattended: what the schedules say is due now and running it (``pipeledger run
--due``), the schedules' status (``pipeledger schedule``), and the long-running loop
(``pipeledger serve``). The pure rules (cron intervals, what is due) are in
:mod:`pipeledger.schedule`; every run goes through :mod:`pipeledger.runs.nodes`."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from pipeledger.common import clock
from pipeledger.common.secrets import redact
from pipeledger.dag.graph import Graph
from pipeledger.errors import ConfigError, PipeledgerError, RunCancelled
from pipeledger.ledger.reads.recent import scheduled_runs
from pipeledger.ledger.vocabulary import TriggerType
from pipeledger.runs.interrupt import interrupt_reset, pause
from pipeledger.runs.nodes import run_nodes
from pipeledger.runs.outcome import Outcome
from pipeledger.runs.scaffold import Trigger
from pipeledger.runs.site import Site
from pipeledger.schedule.cron import Interval
from pipeledger.schedule.due import Plan, candidates, plan

if TYPE_CHECKING:
    from pipeledger.runs.load.request import ProgressCallback

log = logging.getLogger("pipeledger.run")


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


def needs_ledger(site: Site, what: str) -> None:
    if not site.ledger.recording:
        raise ConfigError(f"{what} needs the ledger, and [ledger] enabled = false; nothing was run")


def plans(site: Site, selectors: Sequence[str] = (), now: datetime | None = None) -> list[Plan]:
    """Each selected node's schedule now (``pipeledger.common.clock``): what is due
    (:mod:`pipeledger.schedule.due`). Nodes without a ``schedule`` are left out."""
    needs_ledger(site, "a schedule")
    config = site.config
    moment = now or clock.now()
    out = []
    with site.ledger.reading() as session:
        for name in Graph.of(config).select(selectors):
            node = config.node(name)
            if node.cron is None:
                continue
            among = candidates(node.cron, node.catchup, node.max_catchup, moment)
            held = scheduled_runs(session, name, [i.key for i in among])
            out.append(plan(name, among, node.catchup, held.held_since, held.held_until, held.held))
    return out


def run_due(
    site: Site,
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
    due = [(p.node, i) for p in plans(site, selectors) for i in p.due]
    due = [(n, i) for n, i in due if f"{n} {i.key}" not in already]
    order = {name: k for k, name in enumerate(Graph.of(site.config).select(()))}
    due.sort(key=lambda item: (item[1].end, order[item[0]]))
    interrupt_reset()
    outcomes: list[ScheduledOutcome] = []
    for end in sorted({i.end for _, i in due}):
        batch = {n: i for n, i in due if i.end == end}
        outcomes += _run_intervals(site, batch, on_progress, threads)
    return outcomes


def _run_intervals(
    site: Site,
    batch: dict[str, Interval],
    on_progress: ProgressCallback | None,
    threads: int | None,
) -> list[ScheduledOutcome]:
    base = Trigger(trigger_type=TriggerType.SCHEDULED, correlation_id=str(uuid.uuid4()))

    def trigger(name: str) -> Trigger:
        interval = batch[name]
        return replace(
            base, idempotency_key=interval.key, data_interval=(interval.start, interval.end)
        )

    results = run_nodes(site, list(batch), trigger, on_progress=on_progress, threads=threads)
    return [ScheduledOutcome(n, batch[n], o) for n, o in zip(batch, results, strict=True)]


def schedule_status(site: Site, now: datetime | None = None) -> list[dict[str, Any]]:
    """Each scheduled node: its schedule, next firing, latest scheduled run and what is
    overdue (``pipeledger schedule``)."""
    moment = now or clock.now()
    config = site.config
    out = []
    for p in plans(site, now=moment):
        node = config.node(p.node)
        assert node.cron is not None
        with site.ledger.reading() as session:
            latest = scheduled_runs(session, p.node).latest
        last = {k: v.isoformat() if isinstance(v, datetime) else v for k, v in latest.items()}
        out.append(
            {
                "node": p.node,
                "kind": "model" if p.node in config.models else "load",
                "schedule": node.schedule,
                "timezone": node.timezone,
                "catchup": node.catchup,
                "next": node.cron.next_fire(moment).isoformat(),
                "last": last or None,
                "due": [i.to_json() for i in p.due],
                "overdue": len(p.due),
                "left_behind": p.left_behind,
            }
        )
    return out


def next_wake(site: Site, now: datetime) -> datetime | None:
    """The next firing of any node's schedule after ``now``; None without schedules."""
    fires = [node.cron.next_fire(now) for node in site.config.nodes.values() if node.cron]
    return min(fires, default=None)


def serve(
    site: Site,
    report: Callable[[list[ScheduledOutcome]], None],
    upkeep: Callable[[], dict[str, str]],
    *,
    poll: timedelta = timedelta(minutes=1),
    threads: int | None = None,
) -> None:
    """Run what is due, then sleep until the next firing (at most ``poll``), and again,
    until interrupted: ``pipeledger serve``. Each wake-up first runs ``upkeep`` (the
    watchdog). A run that fails is reported and the loop goes on; an interval this loop
    already tried is not tried again by it (its ``retries`` were made), a later ``run
    --due`` may."""
    tried: set[str] = set()
    while True:
        _upkeep(upkeep)
        try:
            outcomes = run_due(site, threads=threads, already=frozenset(tried))
        except PipeledgerError as exc:  # e.g. the ledger is down: try again next time
            log.warning("could not run what is due: %s", redact(str(exc)))
            outcomes = []
        tried |= {f"{o.node} {o.interval.key}" for o in outcomes}
        tried &= {f"{p.node} {i.key}" for p in _plans_or_none(site) for i in p.candidates}
        report(outcomes)
        now = clock.now()
        wake = min(next_wake(site, now) or now + poll, now + poll)
        try:
            if not pause(max(0.0, (wake - now).total_seconds())):
                return
        except (KeyboardInterrupt, RunCancelled):  # stopped while it waited: nothing to undo
            return


def _plans_or_none(site: Site) -> list[Plan]:
    try:
        return plans(site)
    except PipeledgerError:
        return []


def _upkeep(upkeep: Callable[[], dict[str, str]]) -> None:
    try:
        settled = upkeep()
    except PipeledgerError as exc:
        log.warning("the watchdog could not run: %s", redact(str(exc)))
        return
    for run_id, status in settled.items():
        log.warning(
            "run %s settled as %s (its lease expired or its process is gone)", run_id, status
        )
