"""How a model's output rows map to its upstream rows, read from its SQL (sqlglot): what an
incremental run must recompute when some upstream rows were inserted, replaced or deleted.

A run recomputes the output rows of the *touched* values of its scope columns (a ``merge``
or ``scd2`` model's key, a ``partition_overwrite`` model's ``partition_by``) and publishes
them as a sync of those values: a value the recomputation no longer produces is deleted.
The touched values are found per changed upstream, in one of two ways:

* **traced**: the scope columns are plain copies of one upstream's columns (sqlglot's
  column lineage: renamed through CTEs and subqueries, grouped by, never computed), so the
  touched values are read straight from the changed rows, as they are now and as they were
  (their before-images). Exact whatever the query does with the rows of one value
  (aggregates, HAVING, windows partitioned by the scope), provided that upstream is read
  once and no window spans other values.
* **derived**: the query is recomputed over the changed rows of that upstream (now and
  before), every other upstream read whole (and with its own replaced versions), and the
  scope values it yields are the touched ones. Sound for a query whose output only grows
  with its input (joins, filters on rows, GROUP BY without HAVING): an output row that an
  old or a new version of a changed row took part in is produced again. One occurrence of
  the upstream is replaced at a time (a self-join: each side in turn).

A query that is neither for some upstream (a computed key, HAVING or a window over other
values, NOT EXISTS, EXCEPT, LIMIT, a filter on an aggregate) cannot say which rows a change
touches: the model names the recompute it falls back to (``fallback``) at configuration time.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from sqlglot import exp, parse_one
from sqlglot.errors import SqlglotError
from sqlglot.lineage import Node, lineage
from sqlglot.optimizer.scope import traverse_scope

Recompute = Literal["keys", "partitions", "full", "view"]
Fallback = Literal["partitions", "full"]

# constructs after which an output row may vanish when an input row appears (or the
# reverse), so recomputing over the changed rows alone does not find every touched value
_NOT_MONOTONE: tuple[tuple[type[exp.Expr], str], ...] = (
    (exp.Having, "HAVING"),
    (exp.Window, "a window function"),
    (exp.Except, "EXCEPT"),
    (exp.Intersect, "INTERSECT"),
    (exp.Limit, "LIMIT"),
    (exp.Offset, "OFFSET"),
    (exp.Fetch, "FETCH"),
    (exp.Exists, "EXISTS"),
)


@dataclass(frozen=True, kw_only=True)
class Coverage:
    """How the touched values of ``scope`` are found, per upstream table (by name)."""

    scope: tuple[str, ...]
    traced: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # table -> its columns
    derived: tuple[str, ...] = ()
    uncovered: Mapping[str, str] = field(default_factory=dict)  # table -> why

    def to_json(self) -> dict[str, Any]:
        return {
            "by": list(self.scope),
            "traced": {t: list(c) for t, c in self.traced.items()},
            "derived": list(self.derived),
            "uncovered": dict(self.uncovered),
        }


def table_name(table: exp.Table) -> str:
    return f"{table.db}.{table.name}" if table.db else table.name


def inline_ctes(tree: exp.Query) -> exp.Query:
    """The query with every CTE read more than once written out where it is read, so that
    each read of an upstream table is a node of its own (a recursive CTE is left alone)."""
    tree = tree.copy()
    with_ = tree.args.get("with_") or tree.args.get("with")
    if not isinstance(with_, exp.With) or with_.args.get("recursive"):
        return tree
    for cte in reversed(list(with_.expressions)):
        name = cte.alias_or_name
        reads = [t for t in tree.find_all(exp.Table) if not t.db and t.name == name]
        if len(reads) < 2:
            continue
        for read in reads:
            alias = exp.TableAlias(this=exp.to_identifier(read.alias_or_name))
            read.replace(exp.Subquery(this=cte.this.copy(), alias=alias))
        cte.pop()
    if not with_.expressions:
        with_.pop()
    return tree


def upstream_reads(tree: exp.Query) -> list[exp.Table]:
    """The reads of real tables (not CTEs), in the order they appear."""
    ctes = {cte.alias_or_name for cte in tree.find_all(exp.CTE)}
    return [t for t in tree.find_all(exp.Table) if t.name and (t.db or t.name not in ctes)]


def substitute(tree: exp.Query, choose: Callable[[str, int], str | None], read: str) -> str:
    """The query (text in ``read``'s dialect) with some reads replaced by subqueries:
    ``choose(table, n)`` gives the text for the ``n``-th read of ``table`` (None: keep)."""
    tree = tree.copy()
    seen: Counter[str] = Counter()
    for table in upstream_reads(tree):
        name = table_name(table)
        text = choose(name, seen[name])
        seen[name] += 1
        if text is None:
            continue
        alias = exp.TableAlias(this=exp.to_identifier(table.alias_or_name))
        table.replace(exp.Subquery(this=parse_one(text, read=read), alias=alias))
    return tree.sql(read)


def not_monotone(tree: exp.Query) -> str | None:
    """Why recomputing over changed rows may miss touched values (None: it does not)."""
    for kind, label in _NOT_MONOTONE:
        if tree.find(kind) is not None:
            return f"it uses {label}"
    for node in tree.find_all(exp.In):
        if node.args.get("query") is not None:
            return "it filters with IN (subquery)"
    for distinct in tree.find_all(exp.Distinct):
        if distinct.args.get("on") is not None:
            return "it uses DISTINCT ON"
    for select in tree.find_all(exp.Select):
        if select.args.get("where") is not None and _reads_aggregate(select):
            return "it filters rows of an aggregate"
        if select.args.get("where") is not None and _outer_joined_null_test(select):
            return "it keeps rows an outer join found no match for (IS NULL)"
    for scalar in tree.find_all(exp.Subquery):
        if not isinstance(scalar.parent, (exp.From, exp.Join, exp.Union)):
            return "it uses a scalar subquery"
    return None


def _reads_aggregate(select: exp.Select) -> bool:
    """A SELECT filtering rows that come from an aggregating subquery or CTE."""
    for sub in select.find_all(exp.Subquery):
        inner = sub.this
        if isinstance(inner, exp.Select) and _aggregates(inner) and sub.parent_select is select:
            return True
    with_ = select.root().find(exp.With)
    if with_ is None:
        return False
    aggregated = {c.alias_or_name for c in with_.expressions if _aggregates(c.this)}
    return any(
        t.name in aggregated and not t.db and t.parent_select is select
        for t in select.find_all(exp.Table)
    )


def _aggregates(query: exp.Expr) -> bool:
    return isinstance(query, exp.Select) and (
        query.args.get("group") is not None or query.find(exp.AggFunc) is not None
    )


def outer_joins(tree: exp.Query) -> bool:
    """Whether the query joins anything with LEFT, RIGHT or FULL (a row of one side may
    come out with the other side's columns NULL)."""
    return any(join.side for join in tree.find_all(exp.Join))


def _outer_joined_null_test(select: exp.Select) -> bool:
    outer = any(j.side for j in select.args.get("joins") or [])
    where = select.args.get("where")
    return outer and where is not None and where.find(exp.Is) is not None


def coverage(
    tree: exp.Query, scope: Sequence[str], read: str, schema: Mapping[str, Any] | None = None
) -> Coverage:
    """How each upstream's changes find the touched values of ``scope`` (see the module
    docstring); ``schema`` (sqlglot's mapping) lets ``select *`` be traced too."""
    inlined = inline_ctes(tree)
    reads = Counter(table_name(t) for t in upstream_reads(inlined))
    traced, why = _trace(inlined, scope, read, schema, reads)
    unsafe = not_monotone(inlined)
    derived, uncovered = [], {}
    for name in sorted(reads):
        if name in traced:
            continue
        if unsafe is None:
            derived.append(name)
        else:
            reason = why or f"{', '.join(scope)} does not come from {name}"
            uncovered[name] = f"{reason}, and {unsafe}"
    return Coverage(scope=tuple(scope), traced=traced, derived=tuple(derived), uncovered=uncovered)


def _trace(
    tree: exp.Query,
    scope: Sequence[str],
    read: str,
    schema: Mapping[str, Any] | None,
    reads: Counter[str],
) -> tuple[dict[str, tuple[str, ...]], str | None]:
    """The upstream whose columns the scope columns copy (all from one table, read once),
    or why there is none."""
    sources: dict[str, list[str]] = {}
    for column in scope:
        found, why = _leaves(tree, column, read, schema)
        if found is None:
            return {}, why
        if len(found) != 1:
            return {}, f"{column} comes from several tables"
        [(table, source)] = found
        sources.setdefault(table, []).append(source)
    if len(sources) != 1:
        return {}, f"{', '.join(scope)} come from different tables"
    [(table, columns)] = sources.items()
    if reads[table] > 1:
        return {}, f"{table} is read more than once (a self-join)"
    window = _foreign_window(tree, [*scope, *columns])
    if window:
        return {}, window
    for kind, label in ((exp.Limit, "LIMIT"), (exp.Offset, "OFFSET"), (exp.Fetch, "FETCH")):
        if tree.find(kind) is not None:
            return {}, f"{label} spans several of its values"
    return {table: tuple(columns)}, None


def _leaves(
    tree: exp.Query, column: str, read: str, schema: Mapping[str, Any] | None
) -> tuple[set[tuple[str, str]] | None, str | None]:
    """The (table, column) pairs ``column`` is a plain copy of, or why it is not one."""
    try:
        node = lineage(column, tree, dict(schema or {}), dialect=read)
    except (SqlglotError, ValueError, KeyError):
        try:  # columns named alike in several places need to know their tables
            node = lineage(column, tree, dict(schema or _inferred_schema(tree)), dialect=read)
        except (SqlglotError, ValueError, KeyError) as exc:
            return None, f"the lineage of {column} cannot be read ({exc})"
    found: set[tuple[str, str]] = set()
    for leaf, parent in _walk(node, None):
        if not isinstance(leaf.expression, exp.Table):
            continue
        if parent is None or not _plain(parent.expression):
            return None, f"{column} is computed"
        source = parent.name.split(".")[-1]
        if source == "*":
            return None, f"{column} comes through select * of an unknown table"
        found.add((table_name(leaf.expression), source))
    for step, _ in _walk(node, None):
        if not isinstance(step.expression, exp.Table) and not _plain(step.expression):
            return None, f"{column} is computed ({step.expression.sql(read)[:60]})"
    return (found, None) if found else (None, f"{column} comes from no table")


def _inferred_schema(tree: exp.Query) -> dict[str, Any]:
    """A schema guessed from the query itself: each table read has the columns the query
    takes from it (by its alias, or as the only table of a SELECT)."""
    found: dict[str, dict[str, str]] = {}
    for scope in traverse_scope(tree.copy()):
        tables = {a: s for a, s in scope.sources.items() if isinstance(s, exp.Table)}
        for column in scope.columns:
            source = tables.get(column.table) if column.table else None
            if source is None and not column.table and len(scope.sources) == 1 and tables:
                [source] = tables.values()
            if source is not None:
                found.setdefault(table_name(source), {})[column.name] = "text"
    nested: dict[str, Any] = {}
    for name, columns in found.items():
        schema, _, table = name.rpartition(".")
        (nested.setdefault(schema, {}) if schema else nested)[table] = columns
    return nested


def _walk(node: Node, parent: Node | None) -> list[tuple[Node, Node | None]]:
    out = [(node, parent)]
    for child in node.downstream:
        out.extend(_walk(child, node))
    return out


def _plain(expression: exp.Expr) -> bool:
    """A copy of a column: the column itself, renamed, or every column (``*``)."""
    inner = expression.this if isinstance(expression, exp.Alias) else expression
    return isinstance(inner, exp.Column | exp.Star)


def _foreign_window(tree: exp.Query, names: Sequence[str]) -> str | None:
    """A window whose partition is not one of the scope's values spans several of them."""
    for window in tree.find_all(exp.Window):
        parts = {
            c.name for p in window.args.get("partition_by") or [] for c in p.find_all(exp.Column)
        }
        if not parts & set(names):
            return "a window function spans several of its values"
    return None


@dataclass(frozen=True, kw_only=True)
class Plan:
    """What an incremental run of one model recomputes (``dag --json`` shows it).

    ``recompute``: the output rows of the touched keys (``merge``, ``scd2``), of the
    touched partitions (``partition_overwrite``), everything (``replace``) or nothing (a
    view). ``coverage`` finds the touched values; an upstream it leaves uncovered takes
    the ``fallback`` (``partitions``: the touched values of ``partition_by``, found by
    ``by_partition``; ``full``: the whole query)."""

    recompute: Recompute
    coverage: Coverage | None = None
    fallback: Fallback | None = None
    by_partition: Coverage | None = None

    def falls_back(self, changed: Sequence[str]) -> bool:
        """A change of one of these upstreams needs the fallback."""
        uncovered = self.coverage.uncovered if self.coverage else {}
        return any(name in uncovered for name in changed)

    def to_json(self) -> dict[str, Any]:
        return {
            "recompute": self.recompute,
            **(self.coverage.to_json() if self.coverage else {}),
            "fallback": self.fallback,
            "fallback_by": self.by_partition.to_json() if self.by_partition else None,
        }


def plan(
    *,
    tree: exp.Query,
    read: str,
    materialized: str,
    key: Sequence[str],
    partition_by: str | None,
    fallback: Fallback | None,
    where: str,
) -> Plan:
    """A model's :class:`Plan`, or ValueError saying what the model must state."""
    if materialized == "view":
        return Plan(recompute="view")
    if materialized == "replace":
        return Plan(recompute="full")
    if materialized == "partition_overwrite":
        scope, recompute = [partition_by or ""], "partitions"
    else:
        scope, recompute = list(key), "keys"
    found = coverage(tree, scope, read)
    if not found.uncovered:
        return Plan(recompute=recompute, coverage=found, fallback=fallback)  # type: ignore[arg-type]
    reasons = "; ".join(f"{t}: {why}" for t, why in found.uncovered.items())
    if fallback is None:
        choices = (
            'fallback = "full" (the whole query every run)'
            if materialized == "partition_overwrite"
            else 'fallback = "partitions" (with partition_by: the touched partitions '
            'recomputed whole) or fallback = "full" (the whole query every run)'
        )
        raise ValueError(
            f"{where}: an incremental run cannot tell which output rows a change of an "
            f"upstream touches ({reasons}); say what it recomputes then: {choices}"
        )
    if fallback == "full":
        return Plan(recompute=recompute, coverage=found, fallback="full")  # type: ignore[arg-type]
    by_partition = coverage(tree, [partition_by or ""], read)
    if by_partition.uncovered:
        again = "; ".join(f"{t}: {why}" for t, why in by_partition.uncovered.items())
        raise ValueError(
            f'{where}: fallback = "partitions" cannot tell the touched partitions of '
            f'{partition_by} either ({again}); use fallback = "full"'
        )
    return Plan(
        recompute=recompute,  # type: ignore[arg-type]
        coverage=found,
        fallback="partitions",
        by_partition=by_partition,
    )
