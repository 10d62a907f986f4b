"""A ``Warehouse`` opens a ``Session``, which is one transaction.

Adapters (:mod:`pipeledger.warehouse.adapters`) are the only modules that import a database driver.
They implement these protocols: execute SQL text built elsewhere by pure functions, stage
Arrow batches the fastest way their driver allows, and translate driver errors into
:class:`~pipeledger.errors.WarehouseError` (transient or terminal). They also report each
statement to whoever observes them (:func:`observe_statements`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import timedelta
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

from pipeledger.common.columns import TableName
from pipeledger.warehouse.dialect import Dialect

if TYPE_CHECKING:  # for annotations only: reading state or the ledger needs neither
    import numpy as np
    import pyarrow as pa


class Session(Protocol):
    """One open transaction. Leaving the ``with`` block commits; an exception rolls back."""

    dialect: Dialect
    # the ledger tenant the session was opened for (``open_warehouse``): its ledger reads
    # name it, so that they probe the tenant-led indexes whatever the role's row security
    tenant: str

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run a statement; return the driver's row count."""
        ...

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run a query and return every row (for small results only)."""
        ...

    def fetch_int64(self, sql: str, params: Sequence[Any] = ()) -> np.ndarray[Any, Any]:
        """The single bigint column of a query's rows as a numpy array, unordered and
        without a Python object per row (for up to millions of values)."""
        ...

    def stage(self, batches: Iterable[pa.RecordBatch]) -> None:
        """Stream conformed batches into the staging table (one COPY where the driver can)."""
        ...

    def savepoint(self) -> AbstractContextManager[None]:
        """A nested transaction: an exception inside rolls back to it and propagates."""
        ...

    def lock_pipeline(self, pipeline: str) -> None:
        """Take the pipeline's run lock for this transaction, or raise ConcurrentRunError."""
        ...

    def table_columns(self, table: TableName) -> list[tuple[str, str]] | None:
        """(name, declared type) of an existing table's columns, or None if it is absent."""
        ...

    def mark_rollback(self) -> None:
        """Roll back instead of committing when the block ends (dry runs)."""
        ...

    def interrupt(self) -> None:
        """Stop the statement running now, from another thread: it fails, and the
        transaction rolls back."""
        ...


class Warehouse(Protocol):
    dialect: Dialect
    url: str

    def session(
        self, write: bool = True, *, wait: timedelta | None = None
    ) -> AbstractContextManager[Session]:
        """Open a connection and a transaction on it (``write=False``: a reader). ``wait``:
        the longest any one statement of it may take, lock waits included (the ledger's
        ``write_timeout``); the warehouse's own bound otherwise. Its name on the server is
        the run's the opening thread works for (:mod:`pipeledger.warehouse.clients`)."""
        ...

    def close(self) -> None:
        """Close the connections it keeps between sessions (the end of an invocation); it
        stays usable: a later session opens a new connection."""
        ...


class SourceReader(Protocol):
    """A database read side, used by SQL sources."""

    def read(
        self, sql: str, params: Sequence[Any], batch_rows: int
    ) -> Iterator[pa.RecordBatch]: ...


# -- observing statements ----------------------------------------------------------------

StatementKind = Literal["execute", "query", "fetch", "stage"]
StatementObserver = Callable[[StatementKind, str, float], None]
_Item = TypeVar("_Item")

# read once per statement by the adapters; empty, a statement costs one truth test more
_observers: tuple[StatementObserver, ...] = ()


@contextmanager
def observe_statements(observer: StatementObserver) -> Iterator[None]:
    """Call ``observer(kind, sql, seconds)`` after every statement that a session of this
    process runs while the block lasts (on every thread: the ledger's heartbeat too):

    - ``execute``, ``query``: :meth:`Session.execute` and :meth:`Session.query`, including
      the queries a session runs for its own methods (``lock_pipeline``, ``table_columns``);
    - ``fetch``: :meth:`Session.fetch_int64`;
    - ``stage``: :meth:`Session.stage`, ``sql`` its ``COPY`` (PostgreSQL: one call for the
      whole stream) or its ``INSERT`` (SQLite: one call per batch). Its seconds are the
      adapter's own: encoding and sending the rows and the database storing them, not the
      time the caller's iterable takes to produce the batches.

    ``sql`` is the text sent to the database; ``seconds`` the wall time of the round trip,
    a failed statement's included. Connecting, savepoints and COMMIT are not reported.
    Observers run on the thread that ran the statement, in the order they were added,
    and must not raise. Benchmarks and profilers use it to see where a run's time goes
    without wrapping the adapters' methods."""
    global _observers
    _observers = (*_observers, observer)
    try:
        yield
    finally:
        index = _observers.index(observer)
        _observers = _observers[:index] + _observers[index + 1 :]


class StatementTimer:
    """What an adapter holds around one statement (:func:`observed`): nothing is timed
    while nobody observes."""

    def __enter__(self) -> StatementTimer:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        return None

    def excluding(self, items: Iterable[_Item]) -> Iterable[_Item]:
        """``items``, the time spent producing each not counted as the statement's."""
        return items


class _Timed(StatementTimer):
    def __init__(
        self, kind: StatementKind, sql: str, observers: tuple[StatementObserver, ...]
    ) -> None:
        self.kind, self.sql, self.observers = kind, sql, observers
        self.began, self.outside = 0.0, 0.0

    def __enter__(self) -> StatementTimer:
        self.began = time.perf_counter()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        seconds = time.perf_counter() - self.began - self.outside
        for observer in self.observers:
            observer(self.kind, self.sql, seconds)

    def excluding(self, items: Iterable[_Item]) -> Iterator[_Item]:
        iterator = iter(items)
        while True:
            began = time.perf_counter()
            try:
                item = next(iterator)
            except StopIteration:
                return
            finally:
                self.outside += time.perf_counter() - began
            yield item


_UNOBSERVED = StatementTimer()


def observed(kind: StatementKind, sql: str) -> StatementTimer:
    """For adapters: ``with observed("execute", sql):`` around one statement reports it
    to the observers of :func:`observe_statements`, if any."""
    observers = _observers
    return _Timed(kind, sql, observers) if observers else _UNOBSERVED
