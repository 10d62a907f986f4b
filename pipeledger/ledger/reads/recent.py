"""What the runs themselves ask the ledger: a schedule's intervals held, a retry budget's
attempts, a learned row-count band's history, each node's latest run, a target's latest
snapshot. Each is one or two queries on a read session of the ledger's database
(:meth:`pipeledger.ledger.ledger.Ledger.reading`); before the ledger has tables, each
answers as if it had no runs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pipeledger.ledger import sql as lsql
from pipeledger.ledger.tables import LEDGER, RUNS, SNAPSHOTS, stored_datetime, tenant_is
from pipeledger.warehouse.dialect import Dialect
from pipeledger.warehouse.migrations import is_migrated
from pipeledger.warehouse.session import Session

NAMES_CHUNK = 400  # pipelines per statement where each name is a term of a UNION ALL
HELD_KEYS_CHUNK = 30_000  # keys per statement beside at most NAMES_CHUNK names (SQLite)


@dataclass(frozen=True, kw_only=True)
class ScheduledRuns:
    """What the ledger knows of a pipeline's scheduled runs (``pipeledger.schedule``)."""

    held_since: datetime | None = None  # end of the first interval whose run holds its key
    held_until: datetime | None = None  # end of the latest one
    held: frozenset[str] = frozenset()  # which of the asked keys a run holds
    latest: dict[str, Any] = field(default_factory=dict)  # the latest scheduled run


def scheduled_runs(session: Session, pipeline: str, keys: Sequence[str] = ()) -> ScheduledRuns:
    """The pipeline's scheduled runs: the span of intervals held, which of ``keys`` runs
    hold, and its latest scheduled run."""
    return scheduled_runs_of(session, {pipeline: keys})[pipeline]


def scheduled_runs_of(
    session: Session, asked: Mapping[str, Sequence[str]]
) -> dict[str, ScheduledRuns]:
    """:func:`scheduled_runs` of every pipeline of ``asked`` (pipeline: its keys) in three
    statements for all of them (per chunk of names where arrays do not bind), never three
    per pipeline: ``pipeledger schedule`` of 100 scheduled nodes asked 700."""
    columns = session.table_columns(RUNS) or []
    if not asked or "idempotency_key" not in {name for name, _ in columns}:
        return {name: ScheduledRuns() for name in asked}
    names = list(asked)
    chunks = [names] if session.dialect.array_params else _chunks(names)
    spans: dict[str, tuple[Any, Any]] = {}
    held: set[tuple[str, str]] = set()
    latest: dict[str, dict[str, Any]] = {}
    for chunk in chunks:
        spans |= _spans(session, chunk)
        held |= _held(session, {name: asked[name] for name in chunk})
        latest |= _latest_scheduled(session, chunk)
    return {
        name: ScheduledRuns(
            held_since=stored_datetime(spans.get(name, (None, None))[0]),
            held_until=stored_datetime(spans.get(name, (None, None))[1]),
            held=frozenset(key for key in asked[name] if (name, key) in held),
            latest=latest.get(name, {}),
        )
        for name in names
    }


def _chunks(names: Sequence[str], size: int | None = None) -> list[list[str]]:
    size = size or NAMES_CHUNK
    return [list(names[i : i + size]) for i in range(0, len(names), size)]


def _bound(session: Session, values: Sequence[str]) -> list[Any]:
    """Names bound as one array where arrays bind, else one parameter each."""
    return [list(values)] if session.dialect.array_params else list(values)


def _spans(session: Session, names: Sequence[str]) -> dict[str, tuple[Any, Any]]:
    rows = session.query(lsql.scheduled_spans(session.dialect, len(names)), _bound(session, names))
    return {str(name): (since, until) for name, since, until in rows}


def _held(session: Session, asked: Mapping[str, Sequence[str]]) -> set[tuple[str, str]]:
    keys = sorted({key for keys in asked.values() for key in keys})
    if not keys:
        return set()
    d, names = session.dialect, [name for name, keys in asked.items() if keys]
    found: set[tuple[str, str]] = set()
    # SQLite binds at most 32766 parameters: the keys go in chunks beside the names
    for part in [keys] if d.array_params else _chunks(keys, HELD_KEYS_CHUNK):
        sql = lsql.held_keys(d, len(names), len(part))
        rows = session.query(sql, [*_bound(session, names), *_bound(session, part)])
        found |= {(str(name), str(key)) for name, key in rows}
    return found


def _latest_scheduled(session: Session, names: Sequence[str]) -> dict[str, dict[str, Any]]:
    rows = session.query(lsql.latest_scheduled(session.dialect, len(names)), _bound(session, names))
    return {
        str(name): {
            "run_id": str(run_id),
            "status": str(status),
            "start": stored_datetime(start),
            "end": stored_datetime(end),
        }
        for name, run_id, status, start, end in rows
    }


def attempts_since(session: Session, pipeline: str, since: datetime) -> int:
    """Attempts the pipeline made since ``since`` (a retry budget counts them)."""
    if not is_migrated(session, LEDGER):
        return 0
    rows = session.query(lsql.attempts_since(session.dialect), [pipeline, since])
    return int(rows[0][0])


def volume_history(session: Session, pipeline: str, runs: int = 30) -> list[int]:
    """rows_read of the pipeline's latest successful (or partial) incremental runs."""
    if not is_migrated(session, LEDGER):
        return []
    d = session.dialect
    rows = session.query(
        f"SELECT rows_read FROM {d.table(RUNS)} v WHERE {tenant_is(d, 'v')} "
        f"AND pipeline = {d.param} "
        "AND status IN ('success', 'partial') "
        "AND trigger_type NOT IN ('backfill', 'replay', 'reconcile') "
        f"AND rows_read IS NOT NULL ORDER BY started_at DESC LIMIT {int(runs)}",
        [pipeline],
    )
    return [int(r[0]) for r in rows]


def latest_runs_sql(d: Dialect, count: int) -> str:
    """Of ``count`` pipelines (bound), each one's latest run: one index probe each, in one
    statement (not one per pipeline). Where arrays bind, the names are one array (a
    UNION ALL of 500 names took PostgreSQL 100 ms to plan); elsewhere one each."""
    one = f"SELECT CAST({d.param} AS text) AS pipeline"
    names = (
        f"SELECT unnest(CAST({d.param} AS text[])) AS pipeline"
        if d.array_params
        else " UNION ALL ".join([one] * count)
    )
    latest = (
        f"(SELECT x.run_id FROM {d.table(RUNS)} x WHERE {tenant_is(d, 'x')} "
        "AND x.pipeline = n.pipeline "
        "ORDER BY x.started_at DESC, x.run_id DESC LIMIT 1)"
    )
    # each latest run's columns by a probe of the primary key: a join is hashed over every
    # run of the tenant once the pipelines are many (500 nodes: a scan of all the runs)
    of = [
        f"(SELECT r.{column} FROM {d.table(RUNS)} r "
        f"WHERE r.run_id = h.run_id AND {tenant_is(d, 'r')})"
        for column in ("status", "started_at")
    ]
    return (
        f"WITH heads AS (SELECT n.pipeline, {latest} AS run_id FROM ({names}) n) "
        f"SELECT h.pipeline, h.run_id, {', '.join(of)} FROM heads h WHERE h.run_id IS NOT NULL"
    )


def latest_runs(session: Session, pipelines: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Of each pipeline that has runs, its latest: status, run id, start."""
    out: dict[str, dict[str, Any]] = {}
    if not pipelines or not is_migrated(session, LEDGER):
        return out
    d = session.dialect
    if d.array_params:
        rows = session.query(latest_runs_sql(d, len(pipelines)), [list(pipelines)])
    else:  # SQLite takes at most 500 terms in a UNION ALL
        chunks = [
            list(pipelines[i : i + NAMES_CHUNK]) for i in range(0, len(pipelines), NAMES_CHUNK)
        ]
        rows = [row for c in chunks for row in session.query(latest_runs_sql(d, len(c)), c)]
    for name, run_id, status, started in rows:
        out[str(name)] = {"run_id": str(run_id), "status": str(status), "started_at": str(started)}
    return {name: out[name] for name in pipelines if name in out}


def latest_snapshot(session: Session, target: str) -> tuple[int, str | None] | None:
    """(row_count, max_cursor) of the target's latest snapshot, or None."""
    d = session.dialect
    rows = session.query(
        f"SELECT row_count, max_cursor FROM {d.table(SNAPSHOTS)} sn WHERE {tenant_is(d, 'sn')} "
        f"AND target_table = {d.param} ORDER BY created_at DESC LIMIT 1",
        [target],
    )
    return (int(rows[0][0]), rows[0][1]) if rows else None
