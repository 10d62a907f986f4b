"""Retries of a node's transient failures: which errors, how long to wait, and the daily
budget (``retries``, ``retry_delay``, ``max_retry_delay``, ``max_attempts_per_day``)."""

from __future__ import annotations

import logging
import random
from datetime import UTC, datetime, timedelta

from pipeledger.common.secrets import redact
from pipeledger.errors import CommitUnknown, ConcurrentRunError, Transient, WarehouseBusy
from pipeledger.ledger.reads.recent import attempts_since
from pipeledger.runs.interrupt import pause
from pipeledger.runs.site import Site

log = logging.getLogger("pipeledger.run")


def retryable(exc: BaseException) -> bool:
    """Transient failures only (a connection lost, a serialization failure, a deadlock, a
    lock or statement timeout, the database busy). Never: a data or config error, a gate
    halt, a run skipped for a held lock (its holder loads the rows), a COMMIT of unknown
    outcome (the watchdog settles it first), a run stopped on purpose."""
    if isinstance(exc, WarehouseBusy):
        return True
    return isinstance(exc, Transient) and not isinstance(exc, ConcurrentRunError | CommitUnknown)


def should_retry(site: Site, name: str, exc: BaseException, attempt: int) -> bool:
    """Whether to make another attempt after ``exc``; waits the delay first."""
    node = site.config.node(name)
    if attempt > node.retries or not retryable(exc):
        return False
    if node.max_attempts_per_day is not None:
        with site.ledger.reading() as session:
            spent = attempts_since(session, name, datetime.now(UTC) - timedelta(days=1))
        if spent >= node.max_attempts_per_day:
            exc.add_note(
                f"no retry: pipeline {name} made {spent} attempts in the last 24 hours "
                f"(max_attempts_per_day = {node.max_attempts_per_day})"
            )
            return False
    delay = retry_delay(node.retry_delay, node.max_retry_delay, attempt)
    log.warning(
        "pipeline %s: attempt %d failed (%s); retrying in %.1f s (attempt %d of %d)",
        *(name, attempt, redact(str(exc)), delay, attempt + 1, node.retries + 1),
    )
    return pause(delay)


def retry_delay(base: timedelta, cap: timedelta, attempt: int) -> float:
    """Seconds before attempt ``attempt + 1``: ``base * 2**(attempt-1)``, +-25% jitter (so
    that pipelines that failed together do not retry together), at most ``cap``."""
    seconds: float = base.total_seconds() * 2.0 ** (attempt - 1) * random.uniform(0.75, 1.25)
    return min(seconds, cap.total_seconds())
