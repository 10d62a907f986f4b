"""The watchdog settles runs that can no longer finish on their own: a run whose lease
expired without a heartbeat, or whose process is gone from this host.

Such a run is ``abandoned`` unless the warehouse shows that it committed (its commit
record, written in the run's own transaction; see :class:`CommitLog`): then the ledger
learns from there what the run could not tell it (the ledger was unreachable when it
finished, or the connection broke during COMMIT), and the run ends ``success`` with its
real counts. SQLite cannot take a heartbeat while a load holds its write lock, so there a
run whose process is still alive on this host is left alone even past its lease.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

from pipeledger.ledger import sql as lsql
from pipeledger.ledger import store as st
from pipeledger.ledger.tables import stored_datetime
from pipeledger.warehouse.clients import gone, process_alive, this_host
from pipeledger.warehouse.session import Session


class CommitLog(Protocol):
    """Which runs committed in the warehouse, with the ledger ops each left there."""

    def committed(self, run_ids: Sequence[str]) -> Mapping[str, list[st.Op]]: ...


def abandon_expired(
    session: Session, commits: CommitLog | None = None, now: datetime | None = None
) -> dict[str, str]:
    """Settle every running run whose lease expired or whose process is gone from this
    host: from its commit record if it committed, else as abandoned. Return each settled
    run's id and new status."""
    now = now or datetime.now(UTC)
    d = session.dialect
    here = this_host()
    stale = []
    for run_id, started_at, host, pid, expires in session.query(lsql.running_runs(d)):
        expired = (stored_datetime(expires) or now) < now
        if gone(host, pid) or (
            expired and not _loading_here(d.heartbeat_while_loading, host, pid, here)
        ):
            stale.append((str(run_id), stored_datetime(started_at) or now, host, pid))
    committed = commits.committed([r[0] for r in stale]) if commits and stale else {}
    settled = {}
    for run_id, started, host, pid in stale:
        status = _settle(session, run_id, started, host, pid, committed.get(run_id), now)
        if status is not None:
            settled[run_id] = status
    return settled


def _loading_here(heartbeats: bool, host: object, pid: object, here: str) -> bool:
    """SQLite: a live process on this host may be inside a load that blocks its heartbeat."""
    return not heartbeats and host == here and pid is not None and process_alive(int(str(pid)))


def _settle(
    session: Session,
    run_id: str,
    started: datetime,
    host: Any,
    pid: Any,
    ops: list[st.Op] | None,
    now: datetime,
) -> str | None:
    if ops:  # it committed: what it would have written to the ledger, written now
        for op in ops:
            st.apply(session, op)
        return str(ops[0].data.get("status", "success"))
    duration = int((now - started).total_seconds() * 1000)
    message = f"lease expired without a heartbeat (process {pid} on {host})"
    if gone(host, pid):
        message = f"its process {pid} on {host} ended without finishing the run"
    params = [now, duration, message, run_id]
    return "abandoned" if session.execute(lsql.abandon_run(session.dialect), params) else None
