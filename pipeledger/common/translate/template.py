"""SQLite SQL built from small templates: ``sql("date(_x, _shift)", x=node, shift="+1 days")``
parses the template once and puts the given expressions (or literals) where its ``_name``
columns stand. Every template is written by pipeledger; only the pieces come from a model."""

from __future__ import annotations

from functools import cache

import sqlglot
from sqlglot import exp

Piece = exp.Expr | str | int | float


@cache
def _parsed(template: str) -> exp.Expr:
    # read as a projection: a template like replace(...) is not mistaken for a statement
    select = sqlglot.parse_one(f"SELECT {template}", read="sqlite")
    assert isinstance(select, exp.Select)
    projection: exp.Expr = select.expressions[0]
    return projection


def literal(value: str | int | float) -> exp.Expr:
    """A SQL literal (a negative number as a negation, as the parser reads it)."""
    if isinstance(value, str):
        return exp.Literal.string(value)
    if value < 0:
        return exp.Neg(this=exp.Literal.number(-value))
    return exp.Literal.number(value)


def sql(template: str, **pieces: Piece) -> exp.Expr:
    """The template with each ``_name`` column replaced by ``pieces[name]``."""
    tree = _parsed(template).copy()
    holes = [
        column
        for column in tree.find_all(exp.Column)
        if not column.table and column.name.startswith("_") and column.name[1:] in pieces
    ]
    for hole in holes:
        piece = pieces[hole.name[1:]]
        value = piece.copy() if isinstance(piece, exp.Expr) else literal(piece)
        if hole is tree:
            return value
        hole.replace(_wrapped(value))
    return tree


def _wrapped(value: exp.Expr) -> exp.Expr:
    """A piece in parentheses unless it is atomic, so that the template's operators bind
    as written."""
    atomic = exp.Column | exp.Literal | exp.Anonymous | exp.Func | exp.Paren | exp.Null
    return value if isinstance(value, atomic) else exp.Paren(this=value)


def call(name: str, *args: Piece) -> exp.Expr:
    """A call of a SQLite function by name."""
    values = [a.copy() if isinstance(a, exp.Expr) else literal(a) for a in args]
    return exp.Anonymous(this=name, expressions=values)
