"""Reading a model's SQL with a real SQL parser (sqlglot): its tree (a single read-only
query, or refused naming why), the tables it reads, whether it aggregates, the query
rewritten to read other rows, and its text for each warehouse (PostgreSQL as written,
SQLite translated or refused, DuckDB's spelling).

Imported only when a model's SQL is read (:class:`pipeledger.common.sqltext.ModelSql`):
a run whose models' facts are already known (:mod:`pipeledger.config.facts`) never loads
the parser. The parser keeps ``to_char``'s template and ``date_part`` as written (sqlglot's
own reading rewrites the template into ``strftime`` codes, losing what PostgreSQL means).
"""

from __future__ import annotations

from collections.abc import Mapping

import sqlglot
from sqlglot import exp
from sqlglot.dialects.postgres import Postgres
from sqlglot.errors import SqlglotError
from sqlglot.parsers.postgres import PostgresParser

from pipeledger.common.columns import TableName
from pipeledger.common.translate.pgtypes import Catalog, Types
from pipeledger.common.translate.sqlite import Untranslatable, to_sqlite
from pipeledger.errors import ConfigError, UntranslatableSql

READ = "postgres"  # the SQL models are written in (sqltext.READ names it without the parser)

_BY_NAME = frozenset({"TO_CHAR", "DATE_PART", "TO_DATE", "TO_TIMESTAMP"})


class ModelPostgres(Postgres):
    """PostgreSQL as a model is written in, read with the functions whose meaning
    sqlglot's reading would change kept as calls by name."""

    class Parser(PostgresParser):
        FUNCTIONS = {  # noqa: RUF012 (sqlglot's API)
            name: build for name, build in PostgresParser.FUNCTIONS.items() if name not in _BY_NAME
        }
        FUNCTION_PARSERS = {  # noqa: RUF012
            name: parse
            for name, parse in PostgresParser.FUNCTION_PARSERS.items()
            if name not in _BY_NAME
        }


def parse_query(text: str, where: str) -> exp.Query:
    """The one read-only query ``text`` holds (``where`` names it in the error otherwise)."""
    try:
        statements = [s for s in sqlglot.parse(text, read=ModelPostgres) if s is not None]
    except SqlglotError as exc:
        raise ConfigError(f"{where}: not valid SQL: {_first_line(exc)}") from None
    if len(statements) != 1 or not isinstance(statements[0], exp.Query):
        raise ConfigError(f"{where}: must be exactly one SELECT (a query)")
    refuse_writes(statements[0], where)
    return statements[0]


def tables_read(tree: exp.Query, where: str) -> tuple[TableName, ...]:
    """The tables ``tree`` reads (not its own CTEs), as ``[schema.]table`` names, sorted."""
    ctes = {cte.alias_or_name for cte in tree.find_all(exp.CTE)}
    found: dict[str, TableName] = {}
    for table in tree.find_all(exp.Table):
        if not table.db and table.name in ctes:
            continue
        name = _table_name(table, where)
        found[str(name)] = name
    return tuple(found[k] for k in sorted(found))


def aggregates(tree: exp.Query) -> bool:
    """Its output rows are not one per input row (GROUP BY, aggregates, DISTINCT, windows,
    LIMIT): a changed input row may change other output rows too."""
    kinds = (exp.AggFunc, exp.Group, exp.Distinct, exp.Window, exp.Limit)
    return any(isinstance(node, kinds) for node in tree.walk())


def replacing(tree: exp.Query, tables: Mapping[str, str], where: str) -> str:
    """PostgreSQL text: ``tree`` with each table named in ``tables`` (by ``str(TableName)``)
    read from the given subquery (PostgreSQL text) instead, under its old alias."""

    def swap(node: exp.Expression) -> exp.Expression:
        if not isinstance(node, exp.Table):
            return node
        name = str(_table_name(node, where)) if node.name else ""
        if name not in tables:
            return node
        sub = sqlglot.parse_one(tables[name], read=READ)
        return exp.Subquery(
            this=sub, alias=exp.TableAlias(this=exp.to_identifier(node.alias_or_name))
        )

    return tree.copy().transform(swap).sql(READ)


def render(
    tree: exp.Query, where: str, flat_names: bool, catalog: Catalog | None, translate: bool
) -> str:
    """See :meth:`pipeledger.common.sqltext.ModelSql.render`."""
    if not flat_names:
        return tree.sql(READ)
    tree = tree.copy()
    if not translate:
        return tree.transform(_flat_table).sql("duckdb")
    try:
        return to_sqlite(tree, Types(tree, catalog))
    except Untranslatable as exc:
        line = f", line {exc.line}" if exc.line else ""
        raise UntranslatableSql(
            f"{where}{line}: {exc}; the embedded SQLite warehouse cannot run this "
            "model as PostgreSQL would (rewrite it, or use PostgreSQL)",
            construct=exc.construct,
            line=exc.line,
        ) from None


def _flat_table(node: exp.Expression) -> exp.Expression:
    """``schema.table`` as the one quoted name a warehouse without schemas has."""
    if isinstance(node, exp.Table) and node.db:
        flat = exp.to_identifier(f"{node.db}.{node.name}", quoted=True)
        return exp.Table(this=flat, alias=node.args.get("alias"))
    return node


# -- validation: a model's SQL only reads -----------------------------------------------
# PostgreSQL functions that change something outside the query (sequences, settings,
# locks, files, other sessions, large objects, replication, statistics)
WRITING_FUNCTIONS = frozenset(
    {
        "nextval",
        "setval",
        "set_config",
        "pg_notify",
        "pg_advisory_lock",
        "pg_advisory_xact_lock",
        "pg_advisory_lock_shared",
        "pg_try_advisory_lock",
        "pg_try_advisory_xact_lock",
        "pg_advisory_unlock",
        "pg_advisory_unlock_all",
        "pg_terminate_backend",
        "pg_cancel_backend",
        "pg_reload_conf",
        "pg_rotate_logfile",
        "pg_switch_wal",
        "pg_create_restore_point",
        "pg_file_write",
        "pg_file_unlink",
        "pg_file_rename",
        "lo_import",
        "lo_export",
        "lo_unlink",
        "lo_create",
        "lo_creat",
        "lo_from_bytea",
        "lo_put",
        "lo_truncate",
        "dblink",
        "dblink_exec",
        "dblink_connect",
        "pg_create_logical_replication_slot",
        "pg_create_physical_replication_slot",
        "pg_drop_replication_slot",
        "pg_stat_reset",
        "pg_stat_reset_shared",
        "pg_import_system_collations",
        "txid_current",
        "pg_current_xact_id",
        "pg_logical_emit_message",
        "pg_promote",
    }
)
_WRITES: tuple[tuple[type[exp.Expr], str], ...] = (
    (exp.Insert, "an INSERT (a data-modifying CTE)"),
    (exp.Update, "an UPDATE (a data-modifying CTE)"),
    (exp.Delete, "a DELETE (a data-modifying CTE)"),
    (exp.Merge, "a MERGE (a data-modifying CTE)"),
    (exp.Into, "SELECT ... INTO (it creates a table)"),
    (exp.Lock, "FOR UPDATE / FOR SHARE (it locks rows)"),
)


def refuse_writes(tree: exp.Expr, where: str) -> None:
    """A model's SQL is a single read-only query: refuse, at configuration time, anything in
    it that writes or locks (the database would refuse it only once the model runs, after
    its upstream nodes ran)."""
    for kind, what in _WRITES:
        if tree.find(kind) is not None:
            raise ConfigError(
                f"{where}: a model's SQL must be a single read-only query; it has {what}. "
                "Nothing runs until the model only reads"
            )
    for func in tree.find_all(exp.Func):
        name = (func.name if isinstance(func, exp.Anonymous) else func.sql_name()).lower()
        if name in WRITING_FUNCTIONS:
            raise ConfigError(
                f"{where}: a model's SQL must be a single read-only query; {name}() writes "
                "or holds something outside the query. Nothing runs until the model only reads"
            )


def _table_name(table: exp.Table, where: str) -> TableName:
    if table.catalog:
        raise ConfigError(f"{where}: {table.sql(READ)}: a database-qualified name is not allowed")
    text = f"{table.db}.{table.name}" if table.db else table.name
    try:
        return TableName.parse(text)
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
