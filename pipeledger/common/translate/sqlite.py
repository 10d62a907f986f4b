"""A model's PostgreSQL query, translated to SQLite completely or refused.

Every node of the query passes through one rule: a PostgreSQL construct SQLite spells
differently is rewritten (dates, intervals, ``extract``, ``date_trunc``, casts, ``LIKE``,
string functions, derived-table column lists ...), a construct both spell alike is kept,
and anything else is refused with :class:`Untranslatable`, naming the construct and its
line. Nothing unknown reaches SQLite, so a query that translates runs (or fails on a
missing table or column, which ``pipeledger check`` finds with ``EXPLAIN``).

What a value means on SQLite follows pipeledger's storage there: exact decimals are text
and are read as numbers (``CAST(... AS REAL)``) wherever they are computed or compared;
dates and times are ISO text (:mod:`~pipeledger.common.translate.temporal`). Constant
arithmetic is folded exactly (``0.06 + 0.01`` is ``0.07``, where SQLite's floats would give
``0.06999999999999999``); other decimal arithmetic is SQLite's binary floating point.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from decimal import Decimal

from sqlglot import exp
from sqlglot.errors import ErrorLevel, SqlglotError

from pipeledger.common.translate import temporal, text
from pipeledger.common.translate.pgtypes import (
    TEMPORAL,
    PgType,
    Types,
    cast_target,
    output_name,
)
from pipeledger.common.translate.template import call, literal, sql
from pipeledger.common.translate.temporal import Refused, Span

# SQLite 3.44 added ORDER BY inside an aggregate (string_agg(x, ',' ORDER BY y))
_ORDERED_AGGREGATES = sqlite3.sqlite_version_info >= (3, 44)


class Untranslatable(Exception):
    """A construct of the query SQLite cannot compute as PostgreSQL does."""

    def __init__(self, construct: str, reason: str, line: int | None) -> None:
        self.construct = construct
        self.reason = reason
        self.line = line
        super().__init__(f"{construct}: {reason}")


def to_sqlite(tree: exp.Expr, types: Types) -> str:
    """The query as SQLite text (``schema.table`` becomes the table ``"schema.table"``)."""
    translated = _Translator(types).query(tree)
    try:
        return translated.sql("sqlite", unsupported_level=ErrorLevel.RAISE)
    except SqlglotError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise Untranslatable("the query", first, None) from None


def line_of(node: exp.Expr) -> int | None:
    """The line a construct starts on in the model's text (from the parser's tokens)."""
    current: exp.Expr | None = node
    while current is not None:
        lines = [int(n.meta["line"]) for n in current.walk() if "line" in n.meta]
        if lines:
            return min(lines)
        current = current.parent
    return None


def construct_of(node: exp.Expr) -> str:
    text_ = node.sql("postgres")
    return text_ if len(text_) <= 60 else text_[:57] + "..."


Rule = Callable[["_Translator", exp.Expr], exp.Expr]

# kept as they are: both spell them alike (checked per node: see _kept)
_KEPT: tuple[type[exp.Expr], ...] = (
    *(exp.Select, exp.From, exp.Join, exp.Where, exp.Group, exp.Having, exp.Order),
    *(exp.Ordered, exp.Limit, exp.Offset, exp.With, exp.CTE, exp.Union, exp.Intersect),
    *(exp.Except, exp.TableAlias, exp.Alias, exp.Identifier, exp.Star, exp.Null),
    *(exp.Boolean, exp.And, exp.Or, exp.Is, exp.Exists, exp.Case, exp.If),
    *(exp.Coalesce, exp.Nullif, exp.Window, exp.WindowSpec, exp.Filter, exp.Distinct),
    *(exp.Count, exp.Min, exp.Max, exp.Abs, exp.Sign, exp.Sqrt, exp.Ln, exp.Exp),
    *(exp.Pow, exp.Ceil, exp.Floor, exp.Lower, exp.Upper, exp.Length, exp.Replace),
    *(exp.RowNumber, exp.Rank, exp.DenseRank, exp.Ntile, exp.PercentRank, exp.CumeDist),
    *(exp.Lag, exp.Lead, exp.FirstValue, exp.LastValue, exp.NthValue, exp.Tuple),
    *(exp.BitwiseAnd, exp.BitwiseOr, exp.BitwiseNot, exp.BitwiseLeftShift),
    *(exp.BitwiseRightShift, exp.Var, exp.Log, exp.LogicalAnd, exp.LogicalOr),
)

# functions both have, with the same meaning, that sqlglot does not know by name
_SAME_FUNCTIONS = frozenset(
    [
        *("acos", "asin", "atan", "atan2", "cos", "sin", "tan", "cosh", "sinh", "tanh"),
        *("acosh", "asinh", "atanh", "degrees", "radians", "pi", "log10"),
    ]
)
_TRIMS = {"ltrim": "ltrim", "rtrim": "rtrim", "btrim": "trim"}


class _Translator:
    def __init__(self, types: Types) -> None:
        self.types = types

    # -- walking ----------------------------------------------------------------------
    def query(self, tree: exp.Expr) -> exp.Expr:
        return self.value(tree)

    def tr(self, node: exp.Expr) -> exp.Expr:
        """The SQLite form of ``node`` (an interval as a :class:`Span`)."""
        rule = _RULES.get(type(node))
        try:
            if rule is not None:
                return rule(self, node)
            if isinstance(node, _KEPT) and _kept(node):
                return self.rebuild(node)
        except Refused as exc:
            raise Untranslatable(construct_of(node), str(exc), line_of(node)) from None
        raise Untranslatable(construct_of(node), _why_not(node), line_of(node))

    def value(self, node: exp.Expr) -> exp.Expr:
        """The SQLite form of ``node`` as a value (an interval: its microseconds)."""
        result = self.tr(node)
        if isinstance(result, Span):
            try:
                return temporal.span_micros(result)
            except Refused as exc:
                raise Untranslatable(construct_of(node), str(exc), line_of(node)) from None
        return result

    def rebuild(self, node: exp.Expr) -> exp.Expr:
        """``node`` with each child translated (as a value)."""
        args: dict[str, object] = {}
        for key, arg in node.args.items():
            if isinstance(arg, exp.Expr):
                args[key] = self.value(arg)
            elif isinstance(arg, list):
                args[key] = [self.value(a) if isinstance(a, exp.Expr) else a for a in arg]
            else:
                args[key] = arg
        rebuilt = type(node)(**args)
        rebuilt.meta.update(node.meta)
        rebuilt.comments = node.comments
        kind = self.kind(node)
        if kind == "interval" and not isinstance(node, exp.Query | exp.Paren | exp.Alias):
            return temporal.span(micros=rebuilt)
        return rebuilt

    # -- types ------------------------------------------------------------------------
    def type(self, node: exp.Expr) -> PgType | None:
        return self.types.of(node)

    def kind(self, node: exp.Expr) -> str | None:
        found = self.types.of(node)
        return found.name if found is not None else None

    def interval(self, node: exp.Expr) -> Span:
        """``node`` translated, as an interval."""
        result = self.tr(node)
        if isinstance(result, Span):
            return result
        if isinstance(node, exp.Literal) and node.is_string:
            return temporal.parse_interval(node.this)
        raise Refused("an interval SQLite cannot compute")


def _kept(node: exp.Expr) -> bool:
    if isinstance(node, exp.Intersect | exp.Except):
        return bool(node.args.get("distinct"))
    if isinstance(node, exp.Select):
        return not node.args.get("into") and not node.args.get("locks")
    if isinstance(node, exp.Group):
        return not any(node.args.get(k) for k in ("rollup", "cube", "grouping_sets"))
    return True


def _why_not(node: exp.Expr) -> str:
    if isinstance(node, exp.Intersect | exp.Except):
        return "SQLite has no INTERSECT ALL / EXCEPT ALL"
    if isinstance(node, exp.Group):
        return "SQLite has no ROLLUP, CUBE or GROUPING SETS"
    if isinstance(node, exp.Select) and node.args.get("locks"):
        return "a model reads; it takes no row locks"
    if isinstance(node, exp.Anonymous):
        return f"{node.name}() has no SQLite translation"
    if isinstance(node, exp.Placeholder | exp.Parameter):
        return "a model's SQL takes no parameters"
    if isinstance(node, exp.Lateral):
        return "SQLite has no LATERAL"
    return "SQLite has no equivalent that pipeledger knows of"


# -- tables and queries ----------------------------------------------------------------


def _table(t: _Translator, node: exp.Expr) -> exp.Expr:
    assert isinstance(node, exp.Table)
    if node.args.get("catalog") is not None:
        raise Refused("a database-qualified name")
    rebuilt = t.rebuild(node)
    if node.db:  # no schemas: "schema.table" is one table name
        flat = exp.to_identifier(f"{node.db}.{node.name}", quoted=True)
        return exp.Table(this=flat, alias=rebuilt.args.get("alias"))
    return rebuilt


def _select(t: _Translator, node: exp.Expr) -> exp.Expr:
    """A SELECT, each computed output named as PostgreSQL names it (SQLite would name
    ``count(*)`` "count(*)", not "count")."""
    if not _kept(node):
        raise Refused(_why_not(node))
    rebuilt = t.rebuild(node)
    named = []
    for original, projection in zip(node.expressions, rebuilt.expressions, strict=True):
        if isinstance(original, exp.Alias | exp.Star) or isinstance(projection, exp.Column):
            named.append(projection)
        else:
            name = output_name(original) or "?column?"
            named.append(exp.alias_(projection, exp.to_identifier(name, quoted=True)))
    rebuilt.set("expressions", named)
    return rebuilt


def _subquery(t: _Translator, node: exp.Expr) -> exp.Expr:
    """A derived table; its column list (``AS c (a, b)``, which SQLite lacks) becomes
    the names of its query's outputs."""
    assert isinstance(node, exp.Subquery)
    rebuilt = t.rebuild(node)
    alias = rebuilt.args.get("alias")
    names = [c.name for c in alias.args.get("columns") or []] if alias is not None else []
    if alias is None or not names:
        return rebuilt
    _rename_outputs(rebuilt.this, names)
    rebuilt.set("alias", exp.TableAlias(this=alias.this))
    return rebuilt


def _rename_outputs(query: exp.Expr, names: list[str]) -> None:
    while isinstance(query, exp.SetOperation):
        query = query.this  # a set operation's columns are named by its first query
    if not isinstance(query, exp.Select):
        raise Refused("a column list over a query SQLite cannot rename")
    if any(
        isinstance(p, exp.Star) or (isinstance(p, exp.Column) and p.is_star)
        for p in query.expressions
    ):
        raise Refused("a column list over SELECT *: name the columns")
    renamed = [
        exp.alias_(p.unalias() if i < len(names) else p, exp.to_identifier(names[i], quoted=True))
        if i < len(names)
        else p
        for i, p in enumerate(query.expressions)
    ]
    query.set("expressions", renamed)


def _values(t: _Translator, node: exp.Expr) -> exp.Expr:
    """VALUES as a FROM item: SQLite names its columns column1, column2 ..., so the
    alias's column list becomes a SELECT over it."""
    assert isinstance(node, exp.Values)
    rows = [t.rebuild(row) for row in node.expressions]
    alias = node.args.get("alias")
    names = [c.name for c in alias.args.get("columns") or []] if alias is not None else []
    inner = exp.Values(expressions=rows)
    if not names and alias is None:
        return inner
    outputs: list[exp.Expr | str] = [
        exp.alias_(exp.column(f"column{i + 1}"), exp.to_identifier(n, quoted=True))
        for i, n in enumerate(names)
    ]
    select = exp.select(*(outputs or ["*"])).from_(exp.Subquery(this=inner))
    return exp.Subquery(this=select, alias=exp.TableAlias(this=alias.this) if alias else None)


# -- values ----------------------------------------------------------------------------


def _column(t: _Translator, node: exp.Expr) -> exp.Expr:
    """A column; a decimal (stored as text) is read as a number where it is computed,
    compared or sorted; kept as text where it is only passed on or grouped."""
    assert isinstance(node, exp.Column)
    copied = node.copy()
    kind = t.type(node)
    if kind is not None and kind.name == "interval":
        return temporal.span(micros=copied)
    if kind is not None and kind.is_numeric and not _passed_on(node):
        return sql("CAST(_c AS REAL)", c=copied)
    return copied


def _passed_on(node: exp.Expr) -> bool:
    parent = node.parent
    if isinstance(parent, exp.Alias):
        parent = parent.parent
    if isinstance(parent, exp.Select) and node.arg_key in ("expressions", "this"):
        # a set operation's branches are compared (UNION, INTERSECT) and sorted
        return not isinstance(parent.parent, exp.SetOperation)
    return isinstance(parent, exp.Group | exp.Distinct) or node.arg_key == "partition_by"


def _literal(t: _Translator, node: exp.Expr) -> exp.Expr:
    return node.copy()


def _decimal_constant(node: exp.Expr) -> Decimal | None:
    if isinstance(node, exp.Neg):
        inner = _decimal_constant(node.this)
        return None if inner is None else -inner
    if isinstance(node, exp.Paren):
        return _decimal_constant(node.this)
    if isinstance(node, exp.Literal) and not node.is_string:
        return Decimal(node.this)
    return None


def _number(value: Decimal) -> exp.Expr:
    text_ = format(value, "f")
    return (
        exp.Neg(this=exp.Literal.number(text_[1:]))
        if text_.startswith("-")
        else exp.Literal.number(text_)
    )


def _arithmetic(op: str) -> Rule:
    def rule(t: _Translator, node: exp.Expr) -> exp.Expr:
        kinds = {t.kind(node.this), t.kind(node.expression)}
        if kinds & {*TEMPORAL, "interval"} and op in "+-":
            return _temporal_arithmetic(t, node, op)
        a, b = t.value(node.this), t.value(node.expression)
        x, y = _decimal_constant(a), _decimal_constant(b)
        if x is not None and y is not None and op in "+-*":  # exactly, not in floats
            return _number(x + y if op == "+" else x - y if op == "-" else x * y)
        return {"+": exp.Add, "-": exp.Sub, "*": exp.Mul}[op](this=a, expression=b)

    return rule


_INTEGERS = ("integer", "smallint", "bigint")


def _temporal_arithmetic(t: _Translator, node: exp.Expr, op: str) -> exp.Expr:
    """Dates, timestamps and intervals added and subtracted (PostgreSQL's operators)."""
    left, right = node.this, node.expression
    lk, rk = t.kind(left), t.kind(right)
    if lk not in TEMPORAL and rk not in TEMPORAL:  # interval +- interval
        a, b = t.interval(left), t.interval(right)
        return temporal.add_spans(a, b if op == "+" else temporal.negate(b))
    if op == "+" and lk not in TEMPORAL:  # interval + date is date + interval
        left, right, lk, rk = right, left, rk, lk
    if op == "-" and lk in TEMPORAL and rk in TEMPORAL:
        if lk == rk == "date":
            return temporal.date_difference(t.value(left), t.value(right))
        return temporal.instant_difference(
            _as(t, left, "timestamptz"), _as(t, right, "timestamptz")
        )
    result = t.kind(node)
    if lk not in TEMPORAL or result not in TEMPORAL or rk in TEMPORAL:
        raise Refused("date and time arithmetic SQLite cannot compute")
    days = rk in _INTEGERS  # date +- whole days
    shift = temporal.span(days=t.value(right)) if days else t.interval(right)
    if op == "-":
        shift = temporal.negate(shift)
    return temporal.add_interval(t.value(left), lk, shift, result)


def _as(t: _Translator, node: exp.Expr, kind: str) -> exp.Expr:
    source = t.kind(node) or kind
    value = t.value(node)
    if source == "unknown" and isinstance(value, exp.Literal):
        return literal(temporal.parse_constant(value.this, kind))
    return temporal.as_kind(value, source, kind) if source in TEMPORAL else value


def _multiply(t: _Translator, node: exp.Expr) -> exp.Expr:
    lk, rk = t.kind(node.this), t.kind(node.expression)
    if "interval" in (lk, rk):
        span_node, factor = (
            (node.this, node.expression) if lk == "interval" else (node.expression, node.this)
        )
        if t.kind(factor) not in ("integer", "smallint", "bigint"):
            raise Refused(
                "an interval times a value that is not an integer (PostgreSQL spills "
                "fractions into days and time)"
            )
        return temporal.scale_span(t.interval(span_node), t.value(factor))
    return _arithmetic("*")(t, node)


def _divide(t: _Translator, node: exp.Expr) -> exp.Expr:
    """``a / b``: integers divide as integers (both truncate); any other quotient is a
    decimal or a float, also of values SQLite holds as integers (``extract``,
    ``i::numeric``, ``sum`` of a bigint), so it divides as a float."""
    if "interval" in (t.kind(node.this), t.kind(node.expression)):
        raise Refused("an interval divided (PostgreSQL spills fractions into days and time)")
    a, b = t.value(node.this), t.value(node.expression)
    if t.kind(node) not in _INTEGERS:
        a = sql("CAST(_a AS REAL)", a=a)
    # typed: SQLite divides as its operands say (sqlglot makes an untyped division a
    # float's, which would turn PostgreSQL's integer division into a fraction)
    return exp.Div(this=a, expression=b, typed=True)


def _neg(t: _Translator, node: exp.Expr) -> exp.Expr:
    inner = t.tr(node.this)
    if isinstance(inner, Span):
        return temporal.negate(inner)
    constant = _decimal_constant(inner)
    return _number(-constant) if constant is not None else exp.Neg(this=inner)


def _mod(t: _Translator, node: exp.Expr) -> exp.Expr:
    a, b = t.value(node.this), t.value(node.expression)
    integers = {t.kind(node.this), t.kind(node.expression)} <= {"integer", "smallint", "bigint"}
    return exp.Mod(this=a, expression=b) if integers else call("mod", a, b)


def _interval(t: _Translator, node: exp.Expr) -> exp.Expr:
    assert isinstance(node, exp.Interval)
    value = node.this
    unit = node.args.get("unit")
    if not (isinstance(value, exp.Literal)):
        raise Refused("an interval built from values (write n * interval '1 day')")
    unit_text = unit.name if unit is not None else None
    if unit is not None and not isinstance(unit, exp.Var):
        raise Refused("an interval with a unit range")
    return temporal.parse_interval(str(value.this), unit_text)


# -- comparisons -----------------------------------------------------------------------

_ORDER = {"date": 0, "timestamp": 1, "timestamptz": 2}


def _aligned(t: _Translator, nodes: list[exp.Expr]) -> list[exp.Expr]:
    """Operands that compare as PostgreSQL compares them: dates, timestamps and
    timestamptz (and literals compared with them) as text of one kind; intervals as
    microseconds."""
    kinds = [t.kind(n) for n in nodes]
    temporal_ones = [k for k in kinds if k in _ORDER]
    if not temporal_ones:
        if "interval" in kinds:
            return [temporal.span_micros(t.interval(n)) for n in nodes]
        values = [t.value(n) for n in nodes]
        if "boolean" in kinds:  # flag = 'true': the literal is the boolean it spells
            values = [
                _cast_literal(v.this, PgType("boolean"), n) if k == "unknown" else v
                for v, k, n in zip(values, kinds, nodes, strict=True)
            ]
        return values
    target = max(temporal_ones, key=_ORDER.__getitem__)
    values = [t.value(n) for n in nodes]
    if target != "date" and _midnight_constants(values, kinds, target):
        target = "date"  # a date column against midnight constants: compare dates
    return [_to(value, kind, target) for value, kind in zip(values, kinds, strict=True)]


def _midnight_constants(values: list[exp.Expr], kinds: list[str | None], target: str) -> bool:
    """Whether every non-date operand is a constant at midnight (UTC) and one is a date."""
    if "date" not in kinds:
        return False
    for value, kind in zip(values, kinds, strict=True):
        if kind == "date":
            continue
        if not (isinstance(value, exp.Literal) and value.is_string):
            return False
        text_ = value.this if kind != "unknown" else temporal.parse_constant(value.this, target)
        if temporal.midnight_date(text_) is None:
            return False
    return True


def _to(value: exp.Expr, kind: str | None, target: str) -> exp.Expr:
    if kind == "unknown" and isinstance(value, exp.Literal) and value.is_string:
        try:
            return literal(temporal.parse_constant(value.this, target))
        except Refused:
            return value
    if kind in _ORDER and kind != target:
        if target == "date" and isinstance(value, exp.Literal):
            return literal(temporal.midnight_date(value.this) or value.this)
        return temporal.as_kind(value, kind, target)
    return value


def _comparison(t: _Translator, node: exp.Expr) -> exp.Expr:
    left, right = _aligned(t, [node.this, node.expression])
    rebuilt = type(node)(this=left, expression=right)
    return rebuilt


def _between(t: _Translator, node: exp.Expr) -> exp.Expr:
    this, low, high = _aligned(t, [node.this, node.args["low"], node.args["high"]])
    return exp.Between(this=this, low=low, high=high)


def _in(t: _Translator, node: exp.Expr) -> exp.Expr:
    assert isinstance(node, exp.In)
    if node.args.get("unnest") or node.args.get("field"):
        raise Refused("IN over an array")
    if node.args.get("query") is not None:
        return exp.In(this=t.value(node.this), query=t.value(node.args["query"]))
    this, *items = _aligned(t, [node.this, *node.expressions])
    return exp.In(this=this, expressions=items)


# -- patterns --------------------------------------------------------------------------


def _like(t: _Translator, node: exp.Expr, escape: exp.Expr | None = None) -> exp.Expr:
    """LIKE -> GLOB, ILIKE -> SQLite's LIKE (see :mod:`.text`); ``NOT`` is kept."""
    pattern = node.expression
    escape_char = "\\"
    if escape is not None:
        if not (isinstance(escape, exp.Literal) and escape.is_string):
            raise Refused("a LIKE escape that is not a literal")
        escape_char = escape.this or ""
    subject = _text_value(t, node.this)
    insensitive = isinstance(node, exp.ILike)
    negate = bool(node.args.get("negate"))
    if not (isinstance(pattern, exp.Literal) and pattern.is_string):
        if not insensitive or escape is not None:
            raise Refused("LIKE with a pattern that is not a literal (SQLite's LIKE ignores case)")
        matched = sql("_s LIKE _p ESCAPE '\\'", s=subject, p=_text_value(t, pattern))
    elif insensitive:
        converted = text.like_for_sqlite(pattern.this, escape_char or None)
        matched = sql("_s LIKE _p ESCAPE '\\'", s=subject, p=literal(converted))
    else:
        matched = exp.Glob(
            this=subject, expression=literal(text.like_to_glob(pattern.this, escape_char or None))
        )
    return exp.Not(this=matched) if negate else matched


def _like_rule(t: _Translator, node: exp.Expr) -> exp.Expr:
    return _like(t, node)


def _escape(t: _Translator, node: exp.Expr) -> exp.Expr:
    inner = node.this
    if not isinstance(inner, exp.Like | exp.ILike):
        raise Refused("ESCAPE outside LIKE")
    return _like(t, inner, node.expression)


def _not(t: _Translator, node: exp.Expr) -> exp.Expr:
    return exp.Not(this=t.value(node.this))


# -- functions -------------------------------------------------------------------------


def _text_value(t: _Translator, node: exp.Expr, booleans: str = "true") -> exp.Expr:
    kind = t.type(node)
    return text.as_text(
        t.value(node), kind.name if kind else None, kind.scale if kind else None, booleans
    )


def _extract(t: _Translator, node: exp.Expr) -> exp.Expr:
    field = str(node.this.name).lower()
    source = node.expression
    kind = t.kind(source) or "timestamp"
    if kind == "unknown":
        kind = "timestamp"
    if kind == "interval":
        return temporal.extract(field, temporal.span_micros(t.interval(source)), kind)
    return temporal.extract(field, _temporal_value(t, source, kind), kind)


def _temporal_value(t: _Translator, node: exp.Expr, kind: str) -> exp.Expr:
    value = t.value(node)
    if t.kind(node) == "unknown" and isinstance(value, exp.Literal):
        return literal(temporal.parse_constant(value.this, kind))
    return value


def _date_trunc(t: _Translator, node: exp.Expr) -> exp.Expr:
    unit = node.args.get("unit")
    zone = node.args.get("zone")
    if zone is not None and not (
        isinstance(zone, exp.Literal) and zone.this.upper() in ("UTC", "ETC/UTC", "Z")
    ):
        raise Refused("date_trunc in a time zone other than UTC")
    kind = t.kind(node.this) or "timestamp"
    if kind in ("unknown",):
        kind = "timestamp"
    if kind not in TEMPORAL:
        raise Refused(f"date_trunc of a {kind}")
    result = t.kind(node) or "timestamp"
    unit_text = unit.name if isinstance(unit, exp.Var | exp.Literal) else None
    if unit_text is None:
        raise Refused("date_trunc with a unit that is not a literal")
    return temporal.truncate(str(unit_text), _temporal_value(t, node.this, kind), kind, result)


def _current(kind: str) -> Rule:
    return lambda t, node: temporal.now(kind)


def _cast(t: _Translator, node: exp.Expr) -> exp.Expr:
    assert isinstance(node, exp.Cast)
    target = cast_target(node.to)
    if target is None:
        raise Refused(f"a cast to {node.to.sql('postgres')}")
    source = t.type(node.this)
    source_kind = source.name if source is not None else None
    if target.name == "interval":
        return t.interval(node.this)
    value = t.value(node.this)
    if source_kind == "unknown" and isinstance(value, exp.Literal):
        return _cast_literal(value.this, target, node)
    return _convert(value, source, target, node)


def _cast_literal(value: str, target: PgType, node: exp.Expr) -> exp.Expr:
    if target.name in ("date", "timestamp", "timestamptz", "time"):
        return literal(temporal.parse_constant(value, target.name))
    if target.name == "text":
        return _text_width(literal(value), node)
    if target.is_number:
        try:
            number = Decimal(value.strip())
        except ArithmeticError:
            raise Refused(f"{value!r} is not a number") from None
        if target.name in ("integer", "smallint", "bigint"):
            return literal(int(number.to_integral_value(rounding="ROUND_HALF_UP")))
        if target.is_numeric and target.scale is not None:
            number = number.quantize(Decimal(1).scaleb(-target.scale), rounding="ROUND_HALF_UP")
        return _number(number)
    if target.name == "boolean":
        truth = value.strip().lower()
        if truth in ("t", "true", "y", "yes", "on", "1"):
            return exp.true()
        if truth in ("f", "false", "n", "no", "off", "0"):
            return exp.false()
        raise Refused(f"{value!r} is not a boolean")
    return _convert(literal(value), PgType("text"), target, node)


def _text_width(value: exp.Expr, node: exp.Expr) -> exp.Expr:
    """``varchar(n)``: PostgreSQL's explicit cast cuts to n characters."""
    if not isinstance(node, exp.Cast):
        return value
    params = node.to.expressions
    if params and isinstance(params[0].this, exp.Literal):
        return call("substr", value, 1, int(params[0].this.this))
    return value


def _convert(value: exp.Expr, source: PgType | None, target: PgType, node: exp.Expr) -> exp.Expr:
    """A value of ``source`` type as the ``target`` type, stored as pipeledger stores it."""
    s = source.name if source is not None else None
    name = target.name
    if name == "text":
        return _text_width(text.as_text(value, s, source.scale if source else None, "true"), node)
    if name in ("integer", "smallint", "bigint"):
        if s in ("integer", "smallint", "bigint", "boolean"):
            return value
        if s in ("real", "double precision"):
            return sql("CAST(_r AS INTEGER)", r=_round_half_even(value))
        if s == "numeric":
            return sql("CAST(round(_x) AS INTEGER)", x=value)
        return sql("CAST(trim(_x) AS INTEGER)", x=value)
    if name in ("numeric", "real", "double precision"):
        number = (
            sql("CAST(_x AS REAL)", x=value)
            if s not in ("integer", "smallint", "bigint")
            else value
        )
        if name == "numeric" and target.scale is not None and target.fixed:
            return call("round", number, target.scale)
        return number if s != "boolean" else value
    if name in ("date", "timestamp", "timestamptz"):
        if s in TEMPORAL:
            return temporal.as_kind(value, s or name, name)
        if s in ("text", "unknown", None):
            return temporal.text_to_instant(value, name)
    if name == "time":
        if s in ("timestamp", "timestamptz"):
            return call("substr", value, 12, 15)
        if s in ("text", "unknown", None):
            return temporal.text_to_instant(value, "time")
        if s == "time":
            return value
    if name == "boolean":
        if s in ("integer", "smallint", "bigint"):
            return sql("_x <> 0", x=value)
        if s == "boolean":
            return value
        return sql(
            "CASE lower(trim(_x)) WHEN 'true' THEN 1 WHEN 't' THEN 1 WHEN 'yes' THEN 1 "
            "WHEN 'y' THEN 1 WHEN 'on' THEN 1 WHEN '1' THEN 1 WHEN 'false' THEN 0 "
            "WHEN 'f' THEN 0 WHEN 'no' THEN 0 WHEN 'n' THEN 0 WHEN 'off' THEN 0 "
            "WHEN '0' THEN 0 END",
            x=value,
        )
    if name == "uuid" and s in ("text", "unknown", "uuid"):
        return call("lower", value)
    raise Refused(f"a cast from {s or 'this value'} to {name}")


def _dpipe(t: _Translator, node: exp.Expr) -> exp.Expr:
    return exp.DPipe(this=_text_value(t, node.this), expression=_text_value(t, node.expression))


def _concat(t: _Translator, node: exp.Expr) -> exp.Expr:
    """concat: NULLs are skipped, values printed as PostgreSQL prints them (``t``/``f``)."""
    pieces = [sql("coalesce(_x, '')", x=_text_value(t, a, "t")) for a in node.expressions]
    return _joined(pieces) if pieces else literal("")


def _joined(pieces: list[exp.Expr]) -> exp.Expr:
    result = pieces[0]
    for piece in pieces[1:]:
        result = sql("_a || _b", a=result, b=piece)
    return result


def _concat_ws(t: _Translator, node: exp.Expr) -> exp.Expr:
    separator, *values = node.expressions
    sep = _text_value(t, separator)
    pieces = [
        sql("CASE WHEN _x IS NULL THEN '' ELSE _s || _x END", x=_text_value(t, v, "t"), s=sep)
        for v in values
    ]
    if not pieces:
        return literal("")
    return call("substr", _joined(pieces), sql("length(_s) + 1", s=sep))


def _substring(t: _Translator, node: exp.Expr) -> exp.Expr:
    """substring(s from a for n): characters a .. a+n-1 that exist (SQLite counts a start
    below 1 from the end, PostgreSQL does not)."""
    s = _text_value(t, node.this)
    start = node.args.get("start")
    length = node.args.get("length")
    if start is None:
        raise Refused("substring with a regular expression")
    if isinstance(start, exp.Literal) and not start.is_string and t.kind(start) == "integer":
        first = int(start.this)
        if first >= 1:
            args = [s, t.value(start), *([t.value(length)] if length is not None else [])]
            return call("substr", *args)
    a = t.value(start)
    begin = call("max", a, 1)
    if length is None:
        return call("substr", s, begin)
    n = t.value(length)
    return call("substr", s, begin, call("max", sql("_a + _n - _b", a=a, n=n, b=begin), 0))


def _left(t: _Translator, node: exp.Expr) -> exp.Expr:
    s, n = _text_value(t, node.this), t.value(node.expression)
    return sql(
        "CASE WHEN _n >= 0 THEN substr(_s, 1, _n) ELSE substr(_s, 1, max(length(_s) + _n, 0)) END",
        s=s,
        n=n,
    )


def _right(t: _Translator, node: exp.Expr) -> exp.Expr:
    s, n = _text_value(t, node.this), t.value(node.expression)
    return sql(
        "CASE WHEN _n > 0 THEN substr(_s, -_n) WHEN _n = 0 THEN '' ELSE substr(_s, 1 - _n) END",
        s=s,
        n=n,
    )


def _pad(t: _Translator, node: exp.Expr) -> exp.Expr:
    s, n = _text_value(t, node.this), t.value(node.expression)
    fill_node = node.args.get("fill_pattern")
    fill = _text_value(t, fill_node) if fill_node is not None else literal(" ")
    filler = sql(
        "substr(replace(hex(zeroblob(_n)), '00', _f), 1, _n - length(_s))", n=n, f=fill, s=s
    )
    padded = (
        sql("_p || _s", p=filler, s=s)
        if node.args.get("is_left")
        else sql("_s || _p", p=filler, s=s)
    )
    return sql("CASE WHEN length(_s) >= _n THEN substr(_s, 1, _n) ELSE _p END", s=s, n=n, p=padded)


def _repeat(t: _Translator, node: exp.Expr) -> exp.Expr:
    s, n = _text_value(t, node.this), t.value(node.args["times"])
    return sql("replace(hex(zeroblob(max(_n, 0))), '00', _s)", s=s, n=n)


def _trim(t: _Translator, node: exp.Expr) -> exp.Expr:
    s = _text_value(t, node.this)
    chars = node.args.get("expression")
    position = str(node.args.get("position") or "BOTH").upper()
    name = {"LEADING": "ltrim", "TRAILING": "rtrim"}.get(position, "trim")
    return call(name, s, *([_text_value(t, chars)] if chars is not None else []))


def _position(t: _Translator, node: exp.Expr) -> exp.Expr:
    if node.args.get("position") is not None or node.args.get("occurrence") is not None:
        raise Refused("strpos from a position")
    return call("instr", _text_value(t, node.this), _text_value(t, node.args["substr"]))


def _split_part(t: _Translator, node: exp.Expr) -> exp.Expr:
    """split_part(s, delimiter, n) for a literal n of 1 to 5."""
    index = node.args.get("part_index")
    n = int(index.this) if isinstance(index, exp.Literal) and str(index.this).isdigit() else 0
    if not 1 <= n <= 5:
        raise Refused("split_part with a part that is not a literal from 1 to 5")
    rest = _text_value(t, node.this)
    d = _text_value(t, node.args["delimiter"])
    for _ in range(n - 1):
        rest = sql(
            "CASE WHEN _r IS NULL OR instr(_r, _d) = 0 THEN NULL "
            "ELSE substr(_r, instr(_r, _d) + length(_d)) END",
            r=rest,
            d=d,
        )
    first = sql(
        "CASE WHEN _r IS NULL THEN '' WHEN instr(_r, _d) = 0 THEN _r "
        "ELSE substr(_r, 1, instr(_r, _d) - 1) END",
        r=rest,
        d=d,
    )
    return sql(
        "CASE WHEN _s IS NULL OR _d IS NULL THEN NULL ELSE _f END",
        s=_text_value(t, node.this),
        d=d,
        f=first,
    )


def _string_agg(t: _Translator, node: exp.Expr) -> exp.Expr:
    inner = node.this
    if isinstance(inner, exp.Order) and not _ORDERED_AGGREGATES:
        raise Refused(
            f"string_agg(... ORDER BY ...) needs SQLite 3.44 (this is {sqlite3.sqlite_version})"
        )
    return t.rebuild(node)


def _avg(t: _Translator, node: exp.Expr) -> exp.Expr:
    if t.kind(node.this) == "interval":
        raise Refused("avg of an interval")
    return t.rebuild(node)


def _trunc(t: _Translator, node: exp.Expr) -> exp.Expr:
    places = node.args.get("decimals")
    x = t.value(node.this)
    if places is None:
        return call("trunc", x)
    factor = sql("power(10, _n)", n=t.value(places))
    return sql("trunc(_x * _f) / _f", x=x, f=factor)


def _round(t: _Translator, node: exp.Expr) -> exp.Expr:
    """round(x[, n]); a float rounds half to even in PostgreSQL, a decimal half away from
    zero (as SQLite's round)."""
    places = node.args.get("decimals")
    x = t.value(node.this)
    if places is None and t.kind(node.this) in ("real", "double precision"):
        return _round_half_even(x)
    return call("round", x, *([t.value(places)] if places is not None else []))


def _round_half_even(x: exp.Expr) -> exp.Expr:
    return sql(
        "CASE WHEN abs(_x - CAST(_x AS INTEGER)) = 0.5 THEN 2 * round(_x / 2) ELSE round(_x) END",
        x=x,
    )


def _md5(t: _Translator, node: exp.Expr) -> exp.Expr:
    return call("md5", _text_value(t, node.this))  # registered by pipeledger's adapter


def _anonymous(t: _Translator, node: exp.Expr) -> exp.Expr:
    assert isinstance(node, exp.Anonymous)
    name = str(node.name).lower()
    args = node.expressions
    if name == "to_char":
        return _to_char(t, node)
    if name == "date_part":
        return _date_part(t, args)
    if name in ("to_date", "to_timestamp"):
        return _parse_instant(t, name, args)
    if name == "make_date" and len(args) == 3:
        y, m, d = (t.value(a) for a in args)
        text_ = call("date", call("printf", "%04d-%02d-%02d", y, m, d))
        return sql(
            "CASE WHEN coalesce(_y, _m, _d) IS NULL THEN NULL ELSE _t END", y=y, m=m, d=d, t=text_
        )
    if name == "octet_length":
        return call("length", sql("CAST(_x AS BLOB)", x=_text_value(t, args[0])))
    if name in ("char_length", "character_length"):
        return call("length", _text_value(t, args[0]))
    if name in _TRIMS:
        pieces = [_text_value(t, a) for a in args]
        return call(_TRIMS[name], *pieces)
    if name in _SAME_FUNCTIONS:
        return call(name, *(t.value(a) for a in args))
    raise Refused(f"{name}() has no SQLite translation")


_ISO_TEMPLATES = {
    "to_date": ("YYYY-MM-DD",),
    "to_timestamp": ("YYYY-MM-DD HH24:MI:SS", 'YYYY-MM-DD"T"HH24:MI:SS', "YYYY-MM-DD HH24:MI"),
}


def _parse_instant(t: _Translator, name: str, args: list[exp.Expr]) -> exp.Expr:
    """to_timestamp(epoch seconds), or to_date / to_timestamp of text in an ISO template."""
    if name == "to_timestamp" and len(args) == 1:
        micros = sql("CAST(round(_x * 1000000) AS INTEGER)", x=t.value(args[0]))
        return temporal.from_epoch_micros(micros, "timestamptz")
    template = args[1] if len(args) == 2 else None
    if not (isinstance(template, exp.Literal) and template.this in _ISO_TEMPLATES[name]):
        raise Refused(f"{name} with a template other than {' or '.join(_ISO_TEMPLATES[name])}")
    kind = "date" if name == "to_date" else "timestamptz"
    return temporal.text_to_instant(_text_value(t, args[0]), kind)


def _date_part(t: _Translator, args: list[exp.Expr]) -> exp.Expr:
    """date_part('field', x): extract's value (a double in PostgreSQL)."""
    if len(args) != 2 or not (isinstance(args[0], exp.Literal) and args[0].is_string):
        raise Refused("date_part with a field that is not a literal")
    field, source = str(args[0].this).lower(), args[1]
    kind = t.kind(source) or "timestamp"
    if kind == "interval":
        return temporal.extract(field, temporal.span_micros(t.interval(source)), kind)
    kind = "timestamp" if kind == "unknown" else kind
    return temporal.extract(field, _temporal_value(t, source, kind), kind)


def _to_char(t: _Translator, node: exp.Expr) -> exp.Expr:
    args = node.expressions
    if len(args) != 2 or not (isinstance(args[1], exp.Literal) and args[1].is_string):
        raise Refused("to_char with a template that is not a literal")
    kind = t.kind(args[0])
    if kind not in ("date", "timestamp", "timestamptz", "time", "unknown"):
        raise Refused("to_char of a number (PostgreSQL's number templates)")
    value = _temporal_value(t, args[0], "timestamp" if kind == "unknown" else kind or "timestamp")
    return text.to_char(value, args[1].this)


def _chr(t: _Translator, node: exp.Expr) -> exp.Expr:
    code = t.value(node.expressions[0])
    return sql("CASE WHEN _c IS NULL THEN NULL ELSE char(_c) END", c=code)  # char(NULL) is NUL


def _ascii(t: _Translator, node: exp.Expr) -> exp.Expr:
    s = _text_value(t, node.this)  # ascii('') is 0, SQLite's unicode('') NULL
    return sql("CASE WHEN _s IS NULL THEN NULL ELSE coalesce(unicode(_s), 0) END", s=s)


def _greatest(t: _Translator, node: exp.Expr) -> exp.Expr:
    """greatest/least skip NULLs in PostgreSQL; SQLite's max/min return NULL on any."""
    values = _aligned(t, [node.this, *node.expressions])
    name = "max" if isinstance(node, exp.Greatest) else "min"
    if len(values) == 1:
        return values[0]
    options = [
        exp.Coalesce(this=v, expressions=[o for j, o in enumerate(values) if j != i])
        for i, v in enumerate(values)
    ]
    return call(name, *options)


def _rebuilt(t: _Translator, node: exp.Expr) -> exp.Expr:
    return t.rebuild(node)


def _paren(t: _Translator, node: exp.Expr) -> exp.Expr:
    inner = t.tr(node.this)
    return inner if isinstance(inner, Span) else exp.Paren(this=inner)


def _branches(t: _Translator, node: exp.Expr) -> exp.Expr:
    """CASE, COALESCE, IF: each value as the common type (a date among timestamps as a
    timestamp)."""
    rebuilt = t.rebuild(node)
    result = t.kind(node)
    if result not in _ORDER or isinstance(rebuilt, Span):
        return rebuilt
    for original, value in _branch_values(node, rebuilt):
        value.replace(_to(value.copy(), t.kind(original), result))
    return rebuilt


def _branch_values(node: exp.Expr, rebuilt: exp.Expr) -> list[tuple[exp.Expr, exp.Expr]]:
    if isinstance(node, exp.Case):
        pairs = [
            (o.args["true"], r.args["true"])
            for o, r in zip(node.args.get("ifs") or [], rebuilt.args.get("ifs") or [], strict=True)
        ]
        if node.args.get("default") is not None:
            pairs.append((node.args["default"], rebuilt.args["default"]))
        return pairs
    if isinstance(node, exp.If):
        keys = [k for k in ("true", "false") if node.args.get(k) is not None]
        return [(node.args[k], rebuilt.args[k]) for k in keys]
    return [(node.this, rebuilt.this), *zip(node.expressions, rebuilt.expressions, strict=True)]


def _refuse(reason: str) -> Rule:
    def rule(t: _Translator, node: exp.Expr) -> exp.Expr:
        raise Refused(reason)

    return rule


_COMPARISONS = (exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE, exp.NullSafeEQ, exp.NullSafeNEQ)

_RULES: dict[type[exp.Expr], Rule] = {
    exp.Table: _table,
    exp.Select: _select,
    exp.Subquery: _subquery,
    exp.Values: _values,
    exp.Column: _column,
    exp.Literal: _literal,
    exp.Add: _arithmetic("+"),
    exp.Sub: _arithmetic("-"),
    exp.Mul: _multiply,
    exp.Div: _divide,
    exp.Neg: _neg,
    exp.Mod: _mod,
    exp.Interval: _interval,
    **{c: _comparison for c in _COMPARISONS},
    exp.Between: _between,
    exp.In: _in,
    exp.Like: _like_rule,
    exp.ILike: _like_rule,
    exp.Escape: _escape,
    exp.Not: _not,
    exp.Extract: _extract,
    exp.TimestampTrunc: _date_trunc,
    exp.CurrentDate: _current("date"),
    exp.CurrentTimestamp: _current("timestamptz"),
    exp.Localtimestamp: _current("timestamp"),
    exp.Cast: _cast,
    exp.DPipe: _dpipe,
    exp.Concat: _concat,
    exp.ConcatWs: _concat_ws,
    exp.Substring: _substring,
    exp.Left: _left,
    exp.Right: _right,
    exp.Pad: _pad,
    exp.Repeat: _repeat,
    exp.Trim: _trim,
    exp.StrPosition: _position,
    exp.SplitPart: _split_part,
    exp.GroupConcat: _string_agg,
    exp.Sum: _rebuilt,
    exp.Paren: _paren,
    exp.Coalesce: _branches,
    exp.Case: _branches,
    exp.If: _branches,
    exp.Avg: _avg,
    exp.Trunc: _trunc,
    exp.Round: _round,
    exp.MD5: _md5,
    exp.Anonymous: _anonymous,
    exp.Chr: _chr,
    exp.Ascii: _ascii,
    exp.Greatest: _greatest,
    exp.Least: _greatest,
    exp.RegexpLike: _refuse(
        "a regular expression match (~): SQLite has no POSIX regular expressions"
    ),
    exp.RegexpILike: _refuse(
        "a regular expression match (~*): SQLite has no POSIX regular expressions"
    ),
    exp.SimilarTo: _refuse("SIMILAR TO: SQLite has no SQL regular expressions"),
    exp.BitwiseXor: _refuse("# (xor): SQLite has no xor operator"),
    exp.ArrayAgg: _refuse("array_agg: SQLite has no arrays"),
    exp.Array: _refuse("an array: SQLite has no arrays"),
    exp.Unnest: _refuse("unnest: SQLite has no arrays"),
    exp.Lateral: _refuse("LATERAL: SQLite has none"),
}
