"""The quality gate's results as the ledger keeps them (``quality_results``: one row per
run and check): :func:`run_checks` (one run's, observed against expected) and
:func:`check_history` (a pipeline's over time, newest first)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from pipeledger.ledger.reads.answers import Answer, _as_json, _build, _columns
from pipeledger.ledger.tables import QUALITY, tenant_is
from pipeledger.warehouse.dialect import Dialect
from pipeledger.warehouse.session import Session


@dataclass(frozen=True, kw_only=True)
class CheckRow(Answer):
    run_id: str
    pipeline: str
    target_table: str | None
    check_name: str
    kind: str
    level: str
    status: str  # pass, fail, warn or not_learned
    observed: str | None
    expected: str | None
    failing_rows: int | None
    sample_keys: Any
    created_at: datetime


def run_checks_sql(d: Dialect) -> str:
    return (
        f"SELECT {', '.join(_columns(CheckRow))} FROM {d.table(QUALITY)} q "
        f"WHERE {tenant_is(d, 'q')} AND run_id = {d.param} ORDER BY created_at, check_name"
    )


def check_history_sql(d: Dialect, since: datetime | None) -> str:
    """A pipeline's results, newest first (parameters: the pipeline, ``since`` when given,
    the limit), on the (pipeline, created_at) index."""
    after = f" AND created_at >= {d.param}" if since is not None else ""
    return (
        f"SELECT {', '.join(_columns(CheckRow))} FROM {d.table(QUALITY)} q "
        f"WHERE {tenant_is(d, 'q')} AND pipeline = {d.param}{after} "
        f"ORDER BY created_at DESC, run_id DESC, check_name LIMIT {d.param}"
    )


def _checks(session: Session, sql: str, params: list[Any]) -> list[CheckRow]:
    d = session.dialect
    found = []
    for row in session.query(sql, params):
        check: CheckRow = _build(CheckRow, row, frozenset({"created_at"}))
        found.append(replace(check, sample_keys=_as_json(d, check.sample_keys)))
    return found


def run_checks(session: Session, run_id: str) -> list[CheckRow]:
    """Every check result of one run, in the order the gate recorded them."""
    return _checks(session, run_checks_sql(session.dialect), [run_id])


def check_history(
    session: Session, pipeline: str, since: datetime | None = None, limit: int = 500
) -> list[CheckRow]:
    """The pipeline's check results (since ``since``), newest first, at most ``limit``."""
    params: list[Any] = [pipeline, *([since] if since is not None else []), limit]
    return _checks(session, check_history_sql(session.dialect, since), params)
