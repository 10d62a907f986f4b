"""Sending alerts: rounds of concurrent attempts, each bounded in time, none able to raise.

:func:`deliver` is one **round**: it reads the ledger's due alerts and sends up to
:data:`WORKERS` at once; each attempt claims its alert (its next attempt moved past the
attempt's end, so no other sender takes it meanwhile), sends it through its channel
(:mod:`pipeledger.alerts.channels`) within ``[alerts] timeout`` in total, and settles it:
``delivered``, ``failed`` (refused for good) or ``pending`` with its error recorded and a
next attempt after the backoff. *Every* error of an attempt (a URL the client refuses,
TLS, DNS, a refused connection, a timeout, a 4xx or 5xx answer, a bug building the
payload) is such a failed attempt: a delivery never raises, so it never stops the run or
the scheduler that asked for it.

A round starts no attempt that could not end by its ``deadline`` (a :class:`Deadline` that
the process's exit may bring forward), and returns once the attempts it started have
ended: its length is bounded by the deadline plus the ledger's own writes. Alerts it did
not start stay pending, unclaimed, for the next round.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from pipeledger.alerts import outbox
from pipeledger.alerts.channels import Channel, Refused, open_channels
from pipeledger.common.secrets import redact
from pipeledger.config.model import AlertsConfig, Config
from pipeledger.errors import PipeledgerError
from pipeledger.warehouse.adapters import open_warehouse

log = logging.getLogger("pipeledger.alerts")

WORKERS = 8  # attempts at once
ROUND = timedelta(seconds=30)  # a round starts attempts for this long (at least one timeout)
CLAIM_MARGIN = timedelta(seconds=30)  # a claim outlives its attempt's end by this much
RETRIES_OF_A_RECORD = 10  # an outcome that cannot be recorded is tried again, 1 s apart
MAX_ERROR = 500


@dataclass
class Deadline:
    """When a round must have ended (``time.monotonic()``); the process's exit may bring
    it forward while the round runs."""

    at: float
    stopped: threading.Event = field(default_factory=threading.Event)

    @classmethod
    def after(cls, seconds: float) -> Deadline:
        return cls(time.monotonic() + seconds)

    def left(self) -> float:
        return 0.0 if self.stopped.is_set() else self.at - time.monotonic()


def round_length(settings: AlertsConfig) -> float:
    """How long a round starts attempts: :data:`ROUND`, and at least one attempt."""
    return max(ROUND, settings.timeout).total_seconds()


def _now() -> datetime:
    return datetime.now(UTC)


def deliver(config: Config, deadline: Deadline | None = None) -> int:
    """One round (module docstring); how many alerts were delivered. Never raises."""
    settings = config.alerts
    try:
        channels = open_channels(settings)
    except Exception as exc:  # a config validated elsewhere; still never in anyone's way
        log.warning("alerts not sent: %s", redact(str(exc)))
        return 0
    if not channels:
        return 0
    round_ = _Round(config, channels, deadline or Deadline.after(round_length(settings)))
    return round_.run()


class _Round:
    def __init__(self, config: Config, channels: dict[str, Channel], deadline: Deadline) -> None:
        self.settings = config.alerts
        self.database = open_warehouse(config.ledger_url, tenant=config.ledger.tenant)
        self.channels = channels
        self.deadline = deadline
        self.timeout = self.settings.timeout.total_seconds()
        self.lock = threading.Lock()
        self.queue: list[outbox.Due] = []
        self.seen: set[tuple[str, str]] = set()
        self.exhausted = False
        self.delivered = 0

    def run(self) -> int:
        workers = [
            threading.Thread(target=self._work, name=f"pipeledger-alert-{n}", daemon=True)
            for n in range(WORKERS)
        ]
        for worker in workers:
            worker.start()
        for worker in workers:  # each attempt ends within its timeout: this is bounded
            worker.join(max(self.deadline.left(), 0) + self.timeout + CLAIM_MARGIN.seconds)
        return self.delivered

    def _next(self) -> outbox.Due | None:
        """The next alert to try, or None: none is due, or no attempt started now could
        end before the deadline."""
        with self.lock:
            if self.deadline.left() < self.timeout:
                return None
            if not self.queue and not self.exhausted:
                self.queue = self._read()
                self.exhausted = not self.queue
            if not self.queue:
                return None
            item = self.queue.pop(0)
            self.seen.add((item.alert_key, item.webhook))
            return item

    def _read(self) -> list[outbox.Due]:
        try:
            with self.database.session() as session:
                due = outbox.due(session, _now(), sorted(self.channels))
        except Exception as exc:  # the ledger is down or busy: the next round
            log.warning("due alerts could not be read: %s", redact(str(exc)))
            return []
        return [d for d in due if (d.alert_key, d.webhook) not in self.seen]

    def _work(self) -> None:
        while (item := self._next()) is not None:
            try:
                delivered = self._attempt(item)
            except Exception as exc:  # a thread has no one to raise to
                log.warning("alert %s: %s", item.alert_key, redact(str(exc)))
                delivered = False
            if delivered:
                with self.lock:
                    self.delivered += 1

    def _attempt(self, item: outbox.Due) -> bool:
        """Claim one alert, send it, record the outcome; whether it was delivered."""
        now = _now()
        until = now + self.settings.timeout + CLAIM_MARGIN  # past the attempt's end
        with self.database.session() as session:
            if not outbox.claim(session, item, now, until):
                return False  # another sender took it
        error, retry_at = self._send(item)
        if error is not None:
            log.warning("alert %s to %s not delivered: %s", item.alert_key, item.webhook, error)
        _retrying(lambda: self._settle(item, error, retry_at), item.alert_key)
        return error is None

    def _send(self, item: outbox.Due) -> tuple[str | None, datetime | None]:
        """The attempt's error (None: delivered) and when to try again (None: never)."""
        try:
            self.channels[item.webhook].send(item.payload, self.timeout)
        except Refused as exc:
            return _error(exc), None
        except Exception as exc:  # every other error: a failed attempt, tried again
            s = self.settings
            wait = outbox.backoff(item.attempts + 1, s.retry_delay, s.max_retry_delay)
            return _error(exc), _now() + wait
        return None, None

    def _settle(self, item: outbox.Due, error: str | None, retry_at: datetime | None) -> None:
        with self.database.session() as session:
            outbox.settle(session, item, _now(), error, retry_at)


def _error(exc: BaseException) -> str:
    text = str(getattr(exc, "reason", None) or exc) or type(exc).__name__
    if not isinstance(exc, Refused | OSError):
        text = f"{type(exc).__name__}: {text}"
    return redact(text)[:MAX_ERROR]


def _retrying(action: Callable[[], Any], what: str) -> None:
    """Write an outcome, waiting out a ledger that is briefly busy (SQLite's write lock
    held by a load); the claim's expiry covers the case where it never can."""
    for attempt in range(RETRIES_OF_A_RECORD):
        try:
            action()
            return
        except PipeledgerError as exc:
            if attempt == RETRIES_OF_A_RECORD - 1:
                log.warning("alert %s: its outcome could not be recorded (%s)", what, exc)
                return
            time.sleep(1)
