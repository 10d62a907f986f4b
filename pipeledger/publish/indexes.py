"""The indexes a load or model declares on its target (``indexes = [["l_partkey"], ...]``),
made in the run's transaction once the target exists: on the run that creates the target,
and on the first run after an index is added to the config (or after ``--full-refresh`` or
a ``replace`` model made the target anew). A run whose indexes all exist only asks the
catalog. A column the target lacks fails the run before it commits, naming the column.

Each index is named after its table and columns (``pipeledger_ix_`` and a hash), so the
same declaration always finds the same index; pipeledger never drops one (an index taken
out of the config stays until a person drops it).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from pipeledger.common.columns import TableName
from pipeledger.errors import SchemaError
from pipeledger.warehouse.dialect import Dialect, quote
from pipeledger.warehouse.session import Session


def index_name(table: TableName, columns: Sequence[str]) -> str:
    digest = hashlib.sha256(f"{table}|{','.join(columns)}".encode()).hexdigest()[:16]
    return f"pipeledger_ix_{digest}"


def create_index(d: Dialect, table: TableName, columns: Sequence[str]) -> str:
    names = ", ".join(quote(c) for c in columns)
    name = quote(index_name(table, columns))
    return f"CREATE INDEX IF NOT EXISTS {name} ON {d.table(table)} ({names})"


def index_exists(d: Dialect, table: TableName, columns: Sequence[str]) -> tuple[str, list[str]]:
    """A query returning one row when the index exists, and its parameters."""
    return d.index_lookup(table.schema, index_name(table, columns))


def ensure_indexes(
    session: Session, pipeline: str, target: TableName, indexes: Sequence[Sequence[str]]
) -> int:
    """Make the declared indexes the target lacks; how many it made."""
    if not indexes:
        return 0
    existing = session.table_columns(target)
    if existing is None:  # nothing created it yet (a run that wrote no rows)
        return 0
    names = {name for name, _ in existing}
    made = 0
    for columns in indexes:
        unknown = [c for c in columns if c not in names]
        if unknown:
            raise SchemaError(
                f"{pipeline}: indexes names {unknown[0]!r}, which is not a column of "
                f"{target}; nothing was written (fix indexes in the config)"
            )
        query, params = index_exists(session.dialect, target, columns)
        if not session.query(query, params):
            session.execute(create_index(session.dialect, target, columns))
            made += 1
    return made
