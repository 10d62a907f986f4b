"""The PostgreSQL type of every expression in a model's query, by PostgreSQL's own rules.

A model is written in PostgreSQL's SQL, so its output types are the types PostgreSQL gives
it, on either warehouse: ``date '2024-01-01' + interval '1 day'`` is a timestamp, ``d - d``
an integer, ``extract(...)`` a numeric, ``date_trunc('month', d)`` a timestamptz. The
translation to SQLite (:mod:`pipeledger.common.translate`) asks the same types to know
what an expression holds there.

Decimals keep the scale their operands imply, as PostgreSQL computes them: a sum or a
difference has the larger scale of its operands, a product the sum of their scales
(``numeric(15,2) * numeric(15,2)``: 4 decimals), a sum over rows its operand's scale. A
quotient's scale depends on the values in PostgreSQL (at least 16 significant digits); a
column holding one gets :data:`QUOTIENT_SCALE` decimals, as do ``avg``, ``sqrt`` and the
like. Integer operands count as decimals of scale 0. A target column of a computed decimal
is ``numeric(p,s)`` with ``p`` the digits the operands imply, at least
:data:`COMPUTED_PRECISION` (a sum outgrows its inputs), at most :data:`MAX_PRECISION`
(beyond that the scale gives way, the integer digits never).

Columns are resolved like PostgreSQL resolves them: a qualified name by its table or alias,
an unqualified one in the query's FROM items, then its output names (ORDER BY, GROUP BY),
then the enclosing query (a correlated subquery). The tables' columns come from a
``catalog`` (the warehouse's, or the types a model will have).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from decimal import Decimal, InvalidOperation

from sqlglot import exp

from pipeledger.common.columns import MAX_PRECISION, TableName, canonical_type

Catalog = Callable[[TableName], Sequence[tuple[str, str]] | None]

QUOTIENT_SCALE = 20
COMPUTED_PRECISION = 38
SUM_DIGITS = 10  # a sum of up to ten billion rows
_INT_DIGITS = {"smallint": 5, "integer": 10, "bigint": 19}
INTEGERS = frozenset(_INT_DIGITS)
TEMPORAL = frozenset({"date", "timestamp", "timestamptz"})


@dataclass(frozen=True)
class PgType:
    """A PostgreSQL type: a canonical name (:func:`~pipeledger.common.columns.canonical_type`),
    ``unknown`` (an untyped string literal) or ``null``. A ``numeric`` carries the integer
    ``digits`` and the ``scale`` its values have (None: each value its own); ``fixed``: a
    declared ``numeric(p,s)`` (a column, a cast)."""

    name: str
    digits: int | None = None
    scale: int | None = None
    fixed: bool = False

    @property
    def is_numeric(self) -> bool:
        return self.name == "numeric"

    @property
    def is_number(self) -> bool:
        return self.name in INTEGERS or self.name in ("numeric", "real", "double precision")

    @property
    def is_temporal(self) -> bool:
        return self.name in TEMPORAL

    def as_decimal(self) -> PgType:
        """An integer as the decimal it converts to (scale 0), a numeric as itself."""
        if self.name in _INT_DIGITS:
            return PgType("numeric", self.digits or _INT_DIGITS[self.name], 0)
        return self

    def column_type(self) -> str | None:
        """The canonical type of a target column holding these values (None: cannot tell)."""
        if self.name == "unknown":
            return "text"
        if self.name == "null":
            return None
        if not self.is_numeric:
            return self.name
        if self.scale is None or self.digits is None:
            return None
        if self.fixed:
            return f"numeric({max(1, self.digits + self.scale)},{self.scale})"
        digits = min(self.digits, MAX_PRECISION)
        scale = min(self.scale, MAX_PRECISION - digits)
        precision = min(MAX_PRECISION, max(COMPUTED_PRECISION, digits + scale))
        return f"numeric({precision},{scale})"


NUMERIC_UNKNOWN = PgType("numeric")
TEXT = PgType("text")
BOOLEAN = PgType("boolean")
INTEGER = PgType("integer")
BIGINT = PgType("bigint")
DOUBLE = PgType("double precision")
INTERVAL = PgType("interval")


def declared(text: str) -> PgType:
    """The type of a column declared ``text`` (a catalog's type, canonical or not)."""
    try:
        kind = canonical_type(text)
    except ValueError:
        return TEXT
    if kind.startswith("numeric("):
        precision, scale = (int(p) for p in kind[8:-1].split(","))
        return PgType("numeric", precision - scale, scale, fixed=True)
    return PgType(kind)


def _decimal(value: str) -> PgType:
    """A numeric literal's type: integer, bigint, or numeric with its written scale (its
    digits are the ones written: ``1 - discount`` needs no more digits than ``discount``)."""
    if re.fullmatch(r"\d+", value):
        number = int(value)
        kind = "integer" if number < 2**31 else "bigint" if number < 2**63 else None
        return PgType(kind, digits=len(str(number))) if kind else _numeric_of(value)
    return _numeric_of(value)


def _numeric_of(value: str) -> PgType:
    try:
        number = Decimal(value)
    except InvalidOperation:
        return NUMERIC_UNKNOWN
    _sign, digits, exponent = number.as_tuple()
    scale = max(0, -int(exponent))
    whole = max(1, len(digits) + int(exponent))
    return PgType("numeric", whole, scale)


# -- arithmetic ----------------------------------------------------------------------------


def _numeric_result(op: str, a: PgType, b: PgType) -> PgType:
    """``a op b`` of two decimals (integers as scale 0), by PostgreSQL's scale rules."""
    a, b = a.as_decimal(), b.as_decimal()
    if a.scale is None or b.scale is None or a.digits is None or b.digits is None:
        return NUMERIC_UNKNOWN
    if op in ("+", "-"):
        return PgType("numeric", max(a.digits, b.digits) + 1, max(a.scale, b.scale))
    if op == "*":
        return PgType("numeric", a.digits + b.digits, a.scale + b.scale)
    if op == "/":
        return PgType("numeric", a.digits + b.scale, max(QUOTIENT_SCALE, a.scale, b.scale))
    return PgType("numeric", max(a.digits, b.digits), max(a.scale, b.scale))  # %


def _float(a: PgType, b: PgType) -> PgType:
    return PgType("real") if a.name == b.name == "real" else DOUBLE


def _wider_integer(a: PgType, b: PgType) -> PgType:
    order = ["smallint", "integer", "bigint"]
    return PgType(max(a.name, b.name, key=order.index))


def arithmetic(op: str, a: PgType | None, b: PgType | None) -> PgType | None:
    """The type of ``a op b`` (``op``: + - * / %)."""
    if a is None or b is None:
        return None
    a, b = _literal_as(a, b), _literal_as(b, a)
    temporal = _temporal_arithmetic(op, a, b)
    if temporal is not None:
        return temporal
    if not (a.is_number and b.is_number):
        return None
    if "double precision" in (a.name, b.name) or "real" in (a.name, b.name):
        return _float(a, b)
    if a.name in INTEGERS and b.name in INTEGERS:
        return _wider_integer(a, b)
    return _numeric_result(op, a, b)


def _literal_as(a: PgType, other: PgType) -> PgType:
    """An untyped literal takes the type of the other operand (``d + '1 day'``: interval
    when ``d`` is temporal, else the other's type)."""
    if a.name != "unknown":
        return a
    return INTERVAL if other.is_temporal else other


_TEMPORAL_RESULTS: dict[tuple[str, str, str], str] = {
    ("+", "date", "integer"): "date",
    ("+", "integer", "date"): "date",
    ("-", "date", "integer"): "date",
    ("-", "date", "date"): "integer",
    ("+", "date", "interval"): "timestamp",
    ("+", "interval", "date"): "timestamp",
    ("-", "date", "interval"): "timestamp",
    ("+", "date", "time"): "timestamp",
    ("+", "timestamp", "interval"): "timestamp",
    ("+", "interval", "timestamp"): "timestamp",
    ("-", "timestamp", "interval"): "timestamp",
    ("+", "timestamptz", "interval"): "timestamptz",
    ("+", "interval", "timestamptz"): "timestamptz",
    ("-", "timestamptz", "interval"): "timestamptz",
    ("-", "timestamp", "timestamp"): "interval",
    ("-", "timestamptz", "timestamptz"): "interval",
    ("-", "timestamptz", "timestamp"): "interval",
    ("-", "timestamp", "timestamptz"): "interval",
    ("+", "interval", "interval"): "interval",
    ("-", "interval", "interval"): "interval",
    ("+", "time", "interval"): "time",
    ("-", "time", "interval"): "time",
    ("-", "time", "time"): "interval",
}


def _temporal_arithmetic(op: str, a: PgType, b: PgType) -> PgType | None:
    names = (
        "integer" if a.name in INTEGERS else a.name,
        "integer" if b.name in INTEGERS else b.name,
    )
    found = _TEMPORAL_RESULTS.get((op, *names))
    if found is not None:
        return PgType(found)
    if "interval" in names and op in ("*", "/") and (a.is_number or b.is_number):
        return INTERVAL
    return None


def common(types: Sequence[PgType | None]) -> PgType | None:
    """The type of CASE, COALESCE, GREATEST and set operations over ``types`` (PostgreSQL's
    common type: unknown literals take the others' type; decimals keep the largest scale)."""
    known = [t for t in types if t is not None and t.name not in ("unknown", "null")]
    if not known and any(t is not None and t.name == "unknown" for t in types):
        return TEXT
    if not known:
        return None if any(t is None for t in types) else PgType("null")
    if any(t is None for t in types):
        return None
    names = {t.name for t in known}
    if len(names) == 1 and not known[0].is_numeric:
        return known[0]
    if all(t.is_number for t in known):
        if names & {"double precision", "real"}:
            return DOUBLE if "double precision" in names or len(names) > 1 else PgType("real")
        if names <= INTEGERS:
            result = known[0]
            for t in known[1:]:
                result = _wider_integer(result, t)
            return result
        return _widest_decimal([t.as_decimal() for t in known])
    if names <= {"timestamp", "timestamptz", "date"}:
        return PgType("timestamptz" if "timestamptz" in names else "timestamp")
    return None


def _widest_decimal(decimals: Sequence[PgType]) -> PgType:
    if any(t.scale is None or t.digits is None for t in decimals):
        return NUMERIC_UNKNOWN
    digits = max(t.digits or 0 for t in decimals)
    scale = max(t.scale or 0 for t in decimals)
    same = all(t == decimals[0] for t in decimals)
    return PgType("numeric", digits, scale, fixed=same and decimals[0].fixed)


# -- the types of a query --------------------------------------------------------------


@dataclass(frozen=True)
class Output:
    """One output column of a query: its name (None: PostgreSQL's ``?column?``) and type."""

    name: str | None
    type: PgType | None


class Types:
    """The PostgreSQL type of each expression of one query tree (see the module docstring).
    The tree must not change while it is asked."""

    def __init__(self, tree: exp.Expr, catalog: Catalog | None) -> None:
        self.tree = tree
        self._catalog = catalog
        self._types: dict[int, PgType | None] = {}
        self._outputs: dict[int, list[Output]] = {}
        self._tables: dict[str, list[Output] | None] = {}

    # -- public -----------------------------------------------------------------------
    def of(self, node: exp.Expr) -> PgType | None:
        key = id(node)
        if key not in self._types:
            self._types[key] = None  # a cycle (a recursive CTE) resolves to unknown
            self._types[key] = _infer(self, node)
        return self._types[key]

    def outputs(self, query: exp.Expr) -> list[Output]:
        """The output columns of a query (a SELECT, a set operation, VALUES, a subquery)."""
        key = id(query)
        if key not in self._outputs:
            self._outputs[key] = []
            self._outputs[key] = self._query_outputs(query)
        return self._outputs[key]

    def column(self, column: exp.Column) -> PgType | None:
        found = self.resolve(column)
        return found.type if found is not None else None

    def resolve(self, column: exp.Column) -> Output | None:
        """The source column a column reference reads."""
        scope = _scope_of(column)
        while scope is not None:
            found = self._resolve_in(scope, column)
            if found is not None:
                return found
            scope = _scope_of(scope)
        return None

    # -- tables and sources -----------------------------------------------------------
    def table(self, table: exp.Table) -> list[Output] | None:
        cte = _cte_for(table)
        if cte is not None:
            return _renamed(self.outputs(cte.this), cte.args.get("alias"))
        name = f"{table.db}.{table.name}" if table.db else table.name
        if name not in self._tables:
            self._tables[name] = self._read_table(name)
        return self._tables[name]

    def _read_table(self, name: str) -> list[Output] | None:
        if self._catalog is None:
            return None
        try:
            columns = self._catalog(TableName.parse(name))
        except ValueError:
            return None
        if columns is None:
            return None
        return [Output(column, declared(kind)) for column, kind in columns]

    def source_outputs(self, source: exp.Expr) -> list[Output] | None:
        """The columns a FROM item provides (None: a table the catalog does not know)."""
        if isinstance(source, exp.Table):
            return self.table(source)
        if isinstance(source, exp.Subquery):
            return _renamed(self.outputs(source.this), source.args.get("alias"))
        if isinstance(source, exp.Values):
            return _renamed(self.outputs(source), source.args.get("alias"))
        return None

    def _resolve_in(self, scope: exp.Expr, column: exp.Column) -> Output | None:
        name, qualifier = column.name, column.table
        if isinstance(scope, exp.Select):
            for alias, source in _sources(scope):
                if qualifier and alias != qualifier:
                    continue
                outputs = self.source_outputs(source)
                for output in outputs or []:
                    if output.name == name:
                        return output
                if qualifier and outputs is None:
                    return Output(name, None)  # an unknown table: its columns are unknown
            if not qualifier:
                own = self._output_alias(scope, name, column)
                if own is not None:
                    return own
        elif isinstance(scope, exp.SetOperation) and not qualifier:
            for output in self.outputs(scope):
                if output.name == name:
                    return output
        return None

    def _output_alias(self, select: exp.Select, name: str, column: exp.Column) -> Output | None:
        """An output name of ``select`` referenced in its ORDER BY, GROUP BY or HAVING."""
        if column.find_ancestor(exp.Order, exp.Group, exp.Having) is None:
            return None
        for projection in select.expressions:
            if isinstance(projection, exp.Alias) and projection.alias == name:
                return Output(name, self.of(projection.this))
        return None

    # -- the outputs of queries -------------------------------------------------------
    def _query_outputs(self, query: exp.Expr) -> list[Output]:
        if isinstance(query, exp.Subquery):
            return _renamed(self.outputs(query.this), query.args.get("alias"))
        if isinstance(query, exp.SetOperation):
            left = self.outputs(query.this)
            self._outputs[id(query)] = left  # a recursive CTE's right side reads itself
            right = self.outputs(query.expression)
            return [
                Output(a.name, common([a.type, right[i].type]) if i < len(right) else a.type)
                for i, a in enumerate(left)
            ]
        if isinstance(query, exp.Values):
            return self._values_outputs(query)
        if isinstance(query, exp.Select):
            return list(self._select_outputs(query))
        return []

    def _values_outputs(self, values: exp.Values) -> list[Output]:
        rows = [row for row in values.expressions if isinstance(row, exp.Tuple)]
        if not rows:
            return []
        width = len(rows[0].expressions)
        return [
            Output(f"column{i + 1}", common([self.of(row.expressions[i]) for row in rows]))
            for i in range(width)
        ]

    def _select_outputs(self, select: exp.Select) -> Iterator[Output]:
        for projection in select.expressions:
            if isinstance(projection, exp.Star):
                for _, source in _sources(select):
                    yield from self.source_outputs(source) or []
            elif isinstance(projection, exp.Column) and isinstance(projection.this, exp.Star):
                for alias, source in _sources(select):
                    if alias == projection.table:
                        yield from self.source_outputs(source) or []
            else:
                yield Output(output_name(projection), self.of(projection))


def _renamed(outputs: list[Output], alias: exp.Expr | None) -> list[Output]:
    """A derived table's columns under its alias's column list (``AS c (a, b)``)."""
    names = [c.name for c in alias.args.get("columns") or []] if alias is not None else []
    return [Output(names[i] if i < len(names) else o.name, o.type) for i, o in enumerate(outputs)]


def _sources(select: exp.Select) -> list[tuple[str, exp.Expr]]:
    """The FROM items of ``select`` (the FROM clause and its joins) by their names."""
    items: list[exp.Expr] = []
    from_ = select.args.get("from_")
    if from_ is not None:
        items.append(from_.this)
    items.extend(join.this for join in select.args.get("joins") or [])
    return [(_source_name(item), item) for item in items]


def _source_name(item: exp.Expr) -> str:
    alias = item.args.get("alias")
    if alias is not None and alias.name:
        return str(alias.name)
    return str(item.name) if isinstance(item, exp.Table) else ""


def _scope_of(node: exp.Expr) -> exp.Expr | None:
    """The query (SELECT or set operation) a node belongs to: the nearest one above it
    (for a query, the one enclosing it)."""
    parent = node.parent
    while parent is not None and not isinstance(parent, exp.Select | exp.SetOperation):
        parent = parent.parent
    return parent


def _cte_for(table: exp.Table) -> exp.CTE | None:
    """The CTE a table name refers to, if one is visible where it is used (a CTE's own
    body sees itself only in a ``WITH RECURSIVE``)."""
    if table.db:
        return None
    node: exp.Expr | None = table
    inside: exp.Expr | None = None
    while node is not None:
        with_ = node.args.get("with_") if isinstance(node, exp.Query) else None
        recursive = with_ is not None and bool(with_.args.get("recursive"))
        for cte in with_.expressions if with_ is not None else []:
            if cte.alias_or_name == table.name and (cte is not inside or recursive):
                found: exp.CTE = cte
                return found
        if isinstance(node, exp.CTE):
            inside = node
        node = node.parent
    return None


# -- output names ------------------------------------------------------------------------

# function classes sqlglot reads from exactly one PostgreSQL spelling: PostgreSQL names an
# unaliased output column after the function; the others need an alias
_FUNCTION_NAMES: dict[type[exp.Expr], str] = {
    exp.Count: "count",
    exp.Sum: "sum",
    exp.Avg: "avg",
    exp.Min: "min",
    exp.Max: "max",
    exp.Coalesce: "coalesce",
    exp.Case: "case",
    exp.Greatest: "greatest",
    exp.Least: "least",
    exp.Nullif: "nullif",
    exp.Exists: "exists",
    exp.Lower: "lower",
    exp.Upper: "upper",
    exp.Left: "left",
    exp.Right: "right",
    exp.CurrentDate: "current_date",
    exp.Localtimestamp: "localtimestamp",
    exp.Round: "round",
    exp.Abs: "abs",
    exp.Replace: "replace",
    exp.Concat: "concat",
    exp.ConcatWs: "concat_ws",
    exp.TimestampTrunc: "date_trunc",
    exp.Floor: "floor",
    exp.Sqrt: "sqrt",
    exp.Sign: "sign",
    exp.RowNumber: "row_number",
    exp.GroupConcat: "string_agg",
}
_TYPE_NAMES = {
    "integer": "int4",
    "bigint": "int8",
    "smallint": "int2",
    "boolean": "bool",
    "double precision": "float8",
    "real": "float4",
}


def output_name(projection: exp.Expr) -> str | None:
    """The name PostgreSQL gives an output column (None: ``?column?``, or a function
    whose name sqlglot does not keep: give it an alias)."""
    if isinstance(projection, exp.Alias):
        return str(projection.alias)
    node = projection
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Column):
        return None if isinstance(node.this, exp.Star) else str(node.name)
    if isinstance(node, exp.Cast):
        inner = output_name(node.this)
        if inner is not None and not isinstance(node.this, exp.Literal | exp.Null):
            return inner
        kind = declared(node.to.sql("postgres")).name
        return _TYPE_NAMES.get(kind, kind.split("(")[0])
    if isinstance(node, exp.Trim):
        position = str(node.args.get("position") or "").upper()
        return {"LEADING": "ltrim", "TRAILING": "rtrim"}.get(position, "btrim")
    if isinstance(node, exp.Window):
        return output_name(node.this)
    if isinstance(node, exp.Anonymous):
        return str(node.name).lower()
    if isinstance(node, exp.Subquery) and isinstance(node.this, exp.Select):
        selects = node.this.expressions
        return output_name(selects[0]) if len(selects) == 1 else None
    return _FUNCTION_NAMES.get(type(node))


# -- the rules -------------------------------------------------------------------------


def _infer(types: Types, node: exp.Expr) -> PgType | None:
    rule = _RULES.get(type(node))
    if rule is not None:
        return rule(types, node)
    for kind, base_rule in _BASE_RULES:
        if isinstance(node, kind):
            return base_rule(types, node)
    return None


def _this(types: Types, node: exp.Expr) -> PgType | None:
    return types.of(node.this)


def _boolean(types: Types, node: exp.Expr) -> PgType | None:
    return BOOLEAN


def _literal(types: Types, node: exp.Expr) -> PgType | None:
    assert isinstance(node, exp.Literal)
    return PgType("unknown") if node.is_string else _decimal(node.this)


def _cast(types: Types, node: exp.Expr) -> PgType | None:
    assert isinstance(node, exp.Cast)
    target = cast_target(node.to)
    if target is None or target.name != "numeric" or target.fixed:
        return target
    source = types.of(node.this)
    if source is not None and (source.is_numeric or source.name in INTEGERS):
        return replace(source.as_decimal(), fixed=False)
    if isinstance(node.this, exp.Literal):
        return _numeric_of(str(node.this.this))
    return NUMERIC_UNKNOWN


def cast_target(kind: exp.DataType) -> PgType | None:
    """The type a cast names (``varchar(10)``: text; ``numeric(15,2)``: that decimal)."""
    text = kind.sql("postgres").lower()
    if kind.is_type(exp.DataType.Type.DECIMAL) and not kind.expressions:
        return NUMERIC_UNKNOWN
    try:
        return declared_strict(text)
    except ValueError:
        return None


def declared_strict(text: str) -> PgType:
    kind = canonical_type(text.replace("decimal", "numeric"))
    if kind.startswith("numeric("):
        precision, scale = (int(p) for p in kind[8:-1].split(","))
        return PgType("numeric", precision - scale, scale, fixed=True)
    return PgType(kind)


def _binary(op: str) -> Callable[[Types, exp.Expr], PgType | None]:
    def rule(types: Types, node: exp.Expr) -> PgType | None:
        return arithmetic(op, types.of(node.this), types.of(node.expression))

    return rule


def _neg(types: Types, node: exp.Expr) -> PgType | None:
    return types.of(node.this)


def _dpipe(types: Types, node: exp.Expr) -> PgType | None:
    return TEXT


def _branches(types: Types, node: exp.Expr) -> PgType | None:
    """CASE, COALESCE, GREATEST, LEAST, NULLIF, IF: the common type of its values."""
    if isinstance(node, exp.Case):
        values = [types.of(i.args["true"]) for i in node.args.get("ifs") or []]
        default = node.args.get("default")
        return common([*values, *([types.of(default)] if default is not None else [])])
    if isinstance(node, exp.If):
        false = node.args.get("false")
        return common(
            [types.of(node.args["true"]), *([types.of(false)] if false is not None else [])]
        )
    if isinstance(node, exp.Nullif):
        return types.of(node.this)
    return common([types.of(node.this), *(types.of(e) for e in node.expressions)])


def _sum(types: Types, node: exp.Expr) -> PgType | None:
    kind = types.of(node.this)
    if kind is None:
        return None
    if kind.name in ("smallint", "integer"):
        return BIGINT
    if kind.name == "bigint":
        return PgType("numeric", 19, 0)
    if kind.is_numeric:
        digits = None if kind.digits is None else kind.digits + SUM_DIGITS
        return replace(kind, digits=digits, fixed=False)
    return kind if kind.name in ("real", "double precision", "interval") else None


def _avg(types: Types, node: exp.Expr) -> PgType | None:
    kind = types.of(node.this)
    if kind is None:
        return None
    if kind.name in ("real", "double precision"):
        return DOUBLE
    if kind.name == "interval":
        return INTERVAL
    kind = kind.as_decimal()
    if not kind.is_numeric:
        return None
    scale = None if kind.scale is None else max(QUOTIENT_SCALE, kind.scale)
    return PgType("numeric", kind.digits, scale)


def _statistic(types: Types, node: exp.Expr) -> PgType | None:
    kind = types.of(node.this)
    if kind is None or not kind.is_number:
        return None
    if kind.name in ("real", "double precision"):
        return DOUBLE
    return PgType("numeric", kind.as_decimal().digits, QUOTIENT_SCALE)


def _same(types: Types, node: exp.Expr) -> PgType | None:
    kind = types.of(node.this)
    return replace(kind, fixed=False) if kind is not None and kind.is_numeric else kind


def _rounding(types: Types, node: exp.Expr) -> PgType | None:
    """round/trunc(x[, n]), ceil, floor: a decimal gets scale n (0 without), a float stays."""
    kind = types.of(node.this)
    if kind is None or not kind.is_number:
        return None
    if kind.name in ("real", "double precision"):
        return DOUBLE
    if kind.name in INTEGERS and isinstance(node, exp.Ceil | exp.Floor):
        return PgType("numeric", kind.as_decimal().digits, 0)
    if kind.name in INTEGERS:
        return kind
    places = node.args.get("decimals")
    if places is None:
        return PgType("numeric", (kind.digits or 0) + 1, 0) if kind.digits is not None else kind
    if isinstance(places, exp.Literal) and not places.is_string and places.this.isdigit():
        digits = None if kind.digits is None else kind.digits + 1
        return PgType("numeric", digits, int(places.this))
    return NUMERIC_UNKNOWN


def _math(types: Types, node: exp.Expr) -> PgType | None:
    """sqrt, exp, ln, log, power: a decimal in, a decimal of many decimals out; else a float."""
    kind = types.of(node.this)
    if kind is None or not kind.is_number:
        return None
    if kind.is_numeric:
        return PgType("numeric", COMPUTED_PRECISION - QUOTIENT_SCALE, QUOTIENT_SCALE)
    return DOUBLE


def _mod(types: Types, node: exp.Expr) -> PgType | None:
    return arithmetic("%", types.of(node.this), types.of(node.expression))


def _extract(types: Types, node: exp.Expr) -> PgType | None:
    field = str(node.this.name).lower()
    source = types.of(node.expression)
    if field in ("second", "epoch") and source is not None and source.name != "date":
        return PgType("numeric", 12 if field == "epoch" else 2, 6)
    if field in ("julian",):
        return PgType("numeric", 8, 0 if source is not None and source.name == "date" else 20)
    return PgType("numeric", 12 if field == "epoch" else 10, 0)


def _trunc_time(types: Types, node: exp.Expr) -> PgType | None:
    source = types.of(node.this)
    if source is None:
        return None
    if source.name in ("date", "timestamptz", "unknown"):
        return PgType("timestamptz")
    return source


def _subquery(types: Types, node: exp.Expr) -> PgType | None:
    outputs = types.outputs(node.this)
    return outputs[0].type if len(outputs) == 1 else None


def _column(types: Types, node: exp.Expr) -> PgType | None:
    assert isinstance(node, exp.Column)
    return types.column(node)


def _window(types: Types, node: exp.Expr) -> PgType | None:
    return types.of(node.this)


def _fixed(kind: PgType) -> Callable[[Types, exp.Expr], PgType | None]:
    return lambda types, node: kind


# functions sqlglot does not know, or that pipeledger's parser keeps by name
_NAMED: dict[str, PgType] = {
    "date_part": DOUBLE,
    "to_char": TEXT,
    "to_date": PgType("date"),
    "to_timestamp": PgType("timestamptz"),
    "make_date": PgType("date"),
    "char_length": INTEGER,
    "character_length": INTEGER,
    "octet_length": INTEGER,
    "ltrim": TEXT,
    "rtrim": TEXT,
    "btrim": TEXT,
    "md5": TEXT,
    **{f: DOUBLE for f in ("acos", "asin", "atan", "atan2", "cos", "sin", "tan", "cot")},
    **{f: DOUBLE for f in ("cosh", "sinh", "tanh", "acosh", "asinh", "atanh")},
    **{f: DOUBLE for f in ("degrees", "radians", "pi", "cbrt", "random")},
}


def _anonymous(types: Types, node: exp.Expr) -> PgType | None:
    name = str(node.name).lower()
    if name == "log10" and node.expressions:
        kind = types.of(node.expressions[0])
        if kind is not None and kind.is_numeric:
            return PgType("numeric", COMPUTED_PRECISION - QUOTIENT_SCALE, QUOTIENT_SCALE)
        return DOUBLE
    return _NAMED.get(name)


_RULES: dict[type[exp.Expr], Callable[[Types, exp.Expr], PgType | None]] = {
    exp.Column: _column,
    exp.Anonymous: _anonymous,
    exp.Literal: _literal,
    exp.Boolean: _boolean,
    exp.Null: _fixed(PgType("null")),
    exp.Cast: _cast,
    exp.Paren: _this,
    exp.Alias: _this,
    exp.Neg: _neg,
    exp.Add: _binary("+"),
    exp.Sub: _binary("-"),
    exp.Mul: _binary("*"),
    exp.Div: _binary("/"),
    exp.Mod: _mod,
    exp.DPipe: _dpipe,
    exp.Case: _branches,
    exp.If: _branches,
    exp.Coalesce: _branches,
    exp.Greatest: _branches,
    exp.Least: _branches,
    exp.Nullif: _branches,
    exp.Count: _fixed(BIGINT),
    exp.Sum: _sum,
    exp.Avg: _avg,
    exp.Min: _same,
    exp.Max: _same,
    exp.Abs: _same,
    exp.Stddev: _statistic,
    exp.StddevSamp: _statistic,
    exp.StddevPop: _statistic,
    exp.Variance: _statistic,
    exp.VariancePop: _statistic,
    exp.Round: _rounding,
    exp.Trunc: _rounding,
    exp.Ceil: _rounding,
    exp.Floor: _rounding,
    exp.Sqrt: _math,
    exp.Exp: _math,
    exp.Ln: _math,
    exp.Log: _math,
    exp.Pow: _math,
    exp.Sign: _same,
    exp.Extract: _extract,
    exp.TimestampTrunc: _trunc_time,
    exp.CurrentDate: _fixed(PgType("date")),
    exp.CurrentTimestamp: _fixed(PgType("timestamptz")),
    exp.Localtimestamp: _fixed(PgType("timestamp")),
    exp.Interval: _fixed(INTERVAL),
    exp.Subquery: _subquery,
    exp.Window: _window,
    exp.Filter: _this,
    exp.Length: _fixed(INTEGER),
    exp.StrPosition: _fixed(INTEGER),
    exp.Lower: _fixed(TEXT),
    exp.Upper: _fixed(TEXT),
    exp.Substring: _fixed(TEXT),
    exp.Trim: _fixed(TEXT),
    exp.Replace: _fixed(TEXT),
    exp.Concat: _fixed(TEXT),
    exp.ConcatWs: _fixed(TEXT),
    exp.Left: _fixed(TEXT),
    exp.Right: _fixed(TEXT),
    exp.Pad: _fixed(TEXT),
    exp.Repeat: _fixed(TEXT),
    exp.SplitPart: _fixed(TEXT),
    exp.GroupConcat: _fixed(TEXT),
    exp.TimeToStr: _fixed(TEXT),
    exp.MD5: _fixed(TEXT),
    exp.StrToDate: _fixed(PgType("date")),
    exp.UnixToTime: _fixed(PgType("timestamptz")),
    exp.RowNumber: _fixed(BIGINT),
    exp.Rand: _fixed(DOUBLE),
    exp.LogicalAnd: _fixed(BOOLEAN),
    exp.Escape: _boolean,
    exp.Ascii: _fixed(INTEGER),
    exp.Chr: _fixed(TEXT),
    exp.Rank: _fixed(BIGINT),
    exp.DenseRank: _fixed(BIGINT),
    exp.Ntile: _fixed(INTEGER),
    exp.PercentRank: _fixed(DOUBLE),
    exp.CumeDist: _fixed(DOUBLE),
    exp.Lag: _this,
    exp.Lead: _this,
    exp.FirstValue: _this,
    exp.LastValue: _this,
    exp.NthValue: _this,
    exp.LogicalOr: _fixed(BOOLEAN),
}
_BASE_RULES: list[tuple[type[exp.Expr], Callable[[Types, exp.Expr], PgType | None]]] = [
    (exp.Predicate, _boolean),
    (exp.Connector, _boolean),
    (exp.Not, _boolean),
    (exp.Exists, _boolean),
]
