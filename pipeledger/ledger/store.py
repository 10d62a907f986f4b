"""Writing the ledger: idempotent operations, applied in a transaction or spooled.

Every write is an :class:`Op` whose key makes it idempotent (run_id, task_run_id,
event_id, ...), so an op can be applied any number of times with one effect. That is what
lets a separate ledger be written best-effort: when it cannot be reached the ops go to a
local spool file, and the next run replays the spool into the ledger, exactly once.
"""

from __future__ import annotations

import contextlib
import copy
import fcntl
import json
import logging
import os
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, fields
from datetime import UTC, datetime, timedelta
from enum import Enum
from pathlib import Path
from typing import Any, Literal

from pipeledger.errors import DuplicateRun, WarehouseError
from pipeledger.ledger import sql as lsql
from pipeledger.ledger.tables import HOLDS_KEY, LEDGER, RUNS, declared_tenant
from pipeledger.ledger.vocabulary import AuditEvent, DatasetSnapshot, RunRecord, TaskRecord
from pipeledger.warehouse.migrations import migrate
from pipeledger.warehouse.session import Session, Warehouse

log = logging.getLogger("pipeledger.ledger")

OpKind = Literal[
    "pipeline", "dependencies", "run", "task", "event", "snapshot", "quality", "reconciliation"
]
_DATETIME_FIELDS = frozenset({"data_interval_start", "data_interval_end"})


@dataclass(frozen=True)
class Op:
    kind: OpKind
    data: dict[str, Any]

    def to_json(self) -> str:
        return json.dumps({"kind": self.kind, "data": self.data}, default=_jsonable)

    @classmethod
    def from_json(cls, line: str) -> Op:
        raw = json.loads(line)
        return cls(raw["kind"], {k: _revive(k, v) for k, v in raw["data"].items()})


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Enum):
        return value.value
    raise TypeError(f"cannot spool {type(value).__name__}")


def _revive(key: str, value: Any) -> Any:
    if isinstance(value, str) and (key.endswith("_at") or key in _DATETIME_FIELDS):
        return datetime.fromisoformat(value)
    return value


def _plain(record: Any) -> dict[str, Any]:
    """The record's fields by name, an enum as its value. Its dicts and lists (``extra``,
    an event's values, a snapshot's columns) are copied, so the op keeps what the record
    said when the op was made; ``asdict`` deep-copies every field, 4x the time (0.12 ms
    a run record against 0.03 ms; three records a node of a DAG run)."""
    plain = {}
    for spec in fields(record):
        value = getattr(record, spec.name)
        if isinstance(value, Enum):
            value = value.value
        elif isinstance(value, dict | list):
            value = copy.deepcopy(value)
        plain[spec.name] = value
    return plain


def run_op(record: RunRecord) -> Op:
    return Op("run", _plain(record))


def task_op(task: TaskRecord) -> Op:
    return Op("task", _plain(task))


def event_op(event: AuditEvent) -> Op:
    return Op("event", _plain(event))


def snapshot_op(snapshot: DatasetSnapshot) -> Op:
    return Op("snapshot", _plain(snapshot))


def _params(data: dict[str, Any], columns: Sequence[str]) -> list[Any]:
    values = []
    for column in columns:
        value = data.get(column)
        if column in lsql.JSON_COLUMNS and value is not None:
            value = json.dumps(value, default=_jsonable)
        values.append(value)
    return values


def apply(session: Session, op: Op) -> None:
    """Execute one op in ``session``; applying it again changes nothing."""
    d = session.dialect
    if op.kind == "run":
        at = op.data["started_at"]  # the run's foreign key: a pipeline that never registered
        session.execute(lsql.ensure_pipeline(d), [op.data["pipeline"], at, at])
        changed = _upsert_run(session, op.data)
        if not changed and op.data.get("status") != "running":
            _late_completion(session, op.data)
    elif op.kind == "task":
        session.execute(lsql.insert_task(d), _params(op.data, lsql.TASK_COLUMNS))
    elif op.kind == "event":
        session.execute(lsql.insert_event(d), _params(op.data, lsql.EVENT_COLUMNS))
    elif op.kind == "snapshot":
        session.execute(lsql.insert_snapshot(d), _params(op.data, lsql.SNAPSHOT_COLUMNS))
    elif op.kind == "quality":
        session.execute(lsql.insert_quality(d), _params(op.data, lsql.QUALITY_COLUMNS))
    elif op.kind == "reconciliation":
        statement = lsql.insert_reconciliation(d)
        session.execute(statement, _params(op.data, lsql.RECONCILIATION_COLUMNS))
    elif op.kind == "pipeline":
        session.execute(lsql.upsert_pipeline(d), _params(op.data, lsql.PIPELINE_COLUMNS))
    else:
        session.execute(lsql.delete_dependencies(d), [op.data["downstream"]])
        for upstream in op.data["upstreams"]:
            session.execute(
                lsql.insert_dependency(d), [upstream, op.data["downstream"], op.data["at"]]
            )


def _upsert_run(session: Session, data: dict[str, Any]) -> int:
    """Write a run's row. One that claims an idempotency key another run of the pipeline
    holds raises DuplicateRun (the unique index decides a race: the loser sees the winner)."""
    statement = lsql.upsert_run(session.dialect)
    params = _params(data, lsql.RUN_COLUMNS)
    if data.get("idempotency_key") is None or data.get("status") not in HOLDS_KEY:
        return session.execute(statement, params)
    _refuse_duplicate(session, data)
    try:
        with session.savepoint():
            return session.execute(statement, params)
    except WarehouseError as exc:
        if exc.sqlstate == WarehouseError.UNIQUE_VIOLATION:
            _refuse_duplicate(session, data)
        raise


def _refuse_duplicate(session: Session, data: dict[str, Any]) -> None:
    pipeline, key = data["pipeline"], data["idempotency_key"]
    for run_id, status in session.query(lsql.key_holder(session.dialect), [pipeline, key]):
        if str(run_id) != data["run_id"]:
            raise DuplicateRun(
                f"pipeline {pipeline}: idempotency key {key!r} is held by run {run_id} "
                f"({status}); this trigger did nothing",
                duplicate_of=str(run_id),
                status=str(status),
            )


def apply_replayed(session: Session, op: Op) -> None:
    """Apply a spooled op. A run that claimed a key the ledger could not check when it
    started, and that another run took meanwhile, is kept without the key (the key goes
    to ``extra.duplicate_key``): both ran, and the ledger says so instead of refusing."""
    try:
        with session.savepoint():
            apply(session, op)
    except DuplicateRun as exc:
        log.warning("ledger spool: %s; the run is recorded without the key", exc)
        key = op.data["idempotency_key"]
        extra = {
            **(op.data.get("extra") or {}),
            "duplicate_key": key,
            "duplicate_of": exc.duplicate_of,
        }
        apply(session, Op("run", {**op.data, "idempotency_key": None, "extra": extra}))


def _late_completion(session: Session, data: dict[str, Any]) -> None:
    """A final record arrived (from a separate ledger's spool) for a run that is no longer
    running: the watchdog declared it abandoned while the ledger could not be reached. A
    final state never changes, so the truth is recorded beside it, as an audit event."""
    d = session.dialect
    rows = session.query(
        f"SELECT status FROM {d.table(RUNS)} WHERE tenant = {declared_tenant(d)} "
        f"AND run_id = {d.param}",
        [data["run_id"]],
    )
    if not rows or rows[0][0] == data["status"]:
        return
    event = AuditEvent(
        event_id=str(uuid.uuid5(uuid.NAMESPACE_URL, f"late-completion:{data['run_id']}")),
        run_id=data["run_id"],
        pipeline=data["pipeline"],
        event_type="LATE_COMPLETION",
        created_at=datetime.now(UTC),
        old_values={"status": rows[0][0]},
        new_values={"status": data["status"]},
        metadata={
            k: data.get(k)
            for k in (
                "ended_at",
                "rows_read",
                "rows_inserted",
                "rows_updated",
                "watermark_after",
                "error_code",
            )
        },
    )
    session.execute(lsql.insert_event(d), _params(_plain(event), lsql.EVENT_COLUMNS))


def finish(session: Session, record: RunRecord) -> bool:
    """Move a running run to its final state in ``session``. False: it was not running
    any more (the watchdog declared it abandoned), and nothing was changed."""
    data = run_op(record).data
    columns = [c for c in lsql.RUN_COLUMNS if c != "run_id"]
    changed = session.execute(
        lsql.finish_run(session.dialect), [*_params(data, columns), data["run_id"]]
    )
    return changed == 1


class Spool:
    """An append-only JSON-lines file of ops that could not reach the ledger. Appending and
    replaying take an exclusive lock on a sibling ``.lock`` file, so concurrent runs neither
    replay the same records twice nor lose one appended during a replay.

    One append is written whole or not at all: if the write fails (disk full, a file size
    limit), the file is cut back to where it was, and nothing is left in a buffer. A line
    that is not a whole record anyway (a crash mid-write, a hand edit) is moved to a
    ``.rejected`` file beside the spool with a warning naming the file and line, and the
    other records replay."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @contextmanager
    def locked(self) -> Iterator[None]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.with_suffix(".lock").open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    @contextmanager
    def replaying(self) -> Iterator[list[Op]]:
        """The spooled ops, under the spool's lock while the block replays them (no lock,
        and no lock file made, when there is no spool)."""
        if not self.path.exists():
            yield []
            return
        with self.locked():
            yield self.pending()

    def append(self, ops: Iterable[Op]) -> None:
        with self.locked():
            self._append(ops)

    def _append(self, ops: Iterable[Op]) -> None:
        data = "".join(op.to_json() + "\n" for op in ops).encode()
        handle = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o666)
        try:
            size = os.fstat(handle).st_size
            if size and os.pread(handle, 1, size - 1) != b"\n":
                data = b"\n" + data  # after a torn line: ours starts on a line of its own
            try:
                _write_all(handle, data)
                os.fsync(handle)
            except OSError:
                with contextlib.suppress(OSError):  # else pending() sets the tail aside
                    os.ftruncate(handle, size)  # nothing half-written stays behind
                    if not size:
                        self.path.unlink()  # under the lock: no one else appends now
                raise
        finally:
            os.close(handle)

    def pending(self) -> list[Op]:
        """Every whole record, in order; a line that is not one is set aside (see above)."""
        if not self.path.exists():
            return []
        ops, kept, rejected = [], [], []
        lines = self.path.read_text(encoding="utf-8", errors="replace").splitlines()
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                ops.append(Op.from_json(line))
                kept.append(line)
            except (ValueError, KeyError, TypeError) as exc:
                rejected.append((number, line, exc))
        if rejected:
            self._set_aside(rejected)
            self._rewrite(kept)
        return ops

    def _set_aside(self, rejected: Sequence[tuple[int, str, Exception]]) -> None:
        aside = self.path.with_suffix(".rejected")
        with aside.open("a", encoding="utf-8") as handle:
            for number, line, exc in rejected:
                log.warning(
                    "ledger spool %s line %d is not a whole record (%s); set aside in %s",
                    self.path,
                    number,
                    exc,
                    aside,
                )
                handle.write(line + "\n")

    def _rewrite(self, lines: list[str]) -> None:
        if not lines:
            self.path.unlink(missing_ok=True)
            return
        scratch = self.path.with_suffix(".tmp")
        scratch.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        scratch.replace(self.path)

    def clear(self, count: int) -> None:
        """Drop the first ``count`` ops (those replayed); keep any appended since."""
        self._rewrite([op.to_json() for op in self.pending()[count:]])


def _write_all(handle: int, data: bytes) -> None:
    """Unbuffered, so that a failed write leaves nothing in a buffer to be flushed later
    (a write past a size limit or a full disk first writes what fits, then fails)."""
    view = memoryview(data)
    while view:
        view = view[os.write(handle, view) :]


class LedgerStore:
    """Where ledger ops go: the ledger database, or the spool when it is unreachable."""

    def __init__(
        self,
        database: Warehouse,
        spool: Spool,
        *,
        separate: bool,
        on_unavailable: Literal["spool", "fail"] = "spool",
        wait: timedelta | None = None,
    ) -> None:
        """``wait``: the longest any statement of the ledger's sessions may take."""
        self.database = database
        self.spool = spool
        self.separate = separate
        self.on_unavailable = on_unavailable
        self.wait = wait
        self._migrated = False

    def session(self, write: bool = True) -> AbstractContextManager[Session]:
        """A transaction on the ledger's database, its statements bounded by ``wait``."""
        return self.database.session(write, wait=self.wait)

    def migrate(self) -> list[int]:
        with self.session() as session:
            applied = migrate(session, LEDGER)
        self._migrated = True
        return applied

    def write(self, ops: Sequence[Op]) -> bool:
        """Apply ops in one transaction of their own. False: they were spooled instead."""
        if not ops:
            return True
        try:
            if not self._migrated:
                self.migrate()
            with self.session() as session:
                for op in ops:
                    apply(session, op)
            return True
        except WarehouseError as exc:
            if not (self.separate and self.on_unavailable == "spool"):
                raise
            self._spool(ops, exc)
            return False

    def _spool(self, ops: Sequence[Op], unavailable: WarehouseError) -> None:
        """Append ``ops`` to the spool; if that fails too, raise the ledger's error saying
        that nothing was spooled either."""
        try:
            self.spool.append(ops)
        except OSError as exc:
            raise type(unavailable)(
                f"{unavailable}; its spool {self.spool.path} could not be written either "
                f"({exc}), so nothing was spooled",
                sqlstate=unavailable.sqlstate,
            ) from exc
        log.warning(
            "ledger unavailable (%s); %d record(s) spooled to %s",
            unavailable,
            len(ops),
            self.spool.path,
        )
