"""Sending alerts: one HTTP POST of the alert's JSON per webhook.

:func:`deliver` goes through the due alerts of a ledger once: claim, POST, record the
outcome. :func:`in_background` does that in a daemon thread, so a run never waits for a
webhook; when the process exits it waits at most :data:`EXIT_WAIT` for those threads and
leaves the rest pending (the next run, ``pipeledger watchdog`` or ``serve`` sends them).
"""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from pipeledger.alerts import outbox
from pipeledger.common import version as __about__
from pipeledger.common.secrets import redact
from pipeledger.config.model import AlertsConfig, Config
from pipeledger.errors import PipeledgerError
from pipeledger.warehouse.adapters import open_warehouse

log = logging.getLogger("pipeledger.alerts")

CLAIM_MARGIN = timedelta(seconds=30)  # a claim outlives its attempt's timeout by this much
RETRIES_OF_A_RECORD = 10  # an outcome that cannot be recorded is tried again, 1 s apart


class Refused(Exception):
    """The webhook answered that this alert will never be accepted (4xx)."""


def post(url: str, payload: dict[str, Any], timeout: float) -> None:
    """POST ``payload`` as JSON. Raises :class:`Refused` for a permanent refusal, and
    ``OSError`` (``URLError``, a timeout, a 5xx answer) for what a later attempt may get
    past."""
    request = urllib.request.Request(
        url,
        data=json.dumps(payload).encode(),
        method="POST",
        headers={
            "Content-Type": "application/json",
            "User-Agent": f"pipeledger/{__about__.__version__}",
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            response.read()
    except urllib.error.HTTPError as exc:
        if 400 <= exc.code < 500 and exc.code not in (408, 429):
            raise Refused(f"HTTP {exc.code} {exc.reason}") from exc
        raise


def _now() -> datetime:
    return datetime.now(UTC)


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


def deliver(config: Config, stop: threading.Event | None = None) -> int:
    """Send the ledger's due alerts once each; return how many were delivered."""
    settings, database = config.alerts, open_warehouse(config.ledger_url)
    delivered, seen = 0, set()
    while stop is None or not stop.is_set():
        with database.session() as session:
            batch = outbox.due(session, _now(), sorted(settings.webhooks))
        batch = [item for item in batch if (item.alert_key, item.webhook) not in seen]
        if not batch:
            return delivered
        for item in batch:
            if stop is not None and stop.is_set():
                break
            seen.add((item.alert_key, item.webhook))
            delivered += _attempt(database, settings, item)
    return delivered


def _attempt(database: Any, settings: AlertsConfig, item: outbox.Due) -> int:
    """Claim one alert, POST it, record the outcome; 1 if it was delivered."""
    now = _now()
    with database.session() as session:
        if not outbox.claim(session, item, now, now + settings.timeout + CLAIM_MARGIN):
            return 0
    error, retry_at = None, None
    try:
        post(settings.webhooks[item.webhook], item.payload, settings.timeout.total_seconds())
    except Refused as exc:
        error = str(exc)
    except OSError as exc:  # URLError, timeouts and 5xx answers are OSErrors
        error = redact(str(getattr(exc, "reason", None) or exc))
        retry = outbox.backoff(item.attempts + 1, settings.retry_delay, settings.max_retry_delay)
        retry_at = _now() + retry
    if error is not None:
        log.warning("alert %s to webhook %s not delivered: %s", item.alert_key, item.webhook, error)

    def settle() -> None:
        with database.session() as session:
            outbox.settle(session, item, _now(), error, retry_at)

    _retrying(settle, item.alert_key)
    return 1 if error is None else 0
