"""Looking after the pipelines once a run has ended: SLA breaches, alerts, deliveries.

A look (:func:`look_after`) is one short transaction in the ledger:

1. SLAs are observed (:func:`pipeledger.ledger.reads.sla.observe`): freshness breaches opened
   and ended, runs slower than their ``max_duration`` recorded;
2. the events of the last 24 hours are derived from the ledger
   (:mod:`pipeledger.alerts.events`) and each is recorded once per webhook
   (:mod:`pipeledger.alerts.outbox`), for the kinds ``[alerts] on`` names.

Then the due alerts are delivered (:mod:`pipeledger.alerts.delivery`).

After a run (:func:`after_run`) both happen in the process's watcher, a daemon thread, so
the run never waits for them: it looks (waiting out a ledger that is briefly busy, such as
SQLite's write lock held by the next load), then delivers. A process waits at most
:data:`EXIT_WAIT` for its watcher at exit and leaves the rest to the next look: the next
run, ``pipeledger watchdog`` or ``serve``, which look and deliver at once. Events come
from the ledger, not from the run's memory, so a look that did not happen loses nothing
that the next one (within 24 hours) does not find.
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

EXIT_WAIT = 2.0  # seconds a process waits at exit for its watcher
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
    database = open_warehouse(config.ledger_url)
    ensure_migrated(database, LEDGER)
    settings = config.alerts
    with database.session() as session:
        opened = observe(session, now, now - LOOKBACK)
        raised = 0
        if settings.webhooks:
            for event in events(session, now):
                if event.kind in settings.on:
                    raised += outbox.record(session, event, list(settings.webhooks), now)
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
    recorded once per webhook, by its key (``kind``, ``pipeline`` and ``subject``, which
    defaults to the run id, else the reason), then delivered in the background. Returns
    whether it was new. Raises like a ledger write when the ledger cannot record it."""
    if kind not in config.alerts.on or not config.alerts.webhooks:
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
    database = open_warehouse(config.ledger_url)
    ensure_migrated(database, LEDGER)
    with database.session() as session:
        added = outbox.record(session, event, list(config.alerts.webhooks), now)
    _watcher(config).wake(look=False)
    return added > 0


def deliver_pending(config: Config) -> int:
    """Send every due alert now (``serve`` and ``watchdog`` call this); how many went."""
    return delivery.deliver(config) if config.alerts.webhooks else 0


def after_run(config: Config) -> None:
    """A run has ended (committed or not): look after it in the background."""
    if watching(config):
        _watcher(config).wake(look=True)


# -- the watcher ------------------------------------------------------------------------


class _Watcher(threading.Thread):
    """A process's looks and deliveries for one ledger, one at a time, in the background:
    wakes that arrive while it works make one more round, not one each."""

    def __init__(self, config: Config) -> None:
        super().__init__(name="pipeledger-watcher", daemon=True)
        self.config = config
        self.wanted = threading.Event()
        self.look = False
        self.working = False

    @property
    def busy(self) -> bool:
        return self.is_alive() and (self.working or self.wanted.is_set())

    def wake(self, look: bool) -> None:
        self.look = self.look or look
        self.wanted.set()

    def run(self) -> None:
        while not _STOP.is_set():
            self.wanted.wait()
            self.working = True
            self.wanted.clear()
            if _STOP.is_set():
                return
            look, self.look = self.look, False
            try:
                if look:
                    self._look()
                deliver_pending(self.config)
            except Exception as exc:  # a thread has no one to raise to: the next look
                log.warning("SLAs and alerts not looked after now: %s", redact(str(exc)))
            finally:
                self.working = False

    def _look(self) -> None:
        """Look, waiting out a ledger that is busy (another transaction holds its lock)."""
        deadline = time.monotonic() + BUSY_WAIT
        while True:
            try:
                look_after(self.config)
                return
            except TransientWarehouseError:
                if _STOP.is_set() or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)


_WATCHERS: dict[str, _Watcher] = {}
_STOP = threading.Event()
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
    """At exit: at most :data:`EXIT_WAIT` for the watchers, which stop at the next step."""
    _STOP.set()
    deadline = time.monotonic() + EXIT_WAIT
    with _LOCK:
        watchers = list(_WATCHERS.values())
    for watcher in watchers:
        watcher.wanted.set()
        watcher.join(max(deadline - time.monotonic(), 0))


def wait_for_watchers(timeout: timedelta) -> None:
    """Wait until every watcher of this process is idle (tests and embedding code)."""
    deadline = time.monotonic() + timeout.total_seconds()
    while time.monotonic() < deadline:
        with _LOCK:
            busy = [w for w in _WATCHERS.values() if w.busy]
        if not busy:
            return
        time.sleep(0.05)
