"""Slots per tenant: at most ``max_concurrent_runs`` runs of a tenant at once, the others
``queued`` in the ledger, first come first served, at most ``queue_capacity`` of them.

Every decision is one transaction on the ledger's database that first updates the tenant's
row of ``run_queues``: on PostgreSQL a row lock that a second process waits for, on SQLite
the write lock the transaction holds anyway. So two processes never both take the last
slot, nor both take the last place in the queue. Inside it:

::

    settle   queued runs whose lease expired (their process died while waiting): abandoned;
             slots whose run ended: freed
    count    the tenant's running and queued runs (run_slots joined to pipeline_runs)
    decide   admit: a slot is free and nobody waits    -> running
             queue: the queue has room                 -> queued (waits, see below)
             full                                      -> rejected (QueueFull, exit 7)

A queued run asks again every ``queue_poll`` (renewing its lease, so the settling above
never takes a live waiter for a dead one); it starts when it is the oldest waiter of its
tenant and a slot is free, and ends ``timed_out`` (QueueTimedOut) past ``queue_timeout``,
or ``cancelled`` when ``pipeledger cancel`` asked. Tenants have slots of their own: one
tenant's queue never delays another's. Slots are counted from the runs' own states, so a
run that ends by any path (its commit, the spool, the watchdog) frees its slot.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

from pipeledger.ledger import sql as lsql
from pipeledger.ledger.tables import QUEUES, RUNS, SLOTS, declared_tenant
from pipeledger.warehouse.dialect import Dialect
from pipeledger.warehouse.session import Session

Decision = Literal["running", "queued", "rejected"]


@dataclass(frozen=True, kw_only=True)
class Concurrency:
    """A tenant's slots and queue (``[limits]``)."""

    tenant: str
    max_concurrent_runs: int
    queue_capacity: int
    queue_timeout: timedelta
    queue_poll: timedelta


@dataclass(frozen=True)
class Occupancy:
    running: int
    queued: int


def _now() -> datetime:
    return datetime.now(UTC)


# -- SQL (pure builders) --------------------------------------------------------------
def lock_tenant(d: Dialect) -> str:
    """Take the tenant's row (made on first use): the decision's lock."""
    return (
        f"INSERT INTO {d.table(QUEUES)} (tenant, decided_at) VALUES ({d.param}, {d.param}) "
        "ON CONFLICT (tenant) DO UPDATE SET decided_at = excluded.decided_at"
    )


def abandon_dead_waiters(d: Dialect) -> str:
    p = d.param
    return (
        f"UPDATE {d.table(RUNS)} SET status = 'abandoned', ended_at = {p}, "
        "error_message = 'its process stopped renewing its lease while it waited queued' "
        f"WHERE status = 'queued' AND lease_expires_at < {p} AND run_id IN "
        f"(SELECT run_id FROM {d.table(SLOTS)} WHERE tenant = {p})"
    )


def free_ended(d: Dialect) -> str:
    return (
        f"DELETE FROM {d.table(SLOTS)} WHERE tenant = {d.param} AND run_id NOT IN "
        f"(SELECT run_id FROM {d.table(RUNS)} WHERE status IN ('queued', 'running'))"
    )


def occupancy(d: Dialect) -> str:
    return (
        "SELECT sum(CASE WHEN r.status = 'running' THEN 1 ELSE 0 END), "
        "sum(CASE WHEN r.status = 'queued' THEN 1 ELSE 0 END) "
        f"FROM {d.table(SLOTS)} s JOIN {d.table(RUNS)} r "
        "ON r.tenant = s.tenant AND r.run_id = s.run_id "
        f"WHERE s.tenant = {d.param}"
    )


def first_waiter(d: Dialect) -> str:
    return (
        f"SELECT s.run_id FROM {d.table(SLOTS)} s JOIN {d.table(RUNS)} r "
        "ON r.tenant = s.tenant AND r.run_id = s.run_id "
        f"WHERE s.tenant = {d.param} AND r.status = 'queued' "
        "ORDER BY s.queued_at, s.run_id LIMIT 1"
    )


def take_slot(d: Dialect) -> str:
    return (
        f"INSERT INTO {d.table(SLOTS)} (run_id, tenant, pipeline, queued_at) "
        f"VALUES ({d.param}, {d.param}, {d.param}, {d.param})"
    )


def start_waiter(d: Dialect) -> str:
    p = d.param
    return (
        f"UPDATE {d.table(RUNS)} SET status = 'running', started_at = {p}, "
        f"heartbeat_at = {p}, lease_expires_at = {p} "
        f"WHERE tenant = {declared_tenant(d)} AND run_id = {p} AND status = 'queued'"
    )


def end_waiter(d: Dialect) -> str:
    """A queued run leaves the queue without running: timed out, cancelled, rejected."""
    p = d.param
    return (
        f"UPDATE {d.table(RUNS)} SET status = {p}, ended_at = {p}, duration_ms = {p}, "
        f"error_code = {p}, error_message = {p} "
        f"WHERE tenant = {declared_tenant(d)} AND run_id = {p} AND status = 'queued'"
    )


def status_of(d: Dialect) -> str:
    return (
        f"SELECT status FROM {d.table(RUNS)} "
        f"WHERE tenant = {declared_tenant(d)} AND run_id = {d.param}"
    )


# -- the decisions (in the caller's transaction) ----------------------------------------
def settle(session: Session, tenant: str, now: datetime) -> Occupancy:
    """Lock the tenant, settle dead waiters and ended slots, and count what is left."""
    d = session.dialect
    session.execute(lock_tenant(d), [tenant, now])
    session.execute(abandon_dead_waiters(d), [now, now, tenant])
    session.execute(free_ended(d), [tenant])
    ((running, queued),) = session.query(occupancy(d), [tenant])
    return Occupancy(int(running or 0), int(queued or 0))


def admit(session: Session, limits: Concurrency) -> tuple[Decision, Occupancy, datetime]:
    """What a new run of the tenant may do now (its row is written by the caller), and the
    instant it was decided (with the lock held)."""
    session.execute(lock_tenant(session.dialect), [limits.tenant, _now()])
    now = _now()
    seen = settle(session, limits.tenant, now)
    if seen.running < limits.max_concurrent_runs and seen.queued == 0:
        return "running", seen, now
    if seen.queued < limits.queue_capacity:
        return "queued", seen, now
    return "rejected", seen, now


def hold_slot(session: Session, limits: Concurrency, run_id: str, pipeline: str) -> None:
    session.execute(take_slot(session.dialect), [run_id, limits.tenant, pipeline, _now()])


def turn(
    session: Session, limits: Concurrency, run_id: str, lease: timedelta
) -> tuple[str, datetime]:
    """A waiter's turn: ``running`` when it took a free slot as the oldest waiter,
    ``queued`` (lease renewed) when it must wait on, or the state someone else gave it;
    and the instant it was decided (once the lock was held: on SQLite the session may wait
    for a load's write lock, and the run starts after that load ended, not before)."""
    d = session.dialect
    session.execute(lock_tenant(d), [limits.tenant, _now()])
    now = _now()
    seen = settle(session, limits.tenant, now)
    ((status,),) = session.query(status_of(d), [run_id])
    if status != "queued":
        return str(status), now
    first = session.query(first_waiter(d), [limits.tenant])
    if seen.running < limits.max_concurrent_runs and first and str(first[0][0]) == run_id:
        session.execute(start_waiter(d), [now, now, now + lease, run_id])
        return "running", now
    session.execute(lsql.heartbeat(d, "queued"), [now, now + lease, run_id])
    return "queued", now


def leave(
    session: Session, run_id: str, status: str, queued_at: datetime, code: str, message: str
) -> bool:
    """End a waiter without running it; False when it was not queued any more."""
    now = _now()
    waited = int((now - queued_at).total_seconds() * 1000)
    params = [status, now, waited, code, message, run_id]
    return session.execute(end_waiter(session.dialect), params) == 1
