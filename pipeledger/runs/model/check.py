"""Models checked before they run: each one's SQL in the warehouse's own SQL (translated for
the embedded SQLite, or refused naming the construct and its line), its output columns and
their types, and the database's own verdict on the query (``EXPLAIN``: every table, column
and function it names resolves), without running it. Nothing is written.

``pipeledger check`` asks this of every model (or one); ``pipeledger run`` translates the
models it is about to run first (:func:`refuse_untranslatable`), so that one SQLite cannot
compute stops the run before any node has run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pipeledger.common.columns import RESERVED_PREFIX, Column, TableName
from pipeledger.config.facts import fact_key
from pipeledger.config.model import Config
from pipeledger.errors import SchemaError, UntranslatableSql, WarehouseError
from pipeledger.warehouse.dialect import Dialect, quote
from pipeledger.warehouse.session import Session, Warehouse

CheckStatus = Literal["ok", "refused", "failed", "unchecked"]


@dataclass(frozen=True, kw_only=True)
class ModelCheck:
    """What checking one model found. ``refused``: SQLite cannot compute a construct
    (``construct``, ``line``); ``failed``: its columns cannot be typed or the database
    refused the query; ``unchecked``: an upstream table does not exist yet, so only the
    translation was checked."""

    model: str
    status: CheckStatus
    warehouse: str  # the dialect's name
    message: str = ""
    construct: str | None = None
    line: int | None = None
    columns: tuple[Column, ...] = ()
    missing: tuple[str, ...] = field(default_factory=tuple)
    translated: bool = False  # run as SQLite SQL, translated from PostgreSQL's

    @property
    def passed(self) -> bool:
        return self.status in ("ok", "unchecked")

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "status": self.status,
            "warehouse": self.warehouse,
            "message": self.message,
            "construct": self.construct,
            "line": self.line,
            "columns": {c.name: c.sql_type for c in self.columns},
            "missing_upstreams": list(self.missing),
            "translated": self.translated,
        }

    def line_text(self) -> str:
        """What it found, in one line."""
        if self.message:
            return self.message
        how = "translated to SQLite; " if self.translated else ""
        return f"{len(self.columns)} column(s); {how}the database plans it (EXPLAIN)"


def check_models(config: Config, warehouse: Warehouse, names: Sequence[str]) -> list[ModelCheck]:
    """Each named model checked against the warehouse (see the module docstring)."""
    with warehouse.session(write=False) as session:
        return [check_model(config, session, name) for name in names]


def check_model(config: Config, session: Session, name: str) -> ModelCheck:
    d = session.dialect
    query = config.model_sql(name)

    def found(status: CheckStatus, message: str = "", **more: Any) -> ModelCheck:
        return ModelCheck(
            model=name,
            status=status,
            warehouse=d.name,
            message=message,
            translated=d.translates_models,
            **more,
        )

    try:
        rendered = query.render(
            not d.has_schemas, session.table_columns, translate=d.translates_models
        )
    except UntranslatableSql as exc:
        return found("refused", str(exc), construct=exc.construct, line=exc.line)
    missing = tuple(str(t) for t in query.tables if session.table_columns(t) is None)
    if missing:
        translated = "its SQL translates; " if d.translates_models else ""
        return found(
            "unchecked",
            f"model {name} reads {', '.join(missing)}, which does not exist yet: "
            f"{translated}its columns and the database's plan are checked once it does",
            missing=missing,
        )
    from pipeledger.runs.model.columns import output_columns  # the SQL parser's

    try:
        columns = output_columns(session, query, config.model(name).columns, name)
        with session.savepoint():  # a refused statement must not end the check's transaction
            session.query(d.explain(_typed(d, rendered, columns)))
    except (SchemaError, WarehouseError) as exc:
        return found("failed", f"model {name}: {exc}")
    return found("ok", columns=tuple(c for c in columns if not c.name.startswith(RESERVED_PREFIX)))


def _typed(d: Dialect, rendered: str, columns: Sequence[Column]) -> str:
    """The query as the model stages it: each output column, by name, cast to its type."""
    values = ", ".join(d.cast_to(f"q.{quote(c.name)}", c.sql_type) for c in columns)
    return f"SELECT {values} FROM ({rendered}) AS q"


def refuse_untranslatable(config: Config, warehouse: Warehouse, names: Sequence[str]) -> None:
    """Raise :class:`UntranslatableSql` (exit 2) for the first of the models ``names`` that
    the warehouse cannot run as written (the embedded SQLite: a construct it cannot
    compute), before any of them runs. Upstream tables that exist lend their column types."""
    models = [n for n in names if n in config.models]
    if not models or not warehouse.dialect.translates_models:
        return
    facts = config.model_facts
    with warehouse.session(write=False) as session:
        for name in models:
            query = config.model_sql(name)
            # translated once for this SQL and these upstream columns (their types decide)
            read = {str(t): session.table_columns(t) for t in query.tables}
            translated = fact_key("sqlite", query.text, sorted(read.items()))
            if facts.get("translated", translated):
                continue
            try:
                query.render(True, _read_first(session, read))
            except UntranslatableSql as exc:
                exc.add_note("nothing ran: no load or model of this run was started")
                raise
            facts.put("translated", translated)
    facts.save()


Columns = list[tuple[str, str]] | None


def _read_first(session: Session, read: dict[str, Columns]) -> Callable[[TableName], Columns]:
    """A catalog answering from the columns ``read`` already (by table name), and asking the
    session for any other name (a CTE's, which the tables a query reads leave out)."""

    def catalog(table: TableName) -> Columns:
        key = str(table)
        return read[key] if key in read else session.table_columns(table)

    return catalog
