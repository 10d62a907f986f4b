"""PagerDuty (Events API v2): each alert is a ``trigger`` event whose ``dedup_key`` is the
alert's id, so an alert sent twice (a retry after a lost answer) is one incident.

::

    {"routing_key": "<the service's integration key>", "event_action": "trigger",
     "dedup_key": "<alert_id>", "client": "pipeledger",
     "payload": {"summary": "<text>", "source": "pipeledger", "severity": "error",
                 "timestamp": "<occurred_at>", "component": "<pipeline>", "group": "pipeledger",
                 "class": "<event>", "custom_details": {"reason", "run_id", "details"}}}

Severity: ``[alerts.pagerduty.NAME] severity``, else ``error`` for a run that did not
publish (failed, gate halt, timed out, abandoned) and ``warning`` for the rest.
"""

from __future__ import annotations

import json
from typing import Any

from pipeledger.alerts.channels.webhook import answered, headers
from pipeledger.common.http import endpoint, post
from pipeledger.config.model import PagerDutyChannel

ERRORS = frozenset({"failed", "gate_halt", "timed_out", "abandoned"})
MAX_SUMMARY = 1024  # PagerDuty's limit


def event(alert: dict[str, Any], routing_key: str, severity: str | None) -> dict[str, Any]:
    """The Events API v2 document of one alert."""
    kind = str(alert.get("event"))
    return {
        "routing_key": routing_key,
        "event_action": "trigger",
        "dedup_key": alert.get("alert_id"),
        "client": "pipeledger",
        "payload": {
            "summary": str(alert.get("text") or alert.get("reason"))[:MAX_SUMMARY],
            "source": "pipeledger",
            "severity": severity or ("error" if kind in ERRORS else "warning"),
            "timestamp": alert.get("occurred_at"),
            "component": alert.get("pipeline"),
            "group": "pipeledger",
            "class": kind,
            "custom_details": {
                "reason": alert.get("reason"),
                "run_id": alert.get("run_id"),
                "details": alert.get("details"),
            },
        },
    }


class PagerDuty:
    def __init__(self, config: PagerDutyChannel) -> None:
        self.config = config
        self.to = endpoint(config.url)

    def send(self, alert: dict[str, Any], timeout: float) -> None:
        body = json.dumps(event(alert, self.config.routing_key, self.config.severity))
        answered(post(self.to, body.encode(), headers(alert), timeout))
