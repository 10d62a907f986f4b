"""Quarantine: the rows the quality gate set aside, one entry per (check, row), in
``<target>_quarantine``; :func:`quarantined` lists them. Replaying them through today's
config is :mod:`pipeledger.runs.replay`."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from pipeledger.common.columns import TableName
from pipeledger.config.model import Config
from pipeledger.errors import ConfigError
from pipeledger.quality import checks as q
from pipeledger.warehouse.adapters import open_warehouse
from pipeledger.warehouse.dialect import Dialect
from pipeledger.warehouse.session import Session

MIN_RUN_PREFIX = 8


@dataclass(frozen=True, kw_only=True)
class QuarantineEntry:
    """One row set aside by one check. ``reason`` is the latest verdict on the row (today's
    failing checks after a replay); ``check`` is the check that set it aside."""

    quarantine_id: str
    run_id: str
    pipeline: str
    check: str
    reason: str
    key_values: dict[str, Any]
    row: dict[str, Any]
    quarantined_at: str
    resolved_at: str | None
    resolved_by_run: str | None
    last_checked_run: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "quarantine_id": self.quarantine_id,
            "run_id": self.run_id,
            "pipeline": self.pipeline,
            "check": self.check,
            "reason": self.reason,
            "key_values": self.key_values,
            "row": self.row,
            "quarantined_at": self.quarantined_at,
            "resolved_at": self.resolved_at,
            "resolved_by_run": self.resolved_by_run,
            "last_checked_run": self.last_checked_run,
        }


def select_entries(d: Dialect, target: TableName, *, resolved: bool, run: str | None) -> str:
    """The pipeline's entries, oldest first (parameters: pipeline, then the run prefix)."""
    where = [f"pipeline = {d.param}"]
    if not resolved:
        where.append("resolved_at IS NULL")
    if run is not None:
        where.append(f"substr(run_id, 1, {len(run):d}) = {d.param}")
    return (
        "SELECT quarantine_id, run_id, pipeline, check_name, reason, CAST(key_values AS text), "
        "CAST(row_data AS text), quarantined_at, resolved_at, resolved_by_run, last_checked_run "
        f"FROM {d.table(q.quarantine_table(target))} WHERE {' AND '.join(where)} "
        "ORDER BY quarantined_at, quarantine_id"
    )


def _json(text: object) -> dict[str, Any]:
    """JSON as stored; decimals stay exact (PostgreSQL keeps numeric values as numbers)."""
    value: dict[str, Any] = json.loads(str(text), parse_float=Decimal) if text else {}
    return value


def _time(value: object) -> str | None:
    if value is None:
        return None
    return value.isoformat() if isinstance(value, datetime) else str(value)


def _entry(row: Sequence[Any]) -> QuarantineEntry:
    qid, run_id, pipeline, check, reason, keys, data, at, resolved, by, checked = row
    return QuarantineEntry(
        quarantine_id=str(qid),
        run_id=str(run_id),
        pipeline=str(pipeline),
        check=str(check),
        reason=str(reason),
        key_values=_json(keys),
        row=_json(data),
        quarantined_at=_time(at) or "",
        resolved_at=_time(resolved),
        resolved_by_run=by and str(by),
        last_checked_run=checked and str(checked),
    )


def check_run_filter(run: str | None) -> None:
    if run is not None and len(run) < MIN_RUN_PREFIX:
        raise ConfigError(f"--run {run!r}: give a run id or its first {MIN_RUN_PREFIX}+ characters")


def read_entries(
    session: Session, pipeline: str, target: TableName, *, resolved: bool, run: str | None
) -> list[QuarantineEntry]:
    """Entries of ``pipeline`` in ``target``'s quarantine table ([] if it does not exist)."""
    if session.table_columns(q.quarantine_table(target)) is None:
        return []
    params = [pipeline] if run is None else [pipeline, run]
    rows = session.query(
        select_entries(session.dialect, target, resolved=resolved, run=run), params
    )
    return [_entry(r) for r in rows]


def quarantined(
    config: Config, name: str, *, run: str | None = None, include_resolved: bool = False
) -> list[QuarantineEntry]:
    """What the gate set aside for pipeline ``name``: unresolved entries unless
    ``include_resolved``; ``run`` (a run id or its first 8+ characters) picks one run."""
    pipeline = config.pipeline(name)
    check_run_filter(run)
    warehouse = open_warehouse(config.warehouse_url)
    with warehouse.session(write=False) as session:
        return read_entries(session, name, pipeline.target_name, resolved=include_resolved, run=run)


def open_counts_sql(d: Dialect, targets: Sequence[TableName]) -> str:
    """Per pipeline, its unresolved entries in the quarantine tables of ``targets`` (each
    must exist; parameters: the pipeline of each)."""
    return " UNION ALL ".join(
        f"SELECT pipeline, count(*) FROM {d.table(q.quarantine_table(target))} "
        f"WHERE pipeline = {d.param} AND resolved_at IS NULL GROUP BY pipeline"
        for target in targets
    )


def open_counts(config: Config) -> dict[str, int]:
    """Per pipeline with checks, how many of its quarantine entries are unresolved (0 when
    nothing was ever set aside): one catalog query and one count over the tables there."""
    targets = {name: p.target_name for name, p in config.pipelines.items() if p.checks is not None}
    counts = dict.fromkeys(targets, 0)
    if not targets:
        return counts
    warehouse = open_warehouse(config.warehouse_url)
    d = warehouse.dialect
    with warehouse.session(write=False) as session:
        tables = {d.table(q.quarantine_table(t)): name for name, t in targets.items()}
        found = session.query(d.existing_tables(len(tables)), list(tables))
        present = [tables[str(row[0])] for row in found]
        if present:
            sql = open_counts_sql(d, [targets[name] for name in present])
            counts.update({str(p): int(n) for p, n in session.query(sql, present)})
    return counts
