"""pipeledger's state in the warehouse, always written inside a run's own transaction: the
watermarks, and the commit log (one row per run that committed, so the warehouse itself
can say whether a run committed: the ledger's watchdog settles runs from it, and models
find the upstream runs they have not consumed yet); for loads without a cursor's window,
each full snapshot's fingerprint (:mod:`pipeledger.state.snapshots`) and the files taken
(:mod:`pipeledger.state.files`). Its tables are the ``state`` component's migrations."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pipeledger.common.columns import TableName
from pipeledger.state.files import FilesState, files_states, files_taken_table
from pipeledger.state.guard_sql import (
    fingerprint_guard_table,
    forget_hash_function,
    renewed_guard_table,
)
from pipeledger.state.snapshots import SnapshotState, snapshots, snapshots_table
from pipeledger.state.watermark import CursorValue, from_text
from pipeledger.warehouse.dialect import Dialect, quote
from pipeledger.warehouse.migrations import SCHEMA, Component, Migration, create_schema
from pipeledger.warehouse.session import Session

STATE_TABLE = TableName(SCHEMA, "pipeline_state")
COMMITS_TABLE = TableName(SCHEMA, "run_commits")
INPUTS_TABLE = TableName(SCHEMA, "model_inputs")
FILES_TABLE = TableName(SCHEMA, "files_read")
LATE_TABLE = TableName(SCHEMA, "late_rows")


def _state_table(d: Dialect) -> str:
    return (
        f"CREATE TABLE IF NOT EXISTS {d.table(STATE_TABLE)} ("
        "pipeline text NOT NULL, partition_key text NOT NULL, cursor_column text NOT NULL, "
        "cursor_type text NOT NULL, watermark text NOT NULL, run_id text NOT NULL, "
        "updated_at timestamptz NOT NULL, PRIMARY KEY (pipeline, partition_key))"
    )


def files_read_table(d: Dialect) -> str:
    """Which files (by path, size and modification time) each pipeline's incremental runs
    have read, and which run read each first."""
    big = d.int64_type
    return (
        f"CREATE TABLE IF NOT EXISTS {d.table(FILES_TABLE)} (pipeline text NOT NULL, "
        f"path text NOT NULL, size {big} NOT NULL, mtime_ns {big} NOT NULL, "
        f"first_run_id text NOT NULL, read_at {d.instant_type} NOT NULL, "
        "PRIMARY KEY (pipeline, path, size, mtime_ns))"
    )


def late_rows_table(d: Dialect) -> str:
    """Rows found later than the buffer, by the fingerprint of the row's version, so that a
    row is counted once whoever finds it (a run, a reconcile, a backfill)."""
    big = d.int64_type
    return (
        f"CREATE TABLE IF NOT EXISTS {d.table(LATE_TABLE)} (pipeline text NOT NULL, "
        f"row_hash {big} NOT NULL, lateness_s {big} NOT NULL, run_id text NOT NULL, "
        f"found_at {d.instant_type} NOT NULL, PRIMARY KEY (pipeline, row_hash))"
    )


def state_migrations(d: Dialect) -> list[Migration]:
    """The warehouse's own tables, in order; committed migrations never change (and the
    trigger function is never replaced again either: that voids every guard)."""
    forget = [forget_hash_function()] if d.before_triggers_set_row else []
    return [
        (1, "watermark state per pipeline and partition", [*create_schema(d), _state_table(d)]),
        (2, "trigger function: an outside UPDATE clears the row's fingerprint", forget),
        (
            3,
            "fingerprint guards: which trigger guards a target, and since when",
            [fingerprint_guard_table(d), *forget],
        ),
        (
            4,
            "fingerprint guards replace a guards table of an earlier shape",
            renewed_guard_table(d),
        ),
        (
            5,
            "commit log: one row per run that committed, in the run's transaction",
            _commits_table(d),
        ),
        (
            6,
            "models: which upstream runs each model consumed",
            [
                *inputs_table(d),
                f"CREATE INDEX IF NOT EXISTS {quote('run_commits_target')} "
                f"ON {d.table(COMMITS_TABLE)} (target, committed_at)",
            ],
        ),
        (
            7,
            "lateness: files each pipeline has read, late rows already counted",
            [files_read_table(d), late_rows_table(d)],
        ),
        (
            8,
            "loads without a cursor: each full snapshot's fingerprint, the files taken",
            [snapshots_table(d), files_taken_table(d)],
        ),
    ]


def _commits_table(d: Dialect) -> list[str]:
    table = d.table(COMMITS_TABLE)
    return [
        f"CREATE TABLE IF NOT EXISTS {table} (run_id text PRIMARY KEY, pipeline text NOT NULL, "
        f"target text, committed_at {d.instant_type} NOT NULL, ledger_ops text)",
        f"CREATE INDEX IF NOT EXISTS {quote('run_commits_pipeline')} ON {table} "
        "(pipeline, committed_at)",
    ]


STATE = Component("state", state_migrations, STATE_TABLE)


def inputs_table(d: Dialect) -> list[str]:
    """State migration: which upstream runs each model consumed, and by which model run."""
    table = d.table(INPUTS_TABLE)
    return [
        f"CREATE TABLE IF NOT EXISTS {table} (model text NOT NULL, run_id text NOT NULL, "
        f"upstream text NOT NULL, consumed_by text NOT NULL, consumed_at {d.instant_type} "
        "NOT NULL, PRIMARY KEY (model, run_id))",
    ]


def pending_runs(d: Dialect, targets: int) -> str:
    """Runs that committed into the upstream targets (``targets`` parameters) and that the
    model (the last parameter) has not consumed: whenever they committed, so a run that
    started before the model's last run but committed after it is still found."""
    return (
        f"SELECT c.run_id, c.target FROM {d.table(COMMITS_TABLE)} AS c "
        f"WHERE c.target IN ({d.marks(targets)}) AND NOT EXISTS (SELECT 1 FROM "
        f"{d.table(INPUTS_TABLE)} AS m WHERE m.model = {d.param} AND m.run_id = c.run_id) "
        "ORDER BY c.committed_at, c.run_id"
    )


def record_input(d: Dialect) -> str:
    """Parameters: model, upstream run id, upstream target, this run's id, when."""
    return (
        f"INSERT INTO {d.table(INPUTS_TABLE)} (model, run_id, upstream, consumed_by, "
        f"consumed_at) VALUES ({d.marks(5)}) ON CONFLICT (model, run_id) DO NOTHING"
    )


def read_state(d: Dialect) -> str:
    return (
        "SELECT partition_key, watermark, cursor_type "
        f"FROM {d.table(STATE_TABLE)} WHERE pipeline = {d.param}"
    )


@dataclass(frozen=True, kw_only=True)
class WatermarkRow:
    """One pipeline's (or partition's) state, as ``pipeledger state`` shows it: its
    watermark, and what a load without a cursor's window keeps beside or instead of one (a
    full snapshot's fingerprint, the files taken). A pipeline without a cursor has one row,
    with no watermark."""

    pipeline: str
    partition: str = ""
    cursor_column: str | None = None
    cursor_type: str | None = None
    watermark: str | None = None
    run_id: str | None = None
    updated_at: str | None = None
    snapshot: SnapshotState | None = None
    files: FilesState | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "pipeline": self.pipeline,
            "partition": self.partition or None,
            "cursor_column": self.cursor_column,
            "cursor_type": self.cursor_type,
            "watermark": self.watermark,
            "run_id": self.run_id,
            "updated_at": self.updated_at,
            "snapshot": self.snapshot.to_json() if self.snapshot else None,
            "files": self.files.to_json() if self.files else None,
        }


def watermarks(session: Session, name: str | None = None) -> list[WatermarkRow]:
    """Every pipeline's state (or ``name``'s), read without taking any lock."""
    if session.table_columns(STATE_TABLE) is None:
        return []
    taken, shots = files_states(session), snapshots(session)
    rows = [_watermark_row(r, taken, shots) for r in session.query(read_all_state(session.dialect))]
    marked = {row.pipeline for row in rows}
    rows += [
        WatermarkRow(pipeline=p, snapshot=shots.get(p), files=taken.get(p))
        for p in sorted((taken.keys() | shots.keys()) - marked)
    ]
    rows.sort(key=lambda row: (row.pipeline, row.partition))
    return [row for row in rows if name is None or row.pipeline == name]


def _watermark_row(
    row: Sequence[Any], taken: dict[str, FilesState], shots: dict[str, SnapshotState]
) -> WatermarkRow:
    pipeline, partition, column, kind, mark, run_id, at = (
        v.isoformat() if isinstance(v, datetime) else str(v) for v in row
    )
    return WatermarkRow(
        pipeline=pipeline,
        partition=partition,
        cursor_column=column,
        cursor_type=kind,
        watermark=mark,
        run_id=run_id,
        updated_at=at,
        snapshot=shots.get(pipeline),
        files=taken.get(pipeline),
    )


def read_all_state(d: Dialect) -> str:
    return (
        "SELECT pipeline, partition_key, cursor_column, cursor_type, watermark, run_id, "
        f"updated_at FROM {d.table(STATE_TABLE)} ORDER BY pipeline, partition_key"
    )


def watermark_moved_at(d: Dialect) -> str:
    """When the pipeline's watermark (any partition's) last moved."""
    return f"SELECT max(updated_at) FROM {d.table(STATE_TABLE)} WHERE pipeline = {d.param}"


def write_state(d: Dialect) -> str:
    return (
        f"INSERT INTO {d.table(STATE_TABLE)} "
        "(pipeline, partition_key, cursor_column, cursor_type, watermark, run_id, updated_at) "
        f"VALUES ({d.marks(7)}) "
        "ON CONFLICT (pipeline, partition_key) DO UPDATE SET "
        "cursor_column = excluded.cursor_column, cursor_type = excluded.cursor_type, "
        "watermark = excluded.watermark, run_id = excluded.run_id, updated_at = excluded.updated_at"
    )


def insert_commit(d: Dialect) -> str:
    return (
        f"INSERT INTO {d.table(COMMITS_TABLE)} (run_id, pipeline, target, committed_at, "
        f"ledger_ops) VALUES ({d.marks(5)})"
    )


def select_commits(d: Dialect, count: int) -> str:
    return (
        f"SELECT run_id, ledger_ops FROM {d.table(COMMITS_TABLE)} "
        f"WHERE run_id IN ({d.marks(count)})"
    )


def log_commit(
    session: Session, run_id: str, pipeline: str, target: str | None, ledger_ops: str | None
) -> None:
    """This run commits (it is inside the transaction that does). ``ledger_ops``: what the
    run writes to a ledger that lives elsewhere, as JSON lines, so that it can be written
    there later from here if the ledger cannot hear it now."""
    session.execute(
        insert_commit(session.dialect), [run_id, pipeline, target, datetime.now(UTC), ledger_ops]
    )


def read_commits(session: Session, run_ids: Sequence[str]) -> dict[str, str | None]:
    """Of ``run_ids``, those that committed, with the ledger ops they left."""
    found = {}
    if session.table_columns(COMMITS_TABLE) is None:
        return {}
    for start in range(0, len(run_ids), 500):
        chunk = list(run_ids[start : start + 500])
        rows = session.query(select_commits(session.dialect, len(chunk)), chunk)
        found.update({str(run_id): ops for run_id, ops in rows})
    return found


def read_watermarks(session: Session, pipeline: str) -> dict[str, CursorValue]:
    """The pipeline's watermark per partition (``""`` when it is not partitioned)."""
    rows = session.query(read_state(session.dialect), [pipeline])
    return {str(part): from_text(str(mark)) for part, mark, _ in rows}
