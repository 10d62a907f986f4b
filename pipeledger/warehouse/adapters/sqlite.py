"""The embedded default: one SQLite file in WAL mode.

WAL lets another process read state and history while a load is writing. A load holds
SQLite's single write lock for its whole transaction (``BEGIN IMMEDIATE``), so two loads
into one file run one after the other. Before SQLite opens the file, its writability
(the file, its ``-wal`` and ``-shm``, its folder) is checked: SQLite would open a file it
may not write read-only and make ``-wal``/``-shm`` files with the file's mode, which then
keep failing runs after the file's own mode is fixed. A writer is refused, naming the
file; a reader of a read-only database opens it without making any file.

SQLite has no schemas, so ``schema.table`` is the single table name ``"schema.table"``.
Timestamps are stored as fixed-width ISO 8601 text (UTC for time-zone aware columns) and
exact decimals as text, so that comparisons and ordering in SQL agree with the values'
own order. So are times
(``HH:MM:SS.ffffff``) and uuids (lower case); intervals are integer microseconds, bytea a
BLOB and jsonb its JSON text. Each is declared by a type name that maps back
(``schema.sqlite_declared_type``).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import sqlite3
import threading
import time
import urllib.parse
import weakref
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any
from uuid import UUID

from pipeledger.common.columns import TableName, from_sqlite_declared
from pipeledger.common.stop import cancellable
from pipeledger.errors import (
    ConfigError,
    SourceError,
    TerminalWarehouseError,
    TransientWarehouseError,
    WarehouseBusy,
    WarehouseError,
)
from pipeledger.warehouse.dialect import SQLITE, literal, quote, sqlite_instant
from pipeledger.warehouse.session import observed

# numpy and pyarrow are imported by the functions that handle Arrow data, so that reading
# state or the ledger (the CLI's quick commands) does not load them
if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

BUSY_TIMEOUT_S = 5.0
# bytes per page of a new database file: four times SQLite's default, a third less work
# to write, look up and update 1M rows (fewer pages to split, read and log), for at most
# 16 KB written to the log per page a small transaction touches
PAGE_SIZE = 16_384
# rows per staging statement (at most SQLite's limit of bound parameters allows): a few
# hundred bind as fast as thousands; one-row statements cost a third more
ROWS_PER_INSERT = 256


def database_path(url: str) -> Path:
    """``sqlite:///relative.db`` or ``sqlite:////absolute.db`` to a path."""
    if not url.startswith("sqlite:///"):
        raise ConfigError(f"SQLite URL {url!r} must start with sqlite:///")
    return Path(url.removeprefix("sqlite:///"))


def _value(value: Any) -> Any:
    if isinstance(value, datetime):
        return sqlite_instant(value)
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal | UUID):
        return str(value)
    return value


def _column(array: pa.Array) -> list[Any]:
    import pyarrow as pa

    from pipeledger.common import values

    kind = array.type
    if pa.types.is_timestamp(kind):
        return list(_instant_text(array).to_pylist())
    if pa.types.is_date(kind) or pa.types.is_decimal(kind) or pa.types.is_time(kind):
        return list(array.cast(pa.string()).to_pylist())
    if kind == pa.uuid():
        return list(values.uuid_text(array).to_pylist())
    if kind == pa.json_():
        return list(array.storage.to_pylist())
    if pa.types.is_duration(kind):
        return list(array.cast(pa.int64()).to_pylist())
    return list(array.to_pylist())


def _instant_text(array: pa.Array) -> pa.Array:
    """A timestamp array as fixed-width ISO 8601 text with microseconds
    (``2024-01-05T10:00:00.000000``, ``+00:00`` appended when it has a time zone: in UTC).
    Made of its date's and its time of day's text, which Arrow writes several times faster
    than ``strftime`` (which formats through a C++ locale, value by value)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = array.type
    micros = array.cast(pa.timestamp("us", tz=kind.tz))  # refuses to drop nanoseconds
    wall = micros.cast(pa.int64()).cast(pa.timestamp("us"))  # a zoned value's UTC wall time
    day = wall.cast(pa.date32()).cast(pa.string())
    clock = wall.cast(pa.time64("us")).cast(pa.string())
    offset = [pa.scalar("+00:00")] if kind.tz is not None else []
    return pc.binary_join_element_wise(day, pa.scalar("T"), clock, *offset, pa.scalar(""))


def _md5(text: str | None) -> str | None:
    import hashlib  # imported when the function is first called: reads need none

    return None if text is None else hashlib.md5(text.encode()).hexdigest()


def _regexp(pattern: str, value: str | None) -> bool | None:
    return None if value is None else re.search(pattern, value) is not None


_HINTS = {
    "readonly": "the database file or its folder is read-only for this user",
    "disk is full": "the disk is full, or a file size limit was reached",
    "disk I/O error": "a write failed: the disk may be full, a file size limit reached",
}


def _translate(exc: sqlite3.Error, doing: str) -> WarehouseError:
    text = str(exc)
    transient = isinstance(exc, sqlite3.OperationalError) and ("locked" in text or "busy" in text)
    integrity = isinstance(exc, sqlite3.IntegrityError)
    sqlstate = None
    if integrity and "UNIQUE" in text:
        sqlstate = WarehouseError.UNIQUE_VIOLATION
    elif integrity and "NOT NULL" in text:
        sqlstate = WarehouseError.NOT_NULL_VIOLATION
    kind = TransientWarehouseError if transient else TerminalWarehouseError
    hints = [hint for words, hint in _HINTS.items() if words in text]
    return kind(f"SQLite {doing}: {exc}" + "".join(f" ({h})" for h in hints), sqlstate=sqlstate)


def _sidecars(path: Path) -> list[Path]:
    """The files SQLite keeps beside a database in WAL mode."""
    return [path.with_name(path.name + suffix) for suffix in ("-wal", "-shm")]


def read_only_reason(path: Path) -> tuple[str, str] | None:
    """Why this process could not write the database at ``path``, and the fix; None when
    it can. The folder must be writable too: SQLite makes and removes ``-wal``/``-shm``."""
    if path.exists() and not os.access(path, os.W_OK):
        return "the file is read-only", f"make it writable (chmod u+w {path})"
    for side in _sidecars(path):
        # other processes make and remove these files while we look: a reader that closes
        # removes its -shm (access() then says "not writable" of a file that is gone), and a
        # run opening the database makes its -wal; only a file there before and after an
        # access() that fails is read-only
        if side.exists() and not os.access(side, os.W_OK) and side.exists():
            return (
                f"{side.name} beside it is read-only (left by a reader of the read-only file)",
                f"delete {side} while no process has the database open, or make it writable",
            )
    folder = path.parent
    if not os.access(folder, os.W_OK | os.X_OK):
        return (
            f"its folder is read-only (SQLite writes {path.name}-wal and -shm there)",
            f"make the folder writable (chmod u+w {folder})",
        )
    return None


class SqliteSession:
    dialect = SQLITE

    def __init__(self, conn: sqlite3.Connection, tenant: str = "default") -> None:
        self._conn = conn
        self.tenant = tenant
        self.rollback_only = False
        self.interrupted = False
        self._savepoints = itertools.count()
        # ended: its connection may serve another session, which an interrupt (a timeout's,
        # a cancel's, from another thread) must not reach
        self._ended = False
        self._ending = threading.Lock()

    def execute(self, statement: str, params: Sequence[Any] = ()) -> int:
        self._check()
        try:
            with observed("execute", statement):
                return self._conn.execute(statement, [_value(p) for p in params]).rowcount
        except sqlite3.Error as exc:
            raise _translate(exc, "statement failed") from exc

    def query(self, statement: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        self._check()
        try:
            with observed("query", statement):
                rows = self._conn.execute(statement, [_value(p) for p in params])
                return list(rows.fetchall())
        except sqlite3.Error as exc:
            raise _translate(exc, "query failed") from exc

    def fetch_int64(self, statement: str, params: Sequence[Any] = ()) -> np.ndarray[Any, Any]:
        import numpy as np

        try:
            with observed("fetch", statement):
                rows = self._conn.execute(statement, [_value(p) for p in params])
                return np.fromiter((value for (value,) in rows), dtype=np.int64)
        except sqlite3.Error as exc:
            raise _translate(exc, "query failed") from exc

    def stage(self, batches: Iterable[pa.RecordBatch]) -> None:
        from pipeledger.warehouse.stage import insert_stage  # writes only

        limit = self._conn.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
        for batch in batches:
            self._check()
            names = batch.schema.names
            rows = max(1, min(ROWS_PER_INSERT, limit // len(names)))
            statement = insert_stage(self.dialect, names, rows)
            try:
                with observed("stage", statement):
                    columns = [_column(batch.column(i)) for i in range(batch.num_columns)]
                    self._insert(statement, names, columns, rows)
            except sqlite3.Error as exc:
                raise _translate(exc, "staging failed") from exc

    def _insert(
        self, statement: str, names: list[str], columns: list[list[Any]], rows: int
    ) -> None:
        """The columns' values row by row, ``rows`` rows per ``statement``: one flat list
        of values cut into each statement's parameters, without a Python step per row."""
        from pipeledger.warehouse.stage import insert_stage

        width, count = len(columns), len(columns[0])
        values: list[Any] = [None] * (width * count)
        for index, column in enumerate(columns):
            values[index::width] = column
        per_statement = rows * width
        self._conn.executemany(statement, zip(*[iter(values)] * per_statement, strict=False))
        rest = count % rows
        if rest:  # the rows that do not fill a whole statement
            tail = values[len(values) - rest * width :]
            self._conn.execute(insert_stage(self.dialect, names, rest), tail)

    @contextmanager
    def savepoint(self) -> Iterator[None]:
        name = f"pipeledger_{next(self._savepoints)}"
        self.execute(f"SAVEPOINT {name}")
        try:
            yield
        except BaseException:
            self.execute(f"ROLLBACK TO SAVEPOINT {name}")
            self.execute(f"RELEASE SAVEPOINT {name}")
            raise
        self.execute(f"RELEASE SAVEPOINT {name}")

    def lock_pipeline(self, pipeline: str) -> None:
        """The session already holds the database's write lock (BEGIN IMMEDIATE)."""

    def table_columns(self, table: TableName) -> list[tuple[str, str]] | None:
        name = SQLITE.table(table)
        rows = self.query(f"SELECT name, type FROM pragma_table_info({quote(name[1:-1])})")
        return [(str(n), from_sqlite_declared(str(t))) for n, t in rows] or None

    def mark_rollback(self) -> None:
        self.rollback_only = True

    def interrupt(self) -> None:
        with self._ending:
            if self._ended:
                return
            self.interrupted = True  # no statement after this one
            self._conn.interrupt()

    def end(self) -> None:
        """The session is over: interrupting it does nothing from now on."""
        with self._ending:
            self._ended = True

    def _check(self) -> None:
        if self.interrupted:
            raise TransientWarehouseError("SQLite: the run was interrupted")


def _wal(conn: sqlite3.Connection) -> None:
    """WAL mode, which the file keeps once set. Switching to it needs the file to itself,
    and SQLite answers "database is locked" at once instead of waiting: two runs opening
    a new file together (``run --threads 2``) would fail the second one. It waits here, as
    long as any other lock, for the first one's switch."""
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode != sqlite3.SQLITE_BUSY or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def _close_all(idle: dict[bool, list[_Kept]], anchors: list[sqlite3.Connection]) -> None:
    """Close the idle connections, then the anchor: the file's last connection to close
    checkpoints its WAL (a kept connection left open would leave it to the next process)."""
    for kept in idle.values():
        while kept:
            kept.pop().conn.close()
    while anchors:
        anchors.pop().close()


# idle connections kept per kind of session (reading, writing); more run at once only in
# a DAG run with threads, whose extra connections are closed when their sessions end
_IDLE_MAX = 4


@dataclass
class _Kept:
    """A connection kept between sessions, and the version of the file's schema when its
    session last scoped it to its tenant (:func:`_scope_to_tenant`)."""

    conn: sqlite3.Connection
    keep: bool  # False: opened read-only, or in memory (a new connection is a new database)
    scoped_at: int | None = None


# pipeledger's tables that carry a tenant (ledger migration 13), found without naming them
# (the warehouse layer does not know the ledger's tables), with the tenant's default
_TENANT_TABLES = (
    "SELECT m.name, c.dflt_value FROM sqlite_master AS m, pragma_table_info(m.name) AS c "
    "WHERE m.type = 'table' AND m.name LIKE 'pipeledger.%' AND c.name = 'tenant'"
)
# the SQL function a ledger table's tenant defaults to from ledger migration 16 on: the
# tenant this connection declares, so that a new row is its tenant's when it is inserted
TENANT_FUNCTION = "pipeledger_tenant"
# the default migration 13 gave the tenant column, which a writer's trigger corrects
_UNDECLARED = "'default'"


def _scope_to_tenant(conn: sqlite3.Connection, tenant: str, write: bool) -> None:
    """Show this connection only ``tenant``'s ledger rows, and give its new rows that
    tenant. A reader's temporary views shadow the tables (SQLite resolves an unqualified
    name in ``temp`` first), so every ledger question is filtered without saying so. A
    new row's tenant is the column's default, :data:`TENANT_FUNCTION`, this connection's
    tenant (ledger migration 16); a table whose default is still migration 13's 'default'
    gets a writer's temporary trigger that tags the rows it inserts. ``tenant`` is quoted
    as a literal (a view and a trigger take no bound parameter): from a config it is a
    validated name, from the Python API any text."""
    tables = list(conn.execute(_TENANT_TABLES))
    value = literal(tenant)
    for name, default in tables:
        main, scoped = f"main.{quote(name)}", quote(name)
        if not write:
            conn.execute(
                f"CREATE TEMP VIEW IF NOT EXISTS {scoped} AS "
                f"SELECT * FROM {main} WHERE tenant = {value}"
            )
        elif tenant != "default" and default == _UNDECLARED:
            trigger = quote(f"{name}_tenant")
            conn.execute(
                f"CREATE TEMP TRIGGER IF NOT EXISTS {trigger} AFTER INSERT ON {main} "
                f"FOR EACH ROW WHEN NEW.tenant IS NOT {value} BEGIN "
                # unqualified (SQLite's rule in triggers): a writer has no shadowing views
                f"UPDATE {scoped} SET tenant = {value} WHERE rowid = NEW.rowid; END"
            )


def _scoped(conn: sqlite3.Connection, tenant: str, write: bool, scoped_at: int | None) -> int:
    """Scope the session's connection to its tenant (:func:`_scope_to_tenant`) unless it
    was at the schema's current version (a kept connection: its temporary views and
    triggers stay); return that version. A table made since is scoped now."""
    version = int(conn.execute("PRAGMA schema_version").fetchone()[0])
    if version != scoped_at:
        _scope_to_tenant(conn, tenant, write)
    return version


def _reset(conn: sqlite3.Connection) -> bool:
    """Drop the temporary tables a session left and restore the wait for locks; False when
    the connection cannot be kept (still in a transaction, or it failed)."""
    if conn.in_transaction:
        return False
    try:
        for (name,) in conn.execute(
            "SELECT name FROM temp.sqlite_master WHERE type = 'table'"
        ).fetchall():
            conn.execute(f"DROP TABLE temp.{quote(name)}")
        conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
    except sqlite3.Error:
        return False
    return True


class SqliteWarehouse:
    dialect = SQLITE

    def __init__(self, url: str, tenant: str = "default") -> None:
        """``tenant``: whose ledger rows the sessions see. SQLite has no roles, so this is a
        filter for convenience, not isolation: anyone who can open the file reads it all."""
        self.url = url
        self.path = database_path(url)
        self.tenant = tenant
        self._anchors: list[sqlite3.Connection] = []  # at most one: see _anchor
        # idle connections of ended sessions, by whether they write: see _checkout
        self._idle: dict[bool, list[_Kept]] = {False: [], True: []}
        self._idle_lock = threading.Lock()
        weakref.finalize(self, _close_all, self._idle, self._anchors)  # also at exit

    def _connect(self, write: bool) -> _Kept:
        self._make_folder()
        reason = None if str(self.path) == ":memory:" else read_only_reason(self.path)
        if reason is not None and write:
            what, fix = reason
            raise TerminalWarehouseError(
                f"SQLite warehouse {self.path} cannot be written by this user: {what}; "
                f"{fix}, then run again"
            )
        try:
            conn = self._open(read_only=reason is not None)
            if reason is None:
                self._anchor()
            if reason is None and not write:
                # a reader writes nothing but its access record (pipeledger.ledger.access):
                # its COMMIT need not sync the log (WAL with NORMAL is never corrupted; a
                # power loss may lose the last reads recorded, never a run)
                conn.execute("PRAGMA synchronous=NORMAL")
        except sqlite3.Error as exc:
            raise _translate(exc, f"could not open {self.path}") from exc
        # the SQL functions the quality gate uses, which PostgreSQL has built in
        conn.create_function("md5", 1, _md5, deterministic=True)
        conn.create_function("regexp", 2, _regexp, deterministic=True)
        tenant = self.tenant
        # the ledger's tenant (above): one per connection, so deterministic, which lets a
        # statement evaluate it once rather than at every probe of a tenant-led index
        conn.create_function(TENANT_FUNCTION, 0, lambda: tenant, deterministic=True)
        return _Kept(conn, keep=reason is None and str(self.path) != ":memory:")

    def _anchor(self) -> None:
        """One idle connection to the file for as long as this warehouse lives (closed
        when it is collected, or at exit). Without it every session would be the file's
        last connection, and SQLite checkpoints the WAL into the database, with two
        fsyncs, whenever its last connection closes: 8 a node in a DAG run, most of a
        no-op run's time. With it the WAL is checkpointed as it grows (SQLite's
        auto-checkpoint) and once when the process ends. A committed run is as durable as
        before: its transaction is synced into the WAL at COMMIT (``synchronous=FULL``),
        whether or not a checkpoint follows. It holds no lock and
        opens no transaction, so it never blocks another process."""
        if self._anchors or str(self.path) == ":memory:":
            return
        anchor = sqlite3.connect(
            self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
        )
        anchor.execute("PRAGMA schema_version").fetchone()  # a read: it joins the WAL
        self._anchors.append(anchor)

    def close(self) -> None:
        """Close the idle connections, then the anchor: as the file's last connection it
        checkpoints the WAL."""
        with self._idle_lock:
            _close_all(self._idle, self._anchors)

    def _make_folder(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise TerminalWarehouseError(
                f"SQLite warehouse {self.path}: its folder cannot be made ({exc.strerror}); "
                "nothing was written"
            ) from exc

    def _open(self, read_only: bool) -> sqlite3.Connection:
        """Read-write in WAL mode; or, for a reader of a database it may not write, read
        only without making any file: ``immutable`` when no ``-wal`` exists (nothing
        can be writing), else ``mode=ro`` with the ``-wal``/``-shm`` already there."""
        if not read_only:
            # kept between sessions (_checkout), which a DAG run's threads take in turn
            conn = sqlite3.connect(
                self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
            )
            conn.execute(f"PRAGMA page_size={PAGE_SIZE}")  # a new file's; others keep theirs
            _wal(conn)
            # FULL: each COMMIT syncs the log, so a committed run (rows, watermark and
            # ledger record together) survives a power loss, not only its process dying;
            # one sync per transaction, which a run's checkpoint pays anyway (NORMAL
            # would lose the last runs that committed before the log reached the disk)
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute("PRAGMA foreign_keys=ON")  # the ledger's (off by default in SQLite)
            return conn
        wal, shm = _sidecars(self.path)
        mode = "mode=ro" if wal.exists() and shm.exists() else "immutable=1"
        uri = f"file:{urllib.parse.quote(str(self.path.resolve()))}?{mode}"
        return sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None)

    @contextmanager
    def session(
        self, write: bool = True, *, wait: timedelta | None = None
    ) -> Iterator[SqliteSession]:
        """``wait`` is not used: SQLite's wait for its write lock is always bounded."""
        kept = self._checkout(write)
        conn, clean = kept.conn, False
        session = SqliteSession(conn, self.tenant)
        try:
            self._begin(conn, write)
            kept.scoped_at = _scoped(conn, self.tenant, write, kept.scoped_at)
            yield session
            session._check()  # an interrupted run never commits
            ending = "ROLLBACK" if session.rollback_only else "COMMIT"
            try:
                conn.execute(ending)
            except sqlite3.Error as exc:
                raise _translate(exc, f"{ending} of {self.path} failed") from exc
            clean = True
        except BaseException:
            if conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):  # the first error is the one to keep
                    conn.execute("ROLLBACK")
            raise
        finally:
            session.end()
            self._checkin(kept, write, clean and not session.interrupted)

    def _checkout(self, write: bool) -> _Kept:
        """An idle connection of an earlier session of the same kind, else a new one.
        Opening costs more than most sessions of a run do (the file's checks, WAL mode,
        the pragmas, the tenant's views: 3 ms of a 3.6 ms session that writes a row), and
        a DAG run has four sessions a node."""
        with self._idle_lock:
            idle = self._idle[write]
            if idle:
                return idle.pop()
        return self._connect(write)

    def _checkin(self, kept: _Kept, write: bool, clean: bool) -> None:
        """Keep the connection of a session that ended cleanly, reset to how it opened:
        without the temporary tables its session made (SQLite has no ``ON COMMIT DROP``)
        and with its wait for locks (``light_write`` sets none). A connection that opened
        read-only (``immutable``: it would not see later writes), or whose session failed,
        is closed."""
        conn = kept.conn
        if clean and kept.keep and _reset(conn):
            with self._idle_lock:
                idle = self._idle[write]
                if len(idle) < _IDLE_MAX:
                    idle.append(kept)
                    return
        conn.close()

    def _begin(self, conn: sqlite3.Connection, write: bool) -> None:
        try:
            conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc):
                raise WarehouseBusy(
                    f"{self.path}: another load is writing to this embedded warehouse; "
                    "this run did nothing, try again when it has finished"
                ) from exc
            raise _translate(exc, "could not begin") from exc


def _batch(names: list[str], rows: list[Any], path: Path) -> pa.RecordBatch:
    import pyarrow as pa

    try:
        return pa.RecordBatch.from_pylist([dict(zip(names, r, strict=True)) for r in rows])
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise SourceError(
            f"{path}: a column mixes kinds of values ({exc}); declare its type under "
            "'columns' or cast it in the query"
        ) from None


class SqliteReader:
    """Reads a SQLite source; column types follow the values (declare them in ``columns``)."""

    def __init__(self, url: str) -> None:
        self.path = database_path(url)

    def read(
        self, statement: str, params: Sequence[Any], batch_rows: int
    ) -> Iterator[pa.RecordBatch]:
        conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True)
        try:
            with cancellable(conn.interrupt):  # the run's timeout, cancel
                cursor = conn.execute(statement, [_value(p) for p in params])
                names = [d[0] for d in cursor.description]
                while rows := cursor.fetchmany(batch_rows):
                    yield _batch(names, rows, self.path)
        except sqlite3.Error as exc:
            raise _translate(exc, "source query failed") from exc
        finally:
            conn.close()
