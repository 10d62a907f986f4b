"""Alerts: events read from the ledger after every run, sent once each to webhooks.

::

    a run ends ──> the process's watcher (a daemon thread)     pipeledger watchdog, serve
                     look: SLA breaches observed (ledger.sla)    (look and deliver at once)
                           events derived from the ledger (events)
                           one alert per event and webhook (outbox: deduplicated)
                     deliver: POST each due alert, record the outcome (delivery)

``[alerts]`` in ``pipeledger.toml`` names the webhooks and the events they get; an event
no run records (a check of your own) is raised with :func:`raise_event`.
"""

from pipeledger.alerts.watch import (
    after_run,
    deliver_pending,
    look_after,
    raise_event,
    wait_for_watchers,
    watching,
)

__all__ = [
    "after_run",
    "deliver_pending",
    "look_after",
    "raise_event",
    "wait_for_watchers",
    "watching",
]
