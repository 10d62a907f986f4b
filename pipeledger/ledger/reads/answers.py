"""What every answer of the ledger shares (:mod:`pipeledger.ledger.reads.queries` defines the
words): the levels, the JSON form of an answer, and the pieces of SQL several questions use.
The questions live in modules of their own (``run_history``, ``health`` and ``queries``), so
that a command imports only what it asks."""

from __future__ import annotations

import json
import typing
from collections.abc import Sequence
from dataclasses import fields, is_dataclass
from datetime import UTC, datetime, time, timedelta
from enum import StrEnum
from typing import Any

from pipeledger.common.durations import span as span
from pipeledger.ledger.rollup import COMPARES, sample
from pipeledger.ledger.rollup import FAILURES as FAILURES
from pipeledger.ledger.tables import RUNS, stored_datetime, tenant_is
from pipeledger.warehouse.dialect import Dialect

STATUS_WINDOW = timedelta(days=7)
VOLUME_WINDOW_DAYS = 30
DEFAULT_SLA = timedelta(hours=24)
FRESHNESS_REASON = "freshness SLA exceeded"
MIN_PREFIX = 8


class Level(StrEnum):
    OK = "OK"
    WARNING = "WARNING"
    CRITICAL = "CRITICAL"
    INSUFFICIENT_HISTORY = "INSUFFICIENT_HISTORY"


class Health(StrEnum):
    HEALTHY = "HEALTHY"
    UNKNOWN = "UNKNOWN"
    DEGRADED = "DEGRADED"
    CRITICAL = "CRITICAL"

    @property
    def rank(self) -> int:
        return list(Health).index(self)

    def at_least(self, floor: Health) -> Health:
        return self if self.rank >= floor.rank else floor


# -- values -----------------------------------------------------------------------------


def _as_float(value: Any) -> float | None:
    return None if value is None else float(value)


def _as_json(d: Dialect, value: object) -> Any:
    """JSON columns: jsonb arrives parsed (PostgreSQL), text does not (SQLite)."""
    return json.loads(value) if not d.json_parsed and isinstance(value, str) else value


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, StrEnum):
        return value.value
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if is_dataclass(value):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    return value


class Answer:
    """An answer of the ledger: a frozen dataclass that says itself as JSON."""

    def to_json(self) -> dict[str, Any]:
        payload: dict[str, Any] = _plain(self)
        return payload


def _columns(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in fields(cls))


_ENUMS: dict[type, dict[str, type[StrEnum]]] = {}


def _enums(cls: type) -> dict[str, type[StrEnum]]:
    """The fields of ``cls`` that hold a closed set (a StrEnum, or None)."""
    if cls in _ENUMS:
        return _ENUMS[cls]
    out = {}
    for name, hint in typing.get_type_hints(cls).items():
        kinds = typing.get_args(hint) or (hint,)
        closed = [k for k in kinds if isinstance(k, type) and issubclass(k, StrEnum)]
        if closed:
            out[name] = closed[0]
    _ENUMS[cls] = out
    return out


def _build(cls: type[Any], row: Sequence[Any], datetimes: frozenset[str]) -> Any:
    """An answer from a row in its columns' order: times as aware datetimes, the words of
    a closed set as its enum."""
    values = dict(zip(_columns(cls), row, strict=False))
    for name in datetimes & values.keys():
        values[name] = stored_datetime(values[name])
    for name, enum in _enums(cls).items():
        if values.get(name) is not None:
            values[name] = enum(values[name])
    return cls(**values)


def _day_start(now: datetime) -> datetime:
    return datetime.combine(now.astimezone(UTC).date(), time(), UTC)


def _day(moment: datetime) -> str:
    """The UTC day of an instant, as the rollup keys it (``YYYY-MM-DD``)."""
    return moment.astimezone(UTC).date().isoformat()


def _latest(d: Dialect, outer: str, condition: str = "") -> str:
    """A correlated subquery: the run id of ``outer``'s latest run meeting ``condition``
    (one probe of the (pipeline, started_at) index per pipeline)."""
    return (
        f"(SELECT r.run_id FROM {d.table(RUNS)} r WHERE {tenant_is(d, 'r')} "
        f"AND r.pipeline = {outer}{condition} "
        "ORDER BY r.started_at DESC, r.run_id DESC LIMIT 1)"
    )


_SUCCESS = f" AND r.status = 'success' AND r.trigger_type <> {COMPARES}"


def _sample(d: Dialect) -> str:
    return f" AND {sample(d, 'r')}"


# -- 1. list_runs -----------------------------------------------------------------------
