"""PostgreSQL through psycopg 3: COPY into a temporary staging table, set-based merge."""

from __future__ import annotations

import contextlib
import io
import itertools
import logging
import threading
import time
import weakref
import zlib
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import errors as pgerrors
from psycopg.abc import Buffer
from psycopg.conninfo import conninfo_to_dict
from psycopg.pq import TransactionStatus
from psycopg.types.datetime import IntervalLoader
from psycopg.types.string import TextLoader

from pipeledger.common.columns import TableName, arrow_type
from pipeledger.common.secrets import redact
from pipeledger.common.stop import cancellable
from pipeledger.errors import (
    CommitUnknown,
    ConcurrentRunError,
    InsufficientPrivilege,
    TerminalWarehouseError,
    TransientWarehouseError,
    WarehouseError,
)
from pipeledger.warehouse.clients import client_gone, client_process, current_client
from pipeledger.warehouse.dialect import POSTGRES
from pipeledger.warehouse.session import observed
from pipeledger.warehouse.stage import copy_stage, handed_on

# numpy, pyarrow and the COPY encoder are imported by the methods that handle Arrow data,
# so that reading state or the ledger (the CLI's quick commands) does not load them
if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

# what a retry of the same run may get past: the connection, a lock, a timeout, a conflict
_TRANSIENT = (
    psycopg.OperationalError,
    pgerrors.LockNotAvailable,
    pgerrors.SerializationFailure,
    pgerrors.DeadlockDetected,
    pgerrors.QueryCanceled,
    pgerrors.AdminShutdown,
    pgerrors.CannotConnectNow,
    pgerrors.TooManyConnections,
)
TEMP_BUFFERS = "256MB"
# rows encoded for COPY at a time: the encoder holds a few copies of what it encodes (each
# column's fields, then the joined rows), so a slice of a batch costs a fraction of the
# batch's memory, with the same bytes on the wire
ENCODE_ROWS = 8_192
# how often the server checks that the client of a running statement is still there: a
# statement whose client died (SIGKILL, OOM) is aborted within this, releasing its locks
CLIENT_CHECK_INTERVAL = "1s"
# how long a run waits for the session of a run whose process is gone to end
DEAD_HOLDER_WAIT_S = 30.0
# how long a connection attempt may take, unless the URL says (connect_timeout=...): a
# server that accepts and never answers fails like one that is down
CONNECT_TIMEOUT_S = 10
_POLL_S = 0.1
_IDLE_MAX = 4  # idle connections kept per warehouse: one per DAG thread (default 4)

# psycopg logs a warning when it abandons a COPY on a lost connection; the error raised
# next says the same, so the warning shows only where logging is configured (--verbose)
logging.getLogger("psycopg").addHandler(logging.NullHandler())


def _translate(exc: psycopg.Error, doing: str) -> WarehouseError:
    message = f"PostgreSQL {doing}: {redact(str(exc).strip())}"
    if isinstance(exc, pgerrors.InsufficientPrivilege):
        return InsufficientPrivilege(message, sqlstate=exc.sqlstate)
    kind = TransientWarehouseError if isinstance(exc, _TRANSIENT) else TerminalWarehouseError
    return kind(message, sqlstate=exc.sqlstate)


def _warehouse_settings(name: str, wait: timedelta | None = None) -> dict[str, str]:
    """A warehouse session: in UTC, named ``name`` (``pipeledger.warehouse.clients``), its
    statements aborted by the server once it notices the client is gone (PostgreSQL 14+), its
    temporary staging tables kept in memory instead of spilling early; with ``wait``, no
    statement (nor its wait for a lock) lasts longer."""
    settings = {
        "TimeZone": "UTC",
        "application_name": name,
        "client_connection_check_interval": CLIENT_CHECK_INTERVAL,
        "temp_buffers": TEMP_BUFFERS,
    }
    if wait is not None:
        bound = f"{max(1, int(wait.total_seconds() * 1000))}ms"
        settings |= {"statement_timeout": bound, "lock_timeout": bound}
    return settings


# settings an older server does not know (a separate ledger may run an older release)
_SINCE = {"client_connection_check_interval": 140000}


def _connect(url: str, settings: dict[str, str]) -> psycopg.Connection[Any]:
    """A connection with ``settings`` for the session, set in one round trip, within
    CONNECT_TIMEOUT_S unless the URL sets its own ``connect_timeout``."""
    try:
        given = conninfo_to_dict(url)
        timeout = given.get("connect_timeout", CONNECT_TIMEOUT_S)
        conn = psycopg.connect(url, autocommit=False, connect_timeout=timeout)
    except psycopg.Error as exc:
        raise _translate(exc, f"connect to {redact(url)}") from exc
    # a connection serves many sessions (PostgresWarehouse keeps it), each ended by DISCARD
    # ALL, which drops server-side prepared statements under psycopg's cache of them: no
    # automatic prepares (a session's statements rarely repeat 5 times, the threshold)
    conn.prepare_threshold = None
    try:
        _apply(conn, settings)
    except psycopg.Error as exc:
        conn.close()
        raise _translate(exc, f"connect to {redact(url)}") from exc
    return conn


def _apply(conn: psycopg.Connection[Any], settings: dict[str, str]) -> None:
    """The session's ``settings``, in one round trip."""
    version = conn.info.server_version
    known = {k: v for k, v in settings.items() if version >= _SINCE.get(k, 0)}
    calls = ", ".join("set_config(%s, %s, false)" for _ in known)
    conn.execute(f"SELECT {calls}", [v for pair in known.items() for v in pair])
    conn.commit()  # the settings last the session; the run's transaction starts afresh


def _discard(conn: psycopg.Connection[Any]) -> bool:
    """Make an ended session's connection as a new one is (``DISCARD ALL``: no temporary
    table, setting, prepared statement or session lock survives); False if it cannot be."""
    if conn.closed or conn.broken or conn.info.transaction_status != TransactionStatus.IDLE:
        return False
    try:
        conn.autocommit = True
        conn.execute("DISCARD ALL")
        conn.autocommit = False
    except psycopg.Error:
        return False
    return True


def _close_all(idle: list[psycopg.Connection[Any]]) -> None:
    while idle:
        with contextlib.suppress(psycopg.Error):
            idle.pop().close()


def _commit(conn: psycopg.Connection[Any]) -> None:
    """COMMIT; a connection lost on the way leaves the outcome unknown (CommitUnknown)."""
    try:
        conn.commit()
    except psycopg.Error as exc:
        if conn.broken or conn.closed:
            raise CommitUnknown(
                f"PostgreSQL: the connection was lost during COMMIT "
                f"({redact(str(exc).strip())}); the transaction may or may not have committed",
                sqlstate=exc.sqlstate,
            ) from exc
        raise _translate(exc, "COMMIT failed") from exc


def _rollback(conn: psycopg.Connection[Any]) -> None:
    try:
        conn.rollback()
    except psycopg.Error as exc:
        raise _translate(exc, "ROLLBACK failed") from exc


class PostgresSession:
    dialect = POSTGRES

    def __init__(self, conn: psycopg.Connection[Any], tenant: str = "default") -> None:
        self._conn = conn
        self.tenant = tenant
        self.rollback_only = False
        self.interrupted = False

    def execute(self, statement: str, params: Sequence[Any] = ()) -> int:
        self._check()
        try:
            with observed("execute", statement):
                cursor = self._conn.execute(statement, params or None)
        except psycopg.Error as exc:
            raise _translate(exc, "statement failed") from exc
        return int(cursor.rowcount)

    def query(self, statement: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        self._check()
        try:
            with observed("query", statement):
                cursor = self._conn.execute(statement, params or None)
                return list(cursor.fetchall())
        except psycopg.Error as exc:
            raise _translate(exc, "query failed") from exc

    def fetch_int64(self, statement: str, params: Sequence[Any] = ()) -> np.ndarray[Any, Any]:
        # one bytea of big-endian int8s: a row per COPY message would cost ~0.6 us each
        import numpy as np

        packed = f"SELECT string_agg(int8send(v), ''::bytea) FROM ({statement}) AS fetched(v)"
        with observed("fetch", packed):
            data = self._scalar_bytes(packed, params)
        if data is None:
            return np.zeros(0, dtype=np.int64)
        return np.frombuffer(data, dtype=">i8").astype(np.int64)

    def _scalar_bytes(self, statement: str, params: Sequence[Any]) -> bytes | None:
        try:
            row = self._conn.execute(statement, params or None, binary=True).fetchone()
        except psycopg.Error as exc:
            raise _translate(exc, "query failed") from exc
        return None if row is None or row[0] is None else bytes(row[0])

    def stage(self, batches: Iterable[pa.RecordBatch]) -> None:
        from pipeledger.warehouse.adapters import pg_binary

        stream = iter(batches)
        head = list(itertools.islice(stream, 1))  # popped when written: not held to the end
        if not head:
            return
        schema = head[0].schema  # every batch has the target's columns
        binary = pg_binary.supports(schema)
        encode = pg_binary.encode if binary else _csv_bytes
        statement = copy_stage(schema.names, binary)
        try:
            with (
                observed("stage", statement) as timer,
                self._conn.cursor() as cursor,
                cursor.copy(statement) as copy,
            ):
                if binary:
                    copy.write(pg_binary.HEADER)
                for batch in timer.excluding(itertools.chain(handed_on(head), stream)):
                    self._check()
                    for start in range(0, batch.num_rows, ENCODE_ROWS):
                        copy.write(encode(batch.slice(start, ENCODE_ROWS)))
                if binary:
                    copy.write(pg_binary.TRAILER)
        except psycopg.Error as exc:
            raise _translate(exc, "COPY into staging failed") from exc

    @contextmanager
    def savepoint(self) -> Iterator[None]:
        try:
            with self._conn.transaction():
                yield
        except psycopg.Error as exc:
            raise _translate(exc, "statement failed") from exc

    def lock_pipeline(self, pipeline: str) -> None:
        """Take the pipeline's advisory lock, or raise ConcurrentRunError at once while a
        live run holds it. A holder whose process is gone from this host (killed while
        its statement runs on) is ended, and its lock awaited up to DEAD_HOLDER_WAIT_S."""
        key = zlib.crc32(f"pipeledger:{pipeline}".encode())
        deadline = time.monotonic() + DEAD_HOLDER_WAIT_S
        ended: set[int] = set()
        while not self._try_lock(key):
            backend, name = self._lock_holder(key)
            if backend is not None and not client_gone(name):
                raise ConcurrentRunError(
                    f"pipeline {pipeline}: another run holds its lock{_held_by(name)}; "
                    "this run did nothing"
                )
            if time.monotonic() > deadline:
                raise ConcurrentRunError(
                    f"pipeline {pipeline}: the session of a run whose process is gone still "
                    f"holds its lock after {DEAD_HOLDER_WAIT_S:.0f} s{_held_by(name)}; this "
                    "run did nothing"
                )
            if backend is not None and backend not in ended:
                ended.add(backend)
                self._end_backend(backend)
            time.sleep(_POLL_S)

    def _try_lock(self, key: int) -> bool:
        return bool(self.query("SELECT pg_try_advisory_xact_lock(%s)", [key])[0][0])

    def _lock_holder(self, key: int) -> tuple[int | None, str | None]:
        """The backend holding the advisory lock ``key`` (one bigint: classid 0, objid
        the key) and its session's name; (None, None) when it was just released."""
        rows = self.query(
            "SELECT a.pid, a.application_name FROM pg_locks l "
            "JOIN pg_stat_activity a ON a.pid = l.pid "
            "WHERE l.locktype = 'advisory' AND l.granted AND l.classid = 0 "
            "AND l.objid::bigint = %s AND l.objsubid = 1 "
            "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())",
            [key],
        )
        return (int(rows[0][0]), rows[0][1]) if rows else (None, None)

    def _end_backend(self, backend: int) -> None:
        """Ask the server to end a dead client's session (the server's own check ends it
        too, within CLIENT_CHECK_INTERVAL, if this role may not)."""
        try:
            with self.savepoint():
                self.query("SELECT pg_terminate_backend(%s)", [backend])
        except WarehouseError:
            return

    def table_columns(self, table: TableName) -> list[tuple[str, str]] | None:
        # to_regclass resolves an unqualified name through search_path exactly as the
        # CREATE TABLE that made it did (a schema named after the role comes first)
        rows = self.query(
            "SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a "
            "WHERE a.attrelid = to_regclass(%s) AND a.attnum > 0 AND NOT a.attisdropped "
            "ORDER BY a.attnum",
            [POSTGRES.table(table)],
        )
        return [(str(name), str(kind)) for name, kind in rows] or None

    def mark_rollback(self) -> None:
        self.rollback_only = True

    def interrupt(self) -> None:
        self.interrupted = True  # no statement after this one
        with contextlib.suppress(psycopg.Error):
            self._conn.cancel_safe(timeout=10)

    def _check(self) -> None:
        if self.interrupted:
            raise TransientWarehouseError("PostgreSQL: the run was interrupted")


def _held_by(name: str | None) -> str:
    process = client_process(name)
    if process is None:
        return ""
    return f" (process {process[0]} on {process[1]}: {redact(name or '')})"


def _csv_bytes(batch: pa.RecordBatch) -> memoryview:
    """CSV for COPY. Aware timestamps go out as UTC wall time (the session is in UTC):
    pyarrow formats zoned timestamps an order of magnitude slower than naive ones. Types
    CSV has no form for go out as the text PostgreSQL reads (``pipeledger/common/values.py``)."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    columns = [_csv_column(column) for column in batch.columns]
    buffer = io.BytesIO()
    options = pacsv.WriteOptions(include_header=False, batch_size=65_536)
    pacsv.write_csv(pa.RecordBatch.from_arrays(columns, names=batch.schema.names), buffer, options)
    return buffer.getbuffer()


def _csv_column(column: pa.Array) -> pa.Array:
    import pyarrow as pa

    from pipeledger.common import values

    kind = column.type
    if pa.types.is_timestamp(kind) and kind.tz is not None:
        return column.cast(pa.timestamp(kind.unit))
    if kind == pa.uuid():
        return values.uuid_text(column)
    if kind == pa.json_():
        return column.storage
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
        return values.bytes_text(column)
    if pa.types.is_duration(kind):
        micros = column.cast(pa.int64()).to_pylist()
        return pa.array([None if m is None else values.interval_text(m) for m in micros])
    return column


class PostgresWarehouse:
    dialect = POSTGRES

    def __init__(
        self,
        url: str,
        client: str | None = None,
        wait: timedelta | None = None,
        tenant: str = "default",
    ) -> None:
        """``client``: the name its sessions carry (default: the run the opening thread
        works for, else this process's); ``wait``: the longest a statement may take
        (``adapters.open_warehouse``); ``tenant``: the ledger tenant every transaction
        declares (the ledger's row-level security lets the writer see only its rows)."""
        self.url = url
        self.client = client
        self.wait = wait
        self.tenant = tenant
        # connections of sessions that ended cleanly, reset (``_discard``) for the next:
        # a node of a DAG run opens 3-4 sessions, and a new connection costs the server a
        # process and the client 5-20 ms (more on a busy machine); closed at collection/exit
        self._idle: list[psycopg.Connection[Any]] = []
        self._idle_lock = threading.Lock()
        weakref.finalize(self, _close_all, self._idle)

    @contextmanager
    def session(
        self, write: bool = True, *, wait: timedelta | None = None
    ) -> Iterator[PostgresSession]:
        name = self.client or current_client()
        settings = _warehouse_settings(name, wait or self.wait) | _tenant_setting(self.tenant)
        conn = self._checkout(settings)
        clean = False
        try:
            session = PostgresSession(conn, self.tenant)
            yield session
            session._check()  # an interrupted run never commits
            if session.rollback_only:
                _rollback(conn)
            else:
                _commit(conn)
            clean = not session.interrupted
        except BaseException:
            # an interrupt can land mid-COPY, when the connection cannot take a ROLLBACK;
            # closing it makes the server roll back, and the first error is the one to keep
            with contextlib.suppress(psycopg.Error):
                conn.rollback()
            raise
        finally:
            self._checkin(conn, clean)

    def close(self) -> None:
        with self._idle_lock:
            _close_all(self._idle)

    def _checkout(self, settings: dict[str, str]) -> psycopg.Connection[Any]:
        """An idle connection with ``settings`` applied, else a new one."""
        while True:
            with self._idle_lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None:
                return _connect(self.url, settings)
            try:
                _apply(conn, settings)
                return conn
            except psycopg.Error:  # gone meanwhile (a restart, a terminated backend)
                with contextlib.suppress(psycopg.Error):
                    conn.close()

    def _checkin(self, conn: psycopg.Connection[Any], clean: bool) -> None:
        """Keep the connection of a session that ended cleanly (reset), else close it."""
        if clean and _discard(conn):
            with self._idle_lock:
                if len(self._idle) < _IDLE_MAX:
                    self._idle.append(conn)
                    return
        with contextlib.suppress(psycopg.Error):
            conn.close()


def _tenant_setting(tenant: str) -> dict[str, str]:
    """``pipeledger.tenant``: the ledger's policies (ledger migration 13) show and take
    this tenant's rows only, and a new row's ``tenant`` defaults to it. A setting of the
    session, applied with its others before its transaction (a ``SET LOCAL`` at the
    transaction's start would come before the ``SET TRANSACTION ISOLATION LEVEL`` some
    sessions need first) and again at every checkout of a pooled connection: ``DISCARD
    ALL`` at checkin resets it to empty, which the writer policy matches to no tenant, so
    a connection that missed it would see nothing rather than another tenant's rows."""
    return {"pipeledger.tenant": tenant}


# PostgreSQL type oids and the canonical SQL type (pipeledger.common.columns) their values load as
_OIDS = {
    16: "boolean",
    17: "bytea",
    114: "jsonb",  # json
    3802: "jsonb",
    2950: "uuid",
    1083: "time",
    1186: "interval",
    20: "bigint",
    21: "smallint",
    23: "integer",
    700: "real",
    701: "double precision",
    1082: "date",
    1114: "timestamp",
    1184: "timestamptz",
}


def _arrow_type(column: psycopg.Column) -> pa.DataType:
    if column.type_code == 1700 and column.precision is not None:
        return arrow_type(f"numeric({column.precision},{column.scale or 0})")
    return arrow_type(_OIDS.get(column.type_code, "text"))


class _JsonText(TextLoader):
    """json and jsonb as their text (psycopg would parse them into Python objects)."""


class _FixedInterval(IntervalLoader):
    """An interval of months or years has no fixed length: refuse it rather than let it
    become 30 days a month."""

    def load(self, data: Buffer) -> timedelta:
        text = bytes(data)
        if b"mon" in text or b"year" in text:
            raise psycopg.DataError(
                f"interval {text.decode()!r} counts months or years, which have no fixed "
                "length; select it as text, or convert it in the query (e.g. with "
                "justify_days, or extract(epoch from ...))"
            )
        interval: timedelta = super().load(data)
        return interval


def _reader_adapters(conn: psycopg.Connection[Any]) -> None:
    for name in ("json", "jsonb"):
        conn.adapters.register_loader(name, _JsonText)
    conn.adapters.register_loader("interval", _FixedInterval)


class PostgresReader:
    """Streams a query's rows through a server-side cursor, one Arrow batch at a time."""

    def __init__(self, url: str) -> None:
        self.url = url

    def read(
        self, statement: str, params: Sequence[Any], batch_rows: int
    ) -> Iterator[pa.RecordBatch]:
        conn = _connect(self.url, {"TimeZone": "UTC", "application_name": current_client()})
        _reader_adapters(conn)
        try:
            with (
                cancellable(lambda: conn.cancel_safe(timeout=10)),  # the run's timeout, cancel
                conn.cursor(name="pipeledger_extract") as cursor,
            ):
                cursor.itersize = batch_rows
                cursor.execute(statement, params or None)
                yield from _batches(cursor, batch_rows)
        except psycopg.Error as exc:
            raise _translate(exc, "source query failed") from exc
        finally:
            conn.close()


def _batches(cursor: psycopg.ServerCursor[Any], batch_rows: int) -> Iterator[pa.RecordBatch]:
    import pyarrow as pa

    description = cursor.description or []
    schema = pa.schema([pa.field(c.name, _arrow_type(c)) for c in description])
    while rows := cursor.fetchmany(batch_rows):
        columns = list(zip(*rows, strict=True))
        arrays = [
            pa.array(_plain(items, field.type), type=field.type)
            for items, field in zip(columns, schema, strict=True)
        ]
        yield pa.RecordBatch.from_arrays(arrays, schema=schema)


def _plain(items: Sequence[Any], arrow: pa.DataType) -> Sequence[Any]:
    import pyarrow as pa

    if pa.types.is_string(arrow):
        return [None if v is None else str(v) for v in items]
    return items
