"""What raises an alert: events read from what the ledger recorded, and what is sent.

An event is derived from the ledger, never from a run's memory, so a run recorded by any
writer (a load, the spool's replay, the watchdog settling a run, a Python pipeline) raises
the same events, and looking again finds the same ones:

=========================  ==============================================================
event                      raised by
=========================  ==============================================================
``failed``                 a run that ended ``failed`` (not by its quality gate)
``gate_halt``              a run that its quality gate halted
``timed_out``              a run that ended ``timed_out``
``abandoned``              a run that the watchdog settled as ``abandoned``
``quarantine``             a run that ended ``partial`` (rows set aside in quarantine)
``volume_anomaly``         a latest interval whose volume is CRITICAL (ledger.queries)
``freshness_breach``       an episode of lateness (ledger.sla), once per episode
``slow_run``               a run that took longer than its ``max_duration``
``reconciliation_mismatch`` a reconcile run that found windows differing from the source
                           (its ``reconciliations`` row); or :func:`pipeledger.alerts.raise_event`
=========================  ==============================================================

Each event has a key, ``event:pipeline:subject`` (the subject is the run, or the breach
episode), which the ledger's ``alerts`` table keeps unique per webhook: an event raised
twice is sent once.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from pipeledger.common.secrets import redact
from pipeledger.config.model import AlertKind
from pipeledger.ledger.reads.queries import Level, VolumeAnomaly, span, volume_anomalies
from pipeledger.ledger.reads.sla import Breach, breaches
from pipeledger.ledger.tables import RECONCILIATIONS, RUNS, stored_datetime
from pipeledger.warehouse.dialect import Dialect
from pipeledger.warehouse.session import Session

LOOKBACK = timedelta(hours=24)  # how far back each look finds events not raised yet
MAX_REASON = 500
TITLES: dict[str, str] = {
    "failed": "run failed",
    "gate_halt": "quality gate halted the run",
    "timed_out": "run timed out",
    "abandoned": "run abandoned",
    "quarantine": "rows quarantined",
    "volume_anomaly": "volume anomaly",
    "freshness_breach": "freshness SLA breached",
    "slow_run": "run slower than max_duration",
    "reconciliation_mismatch": "reconciliation mismatch",
}
_BY_STATUS: dict[str, AlertKind] = {
    "failed": "failed",
    "timed_out": "timed_out",
    "abandoned": "abandoned",
    "partial": "quarantine",
}
GATE_HALT_CODE = "GateFailed"  # the error code the ledger records for a gate halt


@dataclass(frozen=True, kw_only=True)
class Event:
    kind: AlertKind
    pipeline: str
    subject: str  # the run, or the breach episode
    reason: str
    occurred_at: datetime
    run_id: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.kind}:{self.pipeline}:{self.subject}"

    @property
    def alert_id(self) -> str:
        """A stable id for receivers that deduplicate (a retry after a lost reply)."""
        return str(uuid.uuid5(uuid.NAMESPACE_URL, f"pipeledger:alert:{self.key}"))

    def text(self) -> str:
        """One line for people (Slack's ``text``: ``*bold*`` is its markup)."""
        run = f" (run {self.run_id[:8]})" if self.run_id else ""
        return f"pipeledger: *{self.pipeline}* {TITLES[self.kind]}{run}: {self.reason}"

    def payload(self) -> dict[str, Any]:
        """The JSON document each webhook receives."""
        return {
            "alert_id": self.alert_id,
            "event": self.kind,
            "pipeline": self.pipeline,
            "run_id": self.run_id,
            "reason": self.reason,
            "text": self.text(),
            "occurred_at": self.occurred_at.isoformat(),
            "details": self.details,
        }


def _reason(text: str | None, fallback: str) -> str:
    words = " ".join(redact(text or "").split())
    return (words[: MAX_REASON - 1] + "…" if len(words) > MAX_REASON else words) or fallback


def ended_runs_sql(d: Dialect) -> str:
    """Runs that ended since the parameter in a state that raises an event."""
    states = ", ".join(f"'{s}'" for s in _BY_STATUS)
    return (
        "SELECT run_id, pipeline, status, error_code, error_message, ended_at, rows_rejected "
        f"FROM {d.table(RUNS)} WHERE ended_at >= {d.param} AND status IN ({states}) "
        "ORDER BY ended_at, run_id"
    )


def run_event(row: Sequence[Any]) -> Event:
    """The event of a run that ended badly (a row of :func:`ended_runs_sql`)."""
    run_id, pipeline, status, code, message, ended, rejected = row
    kind = _BY_STATUS[str(status)]
    if kind == "failed" and str(code or "").startswith(GATE_HALT_CODE):
        kind = "gate_halt"
    details = {"status": status, "error_code": code, "rows_rejected": rejected}
    return Event(
        kind=kind,
        pipeline=str(pipeline),
        subject=str(run_id),
        reason=_reason(message, str(status)),
        occurred_at=stored_datetime(ended) or datetime.min,
        run_id=str(run_id),
        details=details,
    )


def mismatches_sql(d: Dialect) -> str:
    """Reconciliations recorded since the parameter that found the target differing."""
    return (
        "SELECT run_id, pipeline, target_table, windows_differing, missing_rows, extra_rows, "
        f"changed_rows, created_at FROM {d.table(RECONCILIATIONS)} "
        f"WHERE created_at >= {d.param} AND status = 'mismatch' ORDER BY created_at, run_id"
    )


def mismatch_event(row: Sequence[Any]) -> Event:
    """The event of a reconciliation that found differences (a row of :func:`mismatches_sql`)."""
    run_id, pipeline, target, windows, missing, extra, changed, created = row
    reason = (
        f"{target}: {windows} window(s) differ from the source ({missing} rows missing, "
        f"{extra} extra, {changed} changed)"
    )
    details = {
        "target_table": target,
        "windows_differing": windows,
        "missing_rows": missing,
        "extra_rows": extra,
        "changed_rows": changed,
    }
    return Event(
        kind="reconciliation_mismatch",
        pipeline=str(pipeline),
        subject=str(run_id),
        reason=reason,
        occurred_at=stored_datetime(created) or datetime.min,
        run_id=str(run_id),
        details=details,
    )


def volume_event(anomaly: VolumeAnomaly) -> Event:
    details = {
        "rows_written": anomaly.rows_written,
        "history": anomaly.n,
        "mean": anomaly.mean,
        "z_score": anomaly.z_score,
    }
    return Event(
        kind="volume_anomaly",
        pipeline=anomaly.pipeline,
        subject=anomaly.run_id,
        reason=anomaly.reason,
        occurred_at=anomaly.started_at,
        run_id=anomaly.run_id,
        details=details,
    )


def breach_event(breach: Breach) -> Event:
    kind: AlertKind = "freshness_breach" if breach.kind == "freshness" else "slow_run"
    details = {
        "due_at": breach.due_at.isoformat(),
        "sla_s": breach.sla_s,
        "late": span(max(breach.late_s, 0)),
    }
    return Event(
        kind=kind,
        pipeline=breach.pipeline,
        subject=breach.breach_id,
        reason=breach.reason,
        occurred_at=breach.detected_at,
        run_id=breach.run_id,
        details=details,
    )


def events(session: Session, now: datetime, lookback: timedelta = LOOKBACK) -> list[Event]:
    """Every event the ledger shows since ``now - lookback``: runs that ended badly,
    reconciliations that found differences, latest intervals that are volume CRITICAL, and
    breaches (open or seen late since then)."""
    since, d = now - lookback, session.dialect
    found = [run_event(row) for row in session.query(ended_runs_sql(d), [since])]
    found += [mismatch_event(row) for row in session.query(mismatches_sql(d), [since])]
    found += [
        volume_event(a)
        for a in volume_anomalies(session, now)
        if a.level is Level.CRITICAL and a.started_at >= since
    ]
    found += [
        breach_event(b) for b in breaches(session, now, 1) if b.open or b.detected_at >= since
    ]
    return sorted(found, key=lambda e: e.key)  # one order: concurrent lookers cannot deadlock
