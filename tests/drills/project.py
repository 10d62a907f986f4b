"""A drill project (a folder with pipeledger.toml and CSV files), the databases it loads
into, and one consistent read of everything the checks look at."""

from __future__ import annotations

import json
import shutil
import sqlite3
import time
import uuid
from collections.abc import Iterator
from contextlib import AbstractContextManager, closing, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg

from pipeledger.testing.postgres import ThrowawayPostgres
from tests.drills.source import Value, to_us

PIPELINE = "orders"
TARGET = "analytics.orders"
LEASE = "5s"  # short, so that the watchdog can settle killed runs within the drill
HEARTBEAT = "1s"
LEASE_S = 5.0

# cursors as exact integers (microseconds), computed by the server
_PG_TARGET = (
    "SELECT order_id, customer_id, status, amount, note, "
    "(extract(epoch FROM updated_at) * 1000000)::bigint, _pipeledger_run_id "
    'FROM "analytics"."orders"'
)
_SQLITE_TARGET = (
    "SELECT order_id, customer_id, status, amount, note, updated_at, _pipeledger_run_id "
    'FROM "analytics.orders"'
)
RUN_COLUMNS = (
    "run_id", "status", "pid", "trigger_type", "rows_read", "rows_inserted", "rows_updated",
    "rows_unchanged", "started_at", "error_message",
)  # fmt: skip


@dataclass(frozen=True)
class LedgerRun:
    run_id: str
    status: str
    pid: int | None
    trigger_type: str
    rows_read: int | None
    rows_inserted: int | None
    rows_updated: int | None
    rows_unchanged: int | None
    started_at: float  # seconds since the epoch
    error_message: str | None

    @property
    def written(self) -> int:
        return (self.rows_inserted or 0) + (self.rows_updated or 0)


@dataclass
class Observation:
    """The target, its watermark and the ledger as one transaction saw them."""

    target: dict[int, Value] = field(default_factory=dict)
    rows: int = 0  # count(*): more than len(target) means duplicate keys
    by_run: dict[str, int] = field(default_factory=dict)  # rows per _pipeledger_run_id
    watermark: int | None = None
    state_run: str | None = None
    runs: list[LedgerRun] = field(default_factory=list)
    ledger_down: bool = False  # a separate ledger could not be read

    @property
    def duplicates(self) -> int:
        return self.rows - len(self.target)

    @property
    def max_cursor(self) -> int | None:
        return max((v[4] for v in self.target.values()), default=None)

    def run(self, run_id: str) -> LedgerRun | None:
        return next((r for r in self.runs if r.run_id == run_id), None)

    def runs_of_pid(self, pid: int, since: float) -> list[LedgerRun]:
        """The runs a process started (pids are reused: only those started since ``since``)."""
        return [r for r in self.runs if r.pid == pid and r.started_at >= since - 1.0]


def cursor_us(value: object) -> int:
    if isinstance(value, datetime):
        moment = value
    else:
        moment = datetime.fromisoformat(str(value).replace("Z", "+00:00").replace(" ", "T"))
    return to_us(moment if moment.tzinfo else moment.replace(tzinfo=UTC))


def _cents(value: object) -> int:
    return int(Decimal(str(value)).scaleb(2))


def _ledger_run(row: tuple[Any, ...]) -> LedgerRun:
    data = dict(zip(RUN_COLUMNS, row, strict=True))
    data["started_at"] = cursor_us(data["started_at"]) / 1e6
    return LedgerRun(**data)


class PgServer(AbstractContextManager["PgServer"]):
    """The PostgreSQL server the drill's databases live on: the repo's throwaway server,
    or an existing one given by URL (databases named ``drill_*`` are created and dropped)."""

    def __init__(self, url: str | None = None) -> None:
        self._given = url
        self._server: ThrowawayPostgres | None = None
        self._created: list[str] = []
        self.url = url or ""

    def __enter__(self) -> PgServer:
        if not self._given:
            self._server = ThrowawayPostgres(settings={"max_connections": "200"})
            self.url = self._server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.stop()
            return
        for url in self._created:  # on a server of someone else's, leave nothing behind
            self.drop_database(url)

    def pause(self) -> None:
        """Stop the server, keeping its data (only the drill's own throwaway server)."""
        assert self._server is not None, "only a server the drill started can be stopped"
        self._server.pause()

    def resume(self) -> None:
        assert self._server is not None
        self._server.resume()

    def _admin(self, statement: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.url, autocommit=True, connect_timeout=10) as conn:
            cursor = conn.execute(statement, params or None)
            return list(cursor.fetchall()) if cursor.description else []

    def log_text(self) -> str:
        """The server's log (empty for a server the drill did not start)."""
        if self._server is None:
            return ""
        return self._server.log_path.read_text(errors="replace")

    def fresh_database(self, tag: str) -> str:
        """A new empty database; returns its URL."""
        name = f"drill_{tag}_{uuid.uuid4().hex[:8]}"
        self._admin(f'CREATE DATABASE "{name}"')
        base, _, _ = self.url.rpartition("/")
        self._created.append(f"{base}/{name}")
        return self._created[-1]

    def drop_database(self, url: str) -> None:
        self._admin(f'DROP DATABASE IF EXISTS "{url.rpartition("/")[2]}" WITH (FORCE)')

    def client_backends(self, url: str) -> int:
        rows = self._admin(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s "
            "AND backend_type = 'client backend' AND pid <> pg_backend_pid()",
            (url.rpartition("/")[2],),
        )
        return int(rows[0][0])

    def active_statements(self, url: str) -> list[str]:
        """The start of every statement running in the database now."""
        rows = self._admin(
            "SELECT left(query, 60) FROM pg_stat_activity WHERE datname = %s "
            "AND state = 'active' AND pid <> pg_backend_pid()",
            (url.rpartition("/")[2],),
        )
        return [str(r[0]) for r in rows]

    def wait_idle(self, url: str, timeout: float = 120.0) -> float:
        """Seconds until no client is connected to the database any more: a killed
        client's backend goes on with its statement (and holds its locks) until then."""
        started = time.monotonic()
        while self.client_backends(url) and time.monotonic() - started < timeout:
            time.sleep(0.05)
        return time.monotonic() - started


class Project:
    """A folder with pipeledger.toml and ``data/orders_*.csv``; the warehouse is the URL
    given (PostgreSQL) or the embedded SQLite default inside the folder."""

    def __init__(self, root: Path, warehouse_url: str | None, lateness_s: int) -> None:
        self.root = root
        self.data = root / "data"
        self.warehouse_url = warehouse_url
        self.lateness_s = lateness_s
        self.ledger_url: str | None = None
        root.mkdir(parents=True, exist_ok=True)
        self.configure()

    @property
    def backend(self) -> str:
        return "pg" if self.warehouse_url else "sqlite"

    @property
    def sqlite_path(self) -> Path:
        return self.root / ".pipeledger" / "warehouse.db"

    @property
    def spool(self) -> Path:
        return self.root / ".pipeledger" / "ledger-spool.jsonl"

    def configure(self, ledger_url: str | None = None) -> None:
        """Write pipeledger.toml; ``ledger_url`` puts the ledger in a database of its own."""
        self.ledger_url = ledger_url
        lines = []
        if self.warehouse_url:
            lines += ["[warehouse]", f"url = {json.dumps(self.warehouse_url)}", ""]
        lines += ["[ledger]", f'lease = "{LEASE}"', f'heartbeat = "{HEARTBEAT}"']
        if ledger_url:
            lines += [f"url = {json.dumps(ledger_url)}", 'on_unavailable = "spool"']
        lines += [
            "", f"[pipelines.{PIPELINE}]",
            'source = { kind = "csv", path = "data/orders_*.csv" }',
            f'target = "{TARGET}"', 'key = ["order_id"]', 'cursor = "updated_at"',
            'on_conflict = "update"', f'lateness = "{self.lateness_s}s"',
            'columns = { customer_id = "bigint", status = "text", amount = "numeric(12,2)", '
            'note = "text", updated_at = "timestamptz" }', "",
        ]  # fmt: skip
        (self.root / "pipeledger.toml").write_text("\n".join(lines), encoding="utf-8")

    def reset_sqlite(self) -> None:
        """Forget the embedded warehouse (a fresh start after a first load committed)."""
        shutil.rmtree(self.root / ".pipeledger", ignore_errors=True)

    def spooled_runs(self) -> list[str]:
        """Run ids whose records wait in the spool."""
        if not self.spool.exists():
            return []
        ops = [json.loads(line) for line in self.spool.read_text().splitlines() if line.strip()]
        return sorted({op["data"]["run_id"] for op in ops if op["kind"] == "run"})

    # -- one consistent read ---------------------------------------------------------------
    def observe(self) -> Observation:
        """Target, watermark and ledger in one transaction (a separate ledger is read
        after it, from its own database)."""
        seen = Observation()
        with self._reader() as query:
            if query is not None:
                self._read_target(query, seen)
                self._read_state(query, seen)
                if self.ledger_url is None:
                    seen.runs = _read_runs(query, self._table("pipeline_runs"))
        if self.ledger_url is not None:
            try:
                seen.runs = read_ledger(self.ledger_url)
            except psycopg.OperationalError:
                seen.ledger_down = True
        return seen

    def _table(self, name: str) -> str:
        return f'"pipeledger"."{name}"' if self.warehouse_url else f'"pipeledger.{name}"'

    @contextmanager
    def _reader(self) -> Iterator[Query | None]:
        if self.warehouse_url:
            with psycopg.connect(self.warehouse_url, connect_timeout=10) as conn:
                conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
                conn.read_only = True
                yield _pg_query(conn)
                conn.rollback()
            return
        if not self.sqlite_path.exists():
            yield None
            return
        with closing(self._sqlite_reader()) as conn:
            yield _sqlite_query(conn)
            conn.execute("ROLLBACK")

    def _sqlite_reader(self) -> sqlite3.Connection:
        """A connection in a read transaction (one WAL snapshot for every read): read-only,
        unless the process killed last left the WAL's index to be rebuilt, which only a
        connection that may write does (SQLite: "attempt to write a readonly database")."""
        try:
            return _reading(f"file:{self.sqlite_path}?mode=ro")
        except sqlite3.OperationalError as exc:
            if "readonly" not in str(exc):
                raise
            return _reading(f"file:{self.sqlite_path}")

    def _read_target(self, query: Query, seen: Observation) -> None:
        try:
            rows = query(_PG_TARGET if self.warehouse_url else _SQLITE_TARGET)
        except MissingTable:
            return
        by_run: dict[str, int] = {}
        for order_id, customer, status, amount, note, updated_at, run_id in rows:
            seen.target[int(order_id)] = (
                int(customer),
                str(status),
                _cents(amount),
                str(note),
                _cursor_int(updated_at),
            )
            by_run[str(run_id)] = by_run.get(str(run_id), 0) + 1
        seen.rows, seen.by_run = len(rows), by_run

    def _read_state(self, query: Query, seen: Observation) -> None:
        statement = f"SELECT watermark, run_id FROM {self._table('pipeline_state')} "
        try:
            rows = query(statement + "WHERE pipeline = 'orders'")
        except MissingTable:
            return
        if rows:
            seen.watermark, seen.state_run = cursor_us(rows[0][0]), str(rows[0][1])


class MissingTable(Exception):
    """The table does not exist (yet)."""


Query = Any  # (sql) -> list of rows; raises MissingTable


def _cursor_int(value: object) -> int:
    return int(value) if isinstance(value, int) else cursor_us(value)


def _pg_query(conn: psycopg.Connection[Any]) -> Query:
    def query(statement: str) -> list[tuple[Any, ...]]:
        try:
            with conn.transaction():  # a savepoint: a missing table does not end the read
                return list(conn.execute(statement).fetchall())
        except psycopg.errors.UndefinedTable:
            raise MissingTable from None

    return query


def _reading(uri: str) -> sqlite3.Connection:
    """A connection to ``uri`` that has begun reading (closed if it cannot)."""
    conn = sqlite3.connect(uri, uri=True, timeout=30, isolation_level=None)
    try:
        conn.execute("BEGIN")
        conn.execute("SELECT count(*) FROM sqlite_master").fetchall()
    except sqlite3.Error:
        conn.close()
        raise
    return conn


def _sqlite_query(conn: sqlite3.Connection) -> Query:
    def query(statement: str) -> list[tuple[Any, ...]]:
        try:
            return list(conn.execute(statement).fetchall())
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                raise MissingTable from None
            raise

    return query


def _read_runs(query: Query, table: str) -> list[LedgerRun]:
    statement = f"SELECT {', '.join(RUN_COLUMNS)} FROM {table} ORDER BY started_at"
    try:
        return [_ledger_run(r) for r in query(statement)]
    except MissingTable:
        return []


def read_ledger(url: str) -> list[LedgerRun]:
    """The runs of a ledger kept in a PostgreSQL database of its own."""
    with psycopg.connect(url, connect_timeout=10) as conn:
        return _read_runs(_pg_query(conn), '"pipeledger"."pipeline_runs"')


class Site:
    """Where a drill's projects live: folders under ``work``, loading into databases on
    ``server`` (PostgreSQL) or, without one, into each folder's embedded SQLite file."""

    def __init__(self, work: Path, server: PgServer | None) -> None:
        self.work = work
        self.server = server

    @property
    def backend(self) -> str:
        return "pg" if self.server else "sqlite"

    def project(self, name: str, lateness_s: int) -> Project:
        """A new project in an empty folder with an empty warehouse."""
        root = self.work / f"{self.backend}-{name}"
        shutil.rmtree(root, ignore_errors=True)
        url = self.server.fresh_database(name) if self.server else None
        project = Project(root, url, lateness_s)
        return project

    def restart(self, project: Project) -> None:
        """Give a project an empty warehouse again (its files stay)."""
        if self.server and project.warehouse_url:
            self.server.drop_database(project.warehouse_url)
            project.warehouse_url = self.server.fresh_database("restart")
            project.configure(project.ledger_url)
        else:
            project.reset_sqlite()

    def wait_idle(self, project: Project, timeout: float = 120.0) -> float:
        """After a kill: seconds until the killed run's sessions are gone (SQLite: its
        locks went with the process)."""
        if self.server and project.warehouse_url:
            return self.server.wait_idle(project.warehouse_url, timeout)
        return 0.0

    def copying(self, project: Project) -> bool | None:
        """Whether a COPY into staging runs now (None: SQLite cannot tell)."""
        if self.server and project.warehouse_url:
            statements = self.server.active_statements(project.warehouse_url)
            return any(s.lstrip().upper().startswith("COPY") for s in statements)
        return None

    def drop(self, project: Project) -> None:
        if self.server and project.warehouse_url:
            self.server.drop_database(project.warehouse_url)
