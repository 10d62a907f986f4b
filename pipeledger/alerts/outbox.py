"""The ledger's ``alerts`` table: one row per event and channel (its ``webhook`` column
names the channel, of any kind), the outbox of deliveries.

A row is ``pending`` until its channel took it (``delivered``) or refused it for good
(``failed``: a 4xx answer other than 408 and 429, a 5xx SMTP reply). Whoever delivers first
*claims* a due row (moves its next attempt past the attempt's end, in a statement of its
own), so two processes delivering at once never send one alert twice, and the claim is
held until the request has ended (its timeout bounds it); a claim whose process died
expires, and the alert is sent again then (with the same ``alert_id``, for receivers that
deduplicate). After a failed attempt the next one waits ``retry_delay``, doubling each
time, at most ``max_retry_delay``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from pipeledger.alerts.events import Event
from pipeledger.config.model import AlertKind
from pipeledger.ledger.reads.queries import Answer
from pipeledger.ledger.tables import (
    ALERT_TABLE,
    ALERTS,
    declared_tenant,
    stored_datetime,
    tenant_is,
)
from pipeledger.warehouse.dialect import Dialect
from pipeledger.warehouse.session import Session

_COLUMNS = ALERT_TABLE.column_names
BATCH = 100  # due alerts read at once


AlertStatus = Literal["pending", "delivered", "failed"]  # the module docstring


def insert_sql(d: Dialect) -> str:
    marks = ", ".join(d.json_param if c in ALERT_TABLE.json_columns else d.param for c in _COLUMNS)
    return (
        f"INSERT INTO {d.table(ALERTS)} ({', '.join(_COLUMNS)}) VALUES ({marks}) "
        f"ON CONFLICT ({ALERT_TABLE.conflict}) DO NOTHING"
    )


def record(session: Session, event: Event, webhooks: Sequence[str], now: datetime) -> int:
    """The event's alert for each channel (``webhooks``: their names, the ledger's column),
    unless it was raised before; how many are new."""
    payload = json.dumps(event.payload())
    added = 0
    for webhook in sorted(webhooks):
        row = {
            "alert_key": event.key,
            "webhook": webhook,
            "event": event.kind,
            "pipeline": event.pipeline,
            "run_id": event.run_id,
            "reason": event.reason,
            "payload": payload,
            "status": "pending",
            "attempts": 0,
            "created_at": now,
            "next_attempt_at": now,
        }
        added += session.execute(insert_sql(session.dialect), [row.get(c) for c in _COLUMNS])
    return added


@dataclass(frozen=True, kw_only=True)
class Due:
    alert_key: str
    webhook: str
    payload: dict[str, Any]
    attempts: int


def due_sql(d: Dialect, webhooks: int) -> str:
    """Pending alerts whose next attempt is due (parameters: now, the webhooks' names, the
    batch size), oldest first."""
    names = d.marks(webhooks)
    return (
        f"SELECT alert_key, webhook, payload, attempts FROM {d.table(ALERTS)} "
        f"WHERE tenant = {declared_tenant(d)} AND status = 'pending' "
        f"AND next_attempt_at <= {d.param} AND webhook IN ({names}) "
        f"ORDER BY created_at, alert_key, webhook LIMIT {d.param}"
    )


def due(session: Session, now: datetime, webhooks: Sequence[str]) -> list[Due]:
    d = session.dialect
    rows = session.query(due_sql(d, len(webhooks)), [now, *webhooks, BATCH])
    return [
        Due(
            alert_key=key,
            webhook=hook,
            payload=json.loads(p) if isinstance(p, str) else p,
            attempts=int(n),
        )
        for key, hook, p, n in rows
    ]


def claim_sql(d: Dialect) -> str:
    """Parameters: now, the claim's end, key, webhook, now."""
    p = d.param
    return (
        f"UPDATE {d.table(ALERTS)} SET attempts = attempts + 1, last_attempt_at = {p}, "
        f"next_attempt_at = {p} WHERE tenant = {declared_tenant(d)} "
        f"AND alert_key = {p} AND webhook = {p} "
        f"AND status = 'pending' AND next_attempt_at <= {p}"
    )


def claim(session: Session, item: Due, now: datetime, until: datetime) -> bool:
    """Take the alert for one attempt; False: someone else took it first."""
    params = [now, until, item.alert_key, item.webhook, now]
    return session.execute(claim_sql(session.dialect), params) == 1


def outcome_sql(d: Dialect) -> str:
    """Parameters: status, delivered_at, next_attempt_at, last_error, key, webhook."""
    p = d.param
    return (
        f"UPDATE {d.table(ALERTS)} SET status = {p}, delivered_at = {p}, next_attempt_at = {p}, "
        f"last_error = {p} WHERE tenant = {declared_tenant(d)} "
        f"AND alert_key = {p} AND webhook = {p}"
    )


def backoff(attempts: int, first: timedelta, longest: timedelta) -> timedelta:
    """The wait after the ``attempts``-th failed attempt."""
    wait: timedelta = first * 2 ** min(max(attempts - 1, 0), 20)  # 2**20: past any cap
    return min(wait, longest)


def settle(
    session: Session, item: Due, now: datetime, error: str | None, retry_at: datetime | None
) -> None:
    """Record an attempt's outcome: delivered (no error), a retry at ``retry_at``, or
    refused for good (an error and no retry)."""
    if error is None:
        values: list[Any] = ["delivered", now, now, None]
    elif retry_at is not None:
        values = ["pending", None, retry_at, error]
    else:
        values = ["failed", None, now, error]
    session.execute(outcome_sql(session.dialect), [*values, item.alert_key, item.webhook])


@dataclass(frozen=True)
class AlertRow(Answer):
    alert_key: str
    webhook: str
    event: AlertKind
    pipeline: str | None
    run_id: str | None
    reason: str
    status: AlertStatus
    attempts: int
    created_at: datetime
    next_attempt_at: datetime | None
    delivered_at: datetime | None
    last_error: str | None


_LISTED = tuple(c for c in _COLUMNS if c not in ("payload", "last_attempt_at"))


def list_sql(d: Dialect, run: bool = False) -> str:
    """Parameters: since when, then the run id if ``run`` (the session's tenant: :func:`ask`)."""
    of_run = f" AND run_id = {d.param}" if run else ""
    return (
        f"SELECT {', '.join(_LISTED)} FROM {d.table(ALERTS)} a WHERE {tenant_is(d, 'a')} "
        f"AND created_at >= {d.param}{of_run} ORDER BY created_at DESC, alert_key, webhook"
    )


def recent(session: Session, since: datetime, run_id: str | None = None) -> list[AlertRow]:
    """Alerts raised since ``since`` (about run ``run_id`` only, when given), newest first,
    with their delivery status."""
    params: list[Any] = [since] if run_id is None else [since, run_id]
    rows = session.query(list_sql(session.dialect, run_id is not None), params)
    times = ("created_at", "next_attempt_at", "delivered_at")
    found = []
    for row in rows:
        values = dict(zip(_LISTED, row, strict=True))
        values.update({name: stored_datetime(values[name]) for name in times})
        values["attempts"] = int(values["attempts"])
        found.append(AlertRow(**values))
    return found
