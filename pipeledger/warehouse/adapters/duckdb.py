"""DuckDB as an embedded warehouse: one file (``duckdb:///path/warehouse.duckdb``), loaded
column by column from Arrow batches.

What it is, against the SQLite default (README, "The embedded default: why SQLite"):

- **One process at a time.** A process that opens the file holds its lock until it closes
  it: no other process can read it meanwhile (``pipeledger state`` during a load is told
  the file is busy). Within a process, one writing session at a time (a lock of the
  warehouse's, waited on as SQLite's write lock is); readers share the database.
- **The ledger is never in it**: by default a SQLite file beside it
  (``<name>.ledger.db``, the separate-ledger path: the run's record reaches it through
  the commit log the warehouse keeps in the run's transaction).
- **No savepoints**: any error aborts the whole transaction, so the run fails and
  rolls back whole (the callers check first where the others try and catch: duplicate
  keys of a first load, the quality gate's unique keys); **no triggers**: a target has no
  fingerprint guard, and its backfills compare every row (no unchanged-row shortcut).
- ``schema.table`` is one table name ``"schema.table"`` in DuckDB's ``main`` schema, as on
  SQLite, and so are pipeledger's own tables.

Values are DuckDB's own types (``TIMESTAMP WITH TIME ZONE``, ``DECIMAL(p,s)`` up to 38
digits, ``UUID``, ``JSON``...); sessions run in UTC. COMMIT writes DuckDB's log to disk
before it returns (its default): a committed run survives a crash of the process or of
the machine.
"""

from __future__ import annotations

import atexit
import contextlib
import re
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from pipeledger.common.columns import TableName
from pipeledger.errors import (
    ConfigError,
    TerminalWarehouseError,
    TransientWarehouseError,
    WarehouseBusy,
    WarehouseError,
)
from pipeledger.warehouse.dialect import DUCKDB, from_duckdb_type, quote
from pipeledger.warehouse.session import observed

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

PREFIX = "duckdb:///"
WRITE_WAIT_S = 5.0  # as long as SQLite waits for its write lock
_BATCH = "_pipeledger_batch"  # the Arrow batch being staged, as DuckDB sees it


def database_path(url: str) -> Path:
    """``duckdb:///relative.duckdb`` or ``duckdb:////absolute.duckdb`` to a path."""
    if not url.startswith(PREFIX):
        raise ConfigError(f"DuckDB URL {url!r} must start with {PREFIX}")
    return Path(url.removeprefix(PREFIX))


def _translate(exc: duckdb.Error, doing: str) -> WarehouseError:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if isinstance(exc, duckdb.ConstraintException) and "uplicate key" in text:
        return TerminalWarehouseError(
            f"DuckDB {doing}: {text}", sqlstate=WarehouseError.UNIQUE_VIOLATION
        )
    if isinstance(exc, duckdb.TransactionException) and "aborted" in text:
        return TerminalWarehouseError(
            f"DuckDB {doing}: an earlier statement of this run failed and DuckDB cannot roll "
            "back part of a transaction (it has no savepoints); the run rolls back whole"
        )
    if isinstance(exc, duckdb.InterruptException):
        return TransientWarehouseError(f"DuckDB {doing}: interrupted")
    return TerminalWarehouseError(f"DuckDB {doing}: {text}")


@dataclass
class _Database:
    """One open DuckDB database of this process (DuckDB refuses a second instance of a
    file in another mode), shared by the sessions that use it, closed with the last."""

    connection: duckdb.DuckDBPyConnection
    read_only: bool
    sessions: int = 0
    writer: threading.Lock = field(default_factory=threading.Lock)


_OPEN: dict[Path, _Database] = {}
_OPEN_LOCK = threading.Lock()


def _lock_holder(text: str) -> str:
    """Who holds the file's lock, as DuckDB's message says (``... (PID 123)``)."""
    found = re.search(r"Conflicting lock is held in (.+?) \(PID (\d+)\)", text)
    return f" (process {found.group(2)}, {found.group(1)})" if found else ""


def _open(path: Path, read_only: bool) -> duckdb.DuckDBPyConnection:
    try:
        connection = duckdb.connect(str(path), read_only=read_only)
    except duckdb.IOException as exc:
        if "lock" in str(exc).lower():
            raise WarehouseBusy(
                f"{path}: another process has this DuckDB warehouse open{_lock_holder(str(exc))}"
                "; DuckDB lets one process at a time use its file. This did nothing; try "
                "again when it has finished"
            ) from exc
        raise _translate(exc, f"could not open {path}") from exc
    except duckdb.Error as exc:
        raise _translate(exc, f"could not open {path}") from exc
    connection.execute("SET TimeZone = 'UTC'")
    return connection


def _acquire(path: Path, write: bool) -> _Database:
    """This process's database for ``path``: opened read-only for readers of an existing
    file when nothing else of the process has it (other readers may open it too), and
    reopened for writing once no session of it is open."""
    with _OPEN_LOCK:
        found = _OPEN.get(path)
        if found is not None and found.read_only and write:
            if found.sessions:
                raise WarehouseBusy(
                    f"{path}: this process reads the DuckDB warehouse; a load can write it "
                    "once those reads are done"
                )
            del _OPEN[path]
            found.connection.close()
            found = None
        if found is None:
            read_only = not write and path.exists()
            found = _OPEN[path] = _Database(_open(path, read_only), read_only)
        found.sessions += 1
        return found


def _release(path: Path, database: _Database) -> None:
    with _OPEN_LOCK:
        database.sessions -= 1
        if not database.sessions and _OPEN.get(path) is database:
            del _OPEN[path]
            database.connection.close()  # DuckDB checkpoints its log into the file


@atexit.register
def _close_all() -> None:
    """At exit, what a session still holds (the CLI leaves without tearing modules down)."""
    with _OPEN_LOCK:
        for database in _OPEN.values():
            database.connection.close()
        _OPEN.clear()


def _stageable(batch: pa.RecordBatch) -> pa.RecordBatch:
    """Columns of Arrow extension types (uuid, json) as their text, which DuckDB casts to
    the stage's column types on insert."""
    import pyarrow as pa

    from pipeledger.common import values

    arrays, changed = [], False
    for array in batch.columns:
        if array.type == pa.uuid():
            array, changed = values.uuid_text(array), True
        elif array.type == pa.json_():
            array, changed = array.storage, True
        arrays.append(array)
    return pa.RecordBatch.from_arrays(arrays, names=batch.schema.names) if changed else batch


class DuckdbSession:
    dialect = DUCKDB
    tenant = "default"  # the ledger is never in DuckDB

    def __init__(self, cursor: duckdb.DuckDBPyConnection) -> None:
        self._cursor = cursor
        self.rollback_only = False
        self.interrupted = False

    def execute(self, statement: str, params: Sequence[Any] = ()) -> int:
        self._check()
        try:
            with observed("execute", statement):
                self._cursor.execute(statement, list(params))
                return int(self._cursor.rowcount)
        except duckdb.Error as exc:
            raise _translate(exc, "statement failed") from exc

    def query(self, statement: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        self._check()
        try:
            with observed("query", statement):
                return list(self._cursor.execute(statement, list(params)).fetchall())
        except duckdb.Error as exc:
            raise _translate(exc, "query failed") from exc

    def fetch_int64(self, statement: str, params: Sequence[Any] = ()) -> np.ndarray[Any, Any]:
        import numpy as np

        self._check()
        try:
            with observed("fetch", statement):
                found = self._cursor.execute(statement, list(params)).fetchnumpy()
        except duckdb.Error as exc:
            raise _translate(exc, "query failed") from exc
        if not found:
            return np.empty(0, dtype=np.int64)
        return np.asarray(next(iter(found.values())), dtype=np.int64)

    def stage(self, batches: Iterable[pa.RecordBatch]) -> None:
        """Each batch as DuckDB reads Arrow: a whole column at a time, no value by value."""
        for batch in batches:
            self._check()
            names = ", ".join(quote(n) for n in batch.schema.names)
            statement = f"INSERT INTO {DUCKDB.stage()} ({names}) SELECT {names} FROM {_BATCH}"
            try:
                with observed("stage", statement):
                    self._cursor.register(_BATCH, _stageable(batch))
                    try:
                        self._cursor.execute(statement)
                    finally:
                        self._cursor.unregister(_BATCH)
            except duckdb.Error as exc:
                raise _translate(exc, "staging failed") from exc

    @contextmanager
    def savepoint(self) -> Iterator[None]:
        """DuckDB has no savepoints: the block runs in the transaction, and if it fails
        the transaction is lost (every later statement says so; the run rolls back)."""
        yield

    def lock_pipeline(self, pipeline: str) -> None:
        """The session already holds the warehouse's only writing session."""

    def table_columns(self, table: TableName) -> list[tuple[str, str]] | None:
        name = DUCKDB.table(table)[1:-1].replace('""', '"')
        rows = self.query(
            "SELECT column_name, data_type FROM information_schema.columns "
            "WHERE table_catalog = current_database() AND table_schema = 'main' "
            "AND table_name = ? ORDER BY ordinal_position",
            [name],
        )
        return [(str(n), from_duckdb_type(str(t))) for n, t in rows] or None

    def mark_rollback(self) -> None:
        self.rollback_only = True

    def interrupt(self) -> None:
        self.interrupted = True  # no statement after this one
        self._cursor.interrupt()

    def _check(self) -> None:
        if self.interrupted:
            raise TransientWarehouseError("DuckDB: the run was interrupted")


class DuckdbWarehouse:
    dialect = DUCKDB

    def __init__(self, url: str) -> None:
        self.url = url
        self.path = database_path(url)

    def close(self) -> None:
        """Nothing to close: the file's connection closes with its last session."""

    @contextmanager
    def session(
        self, write: bool = True, *, wait: timedelta | None = None
    ) -> Iterator[DuckdbSession]:
        """``wait`` is not used: a writing session waits at most ``WRITE_WAIT_S`` for the
        one before it."""
        self._make_folder()  # a reader of no file gets an empty one, as SQLite's does
        database = _acquire(self.path, write)
        try:
            if write and not database.writer.acquire(timeout=WRITE_WAIT_S):
                raise WarehouseBusy(
                    f"{self.path}: another load of this process is writing to this DuckDB "
                    "warehouse; this run did nothing, try again when it has finished"
                )
            try:
                yield from self._transaction(database.connection.cursor())
            finally:
                if write:
                    database.writer.release()
        finally:
            _release(self.path, database)

    def _transaction(self, cursor: duckdb.DuckDBPyConnection) -> Iterator[DuckdbSession]:
        try:
            cursor.execute("BEGIN TRANSACTION")
            session = DuckdbSession(cursor)
            yield session
            session._check()  # an interrupted run never commits
            ending = "ROLLBACK" if session.rollback_only else "COMMIT"
            try:
                cursor.execute(ending)
            except duckdb.Error as exc:
                raise _translate(exc, f"{ending} of {self.path} failed") from exc
        except BaseException:
            with contextlib.suppress(duckdb.Error):  # the first error is the one to keep
                cursor.execute("ROLLBACK")
            raise
        finally:
            cursor.close()

    def _make_folder(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise TerminalWarehouseError(
                f"DuckDB warehouse {self.path}: its folder cannot be made ({exc.strerror}); "
                "nothing was written"
            ) from exc
