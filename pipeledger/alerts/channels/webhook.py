"""A webhook: the alert's JSON document, POSTed as is (Slack's incoming webhooks show its
``text``). ``Idempotency-Key`` carries the alert's id, for receivers that deduplicate."""

from __future__ import annotations

import json
from typing import Any

from pipeledger.alerts.channels import Refused
from pipeledger.common import version as __about__
from pipeledger.common.http import Answer, endpoint, post

RETRIED = (408, 429)  # 4xx answers that a later attempt may get past


def answered(answer: Answer) -> None:
    """Nothing for a 2xx answer; :class:`Refused` for one that will never change; an
    ``OSError`` for one a later attempt may get past (408, 429, 5xx)."""
    if 200 <= answer.status < 300:
        return
    said = f"HTTP {answer.status} {answer.reason}".rstrip()  # the row names its channel
    if answer.status >= 500 or answer.status in RETRIED:
        raise OSError(said)
    if 300 <= answer.status < 400:
        said += " (redirects are not followed: configure the URL it points to)"
    raise Refused(said)


def headers(alert: dict[str, Any]) -> dict[str, str]:
    return {
        "User-Agent": f"pipeledger/{__about__.__version__}",
        "Idempotency-Key": str(alert.get("alert_id", "")),
    }


class Webhook:
    def __init__(self, url: str) -> None:
        self.to = endpoint(url)

    def send(self, alert: dict[str, Any], timeout: float) -> None:
        body = json.dumps(alert).encode()
        answered(post(self.to, body, headers(alert), timeout))
