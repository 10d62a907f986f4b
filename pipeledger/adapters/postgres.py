"""PostgreSQL through psycopg 3: COPY into a temporary staging table, set-based merge."""

from __future__ import annotations

import contextlib
import io
import itertools
import zlib
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import errors as pgerrors

from pipeledger.errors import (
    ConcurrentRunError,
    InsufficientPrivilege,
    TerminalWarehouseError,
    TransientWarehouseError,
    WarehouseError,
)
from pipeledger.redact import redact
from pipeledger.schema import TableName, arrow_type
from pipeledger.warehouse.dialect import POSTGRES
from pipeledger.warehouse.stage import copy_stage

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


def _translate(exc: psycopg.Error, doing: str) -> WarehouseError:
    message = f"PostgreSQL {doing}: {redact(str(exc).strip())}"
    if isinstance(exc, pgerrors.InsufficientPrivilege):
        return InsufficientPrivilege(message, sqlstate=exc.sqlstate)
    kind = TransientWarehouseError if isinstance(exc, _TRANSIENT) else TerminalWarehouseError
    return kind(message, sqlstate=exc.sqlstate)


def _connect(url: str) -> psycopg.Connection[Any]:
    try:
        conn = psycopg.connect(url, autocommit=False)
    except psycopg.Error as exc:
        raise _translate(exc, f"connect to {redact(url)}") from exc
    conn.execute("SET TIME ZONE 'UTC'")
    # staging lives in temporary tables: let them stay in memory instead of spilling early
    conn.execute(f"SET temp_buffers = '{TEMP_BUFFERS}'")
    return conn


class PostgresSession:
    dialect = POSTGRES

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn
        self.rollback_only = False

    def execute(self, statement: str, params: Sequence[Any] = ()) -> int:
        try:
            cursor = self._conn.execute(statement, params or None)
        except psycopg.Error as exc:
            raise _translate(exc, "statement failed") from exc
        return int(cursor.rowcount)

    def query(self, statement: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        try:
            cursor = self._conn.execute(statement, params or None)
            return list(cursor.fetchall())
        except psycopg.Error as exc:
            raise _translate(exc, "query failed") from exc

    def fetch_int64(self, statement: str, params: Sequence[Any] = ()) -> np.ndarray[Any, Any]:
        # one bytea of big-endian int8s: a row per COPY message would cost ~0.6 us each
        import numpy as np

        packed = f"SELECT string_agg(int8send(v), ''::bytea) FROM ({statement}) AS fetched(v)"
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
        from pipeledger.adapters import pg_binary

        stream = iter(batches)
        head = list(itertools.islice(stream, 1))  # popped when written: not held to the end
        if not head:
            return
        schema = head[0].schema  # every batch has the target's columns
        binary = pg_binary.supports(schema)
        encode = pg_binary.encode if binary else _csv_bytes
        try:
            with (
                self._conn.cursor() as cursor,
                cursor.copy(copy_stage(schema.names, binary)) as copy,
            ):
                if binary:
                    copy.write(pg_binary.HEADER)
                for batch in itertools.chain(_handed_on(head), stream):
                    copy.write(encode(batch))
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
        key = zlib.crc32(f"pipeledger:{pipeline}".encode())
        (acquired,) = self.query("SELECT pg_try_advisory_xact_lock(%s)", [key])[0]
        if not acquired:
            raise ConcurrentRunError(
                f"pipeline {pipeline}: another run holds its lock; this run did nothing"
            )

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


def _handed_on(items: list[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The items of a list, each dropped from it as it is handed on."""
    while items:
        yield items.pop(0)


def _csv_bytes(batch: pa.RecordBatch) -> memoryview:
    """CSV for COPY. Aware timestamps go out as UTC wall time (the session is in UTC):
    pyarrow formats zoned timestamps an order of magnitude slower than naive ones."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    columns = [
        column.cast(pa.timestamp(column.type.unit))
        if pa.types.is_timestamp(column.type) and column.type.tz is not None
        else column
        for column in batch.columns
    ]
    buffer = io.BytesIO()
    options = pacsv.WriteOptions(include_header=False, batch_size=65_536)
    pacsv.write_csv(pa.RecordBatch.from_arrays(columns, names=batch.schema.names), buffer, options)
    return buffer.getbuffer()


class PostgresWarehouse:
    dialect = POSTGRES

    def __init__(self, url: str) -> None:
        self.url = url

    @contextmanager
    def session(self, write: bool = True) -> Iterator[PostgresSession]:
        conn = _connect(self.url)
        try:
            session = PostgresSession(conn)
            yield session
            if session.rollback_only:
                conn.rollback()
            else:
                conn.commit()
        except BaseException:
            # an interrupt can land mid-COPY, when the connection cannot take a ROLLBACK;
            # closing it makes the server roll back, and the first error is the one to keep
            with contextlib.suppress(psycopg.Error):
                conn.rollback()
            raise
        finally:
            conn.close()


# PostgreSQL type oids and the canonical SQL type (pipeledger.schema) their values load as
_OIDS = {
    16: "boolean",
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
        import pyarrow as pa

        return pa.decimal128(column.precision, column.scale or 0)
    return arrow_type(_OIDS.get(column.type_code, "text"))


class PostgresReader:
    """Streams a query's rows through a server-side cursor, one Arrow batch at a time."""

    def __init__(self, url: str) -> None:
        self.url = url

    def read(
        self, statement: str, params: Sequence[Any], batch_rows: int
    ) -> Iterator[pa.RecordBatch]:
        conn = _connect(self.url)
        try:
            with conn.cursor(name="pipeledger_extract") as cursor:
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
            pa.array(_plain(values, field.type), type=field.type)
            for values, field in zip(columns, schema, strict=True)
        ]
        yield pa.RecordBatch.from_arrays(arrays, schema=schema)


def _plain(values: Sequence[Any], arrow: pa.DataType) -> Sequence[Any]:
    import pyarrow as pa

    if pa.types.is_string(arrow):
        return [None if v is None else str(v) for v in values]
    return values
