"""Where an alert goes: one module per kind of channel, each turning the alert's JSON
document (:meth:`pipeledger.alerts.events.Event.payload`, as the ledger stored it) into
what its receiver expects, and sending it within a total time.

=============  ===============================================================
``webhook``    the document itself, POSTed as JSON (:mod:`.webhook`)
``pagerduty``  a PagerDuty Events API v2 ``trigger`` event (:mod:`.pagerduty`)
``email``      one plain-text message over SMTP (:mod:`.email`)
=============  ===============================================================

A channel's :meth:`~Channel.send` returns when the receiver took the alert, raises
:class:`Refused` when it will never take it (a 4xx answer, a 5xx SMTP reply), and raises
anything else for what a later attempt may get past (the delivery records it as a failed
attempt and retries with backoff).
"""

from __future__ import annotations

from typing import Any, Protocol

from pipeledger.config.model import AlertsConfig


class Refused(Exception):
    """The receiver answered that this alert will never be accepted."""


class Channel(Protocol):
    def send(self, alert: dict[str, Any], timeout: float) -> None:
        """Send ``alert`` (the stored JSON document), giving up after ``timeout`` seconds."""
        ...


def open_channels(settings: AlertsConfig) -> dict[str, Channel]:
    """Every channel of ``[alerts]`` by name."""
    from pipeledger.alerts.channels.email import Email
    from pipeledger.alerts.channels.pagerduty import PagerDuty
    from pipeledger.alerts.channels.webhook import Webhook

    found: dict[str, Channel] = {n: Webhook(url) for n, url in settings.webhooks.items()}
    found.update({n: PagerDuty(c) for n, c in settings.pagerduty.items()})
    found.update({n: Email(c) for n, c in settings.email.items()})
    return found
