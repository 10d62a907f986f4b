"""Looking after the pipelines once a run has ended: SLA breaches, alerts, deliveries.

A look (:func:`look_after`) is one short transaction in the ledger:

1. SLAs are observed (:func:`pipeledger.ledger.reads.sla.observe`): freshness breaches opened
   and ended, runs slower than their ``max_duration`` recorded;
2. the events of the last 24 hours are derived from the ledger
   (:mod:`pipeledger.alerts.events`) and each is recorded once per channel that wants its
   kind (:mod:`pipeledger.alerts.outbox`).

Then the due alerts are delivered, in a bounded round (:mod:`pipeledger.alerts.delivery`).

After a run (:func:`after_run`) both happen in the process's watcher, a daemon thread, so
the run never waits for them. When the process exits, it waits for its watcher at most
:func:`exit_wait` (``[alerts] timeout`` + :data:`LOOK_AT_EXIT`): the look a run asked for
is made (so the freshness breach, volume anomaly or slow run that the run itself caused
is recorded and sent by that run's process), attempts in flight end (each within its
timeout), and no attempt starts that could not end in time: those alerts stay pending,
unclaimed, for the next sender. ``pipeledger watchdog`` and ``serve`` look and deliver too,
catching up what a process had no time for: events come from the ledger, not from the
run's memory, so a look that did not happen loses nothing that the next one (within 24
hours) does not find.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from pipeledger.alerts import delivery, outbox
from pipeledger.alerts.events import LOOKBACK, Event, events
from pipeledger.common.secrets import redact
from pipeledger.config.model import AlertKind, Config
from pipeledger.errors import TransientWarehouseError
from pipeledger.ledger.reads.sla import Breach, observe
from pipeledger.ledger.tables import LEDGER
from pipeledger.warehouse.adapters import open_warehouse
from pipeledger.warehouse.migrations import ensure_migrated

log = logging.getLogger("pipeledger.alerts")

LOOK_AT_EXIT = 5.0  # seconds of a process's exit wait for the look (beyond [alerts] timeout)
BUSY_WAIT = 60.0  # seconds a watcher keeps trying a look while the ledger is busy


def watching(config: Config) -> bool:
    """Whether there is anything to look after (``Config.looked_after``)."""
    return config.looked_after


@dataclass(frozen=True)
class Look:
    """What one look found: breaches it opened, and alerts it raised (new rows)."""

    breaches: tuple[Breach, ...]
    alerts: int


def look_after(config: Config, now: datetime | None = None) -> Look:
    """One look (module docstring) in a transaction of its own."""
    now = now or datetime.now(UTC)
    database = open_warehouse(config.ledger_url, tenant=config.ledger.tenant)
    ensure_migrated(database, LEDGER)
    settings = config.alerts
    with database.session() as session:
        opened = observe(session, now, now - LOOKBACK)
        raised = 0
        if settings.channels:
            for event in events(session, now):
                channels = settings.wanting(event.kind)
                if channels:
                    raised += outbox.record(session, event, channels, now)
    return Look(tuple(opened), raised)


def raise_event(
    config: Config,
    kind: AlertKind,
    pipeline: str,
    run_id: str | None,
    reason: str,
    details: dict[str, Any] | None = None,
    subject: str | None = None,
) -> bool:
    """Raise an event that the ledger's runs do not show (e.g. a check of your own):
    recorded once per channel, by its key (``kind``, ``pipeline`` and ``subject``, which
    defaults to the run id, else the reason), then delivered in the background. Returns
    whether it was new. Raises like a ledger write when the ledger cannot record it."""
    channels = config.alerts.wanting(kind)
    if not channels:
        return False
    now = datetime.now(UTC)
    event = Event(
        kind=kind,
        pipeline=pipeline,
        subject=subject or run_id or reason,
        reason=reason,
        occurred_at=now,
        run_id=run_id,
        details=details or {},
    )
    database = open_warehouse(config.ledger_url, tenant=config.ledger.tenant)
    ensure_migrated(database, LEDGER)
    with database.session() as session:
        added = outbox.record(session, event, channels, now)
    _watcher(config).wake(look=False)
    return added > 0


def deliver_pending(config: Config) -> int:
    """One delivery round now, in this thread (``pipeledger watchdog``): at most
    :func:`pipeledger.alerts.delivery.round_length` plus the attempts' ends; how many
    were delivered. Never raises."""
    return delivery.deliver(config) if config.alerts.channels else 0


def after_run(config: Config) -> None:
    """A run has ended (committed or not): look after it in the background."""
    catch_up(config)


def catch_up(config: Config) -> None:
    """Look and deliver in the background (``serve`` at each wake-up): never in the way
    of the work that is due."""
    if watching(config):
        _watcher(config).wake(look=True)


def exit_wait(config: Config) -> float:
    """How long a process waits for its watcher at exit, in seconds."""
    return config.alerts.timeout.total_seconds() + LOOK_AT_EXIT


# -- the watcher ------------------------------------------------------------------------


class _Watcher(threading.Thread):
    """A process's looks and deliveries for one ledger, one round at a time, in the
    background: wakes that arrive while it works make one more round, not one each."""

    def __init__(self, config: Config) -> None:
        super().__init__(name="pipeledger-watcher", daemon=True)
        self.config = config
        self.changed = threading.Condition()
        self.requested = False
        self.look = False
        self.working = False
        self.exit_at: float | None = None  # the process is exiting: be done by then
        self.current: delivery.Deadline | None = None

    @property
    def busy(self) -> bool:
        with self.changed:
            return self.is_alive() and (self.working or self.requested)

    def wake(self, look: bool) -> None:
        with self.changed:
            self.look = self.look or look
            self.requested = True
            self.changed.notify_all()

    def exit_by(self, at: float) -> None:
        """The process exits: finish what was asked by ``at`` (monotonic), then stop."""
        with self.changed:
            self.exit_at = at
            if self.current is not None:
                self.current.at = min(self.current.at, at)
            self.changed.notify_all()

    def run(self) -> None:
        while (work := self._next_round()) is not None:
            look, deadline = work
            try:
                if look:
                    self._look(deadline)
                delivery.deliver(self.config, deadline)
            except Exception as exc:  # a thread has no one to raise to: the next look
                log.warning("SLAs and alerts not looked after now: %s", redact(str(exc)))
            finally:
                with self.changed:
                    self.working = False
                    self.current = None
                    self.changed.notify_all()

    def _next_round(self) -> tuple[bool, delivery.Deadline] | None:
        """Wait for a wake; None when the process exits with nothing more asked."""
        with self.changed:
            while not self.requested and self.exit_at is None:
                self.changed.wait()
            if not self.requested:
                return None
            look, self.look, self.requested = self.look, False, False
            self.working = True
            length = delivery.round_length(self.config.alerts)
            deadline = delivery.Deadline.after(length)
            if self.exit_at is not None:
                deadline.at = min(deadline.at, self.exit_at)
            self.current = deadline
            return look, deadline

    def _look(self, deadline: delivery.Deadline) -> None:
        """Look, waiting out a ledger that is busy (another transaction holds its lock),
        at most :data:`BUSY_WAIT`, and not past the process's exit."""
        give_up = time.monotonic() + BUSY_WAIT
        while True:
            try:
                look_after(self.config)
                return
            except TransientWarehouseError:
                exiting = self.exit_at is not None and deadline.left() <= 0
                if exiting or time.monotonic() > give_up:
                    raise
                time.sleep(0.5)


_WATCHERS: dict[str, _Watcher] = {}
_LOCK = threading.Lock()


def _watcher(config: Config) -> _Watcher:
    """The process's watcher of ``config``'s ledger, started on first use."""
    with _LOCK:
        watcher = _WATCHERS.get(config.ledger_url)
        if watcher is None or not watcher.is_alive():
            if not _WATCHERS:
                atexit.register(_wait_at_exit)
            watcher = _WATCHERS[config.ledger_url] = _Watcher(config)
            watcher.start()
        watcher.config = config  # a process that reloads its config (serve) uses the new one
        return watcher


def _wait_at_exit() -> None:
    """At exit: each watcher finishes what it was asked within :func:`exit_wait`."""
    with _LOCK:
        watchers = list(_WATCHERS.values())
    now = time.monotonic()
    ends = []
    for watcher in watchers:
        end = now + exit_wait(watcher.config)
        watcher.exit_by(end)
        ends.append(end)
    for watcher, end in zip(watchers, ends, strict=True):
        watcher.join(max(end - time.monotonic(), 0) + 0.5)  # its last settle


def wait_for_watchers(timeout: timedelta) -> None:
    """Wait until every watcher of this process is idle (tests and embedding code)."""
    deadline = time.monotonic() + timeout.total_seconds()
    while time.monotonic() < deadline:
        with _LOCK:
            busy = [w for w in _WATCHERS.values() if w.busy]
        if not busy:
            return
        time.sleep(0.05)
