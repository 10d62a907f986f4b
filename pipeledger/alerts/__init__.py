"""Alerts: events read from the ledger after every run, sent once each to every channel.

::

    a run ends ──> the process's watcher (a daemon thread)     pipeledger watchdog, serve
                     look: SLA breaches observed (ledger.sla)    (catch up what was missed)
                           events derived from the ledger (events)
                           one alert per event and channel (outbox: deduplicated)
                     deliver: rounds of concurrent, bounded attempts (delivery), each
                           through its channel: webhook, PagerDuty, email (channels)
    the process exits: the watcher's look is made and attempts in flight end, within
                     [alerts] timeout + 5 s (watch.exit_wait)

``[alerts]`` in ``pipeledger.toml`` names the channels and the events they get; an event
no run records (a check of your own) is raised with :func:`raise_event`.
"""

from pipeledger.alerts.watch import (
    after_run,
    catch_up,
    deliver_pending,
    look_after,
    raise_event,
    wait_for_watchers,
    watching,
)

__all__ = [
    "after_run",
    "catch_up",
    "deliver_pending",
    "look_after",
    "raise_event",
    "wait_for_watchers",
    "watching",
]
