"""The ledger's history of runs: :func:`list_runs` (a page of them, newest first, by the
filters of :class:`RunFilter`) and :func:`count_runs` (how many match); one run in detail is
:mod:`pipeledger.ledger.reads.detail`. The words are defined in
:mod:`pipeledger.ledger.reads.queries`.

Pages are keyset pages: the next page is the runs that started before the last one shown
(``before``: its start and run id), so a page of a long history costs what the first one
does, on the (pipeline, started_at) index, and a run recorded meanwhile shifts nothing."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from pipeledger.ledger.reads.answers import Answer, _build, _columns
from pipeledger.ledger.tables import RUNS, stored_datetime, tenant_is
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


@dataclass(frozen=True, kw_only=True)
class RunFilter:
    """Which runs: of one pipeline, started in ``[since, until)``, in one state, of one
    trigger type, the attempts of one logical run, the nodes of one DAG run (its
    correlation id); each None matches every run. ``before``: the runs that started
    before this (started_at, run_id), the next page."""

    pipeline: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    status: str | None = None
    trigger_type: str | None = None
    logical_run_id: str | None = None
    correlation_id: str | None = None
    before: tuple[datetime, str] | None = None


def _where(d: Dialect, f: RunFilter) -> tuple[str, list[Any]]:
    p = d.param
    pairs = (
        ("pipeline =", f.pipeline),
        ("started_at >=", f.since),
        ("started_at <", f.until),
        ("status =", f.status),
        ("trigger_type =", f.trigger_type),
        ("logical_run_id =", f.logical_run_id),
        ("correlation_id =", f.correlation_id),
    )
    where = [tenant_is(d, "r")]  # the tenant's part of every index on the runs
    where += [f"{clause} {p}" for clause, value in pairs if value is not None]
    params: list[Any] = [value for _, value in pairs if value is not None]
    if f.before is not None:
        # started_at <= ... first: an index condition; the tie on run id filters it
        where.append(f"started_at <= {p} AND (started_at < {p} OR run_id < {p})")
        params += [f.before[0], f.before[0], f.before[1]]
    return f" r WHERE {' AND '.join(where)}", params


def list_runs_sql(
    d: Dialect,
    pipeline: str | None = None,
    since: datetime | None = None,
    status: str | None = None,
    limit: int = 50,
    *,
    where: RunFilter | None = None,
) -> tuple[str, list[Any]]:
    """The runs ``where`` (or the three first filters) matches, newest first."""
    chosen = where or RunFilter(pipeline=pipeline, since=since, status=status)
    condition, params = _where(d, chosen)
    return (
        f"SELECT {', '.join(_columns(RunRow))} FROM {d.table(RUNS)}{condition} "
        f"ORDER BY started_at DESC, run_id DESC LIMIT {d.param}",
        [*params, limit],
    )


def count_runs_sql(d: Dialect, where: RunFilter) -> tuple[str, list[Any]]:
    condition, params = _where(d, where)
    return f"SELECT count(*) FROM {d.table(RUNS)}{condition}", params


def run_start_sql(d: Dialect) -> str:
    """A run's (started_at, run_id): where the page after it starts."""
    return (
        f"SELECT r.started_at, r.run_id FROM {d.table(RUNS)} r "
        f"WHERE r.run_id = {d.param} AND {tenant_is(d, 'r')}"
    )


def _plain(where: RunFilter) -> RunFilter:
    """The filter with its closed sets as the text the ledger stores (a StrEnum binds by
    its value)."""
    return RunFilter(
        pipeline=where.pipeline,
        since=where.since,
        until=where.until,
        status=None if where.status is None else str(where.status),
        trigger_type=None if where.trigger_type is None else str(where.trigger_type),
        logical_run_id=where.logical_run_id,
        correlation_id=where.correlation_id,
        before=where.before,
    )


def run_start(session: Session, run_id: str) -> tuple[datetime, str] | None:
    """Where the page after run ``run_id`` starts; None when the ledger has no such run."""
    rows = session.query(run_start_sql(session.dialect), [run_id])
    if not rows:
        return None
    started = stored_datetime(rows[0][0])
    assert started is not None
    return started, str(rows[0][1])


def list_runs(
    session: Session,
    pipeline: str | None = None,
    since: datetime | None = None,
    status: str | None = None,
    limit: int = 50,
    *,
    where: RunFilter | None = None,
) -> list[RunRow]:
    """Runs, newest first: those ``where`` matches (or, without it, optionally of one
    pipeline, started since ``since``, in ``status``), at most ``limit``."""
    chosen = _plain(where or RunFilter(pipeline=pipeline, since=since, status=status))
    sql, params = list_runs_sql(session.dialect, limit=limit, where=chosen)
    return [_build(RunRow, row, _RUN_TIMES) for row in session.query(sql, params)]


def count_runs(session: Session, where: RunFilter) -> int:
    """How many runs ``where`` matches (its ``before`` left out: every page's total)."""
    sql, params = count_runs_sql(session.dialect, replace(_plain(where), before=None))
    return int(session.query(sql, params)[0][0])
