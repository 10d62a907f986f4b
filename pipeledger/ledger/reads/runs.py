"""The ledger's history of runs: :func:`list_runs` (one run in detail:
:mod:`pipeledger.ledger.reads.detail`). The words are defined in
:mod:`pipeledger.ledger.reads.queries`."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pipeledger.ledger.reads.answers import Answer, _build, _columns
from pipeledger.ledger.tables import RUNS
from pipeledger.ledger.vocabulary import RunStatus, TriggerType
from pipeledger.warehouse.dialect import Dialect
from pipeledger.warehouse.session import Session


@dataclass(frozen=True, kw_only=True)
class RunRow(Answer):
    run_id: str
    logical_run_id: str
    attempt: int
    pipeline: str
    status: RunStatus
    trigger_type: TriggerType
    started_at: datetime
    ended_at: datetime | None
    duration_ms: int | None
    rows_read: int | None
    rows_inserted: int | None
    rows_updated: int | None
    rows_unchanged: int | None
    rows_rejected: int | None
    rows_deleted: int | None
    watermark_before: str | None
    watermark_after: str | None
    error_code: str | None
    error_message: str | None
    parent_run_id: str | None
    data_interval_start: datetime | None
    data_interval_end: datetime | None
    correlation_id: str | None


_RUN_TIMES = frozenset({"started_at", "ended_at", "data_interval_start", "data_interval_end"})


def list_runs_sql(
    d: Dialect,
    pipeline: str | None = None,
    since: datetime | None = None,
    status: str | None = None,
    limit: int = 50,
) -> tuple[str, list[Any]]:
    where: list[str] = []
    params: list[Any] = []
    for clause, value in (("pipeline =", pipeline), ("started_at >=", since), ("status =", status)):
        if value is not None:
            where.append(f"{clause} {d.param}")
            params.append(value)
    condition = f" WHERE {' AND '.join(where)}" if where else ""
    return (
        f"SELECT {', '.join(_columns(RunRow))} FROM {d.table(RUNS)}{condition} "
        f"ORDER BY started_at DESC, run_id DESC LIMIT {d.param}",
        [*params, limit],
    )


def list_runs(
    session: Session,
    pipeline: str | None = None,
    since: datetime | None = None,
    status: str | None = None,
    limit: int = 50,
) -> list[RunRow]:
    """Runs, newest first, optionally of one pipeline, started since ``since``, in ``status``."""
    wanted = None if status is None else str(status)  # a StrEnum binds by its value
    sql, params = list_runs_sql(session.dialect, pipeline, since, wanted, limit)
    return [_build(RunRow, row, _RUN_TIMES) for row in session.query(sql, params)]
