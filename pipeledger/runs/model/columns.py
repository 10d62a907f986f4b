"""A model's output columns and their types, before its target exists.

Types come from the query itself, annotated by sqlglot against the upstream tables' column
types (read from the catalog), so one project gets the same target types on PostgreSQL and
on SQLite. A decimal computed by an expression (``sum(amount)``) keeps its scale and gets
the widest precision, 38, since a sum outgrows its inputs. ``columns`` in the model's
config overrides any of them; a column whose type cannot be told is refused with the
override that fixes it.
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.annotate_types import annotate_types
from sqlglot.optimizer.qualify import qualify

from pipeledger.common.columns import Column, TableName, canonical_type, check_identifier
from pipeledger.common.sqltext import READ, ModelSql
from pipeledger.errors import SchemaError
from pipeledger.warehouse.session import Session

_WIDEST = 38


def output_columns(
    session: Session, query: ModelSql, overrides: Mapping[str, str], model: str
) -> tuple[Column, ...]:
    """The query's columns in order, typed (see the module docstring)."""
    schema = _upstream_schema(session, query.tables)
    try:
        tree = qualify(
            query.tree.copy(), schema=schema, dialect=READ, validate_qualify_columns=False
        )
        typed = annotate_types(tree, schema=schema, dialect=READ)
    except SqlglotError as exc:
        raise SchemaError(f"model {model}: cannot read the query's columns: {exc}") from None
    columns = []
    for select in typed.selects:
        name = _name(select, model)
        kind = overrides.get(name) or _canonical(select)
        if kind is None:
            raise SchemaError(
                f"model {model}: cannot tell the type of column {name!r} "
                f"({select.sql(READ)}); declare it under [models.{model}.columns], "
                f'e.g. {name} = "text"'
            )
        columns.append(Column(name, kind))
    return tuple(columns)


def _upstream_schema(session: Session, tables: tuple[TableName, ...]) -> dict[str, object]:
    """sqlglot's schema mapping: {schema: {table: {column: type}}} (or {table: ...})."""
    nested: dict[str, dict[str, dict[str, str]]] = {}
    flat: dict[str, dict[str, str]] = {}
    for table in tables:
        columns = {name: _sql_type(kind) for name, kind in session.table_columns(table) or []}
        if table.schema is None:
            flat[table.table] = columns
        else:
            nested.setdefault(table.schema, {})[table.table] = columns
    mixed: dict[str, object] = {**nested, **flat}
    return mixed if not (nested and flat) else dict(nested)


def _sql_type(declared: str) -> str:
    try:
        return canonical_type(declared)
    except ValueError:
        return "text"


def _name(select: exp.Expr, model: str) -> str:
    name = select.alias_or_name
    try:
        return check_identifier(name, "column") if not name.startswith("_pipeledger_") else name
    except ValueError as exc:
        raise SchemaError(f"model {model}: {exc}; give it an alias (AS name)") from None


def _canonical(select: exp.Expr) -> str | None:
    kind = select.type
    if kind is None or kind.this == exp.DataType.Type.UNKNOWN:
        return None
    text = kind.sql(READ).lower()
    try:
        canonical = canonical_type(text)
    except ValueError:
        return _decimal(kind) or ("text" if kind.is_type(*exp.DataType.TEXT_TYPES) else None)
    if canonical.startswith("numeric(") and not isinstance(select.unalias(), exp.Column):
        return f"numeric({_WIDEST},{canonical.rstrip(')').split(',')[1]})"
    return canonical


def _decimal(kind: exp.DataType) -> str | None:
    """A decimal without a precision (``numeric``): the widest, with scale 6 if none."""
    if not kind.is_type(exp.DataType.Type.DECIMAL):
        return None
    params = [int(p.name) for p in kind.expressions if p.name.isdigit()]
    scale = params[1] if len(params) > 1 else 6
    return f"numeric({_WIDEST},{scale})"
