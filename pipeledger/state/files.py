"""The files a pipeline has taken (``incremental = "files"``), written in the transaction of
the run that read them, as the watermark is: per file its path, size, modification time,
content hash, the rows read from it, and the run that took it.

A file is *unchanged* when its path, size and modification time are those taken (it is not
opened); a file whose size or time changed but whose content hash is the one taken was
only copied or touched (its new time is recorded, nothing is read); any other file is new
or changed and is read whole, whatever its cursors (:mod:`pipeledger.runs.load.files`).
Only the latest version of a path is kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pipeledger.common.columns import TableName
from pipeledger.common.files import FileSeen
from pipeledger.warehouse.dialect import Dialect
from pipeledger.warehouse.migrations import SCHEMA
from pipeledger.warehouse.session import Session

FILES_TAKEN_TABLE = TableName(SCHEMA, "files_taken")
_CHUNK = 100  # files per INSERT (7 parameters each: well under SQLite's limit)


def files_taken_table(d: Dialect) -> str:
    """State migration 8: the files each ``incremental = "files"`` pipeline has taken."""
    big, at = d.int64_type, d.instant_type
    return (
        f"CREATE TABLE IF NOT EXISTS {d.table(FILES_TAKEN_TABLE)} (pipeline text NOT NULL, "
        f"path text NOT NULL, size {big} NOT NULL, mtime_ns {big} NOT NULL, "
        f"content_hash text NOT NULL, row_count {big}, run_id text NOT NULL, "
        f"taken_at {at} NOT NULL, PRIMARY KEY (pipeline, path))"
    )


def read_taken(d: Dialect) -> str:
    return (
        "SELECT path, size, mtime_ns, content_hash, row_count, run_id, taken_at "
        f"FROM {d.table(FILES_TAKEN_TABLE)} WHERE pipeline = {d.param}"
    )


def take_files(d: Dialect, count: int) -> str:
    """Record ``count`` files (pipeline, path, size, mtime_ns, content hash, rows, run id,
    when: 8 parameters each); a path taken before gets its new version. ``row_count`` NULL:
    a file only touched keeps the rows counted when it was read."""
    values = ", ".join([f"({d.marks(8)})"] * count)
    return (
        f"INSERT INTO {d.table(FILES_TAKEN_TABLE)} AS f (pipeline, path, size, mtime_ns, "
        f"content_hash, row_count, run_id, taken_at) VALUES {values} "
        "ON CONFLICT (pipeline, path) DO UPDATE SET size = excluded.size, "
        "mtime_ns = excluded.mtime_ns, content_hash = excluded.content_hash, "
        "row_count = coalesce(excluded.row_count, f.row_count), run_id = excluded.run_id, "
        "taken_at = excluded.taken_at"
    )


def summarize_taken(d: Dialect) -> str:
    """Per pipeline: files taken, their bytes, and when the last was taken."""
    return (
        "SELECT pipeline, count(*), sum(size), max(taken_at) "
        f"FROM {d.table(FILES_TAKEN_TABLE)} GROUP BY pipeline ORDER BY pipeline"
    )


@dataclass(frozen=True, kw_only=True)
class TakenFile:
    """One file as its pipeline took it."""

    seen: FileSeen
    content_hash: str
    rows: int | None = None  # None: only touched since (its rows counted before)


@dataclass(frozen=True, kw_only=True)
class FilesState:
    """What a pipeline has taken, as ``pipeledger state`` shows it."""

    files: int
    bytes: int
    last_taken_at: str

    def to_json(self) -> dict[str, Any]:
        return {"files": self.files, "bytes": self.bytes, "last_taken_at": self.last_taken_at}


def taken(session: Session, pipeline: str) -> dict[str, TakenFile]:
    """The pipeline's files as taken, by path."""
    rows = session.query(read_taken(session.dialect), [pipeline])
    return {
        str(path): TakenFile(
            seen=FileSeen(str(path), int(size), int(mtime)),
            content_hash=str(digest),
            rows=None if count is None else int(count),
        )
        for path, size, mtime, digest, count, _, _ in rows
    }


def take(
    session: Session, pipeline: str, files: Sequence[TakenFile], run_id: str, at: datetime
) -> None:
    """Record ``files`` as taken by this run (inside its transaction)."""
    d = session.dialect
    for start in range(0, len(files), _CHUNK):
        chunk = files[start : start + _CHUNK]
        params: list[Any] = []
        for f in chunk:
            s = f.seen
            params += [pipeline, s.path, s.size, s.mtime_ns, f.content_hash, f.rows, run_id, at]
        session.execute(take_files(d, len(chunk)), params)


def files_states(session: Session) -> dict[str, FilesState]:
    """Per pipeline, what it has taken; read without taking any lock."""
    if session.table_columns(FILES_TAKEN_TABLE) is None:
        return {}
    return {
        str(pipeline): FilesState(
            files=int(count),
            bytes=int(size or 0),
            last_taken_at=last.isoformat() if isinstance(last, datetime) else str(last),
        )
        for pipeline, count, size, last in session.query(summarize_taken(session.dialect))
    }
