"""One run in detail: :func:`show_run` (the run with its tasks, audit events, snapshots
and check results) and :func:`audit_trail` (the audit events about one table). The words are
defined in :mod:`pipeledger.ledger.reads.queries`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from pipeledger.errors import AmbiguousRunId
from pipeledger.ledger.reads.answers import MIN_PREFIX, Answer, _as_json, _build, _columns
from pipeledger.ledger.reads.checks import CheckRow, run_checks
from pipeledger.ledger.reads.runs import _RUN_TIMES, RunRow
from pipeledger.ledger.tables import AUDIT, RUNS, SNAPSHOTS, TASKS, stored_datetime, tenant_is
from pipeledger.ledger.vocabulary import TaskStatus
from pipeledger.warehouse.dialect import Dialect
from pipeledger.warehouse.session import Session

# -- 2. show_run ------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class TaskRow(Answer):
    task_run_id: str
    name: str
    seq: int
    status: TaskStatus
    started_at: datetime
    ended_at: datetime | None
    duration_ms: int | None
    rows_in: int | None
    rows_out: int | None
    rows_rejected: int | None
    bytes: int | None
    error_message: str | None


@dataclass(frozen=True, kw_only=True)
class AuditRow(Answer):
    event_id: str
    run_id: str | None
    pipeline: str | None
    event_type: str
    target_table: str | None
    record_count: int | None
    old_values: Any
    new_values: Any
    metadata: Any
    created_at: datetime


@dataclass(frozen=True, kw_only=True)
class SnapshotRow(Answer):
    target_table: str
    row_count: int
    max_cursor: str | None
    schema_fingerprint: str
    columns: Any
    created_at: datetime


@dataclass(frozen=True, kw_only=True)
class RunDetail(Answer):
    run: RunRow
    triggered_by: str | None
    correlation_id: str | None
    environment: str | None
    bytes_read: int | None
    code_version: str | None
    host: str | None
    pid: int | None
    heartbeat_at: datetime | None
    lease_expires_at: datetime | None
    extra: Any
    tasks: tuple[TaskRow, ...]
    events: tuple[AuditRow, ...]
    snapshots: tuple[SnapshotRow, ...]
    checks: tuple[CheckRow, ...]

    def to_json(self) -> dict[str, Any]:
        payload = super().to_json()
        return {**payload.pop("run"), **payload}


_DETAIL_COLUMNS = (
    "triggered_by",
    "correlation_id",
    "environment",
    "bytes_read",
    "code_version",
    "host",
    "pid",
    "heartbeat_at",
    "lease_expires_at",
    "extra",
)
_DETAIL_TIMES = frozenset({"heartbeat_at", "lease_expires_at"})


def match_run_id(session: Session, run_id: str) -> str | None:
    """The run id ``run_id`` names: itself, or the one run it is the first 8+ characters
    of; None when it names none. Raises AmbiguousRunId when it starts several."""
    d = session.dialect
    runs = d.table(RUNS)
    mine = tenant_is(d, "r")
    if session.query(f"SELECT 1 FROM {runs} r WHERE r.run_id = {d.param} AND {mine}", [run_id]):
        return run_id
    if len(run_id) < MIN_PREFIX:
        return None
    found = [
        str(row[0])
        for row in session.query(
            f"SELECT run_id FROM {runs} r WHERE {mine} "
            f"AND substr(run_id, 1, {d.param}) = {d.param} "
            "ORDER BY run_id LIMIT 6",
            [len(run_id), run_id],
        )
    ]
    if len(found) > 1:
        more = ", ..." if len(found) > 5 else ""
        raise AmbiguousRunId(
            f"run id prefix {run_id!r} matches several runs ({', '.join(found[:5])}{more}); "
            "give more characters"
        )
    return found[0] if found else None


def show_run(session: Session, run_id: str) -> RunDetail | None:
    """One run with its tasks (by seq), audit events, snapshots and check results; None
    if unknown.

    ``run_id`` may be a prefix of at least 8 characters that matches exactly one run."""
    full = match_run_id(session, run_id)
    if full is None:
        return None
    d = session.dialect
    p = d.param
    (row,) = session.query(
        f"SELECT {', '.join((*_columns(RunRow), *_DETAIL_COLUMNS))} "
        f"FROM {d.table(RUNS)} r WHERE r.run_id = {p} AND {tenant_is(d, 'r')}",
        [full],
    )
    run = _build(RunRow, row, _RUN_TIMES)
    more = dict(zip(_DETAIL_COLUMNS, row[len(_columns(RunRow)) :], strict=True))
    for name in _DETAIL_TIMES:
        more[name] = stored_datetime(more[name])
    more["extra"] = _as_json(d, more["extra"])
    tasks = session.query(
        f"SELECT {', '.join(_columns(TaskRow))} FROM {d.table(TASKS)} t "
        f"WHERE {tenant_is(d, 't')} AND t.run_id = {p} "
        "ORDER BY seq, started_at",
        [full],
    )
    snapshots = session.query(
        f"SELECT {', '.join(_columns(SnapshotRow))} FROM {d.table(SNAPSHOTS)} sn "
        f"WHERE {tenant_is(d, 'sn')} AND sn.run_id = {p} ORDER BY target_table",
        [full],
    )
    return RunDetail(
        run=run,
        **more,
        tasks=tuple(_build(TaskRow, t, frozenset({"started_at", "ended_at"})) for t in tasks),
        events=tuple(_events(session, "run_id", full, None, None, ascending=True)),
        snapshots=tuple(_snapshot(d, s) for s in snapshots),
        checks=tuple(run_checks(session, full)),
    )


def _snapshot(d: Dialect, row: Sequence[Any]) -> SnapshotRow:
    snapshot: SnapshotRow = _build(SnapshotRow, row, frozenset({"created_at"}))
    return replace(snapshot, columns=_as_json(d, snapshot.columns))


# -- 6. audit_trail ---------------------------------------------------------------------


def _events(
    session: Session,
    column: str,
    value: str,
    since: datetime | None,
    limit: int | None,
    *,
    ascending: bool = False,
) -> list[AuditRow]:
    d = session.dialect
    params: list[Any] = [value]
    sql = (
        f"SELECT {', '.join(_columns(AuditRow))} FROM {d.table(AUDIT)} e "
        f"WHERE {tenant_is(d, 'e')} AND {column} = {d.param}"
    )
    if since is not None:
        sql += f" AND created_at >= {d.param}"
        params.append(since)
    order = "" if ascending else " DESC"
    sql += f" ORDER BY created_at{order}, event_id{order}"
    if limit is not None:
        sql += f" LIMIT {d.param}"
        params.append(limit)
    result = []
    for row in session.query(sql, params):
        event: AuditRow = _build(AuditRow, row, frozenset({"created_at"}))
        parsed = {
            k: _as_json(d, getattr(event, k)) for k in ("old_values", "new_values", "metadata")
        }
        result.append(replace(event, **parsed))
    return result


def audit_trail(
    session: Session, target_table: str, since: datetime | None = None, limit: int = 200
) -> list[AuditRow]:
    """Audit events about ``target_table``, newest first, JSON values parsed."""
    return _events(session, "target_table", target_table, since, limit)
