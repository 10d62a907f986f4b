"""The time schedules and idempotency keys are reckoned in.

``PIPELEDGER_NOW`` (an ISO 8601 instant; without an offset it is UTC) sets this process's
clock: it starts at that instant and runs on in real time. It is a hook for tests and for
rehearsing a schedule ("what would run at 02:00?"), and touches nothing else: run start
times, leases and heartbeats keep the real time.
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta

from pipeledger.errors import ConfigError

VARIABLE = "PIPELEDGER_NOW"
STARTED = time.monotonic()  # the process began here, as far as the clock knows


def now() -> datetime:
    """The current instant (UTC), or the one ``PIPELEDGER_NOW`` sets, moved on by the time
    this process has run since."""
    text = os.environ.get(VARIABLE)
    if not text:
        return datetime.now(UTC)
    return fixed(text) + timedelta(seconds=time.monotonic() - STARTED)


def fixed(text: str) -> datetime:
    """``PIPELEDGER_NOW``'s instant."""
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ConfigError(
            f"{VARIABLE}={text!r} is not an ISO 8601 instant (e.g. 2024-01-01T05:00:00Z)"
        ) from None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
