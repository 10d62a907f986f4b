"""Questions the ledger answers, as library functions over a read-only session.

The CLI, ``--json`` and the web page are thin faces over these functions.
"""

from __future__ import annotations

from datetime import datetime

from pipeledger.adapters.base import Session
from pipeledger.ledger.schema import RUNS


def _as_datetime(value: object) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value
    return datetime.fromisoformat(str(value))


def last_success(session: Session, pipeline: str) -> datetime | None:
    """``data_interval_end`` of the pipeline's latest successful run (by start time)."""
    d = session.dialect
    rows = session.query(
        f"SELECT data_interval_end FROM {d.table(RUNS)} WHERE pipeline = {d.param} "
        "AND status = 'success' ORDER BY started_at DESC LIMIT 1",
        [pipeline],
    )
    return _as_datetime(rows[0][0]) if rows else None
