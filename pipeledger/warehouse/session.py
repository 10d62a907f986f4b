"""A ``Warehouse`` opens a ``Session``, which is one transaction.

Adapters (:mod:`pipeledger.warehouse.adapters`) are the only modules that import a database driver.
They implement these protocols: execute SQL text built elsewhere by pure functions, stage
Arrow batches the fastest way their driver allows, and translate driver errors into
:class:`~pipeledger.errors.WarehouseError` (transient or terminal).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Protocol

from pipeledger.common.columns import TableName
from pipeledger.warehouse.dialect import Dialect

if TYPE_CHECKING:  # for annotations only: reading state or the ledger needs neither
    import numpy as np
    import pyarrow as pa


class Session(Protocol):
    """One open transaction. Leaving the ``with`` block commits; an exception rolls back."""

    dialect: Dialect

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


class SourceReader(Protocol):
    """A database read side, used by SQL sources."""

    def read(
        self, sql: str, params: Sequence[Any], batch_rows: int
    ) -> Iterator[pa.RecordBatch]: ...
