"""Column lineage of a model, read from its SQL by sqlglot (``sqlglot.lineage``): for each
output column, the upstream table columns it is computed from and how (OpenLineage's
transformation types: ``DIRECT`` ``IDENTITY`` when the column is copied as it is,
``TRANSFORMATION`` when an expression computes it, ``AGGREGATION`` when an aggregate does).
A column computed from no column (``count(*)``, a constant) has no lineage; a query sqlglot
cannot trace (it names a column no upstream table has) gives none for that column.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.lineage import Node, lineage

from pipeledger.common.columns import TableName
from pipeledger.common.sqltext import READ, ModelSql

Subtype = str  # "IDENTITY", "TRANSFORMATION" or "AGGREGATION"


@dataclass(frozen=True)
class SourceColumn:
    table: TableName
    column: str
    subtype: Subtype


Schema = Mapping[str, Mapping[str, Mapping[str, str]] | Mapping[str, str]]


def column_lineage(
    query: ModelSql, columns: Sequence[str], schema: Schema
) -> dict[str, tuple[SourceColumn, ...]]:
    """Each output column's upstream columns (module docstring); ``schema`` is sqlglot's
    mapping of the upstream tables' columns ({schema: {table: {column: type}}})."""
    traced: dict[str, tuple[SourceColumn, ...]] = {}
    for column in columns:
        try:
            root = lineage(column, query.tree.copy(), schema=dict(schema), dialect=READ)
        except (SqlglotError, KeyError, ValueError):
            continue
        found = _sources(root)
        if found:
            traced[column] = found
    return traced


def _sources(root: Node) -> tuple[SourceColumn, ...]:
    out: dict[tuple[str, str], SourceColumn] = {}
    for path in _paths(root, ()):
        leaf = path[-1]
        if not isinstance(leaf.source, exp.Table) or not leaf.source.name:
            continue
        table = leaf.source
        name = TableName.parse(f"{table.db}.{table.name}" if table.db else table.name)
        column = leaf.name.rsplit(".", 1)[-1]
        subtype = _subtype([n.expression for n in path[:-1]])
        out.setdefault((str(name), column), SourceColumn(name, column, subtype))
    return tuple(out[k] for k in sorted(out))


def _paths(node: Node, above: tuple[Node, ...]) -> list[tuple[Node, ...]]:
    here = (*above, node)
    if not node.downstream:
        return [here]
    return [p for child in node.downstream for p in _paths(child, here)]


def _subtype(expressions: Sequence[exp.Expr]) -> Subtype:
    if any(e.find(exp.AggFunc) is not None for e in expressions):
        return "AGGREGATION"
    if all(isinstance(_unaliased(e), exp.Column) for e in expressions):
        return "IDENTITY"
    return "TRANSFORMATION"


def _unaliased(expression: exp.Expr) -> exp.Expr:
    return expression.this if isinstance(expression, exp.Alias) else expression


def query_tables(sql: str) -> tuple[TableName, ...]:
    """The tables a SQL source's ``query`` reads (its CTEs left out); none if sqlglot
    cannot read it."""
    try:
        return ModelSql(sql, "source query").tables
    except Exception:  # a query sqlglot cannot read still loads: it just has no lineage
        return ()
