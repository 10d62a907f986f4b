"""The watchdog: a run whose lease expired without a heartbeat is ``abandoned``."""

from __future__ import annotations

import os
import socket
from datetime import UTC, datetime

from pipeledger.adapters.base import Session
from pipeledger.ledger import sql as lsql
from pipeledger.ledger.model import stored_datetime


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def abandon_expired(session: Session, now: datetime | None = None) -> list[str]:
    """Mark every running run whose lease has expired as abandoned; return their ids.

    SQLite cannot take a heartbeat while a load holds its write lock, so there a run
    whose process is still alive on this host is left alone even past its lease.
    """
    now = now or datetime.now(UTC)
    d = session.dialect
    here = socket.gethostname()
    abandoned = []
    for run_id, started_at, host, pid in session.query(lsql.expired_runs(d), [now]):
        if d.name == "sqlite" and host == here and pid is not None and process_alive(int(pid)):
            continue
        started = stored_datetime(started_at) or now
        duration = int((now - started).total_seconds() * 1000)
        message = f"lease expired without a heartbeat (process {pid} on {host})"
        if session.execute(lsql.abandon_run(d), [now, duration, message, run_id]):
            abandoned.append(str(run_id))
    return abandoned
