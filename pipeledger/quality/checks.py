"""The checks a pipeline declares, as SQL predicates over the staged rows (pure functions).

A row-level check is a predicate that is true for a *bad* row; all of them are counted in
one pass over the staging table, so no row is pulled into Python to be checked.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from pipeledger.common.columns import TableName
from pipeledger.config.model import ChecksConfig
from pipeledger.errors import SchemaError
from pipeledger.quality.report import CheckKind
from pipeledger.transform.conform import Shape
from pipeledger.warehouse.dialect import Dialect, quote

QUARANTINE_SUFFIX = "_quarantine"


@dataclass(frozen=True, kw_only=True)
class RowCheck:
    name: str
    kind: CheckKind
    predicate: str
    params: tuple[Any, ...]
    expected: str
    warn_only: bool = False


def _col(name: str) -> str:
    return f"s.{quote(name)}"


def _empty(shape: Shape, name: str) -> str:
    sql_type = next(c.sql_type for c in shape.columns if c.name == name)
    if sql_type == "text":
        return f"({_col(name)} IS NULL OR {_col(name)} = '')"
    return f"{_col(name)} IS NULL"


def _number(d: Dialect, shape: Shape, name: str) -> str:
    """The column as something that compares as a number (SQLite keeps decimals as text)."""
    sql_type = next((c.sql_type for c in shape.columns if c.name == name), "")
    return d.as_number(_col(name), sql_type)


def row_checks(d: Dialect, checks: ChecksConfig, shape: Shape) -> list[RowCheck]:
    """Every row-level check, the key's non-null check first (it is always checked)."""
    named = [*checks.not_null, *checks.range, *checks.accepted_values, *checks.matches]
    unknown = sorted({name for name in named if name not in shape.names})
    if unknown:
        raise SchemaError(f"checks name column(s) {unknown} that the target does not have")
    warn = set(checks.warn)
    out = [
        RowCheck(
            name=f"key_not_null:{k}",
            kind="key",
            predicate=_empty(shape, k),
            params=(),
            expected="no empty key",
            warn_only="key" in warn,
        )
        for k in shape.key
    ]
    for name in checks.not_null:
        if name not in shape.key:
            out.append(
                RowCheck(
                    name=f"not_null:{name}",
                    kind="not_null",
                    predicate=_empty(shape, name),
                    params=(),
                    expected="no empty value",
                    warn_only="not_null" in warn,
                )
            )
    out += _ranges(d, checks, shape, "range" in warn)
    out += _accepted(d, checks, shape, "accepted_values" in warn)
    out += _matches(d, checks, shape, "matches" in warn)
    return out


def _bound(shape: Shape, name: str, limit: float) -> Any:
    """A bound of the column's own kind: compared with a float, PostgreSQL would convert
    every exact numeric value to a float first (twice as slow over a million rows)."""
    sql_type = next((c.sql_type for c in shape.columns if c.name == name), "")
    if sql_type.startswith("numeric"):
        return Decimal(repr(limit))
    if sql_type in ("smallint", "integer", "bigint") and float(limit).is_integer():
        return int(limit)
    return limit


def _ranges(d: Dialect, checks: ChecksConfig, shape: Shape, warn: bool) -> list[RowCheck]:
    out = []
    for name, bound in checks.range.items():
        value = _number(d, shape, name)
        parts: list[str] = []
        params: list[Any] = []
        expected: list[str] = []
        if bound.min is not None:
            parts.append(f"{value} < {d.param}")
            params.append(_bound(shape, name, bound.min))
            expected.append(f">= {bound.min:g}")
        if bound.max is not None:
            parts.append(f"{value} > {d.param}")
            params.append(_bound(shape, name, bound.max))
            expected.append(f"<= {bound.max:g}")
        out.append(
            RowCheck(
                name=f"range:{name}",
                kind="range",
                predicate="(" + " OR ".join(parts) + ")",
                params=tuple(params),
                expected=" and ".join(expected),
                warn_only=warn,
            )
        )
    return out


def _accepted(d: Dialect, checks: ChecksConfig, shape: Shape, warn: bool) -> list[RowCheck]:
    out = []
    for name, values in checks.accepted_values.items():
        marks = ", ".join([d.param] * len(values))
        shown = ", ".join(map(str, values[:8])) + (", ..." if len(values) > 8 else "")
        out.append(
            RowCheck(
                name=f"accepted_values:{name}",
                kind="accepted_values",
                predicate=f"{_number(d, shape, name)} NOT IN ({marks})",
                params=tuple(values),
                expected=f"one of {shown}",
                warn_only=warn,
            )
        )
    return out


def _text(shape: Shape, name: str) -> str:
    sql_type = next((c.sql_type for c in shape.columns if c.name == name), "")
    return _col(name) if sql_type == "text" else f"CAST({_col(name)} AS text)"


def _matches(d: Dialect, checks: ChecksConfig, shape: Shape, warn: bool) -> list[RowCheck]:
    out = []
    for name, pattern in checks.matches.items():
        predicate = d.regex_mismatch(_text(shape, name))
        out.append(
            RowCheck(
                name=f"matches:{name}",
                kind="matches",
                predicate=predicate,
                params=(pattern,),
                expected=f"matching {pattern}",
                warn_only=warn,
            )
        )
    return out


def count_failures(d: Dialect, checks: Sequence[RowCheck]) -> tuple[str, list[Any]]:
    """One pass: the number of staged rows, then the failing rows of each check."""
    parts: list[str] = ["count(*)"]
    params: list[Any] = []
    for check in checks:
        parts.append(d.count_where(check.predicate))
        params.extend(check.params)
    return f"SELECT {', '.join(parts)} FROM {d.stage()} AS s", params


def sample_keys(d: Dialect, key: Sequence[str], predicate: str) -> str:
    keys = ", ".join(_col(k) for k in key)
    return f"SELECT {keys} FROM {d.stage()} AS s WHERE {predicate} LIMIT 5"


def duplicate_predicate(d: Dialect, key: Sequence[str]) -> str:
    """True for every staged row whose key is staged more than once."""
    keys = ", ".join(quote(k) for k in key)
    lhs = _col(key[0]) if len(key) == 1 else "(" + ", ".join(_col(k) for k in key) + ")"
    return f"{lhs} IN (SELECT {keys} FROM {d.stage()} GROUP BY {keys} HAVING count(*) > 1)"


def quarantine_table(target: TableName) -> TableName:
    return TableName(target.schema, target.table + QUARANTINE_SUFFIX)


def create_quarantine(d: Dialect, target: TableName) -> str:
    js = d.json_type
    return (
        f"CREATE TABLE IF NOT EXISTS {d.table(quarantine_table(target))} ("
        "quarantine_id text PRIMARY KEY, run_id text NOT NULL, pipeline text NOT NULL, "
        f"check_name text NOT NULL, reason text NOT NULL, key_values {js}, row_data {js} NOT NULL, "
        "quarantined_at timestamptz NOT NULL, resolved_at timestamptz, resolved_by_run text, "
        "last_checked_run text)"
    )


def _row_json(d: Dialect, shape: Shape, names: Sequence[str]) -> str:
    """The row as a JSON object, each value in the text a replay reads back (PostgreSQL's
    own rendering; SQLite's stored text, which PostgreSQL's rendering matches)."""
    types = {c.name: c.sql_type for c in shape.columns}
    return d.json_object([(n, d.json_value(_col(n), types.get(n, ""))) for n in names])


def quarantine_rows(
    d: Dialect, target: TableName, shape: Shape, check: RowCheck, predicate: str
) -> str:
    """Copy the staged rows failing ``check`` into the quarantine table, once each: the id
    is a hash of the check and the row, so a re-run of the same input adds nothing."""
    p = d.param
    row = _row_json(d, shape, [c.name for c in shape.columns])
    keys = _row_json(d, shape, list(shape.key))
    failing = (
        f"SELECT md5({p} || CAST({row} AS text)) AS id, {keys} AS key_values, {row} AS row_data "
        f"FROM {d.stage()} AS s WHERE {predicate}"
    )
    # identical staged rows share an id: an upsert may meet each id once per statement
    distinct = d.distinct_on("f.id")
    return (
        f"INSERT INTO {d.table(quarantine_table(target))} (quarantine_id, run_id, pipeline, "
        "check_name, reason, key_values, row_data, quarantined_at, last_checked_run) "
        f"SELECT {distinct}f.id, {p}, {p}, {p}, {p}, f.key_values, f.row_data, {p}, {p} "
        f"FROM ({failing}) AS f WHERE true ON CONFLICT (quarantine_id) DO UPDATE SET "
        "resolved_at = NULL, resolved_by_run = NULL, run_id = excluded.run_id, "
        "last_checked_run = excluded.last_checked_run "
        f"WHERE {d.table(quarantine_table(target))}.resolved_at IS NOT NULL"
    )


def delete_failing(d: Dialect, predicates: Sequence[str]) -> str:
    """Remove the failing rows from staging. The rows are chosen before any is deleted
    (SQLite would otherwise re-evaluate the duplicate-key subquery as rows disappear)."""
    where = " OR ".join(f"({p})" for p in predicates)
    if d.statement_snapshot:
        return f"DELETE FROM {d.stage()} AS s WHERE {where}"
    chosen = f"SELECT rowid FROM {d.stage()} AS s WHERE {where}"
    return f"DELETE FROM {d.stage()} WHERE rowid IN ({chosen})"
