"""What differs between the warehouses, said once: each dialect is a class of capabilities
(flags) and small SQL renderings, so that builders ask ``d.has_schemas`` or
``d.count_where(...)`` instead of checking a dialect's name.

Three dialects: PostgreSQL (``%s`` parameters), SQLite and DuckDB (``?`` parameters). SQLite has
no schemas, so ``schema.table`` is one quoted table name ``"schema.table"``; it keeps
exact decimals as text, has no ``FILTER`` clause, no ``IS DISTINCT FROM`` (its ``IS NOT``
means the same), and a write transaction holds the whole database's write lock.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import ClassVar, Literal

from pipeledger.common.columns import TableName, sqlite_declared_type
from pipeledger.errors import SchemaError

DialectName = Literal["postgres", "sqlite", "duckdb"]
TimeUnit = Literal["hour", "day", "month"]
# a time unit's label, for a cursor in UTC: 2024-01-05T10 (hour), 2024-01-05, 2024-01
_LABEL_WIDTHS: dict[str, int] = {"hour": 13, "day": 10, "month": 7}
_LABEL_FORMATS: dict[str, str] = {
    "hour": 'YYYY-MM-DD"T"HH24',
    "day": "YYYY-MM-DD",
    "month": "YYYY-MM",
}
STAGE = "_pipeledger_stage"
STAGE_UNIQUE = "_pipeledger_stage_unique"


def sqlite_instant(value: datetime) -> str:
    """How SQLite stores an instant: fixed-width ISO 8601 text with microseconds, in UTC
    with ``+00:00`` when it has a time zone (then text order is time order)."""
    if value.tzinfo is None:
        return value.isoformat(timespec="microseconds")
    utc = value.astimezone(UTC).replace(tzinfo=None)
    return utc.isoformat(timespec="microseconds") + "+00:00"


def quote(name: str) -> str:
    """A quoted identifier (names are validated first: ``schema.check_identifier``)."""
    return '"' + name.replace('"', '""') + '"'


def literal(text: str) -> str:
    """A quoted string literal, for the few places that take no bound parameter (DDL)."""
    return "'" + text.replace("'", "''") + "'"


class Dialect:
    """The capabilities every warehouse is asked about. Instances are immutable singletons:
    :data:`POSTGRES`, :data:`SQLITE` and :data:`DUCKDB`."""

    name: ClassVar[DialectName]
    param: ClassVar[str]
    #: ``CREATE SCHEMA`` exists; otherwise ``schema.table`` is a single table name
    has_schemas: ClassVar[bool]
    #: the type of JSON columns, and a bound parameter of that type
    json_type: ClassVar[str]
    json_param: ClassVar[str]
    #: temporary tables live in their own schema that must be named (SQLite's ``temp.``)
    temp_prefix: ClassVar[str]
    #: what a temporary table's DDL adds so that it goes away at COMMIT
    on_commit_drop: ClassVar[str]
    #: a bulk first load is cheaper with the primary key built after the insert (SQLite,
    #: which cannot add one to a table, builds the unique index ``<target>_pkey`` instead)
    deferred_primary_key: ClassVar[bool]
    #: a first load may stage into a table that is renamed into place (no second copy)
    promotes_stage: ClassVar[bool]
    #: a unique index on the staged keys proves them unique (else: a GROUP BY query)
    proves_keys_by_index: ClassVar[bool]
    #: the merge statement returns (inserted, updated) itself
    merge_returns_counts: ClassVar[bool]
    #: a statement's WITH may write (``WITH gone AS (DELETE ... RETURNING ...) INSERT``)
    writes_in_with: ClassVar[bool]
    #: statements without parameters can be sent together, ``;``-separated, in one round
    #: trip inside the open transaction (a migration's DDL: ~290 statements on a new
    #: database)
    runs_scripts: ClassVar[bool]
    #: storage options of a table whose rows get updated: room on each page for a row's new
    #: version (PostgreSQL then updates in place of the page, without a new index entry)
    room_for_updates: ClassVar[str]
    #: an array can be bound as one parameter (``= ANY(%s)``)
    array_params: ClassVar[bool]
    #: another transaction can renew a lease while a load holds its write lock
    heartbeat_while_loading: ClassVar[bool]
    #: a load's transaction leaves room for short transactions of its own beside it
    concurrent_transactions: ClassVar[bool]
    #: JSON columns arrive parsed from the driver
    json_parsed: ClassVar[bool]
    #: ``ADD COLUMN IF NOT EXISTS`` exists
    add_column_if_not_exists: ClassVar[bool]
    #: values compare by their type (SQLite compares by storage class: timestamps kept as
    #: text in different formats compare wrongly), so a source can filter a window itself
    typed_comparisons: ClassVar[bool]
    #: ``CREATE OR REPLACE VIEW`` exists (it keeps the views built on the view)
    replaces_views: ClassVar[bool]
    #: tables have ids in a catalog (PostgreSQL oids) that every name reaching them shares
    catalog_oids: ClassVar[bool]
    #: trigger names are per table (PostgreSQL) rather than per database (SQLite)
    triggers_per_table: ClassVar[bool]
    #: a BEFORE trigger may change the row being written (else: an AFTER trigger updates it)
    before_triggers_set_row: ClassVar[bool]
    #: roles own tables and hold privileges (what a run may alter is asked of the catalog)
    has_roles: ClassVar[bool]
    #: a trigger can be present but disabled (PostgreSQL's ENABLE/DISABLE TRIGGER)
    toggles_triggers: ClassVar[bool]
    #: a trigger calls a function (PostgreSQL) rather than running statements of its own
    triggers_call_functions: ClassVar[bool]
    #: LIMIT and OFFSET of a correlated subquery may name the outer query's columns
    correlated_limit: ClassVar[bool]
    #: a subquery in FROM may name the columns of the tables before it (``LATERAL``)
    lateral_joins: ClassVar[bool]
    #: a session may run a statement on another thread while its own does other work
    #: (psycopg's connection serializes its users; SQLite's and DuckDB's are kept to
    #: the thread that made them)
    threaded_statements: ClassVar[bool]
    #: the column type of pipeledger's own instants in tables kept as plain text
    instant_type: ClassVar[str]
    #: a statement sees the tables as they were when it began, not its own changes so far
    statement_snapshot: ClassVar[bool]
    #: the first statement of a transaction whose every statement sees one snapshot (None:
    #: a writing transaction already does, holding the only write lock)
    snapshot_statement: ClassVar[str | None]
    #: the type of a 64-bit integer column in pipeledger's own tables
    int64_type: ClassVar[str]
    #: ``ALTER TABLE ... ADD CONSTRAINT`` exists (else a table is rebuilt to gain one)
    alters_constraints: ClassVar[bool]
    #: roles and row-level security keep tenants apart (else a query filter only does)
    row_security: ClassVar[bool]
    #: a join or EXISTS on columns without an index is hashed (else it loops over the
    #: other table for every row: such columns need an index)
    hash_joins: ClassVar[bool]
    #: join methods can be switched off for a statement (``SET LOCAL enable_hashjoin``)
    steers_joins: ClassVar[bool]
    #: a failed statement inside a savepoint can be rolled back to it and the transaction
    #: go on (DuckDB has no savepoints: any error aborts the whole transaction, so its
    #: callers check first what others try and catch)
    partial_rollback: ClassVar[bool]
    #: triggers exist (the fingerprint guard is one: without, backfills compare every row)
    has_triggers: ClassVar[bool]
    distinct_operator: ClassVar[str]
    #: the driver reads every ``%`` of a statement that binds parameters as the start of a
    #: placeholder (psycopg: ``%s``; a literal ``%`` is written ``%%`` there)
    percent_placeholders: ClassVar[bool]
    #: models, written in PostgreSQL's SQL, run translated (pipeledger.common.translate)
    translates_models: ClassVar[bool]
    #: a table is read in ranges of its heap pages (PostgreSQL's ctid, a TID range scan);
    #: else in ranges of its rowid (SQLite), each a range of the table's own b-tree
    reads_page_ranges: ClassVar[bool]
    #: what a read transaction runs before its one small write (the access audit's record)
    #: so that the write never waits: for a lock (SQLite's one write lock, which a load
    #: holds for its whole run: fail at once instead) or for the disk at COMMIT
    #: (PostgreSQL: a record may be lost in a server crash, never anything else)
    light_write: ClassVar[tuple[str, ...]]

    def __repr__(self) -> str:
        return f"Dialect({self.name!r})"

    def hash_memory(self, megabytes: int) -> tuple[str, ...]:
        """Statements giving the rest of the transaction ``megabytes`` of memory for each
        hash or sort (none where the warehouse sizes them itself)."""
        return ()

    def analyze(self, table: str) -> tuple[str, ...]:
        """Statements giving the planner the statistics of ``table`` (SQL text), a temporary
        table just filled. PostgreSQL's autovacuum never analyzes one, so the planner
        guessed 200 distinct keys for 150,000 touched ones and probed an index 150,000
        times where one hash join reads the table once (a model's stage: 1.29 s -> 0.53 s).
        None where the warehouse reads what it needs itself."""
        return ()

    def table(self, name: TableName) -> str:
        """A table name as SQL text, quoted."""
        if name.schema is None:
            return quote(name.table)
        if self.has_schemas:
            return f"{quote(name.schema)}.{quote(name.table)}"
        return quote(f"{name.schema}.{name.table}")

    def stored_table(self, name: TableName) -> str:
        """:meth:`table`, past any temporary view of the same name: a SQLite read session
        of one tenant shadows the ledger's tables with views of its rows, and a read that
        records itself (the access audit) writes the table beneath."""
        return self.table(name)

    def temp(self, name: str) -> str:
        """A temporary table (or index) by name."""
        return f"{self.temp_prefix}{quote(name)}"

    def stage(self) -> str:
        """The stage, by the name every statement of a run reaches it by: unqualified, so
        that a temporary stage is found first (PostgreSQL searches ``pg_temp`` first, SQLite
        ``temp`` before ``main``), and a promotable stage (:attr:`promotes_stage`) when the
        run has no temporary one."""
        return quote(STAGE)

    def stage_unique(self) -> str:
        return self.temp(STAGE_UNIQUE)

    def column_type(self, sql_type: str) -> str:
        """The DDL type of a canonical SQL type."""
        return sql_type

    def verbatim(self, text: str) -> str:
        """SQL text written elsewhere (a model's query: ``like 'return%'``, a ``%`` in a
        comment) as it must appear inside a statement that binds parameters, so that the
        driver passes it to the database unchanged."""
        return text.replace("%", "%%") if self.percent_placeholders else text

    def explain(self, query: str) -> str:
        """A statement the database plans ``query`` for without running it (so that it
        resolves every table, column and function it names)."""
        return f"EXPLAIN {query}"

    def index_lookup(self, schema: str | None, name: str) -> tuple[str, list[str]]:
        """A query returning a row when the index ``name`` (of a table in ``schema``)
        exists, and its parameters."""
        raise NotImplementedError

    def marks(self, count: int) -> str:
        """``count`` bound parameters, comma-separated."""
        return ", ".join([self.param] * count)

    def differs(self, left: str, right: str, columns: Sequence[str]) -> str:
        """True when the rows ``left`` and ``right`` differ in ``columns`` (nulls equal)."""
        lhs = ", ".join(f"{left}.{quote(c)}" for c in columns)
        rhs = ", ".join(f"{right}.{quote(c)}" for c in columns)
        if len(columns) == 1:
            return f"{lhs} {self.distinct_operator} {rhs}"
        return f"({lhs}) {self.distinct_operator} ({rhs})"

    def row_text(self, alias: str, columns: Sequence[str]) -> str:
        """A text rendering of a row's values: a total order used to break cursor ties."""
        raise NotImplementedError

    def count_where(self, predicate: str) -> str:
        """An aggregate counting the rows for which ``predicate`` holds."""
        raise NotImplementedError

    def regex_mismatch(self, text: str) -> str:
        """True when ``text`` does not match the pattern bound as the next parameter."""
        raise NotImplementedError

    def json_object(self, pairs: Sequence[tuple[str, str]]) -> str:
        """A JSON object from (key, SQL expression) pairs; keys are validated identifiers."""
        raise NotImplementedError

    def as_number(self, expression: str, sql_type: str) -> str:
        """``expression`` of ``sql_type`` as something that compares as a number."""
        return expression

    def json_value(self, expression: str, sql_type: str) -> str:
        """``expression`` of ``sql_type`` as a value inside a JSON object, in the text a
        quarantine replay reads back."""
        return expression

    def exact_square(self, expression: str) -> str:
        """The square of an integer expression, without overflow."""
        raise NotImplementedError

    def utc_day(self, column: str) -> str:
        """A timestamp column's UTC day as ``YYYY-MM-DD`` text."""
        raise NotImplementedError

    def time_label(self, column: str, unit: TimeUnit) -> str:
        """The UTC hour, day or month a date or timestamp column falls in, as text:
        ``2024-01-05T10``, ``2024-01-05`` or ``2024-01`` (the same on every warehouse)."""
        raise NotImplementedError

    def time_bucket(self, column: str, unit: TimeUnit) -> str:
        """A value per UTC hour, day or month of a date or timestamp column, cheaper to
        compute per row than :meth:`time_label`, whose label :meth:`time_label` of it is."""
        return self.time_label(column, unit)

    def distinct_on(self, expression: str) -> str:
        """``SELECT`` prefix keeping one row per ``expression`` where the upsert needs it."""
        return ""

    def quotient(self, dividend: str, divisor: str) -> str:
        """Integer division, truncated toward zero, of two integer expressions."""
        return f"{dividend} / {divisor}"

    def cast_to(self, expression: str, sql_type: str) -> str:
        """``expression`` as a value of the canonical ``sql_type``, stored as this warehouse
        stores that type."""
        return f"CAST({expression} AS {sql_type})"

    def existing_tables(self, count: int) -> str:
        """Of ``count`` bound table names, each as :meth:`table` writes it, the ones that
        exist (one catalog query for many tables)."""
        raise NotImplementedError


class _Postgres(Dialect):
    name = "postgres"
    param = "%s"
    has_schemas = True
    json_type = "jsonb"
    json_param = "%s::jsonb"
    temp_prefix = ""
    on_commit_drop = " ON COMMIT DROP"
    deferred_primary_key = True
    promotes_stage = True
    proves_keys_by_index = True
    merge_returns_counts = True
    writes_in_with = True
    runs_scripts = True
    room_for_updates = " WITH (fillfactor = 90)"
    array_params = True
    reads_page_ranges = True
    heartbeat_while_loading = True
    concurrent_transactions = True
    json_parsed = True
    add_column_if_not_exists = True
    typed_comparisons = True
    catalog_oids = True
    triggers_per_table = True
    before_triggers_set_row = True
    has_roles = True
    toggles_triggers = True
    triggers_call_functions = True
    correlated_limit = True
    lateral_joins = True
    threaded_statements = True
    instant_type = "timestamptz"
    int64_type = "bigint"
    alters_constraints = True
    row_security = True
    hash_joins = True
    steers_joins = True
    replaces_views = True
    partial_rollback = True
    has_triggers = True
    statement_snapshot = True
    snapshot_statement = "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"
    distinct_operator = "IS DISTINCT FROM"
    percent_placeholders = True
    translates_models = False
    light_write = ("SET LOCAL synchronous_commit = off",)

    def analyze(self, table: str) -> tuple[str, ...]:
        return (f"ANALYZE {table}",)

    def hash_memory(self, megabytes: int) -> tuple[str, ...]:
        return (f"SET LOCAL work_mem = '{int(megabytes)}MB'",)

    def index_lookup(self, schema: str | None, name: str) -> tuple[str, list[str]]:
        # an index lives in its table's schema (a table without one: the search path's)
        qualified = f"{quote(schema)}.{quote(name)}" if schema else quote(name)
        return "SELECT 1 WHERE to_regclass(%s) IS NOT NULL", [qualified]

    def row_text(self, alias: str, columns: Sequence[str]) -> str:
        values = ", ".join(f"{alias}.{quote(c)}" for c in columns)
        return f'(ROW({values})::text COLLATE "C")'

    def count_where(self, predicate: str) -> str:
        return f"count(*) FILTER (WHERE {predicate})"

    def regex_mismatch(self, text: str) -> str:
        return f"NOT ({text} ~ %s)"

    def json_object(self, pairs: Sequence[tuple[str, str]]) -> str:
        return "jsonb_build_object(" + ", ".join(f"{literal(k)}, {v}" for k, v in pairs) + ")"

    def exact_square(self, expression: str) -> str:
        return f"CAST({expression} AS numeric) * {expression}"

    def utc_day(self, column: str) -> str:
        return f"to_char({column} AT TIME ZONE 'UTC', 'YYYY-MM-DD')"

    def time_label(self, column: str, unit: TimeUnit) -> str:
        # sessions run in UTC, so a timestamptz and a timestamp both show their UTC time
        return f"to_char({column}, '{_LABEL_FORMATS[unit]}')"

    def time_bucket(self, column: str, unit: TimeUnit) -> str:
        return f"date_trunc('{unit}', {column})"  # in the session's UTC, as the label

    def distinct_on(self, expression: str) -> str:
        # one statement may not touch a row twice in ON CONFLICT
        return f"DISTINCT ON ({expression}) "

    def existing_tables(self, count: int) -> str:
        # to_regclass reads a quoted, qualified name as CREATE TABLE did (search_path too)
        names = " UNION ALL ".join(["SELECT CAST(%s AS text) AS name"] * count)
        return f"SELECT n.name FROM ({names}) n WHERE to_regclass(n.name) IS NOT NULL"


class _Sqlite(Dialect):
    name = "sqlite"
    param = "?"
    has_schemas = False
    json_type = "text"
    json_param = "?"
    temp_prefix = "temp."
    on_commit_drop = ""
    deferred_primary_key = True
    promotes_stage = True
    proves_keys_by_index = False
    merge_returns_counts = False
    writes_in_with = False
    runs_scripts = False
    room_for_updates = ""
    array_params = False
    reads_page_ranges = False
    heartbeat_while_loading = False
    concurrent_transactions = False
    json_parsed = False
    add_column_if_not_exists = False
    typed_comparisons = False
    catalog_oids = False
    triggers_per_table = False
    before_triggers_set_row = False
    has_roles = False
    toggles_triggers = False
    triggers_call_functions = False
    correlated_limit = False
    lateral_joins = False
    threaded_statements = False
    instant_type = "text"
    int64_type = "integer"  # SQLite's INTEGER is 64-bit
    alters_constraints = False
    row_security = False
    hash_joins = False
    steers_joins = False
    replaces_views = False
    partial_rollback = True
    has_triggers = True
    statement_snapshot = False
    snapshot_statement = None
    distinct_operator = "IS NOT"
    percent_placeholders = False
    translates_models = True
    # a reader's COMMIT does not sync either: see the adapter's read sessions
    light_write = ("PRAGMA busy_timeout = 0",)

    def explain(self, query: str) -> str:
        return f"EXPLAIN QUERY PLAN {query}"

    def index_lookup(self, schema: str | None, name: str) -> tuple[str, list[str]]:
        # index names are the database's (pipeledger's carry their table in their hash)
        return "SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = ?", [name]

    def column_type(self, sql_type: str) -> str:
        # exact decimals are kept as text (NUMERIC affinity would round them), and other
        # types by names of SQLite's own (schema.sqlite_declared_type)
        return sqlite_declared_type(sql_type)

    def json_value(self, expression: str, sql_type: str) -> str:
        # bytea as PostgreSQL's \x hex text (json_object refuses a BLOB), jsonb as JSON
        # (not a string holding it), an interval (integer microseconds) as its text
        if sql_type == "bytea":  # hex(NULL) is '', not NULL
            hexed = f"'\\x' || lower(hex({expression}))"
            return f"CASE WHEN {expression} IS NULL THEN NULL ELSE {hexed} END"
        if sql_type == "jsonb":
            return f"json({expression})"
        if sql_type == "interval":
            magnitude = f"abs({expression})"
            return (
                f"CASE WHEN {expression} IS NULL THEN NULL ELSE "
                f"(CASE WHEN {expression} < 0 THEN '-' ELSE '' END) || "
                f"printf('%02d:%02d:%02d.%06d', {magnitude} / 3600000000, "
                f"{magnitude} / 60000000 % 60, {magnitude} / 1000000 % 60, "
                f"{magnitude} % 1000000) END"
            )
        return expression

    def row_text(self, alias: str, columns: Sequence[str]) -> str:
        return "(" + " || ',' || ".join(f"quote({alias}.{quote(c)})" for c in columns) + ")"

    def count_where(self, predicate: str) -> str:
        return f"coalesce(sum(CASE WHEN {predicate} THEN 1 ELSE 0 END), 0)"

    def regex_mismatch(self, text: str) -> str:
        return f"NOT regexp(?, {text})"  # a function the adapter registers

    def json_object(self, pairs: Sequence[tuple[str, str]]) -> str:
        return "json_object(" + ", ".join(f"{literal(k)}, {v}" for k, v in pairs) + ")"

    def as_number(self, expression: str, sql_type: str) -> str:
        if sql_type.startswith("numeric"):  # stored as text, which compares as text
            return f"CAST({expression} AS REAL)"
        return expression

    def exact_square(self, expression: str) -> str:
        return f"{expression} * {expression}"  # SQLite's integers are 64-bit

    def utc_day(self, column: str) -> str:
        return f"substr({column}, 1, 10)"  # stored as UTC ISO-8601 text

    def stored_table(self, name: TableName) -> str:
        return f"main.{self.table(name)}"  # temp views shadow a name in `main`

    def time_label(self, column: str, unit: TimeUnit) -> str:
        return f"substr({column}, 1, {_LABEL_WIDTHS[unit]})"  # UTC ISO-8601 text

    def cast_to(self, expression: str, sql_type: str) -> str:
        # exact decimals are text with the column's scale; dates and times are ISO text
        if sql_type.startswith("numeric("):
            scale = int(sql_type.rstrip(")").split(",")[1])
            return (
                f"CASE WHEN {expression} IS NULL THEN NULL "
                f"ELSE printf('%.{scale}f', {expression}) END"
            )
        kinds = {
            "bigint": "INTEGER",
            "integer": "INTEGER",
            "smallint": "INTEGER",
            "boolean": "INTEGER",
            "real": "REAL",
            "double precision": "REAL",
            "text": "TEXT",
        }
        if sql_type in kinds:
            return f"CAST({expression} AS {kinds[sql_type]})"
        return expression

    def existing_tables(self, count: int) -> str:
        # a table's name in the catalog, quoted as Dialect.table quotes it
        quoted = """'"' || replace(name, '"', '""') || '"'"""
        return (
            f"SELECT {quoted} FROM sqlite_master WHERE type = 'table' "
            f"AND {quoted} IN ({self.marks(count)})"
        )


# DuckDB's names of the canonical types (the same name back, lower-cased, from its catalog)
_DUCKDB_TYPES = {
    "smallint": "SMALLINT",
    "integer": "INTEGER",
    "bigint": "BIGINT",
    "real": "FLOAT",
    "double precision": "DOUBLE",
    "boolean": "BOOLEAN",
    "text": "VARCHAR",
    "date": "DATE",
    "timestamp": "TIMESTAMP",
    "timestamptz": "TIMESTAMP WITH TIME ZONE",
    "bytea": "BLOB",
    "uuid": "UUID",
    "jsonb": "JSON",
    "time": "TIME",
    "interval": "INTERVAL",
}
DUCKDB_MAX_PRECISION = 38  # DuckDB's widest DECIMAL


def duckdb_type(sql_type: str) -> str:
    """The DuckDB type of a canonical type; refuses a decimal wider than DuckDB's."""
    if sql_type.startswith("numeric("):
        precision = int(sql_type.removeprefix("numeric(").split(",")[0])
        if precision > DUCKDB_MAX_PRECISION:
            raise SchemaError(
                f"type {sql_type}: DuckDB's decimals hold at most {DUCKDB_MAX_PRECISION} "
                "digits; declare the column numeric(38,s) or text"
            )
        return "DECIMAL" + sql_type.removeprefix("numeric")
    return _DUCKDB_TYPES.get(sql_type, sql_type)


def from_duckdb_type(text: str) -> str:
    """The canonical type of a column DuckDB's catalog says is ``text``."""
    upper = text.upper()
    if upper.startswith("DECIMAL"):
        return "numeric" + upper.removeprefix("DECIMAL").replace(" ", "")
    found = {declared: kind for kind, declared in _DUCKDB_TYPES.items()}
    return found.get(upper, text.lower())


class _Duckdb(Dialect):
    """DuckDB, embedded, as SQLite is: one file, ``schema.table`` as one table name (the
    shape pipeledger's own tables and a target's name take on SQLite), one writing process
    at a time (it holds the file's lock: no other process can even read it meanwhile).
    Its SQL and types are PostgreSQL's in most of what pipeledger asks: ``IS DISTINCT
    FROM``, ``FILTER``, typed timestamps and decimals, hash joins. It has no savepoints and
    no triggers."""

    name = "duckdb"
    param = "?"
    has_schemas = False
    json_type = "JSON"
    json_param = "CAST(? AS JSON)"
    # unqualified: DuckDB looks in temp first, and an index may not name its schema
    temp_prefix = ""
    on_commit_drop = ""
    deferred_primary_key = False
    promotes_stage = False
    proves_keys_by_index = False
    merge_returns_counts = False
    writes_in_with = False
    runs_scripts = False
    room_for_updates = ""
    array_params = False
    heartbeat_while_loading = False
    concurrent_transactions = False
    json_parsed = False
    add_column_if_not_exists = True
    typed_comparisons = True
    catalog_oids = False
    triggers_per_table = False
    before_triggers_set_row = False
    has_roles = False
    toggles_triggers = False
    triggers_call_functions = False
    instant_type = "TIMESTAMP WITH TIME ZONE"
    int64_type = "BIGINT"
    alters_constraints = False
    row_security = False  # the ledger is never in it
    hash_joins = True
    steers_joins = False
    partial_rollback = False
    has_triggers = False
    light_write = ()  # one process has the file: there is no lock to wait for
    statement_snapshot = True
    correlated_limit = False  # never asked: the ledger is never inside a DuckDB file
    lateral_joins = True
    threaded_statements = False
    replaces_views = True
    percent_placeholders = False
    translates_models = False  # models run as written, in DuckDB's PostgreSQL-like SQL
    reads_page_ranges = False
    snapshot_statement = None
    distinct_operator = "IS DISTINCT FROM"

    def column_type(self, sql_type: str) -> str:
        return duckdb_type(sql_type)

    def json_value(self, expression: str, sql_type: str) -> str:
        # DuckDB's JSON drops a decimal's scale (-5.00 becomes -5.0) and writes instants
        # with a space: both as the text PostgreSQL's jsonb holds
        if sql_type.startswith("numeric("):
            return f"CAST({expression} AS VARCHAR)"
        if sql_type == "timestamptz":
            return f"strftime({expression}, '%Y-%m-%dT%H:%M:%S.%f+00:00')"
        if sql_type == "timestamp":
            return f"strftime({expression}, '%Y-%m-%dT%H:%M:%S.%f')"
        return expression

    def row_text(self, alias: str, columns: Sequence[str]) -> str:
        values = ", ".join(f"{alias}.{quote(c)}" for c in columns)
        return f"CAST(ROW({values}) AS VARCHAR)"

    def count_where(self, predicate: str) -> str:
        return f"count(*) FILTER (WHERE {predicate})"

    def regex_mismatch(self, text: str) -> str:
        return f"NOT regexp_matches({text}, ?)"

    def json_object(self, pairs: Sequence[tuple[str, str]]) -> str:
        return "json_object(" + ", ".join(f"{literal(k)}, {v}" for k, v in pairs) + ")"

    def exact_square(self, expression: str) -> str:
        return f"CAST({expression} AS HUGEINT) * {expression}"

    def utc_day(self, column: str) -> str:
        return f"strftime({column}, '%Y-%m-%d')"  # sessions run in UTC

    def time_label(self, column: str, unit: TimeUnit) -> str:
        formats = {"hour": "%Y-%m-%dT%H", "day": "%Y-%m-%d", "month": "%Y-%m"}
        return f"strftime({column}, '{formats[unit]}')"

    def time_bucket(self, column: str, unit: TimeUnit) -> str:
        return f"date_trunc('{unit}', {column})"  # sessions run in UTC

    def quotient(self, dividend: str, divisor: str) -> str:
        return f"{dividend} // {divisor}"  # DuckDB's / divides as floats

    def cast_to(self, expression: str, sql_type: str) -> str:
        return f"CAST({expression} AS {duckdb_type(sql_type)})"


POSTGRES: Dialect = _Postgres()
SQLITE: Dialect = _Sqlite()
DUCKDB: Dialect = _Duckdb()
