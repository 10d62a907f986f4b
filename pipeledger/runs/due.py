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
from pipeledger.ledger.reads.recent import ScheduledRuns, scheduled_runs_of
from pipeledger.ledger.vocabulary import TriggerType
from pipeledger.runs.interrupt import interrupt_reset, pause
from pipeledger.runs.nodes import run_nodes
from pipeledger.runs.outcome import Outcome, failure
from pipeledger.runs.scaffold import Trigger
from pipeledger.runs.site import Site
from pipeledger.schedule.cron import Cron, Interval
from pipeledger.schedule.due import Plan, candidates, plan

if TYPE_CHECKING:
    from pipeledger.runs.load.request import ProgressCallback

log = logging.getLogger("pipeledger.run")


@dataclass(frozen=True)
class ScheduledOutcome:
    """One scheduled interval's run."""

    node: str
    interval: Interval | None  # None: its schedule could not be read
    outcome: Outcome

    @property
    def exit_code(self) -> int:
        return self.outcome.exit_code

    def to_json(self) -> dict[str, Any]:
        interval = self.interval
        return {
            **self.outcome.to_json(),
            "data_interval_start": interval.start.isoformat() if interval else None,
            "data_interval_end": interval.end.isoformat() if interval else None,
        }


def needs_ledger(site: Site, what: str) -> None:
    if not site.ledger.recording:
        raise ConfigError(f"{what} needs the ledger, and [ledger] enabled = false; nothing was run")


def plans(site: Site, selectors: Sequence[str] = (), now: datetime | None = None) -> list[Plan]:
    """Each selected node's schedule now (``pipeledger.common.clock``): what is due
    (:mod:`pipeledger.schedule.due`). Nodes without a ``schedule`` are left out; a node
    whose schedule cannot be read has a plan with its ``error`` and nothing due, and the
    others are planned as usual."""
    return [p for p, _ in _planned(site, selectors, now or clock.now())]


def _planned(
    site: Site, selectors: Sequence[str], moment: datetime
) -> list[tuple[Plan, ScheduledRuns]]:
    """:func:`plans`, each with what the ledger knows of the node's scheduled runs, asked
    of the ledger once for every node (a few statements, not a few per node)."""
    needs_ledger(site, "a schedule")
    config = site.config
    among: dict[str, list[Interval]] = {}
    unreadable: dict[str, str] = {}
    scheduled = Graph.of(config).select(selectors)
    for name in scheduled:
        node = config.node(name)
        if node.cron is None:
            continue
        try:
            among[name] = candidates(node.cron, node.catchup, node.max_catchup, moment)
        except Exception as exc:  # one bad schedule never stops the others
            unreadable[name] = _schedule_error(name, exc)
    with site.ledger.reading() as session:
        asked = {n: [i.key for i in among.get(n, [])] for n in [*among, *unreadable]}
        known = scheduled_runs_of(session, asked)
    out = []
    for name in scheduled:
        if name in unreadable:
            out.append((Plan(node=name, candidates=(), error=unreadable[name]), known[name]))
        elif name in among:
            held = known[name]
            catchup = config.node(name).catchup
            chosen = plan(name, among[name], catchup, held.held_since, held.held_until, held.held)
            out.append((chosen, held))
    return out


def _schedule_error(node: str, exc: BaseException) -> str:
    return redact(f"{node}: its schedule could not be read ({exc}); nothing was run for it")


def settle_dead_runs(site: Site) -> dict[str, str]:
    """The watchdog, before planning: a run whose process died is settled first, so its
    interval is planned again now, in its place (oldest first), not after later ones."""
    try:
        return site.ledger.watchdog()
    except PipeledgerError as exc:  # e.g. a ledger of its own is down: the runs spool
        log.warning("the watchdog could not run before planning: %s", redact(str(exc)))
        return {}


def run_due(
    site: Site,
    selectors: Sequence[str] = (),
    *,
    on_progress: ProgressCallback | None = None,
    threads: int | None = None,
    already: frozenset[str] = frozenset(),
    settle: bool = True,
) -> list[ScheduledOutcome]:
    """Run every interval that is due now (:func:`plans`), oldest first; intervals that
    end together run as one DAG run, in dependency order. Each is a run of its own with
    its ``data_interval`` and an idempotency key per pipeline and interval, so an interval
    another scheduler runs (or ran) is skipped as a duplicate. ``already``: keys
    (``node interval-key``) not to try again (``pipeledger serve`` tries each once).
    ``settle``: run the watchdog first (:func:`settle_dead_runs`; ``serve`` has just run
    it). A node whose schedule cannot be read is one failed outcome without an interval."""
    if settle:
        settle_dead_runs(site)
    planned = plans(site, selectors)
    unreadable = [
        ScheduledOutcome(p.node, None, failure(p.node, ConfigError(p.error)))
        for p in planned
        if p.error is not None
    ]
    due = [(p.node, i) for p in planned for i in p.due]
    due = [(n, i) for n, i in due if f"{n} {i.key}" not in already]
    order = {name: k for k, name in enumerate(Graph.of(site.config).select(()))}
    due.sort(key=lambda item: (item[1].end, order[item[0]]))
    interrupt_reset()
    outcomes: list[ScheduledOutcome] = []
    for end in sorted({i.end for _, i in due}):
        batch = {n: i for n, i in due if i.end == end}
        outcomes += _run_intervals(site, batch, on_progress, threads)
    return unreadable + outcomes


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


def schedule_status(
    site: Site, now: datetime | None = None, selectors: Sequence[str] = ()
) -> list[dict[str, Any]]:
    """Each scheduled node (of ``selectors``, default all): its schedule, next firing,
    latest scheduled run and what is overdue (``pipeledger schedule``)."""
    moment = now or clock.now()
    config = site.config
    out = []
    for p, held in _planned(site, selectors, moment):
        node = config.node(p.node)
        assert node.cron is not None
        last = {k: v.isoformat() if isinstance(v, datetime) else v for k, v in held.latest.items()}
        following = None if p.error else next_wake_of(node.cron, moment)
        out.append(
            {
                "node": p.node,
                "kind": "model" if p.node in config.models else "load",
                "schedule": node.schedule,
                "timezone": node.timezone,
                "catchup": node.catchup,
                "next": following.isoformat() if following else None,
                "last": last or None,
                "due": [i.to_json() for i in p.due],
                "overdue": len(p.due),
                "left_behind": p.left_behind,
                "error": p.error,
            }
        )
    return out


def next_wake_of(cron: Cron, now: datetime) -> datetime | None:
    try:
        return cron.next_fire(now)
    except Exception:  # its plan has the error
        return None


def next_wake(site: Site, now: datetime) -> datetime | None:
    """The next firing of any node's schedule after ``now``; None without schedules (a
    schedule that cannot be read is left out)."""
    nodes = site.config.nodes.values()
    fires = [next_wake_of(node.cron, now) for node in nodes if node.cron is not None]
    return min((f for f in fires if f is not None), default=None)


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
    watchdog; alerts are delivered in the background, never before what is due). A run
    that fails is reported and the loop goes on; an interval this loop already tried is
    not tried again by it (its ``retries`` were made), a later ``run --due`` may."""
    tried: set[str] = set()
    while True:
        _upkeep(upkeep)
        try:
            outcomes = run_due(site, threads=threads, already=frozenset(tried), settle=False)
        except PipeledgerError as exc:  # e.g. the ledger is down: try again next time
            log.warning("could not run what is due: %s", redact(str(exc)))
            outcomes = []
        tried |= {f"{o.node} {o.interval.key}" for o in outcomes if o.interval}
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
