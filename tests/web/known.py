"""A project whose ledger holds one run of every kind, for the dashboard's tests.

Real runs (through the CLI, as a user makes them) where the dashboard shows what only a
real run leaves behind: ``orders`` succeeds, then ends ``partial`` with one row
quarantined (its model ``order_totals`` runs in the same DAG run); ``payments`` succeeds,
then its gate halts it twice (the second time as ``--retry``: attempt 2 of the same
logical run). Runs recorded through the ledger's own store where making them for real
would take a process killed or hung on purpose: ``customers`` (a success, then
``abandoned`` and ``timed_out``), ``events`` (nine successes, ``cancelled`` and
``skipped``), and a Python pipeline named ``<script>alert(1)</script>`` whose error is
HTML. ``refunds`` is configured, scheduled, and never ran. ``events`` waits on
``customers``, whose freshness SLA is broken; the alerts of all this were delivered to a
webhook on this host.

The health each node must show follows from the rules of
:mod:`pipeledger.ledger.reads.queries` (successes / finished runs of 7 days).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from pipeledger import api
from tests.helpers import Project, order, orders_pipeline
from tests.ledger_fixtures import ledger
from tests.webhook import Receiver

SCRIPT_NAME = "<script>alert(1)</script>"
HTML_ERROR = "<b>boom</b> <img src=x onerror=alert(2)> in step <i>extract</i>"
PASSWORD = "s3cr3t-Pa55word"  # the PostgreSQL password tests/web look for in every response

HEALTH = {
    "orders": "DEGRADED",  # 1 of 2
    "payments": "CRITICAL",  # 1 of 3
    "order_totals": "HEALTHY",  # 1 of 1
    "customers": "CRITICAL",  # 1 of 3
    "events": "HEALTHY",  # 9 of 10 (skipped does not count)
    SCRIPT_NAME: "CRITICAL",  # 0 of 1
    "refunds": "UNKNOWN",  # never ran
}
RATES = {"orders": "50%", "payments": "33%", "customers": "33%", "events": "90%"}


@dataclass
class Known:
    """The project and the ids of its interesting runs."""

    project: Project
    runs: dict[str, str] = field(default_factory=dict)  # what -> run id


def configure(project: Project, webhook: str) -> None:
    quarantine = {"accepted_values": {"status": ["completed", "shipped"]}, "on_fail": "quarantine"}
    missing = {"kind": "csv", "path": "data/never*.csv"}
    project.configure(
        models={
            "order_totals": {
                "query": "select status, count(*) as orders from analytics.orders group by status",
                "target": "mart.order_totals",
                "materialized": "replace",
            }
        },
        orders=orders_pipeline(checks=quarantine),
        payments=orders_pipeline(
            source={"kind": "csv", "path": "data/payments*.csv"},
            target="analytics.payments",
            checks={"row_count": {"max": 3}},
        ),
        customers=orders_pipeline(source=missing, target="analytics.customers"),
        events=orders_pipeline(source=missing, target="analytics.events"),
        refunds=orders_pipeline(source=missing, target="analytics.refunds", schedule="0 2 * * *"),
        raw=f'\n[alerts]\nwebhooks = {{ hook = "{webhook}" }}\n',
    )


def _run(project: Project, *args: str, code: int = 0) -> list[dict[str, object]]:
    exit_code, out, err = project.cli("run", *args, "--json")
    assert exit_code == code, f"exit {exit_code}\n{out}\n{err}"
    outcomes: list[dict[str, object]] = json.loads(out)
    return outcomes


def real_runs(known: Known) -> None:
    p = known.project
    p.write_csv("orders_1.csv", [order(i, f"2024-01-01T1{i}:00:00Z") for i in range(1, 4)])
    known.runs["orders success"] = str(_run(p, "orders")[0]["run_id"])
    p.write_csv(
        "orders_2.csv",
        [order(4, "2024-01-02T10:00:00Z"), order(5, "2024-01-02T11:00:00Z", status="bogus")],
    )
    both = {str(o["pipeline"]): str(o["run_id"]) for o in _run(p, "orders", "order_totals")}
    known.runs["orders partial"] = both["orders"]
    known.runs["order_totals success"] = both["order_totals"]
    p.write_csv("payments_1.csv", [order(i, f"2024-01-01T1{i}:00:00Z") for i in range(1, 3)])
    known.runs["payments success"] = str(_run(p, "payments")[0]["run_id"])
    p.write_csv("payments_2.csv", [order(i, f"2024-01-03T1{i}:00:00Z") for i in range(3, 7)])
    known.runs["payments failed"] = str(_run(p, "payments", code=3)[0]["run_id"])
    known.runs["payments retry"] = str(_run(p, "payments", "--retry", code=3)[0]["run_id"])


def recorded_runs(known: Known, url: str, now: datetime) -> None:
    """The runs of the kinds no test should wait for, written into the project's ledger."""
    hour = timedelta(hours=1)
    with ledger(url) as b:
        for name in ("events", SCRIPT_NAME):
            b.pipeline(name, registered=now - timedelta(days=30))
        b.pipeline("customers", freshness_sla=6 * hour, registered=now - timedelta(days=30))
        b.depends("events", "customers")
        b.run("customers", now - 30 * hour)
        known.runs["customers abandoned"] = b.run(
            "customers",
            now - 5 * hour,
            status="abandoned",
            written=None,
            error_code="LEASE_EXPIRED",
            error_message="lease expired without a heartbeat",
        ).run_id
        known.runs["customers timed_out"] = b.run(
            "customers",
            now - 2 * hour,
            status="timed_out",
            written=None,
            error_code="RunTimedOut",
            error_message="pipeline customers ran past its timeout of 30m and was stopped",
        ).run_id
        for k in range(9):  # twice a day, all inside the 7 days
            b.run("events", now - (12 * k + 6) * hour, written=100 + (k * 7) % 5)
        known.runs["events cancelled"] = b.run(
            "events", now - 3 * hour, status="cancelled", written=None
        ).run_id
        known.runs["events skipped"] = b.run(
            "events", now - 1 * hour, status="skipped", written=None
        ).run_id
        known.runs["script failed"] = b.run(
            SCRIPT_NAME,
            now - 4 * hour,
            status="failed",
            written=None,
            error_code="ValueError",
            error_message=HTML_ERROR,
        ).run_id


def ledger_url(project: Project) -> str:
    if project.warehouse_url:
        return project.warehouse_url
    return f"sqlite:///{project.root / '.pipeledger' / 'warehouse.db'}"


def build(project: Project) -> Known:
    """Configure ``project`` and fill its ledger (about 10 s: six real runs), then let the
    watchdog see the SLAs and deliver the alerts."""
    known = Known(project)
    receiver = Receiver()
    receiver.start()
    try:
        configure(project, receiver.url)
        real_runs(known)
        recorded_runs(known, ledger_url(project), datetime.now(UTC))
        api.watchdog(project.root / "pipeledger.toml")
    finally:
        receiver.stop()
    return known
