"""A model's SQL as text: its ``{{ ref('x') }}`` references resolved, and :class:`ModelSql`,
the query whose tree, tables and renderings the parser (:mod:`pipeledger.common.sqlparse`)
reads when first asked. The tables it reads may be given (``known``: remembered from an
earlier reading of the same text, :mod:`pipeledger.config.facts`), so that a run asking
only which tables a model reads does not import the parser.

Models are written in PostgreSQL's SQL. On SQLite the query is translated completely or
refused, naming the construct and its line (:mod:`pipeledger.common.translate.sqlite`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from pipeledger.common.columns import TableName
from pipeledger.errors import ConfigError

if TYPE_CHECKING:
    from sqlglot import exp

    from pipeledger.common.translate.pgtypes import Catalog

READ = "postgres"  # the SQL models are written in: the parser's (sqlparse.READ)


@dataclass(frozen=True)
class ModelSql:
    """One model's query. ``where`` names it in messages (the model and its file);
    ``known``: the tables it reads, when already known for this exact text."""

    text: str
    where: str
    known: tuple[TableName, ...] | None = field(default=None, compare=False, repr=False)

    @cached_property
    def tree(self) -> exp.Query:
        """The one read-only query it holds (refused with :class:`ConfigError`)."""
        from pipeledger.common.sqlparse import parse_query

        return parse_query(self.text, self.where)

    @cached_property
    def tables(self) -> tuple[TableName, ...]:
        """The tables it reads (not its own CTEs), as ``[schema.]table`` names."""
        if self.known is not None:
            return self.known
        from pipeledger.common.sqlparse import tables_read

        return tables_read(self.tree, self.where)

    @cached_property
    def aggregates(self) -> bool:
        """Its output rows are not one per input row (GROUP BY, aggregates, DISTINCT,
        windows, LIMIT): a changed input row may change other output rows too."""
        from pipeledger.common.sqlparse import aggregates

        return aggregates(self.tree)

    def replacing(self, tables: Mapping[str, str]) -> ModelSql:
        """The query with each table named in ``tables`` (by ``str(TableName)``) read from
        the given subquery (PostgreSQL text) instead, under its old alias."""
        from pipeledger.common.sqlparse import replacing

        return ModelSql(replacing(self.tree, tables, self.where), self.where)

    def render(
        self, flat_names: bool, catalog: Catalog | None = None, *, translate: bool = True
    ) -> str:
        """The query for a warehouse: PostgreSQL as written, or SQLite (``flat_names``:
        ``schema.table`` is one quoted name there), translated with the column types the
        ``catalog`` gives (the warehouse's ``table_columns``); refused with
        :class:`~pipeledger.errors.UntranslatableSql` when SQLite cannot compute it.
        DuckDB (``translate`` False): its names flattened, in DuckDB's own spelling."""
        from pipeledger.common.sqlparse import render

        return render(self.tree, self.where, flat_names, catalog, translate)


# -- dbt-style references: {{ ref('x') }} and ref('x') --------------------------------
_REF = re.compile(
    r"\{\{\s*ref\(\s*(?P<q1>['\"])(?P<a>[^'\"]+)(?P=q1)\s*\)\s*\}\}"
    r"|\bref\(\s*(?P<q2>['\"])(?P<b>[^'\"]+)(?P=q2)\s*\)",
    re.IGNORECASE,
)
_JINJA_COMMENT = re.compile(r"\{#.*?#\}", re.DOTALL)


def resolve_refs(text: str, targets: Mapping[str, TableName], where: str) -> str:
    """The SQL with every ``{{ ref('x') }}`` (or ``ref('x')``) replaced by node ``x``'s target
    table, and Jinja comments ``{# ... #}`` blanked (line numbers are kept); any other Jinja
    is refused, naming it."""
    text = _JINJA_COMMENT.sub(lambda m: "\n" * m.group(0).count("\n"), text)

    def target(match: re.Match[str]) -> str:
        name = match.group("a") or match.group("b")
        if name not in targets:
            known = ", ".join(sorted(targets)) or "none"
            raise ConfigError(
                f"{where}: ref({name!r}) names no pipeline or model (defined: {known})"
            )
        table = targets[name]
        return ".".join(
            _quoted(p) for p in ([table.schema] if table.schema else []) + [table.table]
        )

    resolved = _REF.sub(target, text)
    jinja = re.search(r"\{\{.*?\}\}|\{%.*?%\}", resolved, re.DOTALL)
    if jinja:
        line = resolved.count("\n", 0, jinja.start()) + 1
        raise ConfigError(
            f"{where}, line {line}: {jinja.group(0)[:60]!r}: only {{{{ ref('name') }}}} is "
            "understood in model SQL (write the rest out as SQL)"
        )
    return resolved


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
