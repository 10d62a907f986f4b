"""A table or query in another database. The window becomes a WHERE clause with bound
parameters, so with an index on the cursor an incremental run reads only new rows."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pyarrow as pa

from pipeledger.common.columns import RESERVED_PREFIX, TableName
from pipeledger.common.secrets import redact
from pipeledger.sources.base import BATCH_ROWS, ReadSpec, SourceBatch
from pipeledger.state.watermark import Window, is_whole_day
from pipeledger.warehouse.adapters import open_reader
from pipeledger.warehouse.dialect import POSTGRES, SQLITE, Dialect, quote


def window_predicate(
    d: Dialect, window: Window, cursor: str | None, partition_by: str | None
) -> tuple[str, list[Any]]:
    """``WHERE`` text and its parameters for ``window`` (``"1=1"`` for a full read, the
    only read of a pipeline without a cursor)."""
    if cursor is None or window.is_full:
        return "1=1", []
    column = quote(cursor)
    conditions: list[str] = []
    params: list[Any] = []
    if window.lower is not None:
        conditions.append(f"{column} >= {d.param}")
        params.append(window.lower)
    if window.upper is not None and is_whole_day(window.upper):
        conditions.append(f"{column} < {d.param}")  # a date-only end covers that whole day
        params.append(window.upper + timedelta(days=1))  # type: ignore[operator]
    elif window.upper is not None:
        conditions.append(f"{column} <= {d.param}")
        params.append(window.upper)
    if window.partition_lower and partition_by is not None:
        text, extra = _partition_predicate(d, window, column, partition_by)
        conditions.append(text)
        params.extend(extra)
    return (" AND ".join(conditions) or "1=1"), params


def _partition_predicate(
    d: Dialect, window: Window, column: str, partition_by: str
) -> tuple[str, list[Any]]:
    part = f"CAST({quote(partition_by)} AS TEXT)"
    known = list(window.partition_lower)
    marks = ", ".join([d.param] * len(known))
    branches = [f"{part} IS NULL OR {part} NOT IN ({marks})"]
    params: list[Any] = list(known)
    for value, lower in window.partition_lower.items():
        branches.append(f"({part} = {d.param} AND {column} >= {d.param})")
        params.extend([value, lower])
    return "(" + " OR ".join(branches) + ")", params


def select_statement(
    d: Dialect, table: str | None, query: str | None, where: str, *, binds: bool = False
) -> str:
    """The read of a table or query. ``binds``: ``where`` binds parameters, so the query's
    own text is kept from the driver's placeholders (``like 'a%'``: :meth:`Dialect.verbatim`)."""
    if table is not None:
        source = d.table(TableName.parse(table))
    else:
        text = d.verbatim(query or "") if binds else query
        source = f"({text}) AS pipeledger_source"
    return f"SELECT * FROM {source} WHERE {where}"


class SqlSource:
    def __init__(self, url: str, table: str | None, query: str | None) -> None:
        self.url = url
        self.table = table
        self.query = query
        what = f"table {table}" if table else "query"
        self.description = f"SQL {what} at {redact(url)}"
        self.dialect = SQLITE if url.startswith("sqlite") else POSTGRES
        self.bytes_read = 0

    def schemas(self, spec: ReadSpec) -> list[pa.Schema]:
        return []  # one query, one schema: its first batch tells

    def batches(self, spec: ReadSpec) -> Iterator[SourceBatch]:
        # SQLite stores timestamps as text in any of several formats, which compare wrongly
        # as text ('2024-01-01 11:00' < '2024-01-01T10:00'): there the rows are read whole
        # and the window is applied after they are cast to the cursor's type
        pushdown = self.dialect.typed_comparisons
        where: str = "1=1"
        params: list[Any] = []
        if pushdown:
            where, params = window_predicate(
                self.dialect, spec.window, spec.cursor, spec.partition_by
            )
        statement = select_statement(
            self.dialect, self.table, self.query, where, binds=bool(params)
        )
        for batch in open_reader(self.url).read(statement, params, BATCH_ROWS):
            self.bytes_read += batch.nbytes
            yield SourceBatch(
                batch=_own_columns(batch), origin=self.description, unfiltered=not pushdown
            )


def _own_columns(batch: pa.RecordBatch) -> pa.RecordBatch:
    """A pipeledger target read as a source: its ``_pipeledger_*`` columns (run id, load
    time, fingerprint) describe the upstream's load, not the data, and are not carried."""
    ours = [i for i, name in enumerate(batch.schema.names) if name.startswith(RESERVED_PREFIX)]
    for index in reversed(ours):
        batch = batch.remove_column(index)
    return batch
