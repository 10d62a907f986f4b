"""A model's output columns and their types, before its target exists.

Types are PostgreSQL's, derived from the query against the upstream tables' column types
(read from the catalog) by :mod:`pipeledger.common.translate.pgtypes`, so one project gets
the same target types on PostgreSQL and on SQLite. A column passed on as it is keeps its
type; a computed decimal keeps the scale its operands imply (a product adds scales: the
``numeric(15,2) * numeric(15,2)`` of TPC-H's revenue has 4 decimals; a sum keeps its
operand's scale; a quotient or an average gets 20) with precision 38, or more when the
operands need it (up to 76). An unaliased output is named as PostgreSQL names it
(``sum(x)``: ``sum``). ``columns`` in the model's config overrides any type; a column
whose type cannot be told is refused with the override that fixes it.
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.annotate_types import annotate_types
from sqlglot.optimizer.qualify import qualify

from pipeledger.common.columns import Column, TableName, canonical_type, check_identifier
from pipeledger.common.sqltext import READ, ModelSql
from pipeledger.common.translate.pgtypes import Output, PgType, Types
from pipeledger.errors import SchemaError
from pipeledger.warehouse.session import Session


def output_columns(
    session: Session, query: ModelSql, overrides: Mapping[str, str], model: str
) -> tuple[Column, ...]:
    """The query's columns in order, typed (see the module docstring)."""
    outputs = Types(query.tree, session.table_columns).outputs(query.tree)
    fallback: dict[str, str | None] | None = None
    columns: list[Column] = []
    for position, output in enumerate(outputs):
        name = _name(output, position, query, model)
        kind = overrides.get(name) or (output.type.column_type() if output.type else None)
        if kind is None and not _unknown_scale(output.type):
            fallback = fallback if fallback is not None else _sqlglot_types(session, query, model)
            kind = fallback.get(name)
        if kind is None:
            raise SchemaError(_untyped(model, name, output.type, query, position))
        columns.append(Column(name, kind))
    duplicates = sorted({c.name for c in columns if [d.name for d in columns].count(c.name) > 1})
    if duplicates:
        raise SchemaError(
            f"model {model}: more than one output column is named {duplicates[0]!r}; give "
            "each a name of its own (AS name)"
        )
    return tuple(columns)


def _unknown_scale(kind: PgType | None) -> bool:
    return kind is not None and kind.is_numeric and kind.scale is None


def _projection(query: ModelSql, position: int) -> str:
    selects = query.tree.selects
    return selects[position].sql(READ) if position < len(selects) else f"column {position + 1}"


def _untyped(model: str, name: str, kind: PgType | None, query: ModelSql, position: int) -> str:
    if _unknown_scale(kind):
        return (
            f"model {model}: cannot tell the scale of column {name!r} "
            f"({_projection(query, position)}): its decimals depend on each value; declare "
            f'it under [models.{model}.columns], e.g. {name} = "numeric(38,6)"'
        )
    return (
        f"model {model}: cannot tell the type of column {name!r} "
        f"({_projection(query, position)}); declare it under [models.{model}.columns], "
        f'e.g. {name} = "text"'
    )


def _name(output: Output, position: int, query: ModelSql, model: str) -> str:
    name = output.name
    if name is None:
        raise SchemaError(
            f"model {model}: output column {position + 1} ({_projection(query, position)}) "
            "has no name; give it an alias (AS name)"
        )
    try:
        return check_identifier(name, "column") if not name.startswith("_pipeledger_") else name
    except ValueError as exc:
        raise SchemaError(f"model {model}: {exc}; give it an alias (AS name)") from None


# -- sqlglot's own annotation, for what pipeledger's types do not cover ------------------


def _sqlglot_types(session: Session, query: ModelSql, model: str) -> dict[str, str | None]:
    """The output types sqlglot's annotator gives (functions pipeledger does not type)."""
    schema = _upstream_schema(session, query.tables)
    try:
        tree = qualify(
            query.tree.copy(), schema=schema, dialect=READ, validate_qualify_columns=False
        )
        typed = annotate_types(tree, schema=schema, dialect=READ)
    except SqlglotError as exc:
        raise SchemaError(f"model {model}: cannot read the query's columns: {exc}") from None
    return {select.alias_or_name: _canonical(select) for select in typed.selects}


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


def _canonical(select: exp.Expr) -> str | None:
    kind = select.type
    if kind is None or kind.this == exp.DataType.Type.UNKNOWN:
        return None
    if kind.is_type(exp.DataType.Type.DECIMAL):
        return None  # a decimal's scale is pipeledger's own rule, never a guess
    try:
        return canonical_type(kind.sql(READ).lower())
    except ValueError:
        return "text" if kind.is_type(*exp.DataType.TEXT_TYPES) else None
