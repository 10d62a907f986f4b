"""The embedded default: one SQLite file in WAL mode.

WAL lets another process read state and history while a load is writing. A load holds
SQLite's single write lock for its whole transaction (``BEGIN IMMEDIATE``), so two loads
into one file run one after the other. SQLite has no schemas, so ``schema.table`` is the
single table name ``"schema.table"``. Timestamps are stored as fixed-width ISO 8601 text
(UTC for time-zone aware columns) and exact decimals as text, so that comparisons and
ordering in SQL agree with the values' own order.
"""

from __future__ import annotations

import hashlib
import itertools
import re
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any
from uuid import UUID

from pipeledger.errors import (
    ConcurrentRunError,
    ConfigError,
    SourceError,
    TerminalWarehouseError,
    TransientWarehouseError,
    WarehouseError,
)
from pipeledger.schema import TableName
from pipeledger.warehouse.dialect import SQLITE, quote
from pipeledger.warehouse.stage import insert_stage

# numpy and pyarrow are imported by the functions that handle Arrow data, so that reading
# state or the ledger (the CLI's quick commands) does not load them
if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

BUSY_TIMEOUT_S = 5.0


def database_path(url: str) -> Path:
    """``sqlite:///relative.db`` or ``sqlite:////absolute.db`` to a path."""
    if not url.startswith("sqlite:///"):
        raise ConfigError(f"SQLite URL {url!r} must start with sqlite:///")
    return Path(url.removeprefix("sqlite:///"))


def _value(value: Any) -> Any:
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            value = value.astimezone(UTC)
            return value.replace(tzinfo=None).isoformat(timespec="microseconds") + "+00:00"
        return value.isoformat(timespec="microseconds")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal | UUID):
        return str(value)
    return value


def _column(array: pa.Array) -> list[Any]:
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = array.type
    if pa.types.is_timestamp(kind):
        text = pc.strftime(array.cast(pa.timestamp("us", tz=kind.tz)), format="%Y-%m-%dT%H:%M:%S")
        if kind.tz is not None:
            text = pc.binary_join_element_wise(text, pa.scalar("+00:00"), "")
        return list(text.to_pylist())
    if pa.types.is_date(kind) or pa.types.is_decimal(kind):
        return list(array.cast(pa.string()).to_pylist())
    return list(array.to_pylist())


def _md5(text: str | None) -> str | None:
    return None if text is None else hashlib.md5(text.encode()).hexdigest()


def _regexp(pattern: str, value: str | None) -> bool | None:
    return None if value is None else re.search(pattern, value) is not None


def _translate(exc: sqlite3.Error, doing: str) -> WarehouseError:
    text = str(exc)
    transient = isinstance(exc, sqlite3.OperationalError) and ("locked" in text or "busy" in text)
    unique = isinstance(exc, sqlite3.IntegrityError) and "UNIQUE" in text
    sqlstate = WarehouseError.UNIQUE_VIOLATION if unique else None
    kind = TransientWarehouseError if transient else TerminalWarehouseError
    return kind(f"SQLite {doing}: {exc}", sqlstate=sqlstate)


class SqliteSession:
    dialect = SQLITE

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self.rollback_only = False
        self._savepoints = itertools.count()

    def execute(self, statement: str, params: Sequence[Any] = ()) -> int:
        try:
            return self._conn.execute(statement, [_value(p) for p in params]).rowcount
        except sqlite3.Error as exc:
            raise _translate(exc, "statement failed") from exc

    def query(self, statement: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        try:
            return list(self._conn.execute(statement, [_value(p) for p in params]).fetchall())
        except sqlite3.Error as exc:
            raise _translate(exc, "query failed") from exc

    def fetch_int64(self, statement: str, params: Sequence[Any] = ()) -> np.ndarray[Any, Any]:
        import numpy as np

        try:
            rows = self._conn.execute(statement, [_value(p) for p in params])
            return np.fromiter((value for (value,) in rows), dtype=np.int64)
        except sqlite3.Error as exc:
            raise _translate(exc, "query failed") from exc

    def stage(self, batches: Iterable[pa.RecordBatch]) -> None:
        for batch in batches:
            columns = [_column(batch.column(i)) for i in range(batch.num_columns)]
            try:
                self._conn.executemany(
                    insert_stage(self.dialect, batch.schema.names), zip(*columns, strict=True)
                )
            except sqlite3.Error as exc:
                raise _translate(exc, "staging failed") from exc

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
        return [(str(n), _declared(str(t))) for n, t in rows] or None

    def mark_rollback(self) -> None:
        self.rollback_only = True


def _declared(text: str) -> str:
    lowered = text.lower()
    if lowered.startswith("decimal_text"):
        return "numeric" + lowered.removeprefix("decimal_text")
    return lowered


class SqliteWarehouse:
    dialect = SQLITE

    def __init__(self, url: str) -> None:
        self.url = url
        self.path = database_path(url)

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        # the SQL functions the quality gate uses, which PostgreSQL has built in
        conn.create_function("md5", 1, _md5, deterministic=True)
        conn.create_function("regexp", 2, _regexp, deterministic=True)
        return conn

    @contextmanager
    def session(self, write: bool = True) -> Iterator[SqliteSession]:
        conn = self._connect()
        try:
            self._begin(conn, write)
            session = SqliteSession(conn)
            yield session
            conn.execute("ROLLBACK" if session.rollback_only else "COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        finally:
            conn.close()

    def _begin(self, conn: sqlite3.Connection, write: bool) -> None:
        try:
            conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc):
                raise ConcurrentRunError(
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
            cursor = conn.execute(statement, [_value(p) for p in params])
            names = [d[0] for d in cursor.description]
            while rows := cursor.fetchmany(batch_rows):
                yield _batch(names, rows, self.path)
        except sqlite3.Error as exc:
            raise _translate(exc, "source query failed") from exc
        finally:
            conn.close()
