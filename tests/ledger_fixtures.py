"""Synthetic ledgers: runs, tasks, events, snapshots and dependencies written through the
ledger's own store (``apply`` of idempotent ops), at fixed times around a fixed ``NOW``."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from pipeledger.ledger import store as st
from pipeledger.ledger.tables import LEDGER
from pipeledger.ledger.vocabulary import (
    AuditEvent,
    DatasetSnapshot,
    RunRecord,
    RunStatus,
    TaskRecord,
    TaskStatus,
    TriggerType,
)
from pipeledger.warehouse.adapters import open_warehouse
from pipeledger.warehouse.migrations import migrate
from pipeledger.warehouse.session import Session

NOW = datetime(2024, 6, 15, 12, 0, tzinfo=UTC)
TODAY = datetime(2024, 6, 15, tzinfo=UTC)
_IDS = uuid.UUID("6f1c7f0e-3c55-4b7e-9a55-0c6f1b0d2a11")


class LedgerBuilder:
    """Writes ledger records into one open session; run ids are deterministic uuids."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self._count = 0

    def _id(self, kind: str) -> str:
        self._count += 1
        return str(uuid.uuid5(_IDS, f"{kind}/{self._count}"))

    def run(
        self,
        pipeline: str,
        started_at: datetime,
        *,
        status: str = "success",
        written: int | None = 100,
        trigger: str = "scheduled",
        duration: timedelta = timedelta(minutes=1),
        run_id: str | None = None,
        **more: Any,
    ) -> RunRecord:
        """One run; ``written`` rows are split into inserted (the rest) and updated (a tenth)."""
        final = status != "running"
        updated = None if written is None else written // 10
        run_id = run_id or self._id("run")
        record = RunRecord(
            run_id=run_id,
            logical_run_id=more.pop("logical_run_id", run_id),
            attempt=more.pop("attempt", 1),
            pipeline=pipeline,
            trigger_type=TriggerType(trigger),
            status=RunStatus(status),
            started_at=started_at,
            ended_at=started_at + duration if final else None,
            duration_ms=int(duration.total_seconds() * 1000) if final else None,
            rows_read=written,
            rows_inserted=None if written is None else written - (updated or 0),
            rows_updated=updated,
            rows_unchanged=0,
            rows_rejected=0,
            **more,
        )
        st.apply(self.session, st.run_op(record))
        return record

    def task(
        self,
        run: RunRecord,
        name: str,
        seq: int,
        *,
        duration_ms: int = 1000,
        rows_out: int | None = 10,
        status: str = "success",
    ) -> TaskRecord:
        start = run.started_at + timedelta(seconds=seq)
        record = TaskRecord(
            task_run_id=self._id("task"),
            run_id=run.run_id,
            name=name,
            seq=seq,
            started_at=start,
            ended_at=start + timedelta(milliseconds=duration_ms),
            duration_ms=duration_ms,
            status=TaskStatus(status),
            rows_in=rows_out,
            rows_out=rows_out,
        )
        st.apply(self.session, st.task_op(record))
        return record

    def event(
        self,
        run: RunRecord | None,
        event_type: str,
        created_at: datetime,
        *,
        target_table: str | None = None,
        **values: Any,
    ) -> AuditEvent:
        event = AuditEvent(
            event_id=self._id("event"),
            run_id=run.run_id if run else None,
            pipeline=run.pipeline if run else None,
            event_type=event_type,
            created_at=created_at,
            target_table=target_table,
            **values,
        )
        st.apply(self.session, st.event_op(event))
        return event

    def snapshot(
        self,
        run: RunRecord,
        target_table: str,
        row_count: int,
        max_cursor: str | None = "2024-06-01T00:00:00",
    ) -> DatasetSnapshot:
        snapshot = DatasetSnapshot(
            run_id=run.run_id,
            target_table=target_table,
            row_count=row_count,
            max_cursor=max_cursor,
            schema_fingerprint="abc123",
            columns=[{"name": "order_id", "type": "bigint"}],
            created_at=run.ended_at or run.started_at,
        )
        st.apply(self.session, st.snapshot_op(snapshot))
        return snapshot

    def pipeline(
        self,
        name: str,
        freshness_sla: timedelta | None = None,
        max_duration: timedelta | None = None,
        registered: datetime = NOW - timedelta(days=60),
    ) -> None:
        sla = int(freshness_sla.total_seconds()) if freshness_sla else None
        slow = int(max_duration.total_seconds()) if max_duration else None
        data = {
            "name": name,
            "version": "v1",
            "freshness_sla_s": sla,
            "max_duration_s": slow,
            "created_at": registered,
            "updated_at": registered,
        }
        st.apply(self.session, st.Op("pipeline", data))

    def depends(self, downstream: str, *upstreams: str) -> None:
        data = {"downstream": downstream, "upstreams": list(upstreams), "at": NOW}
        st.apply(self.session, st.Op("dependencies", data))

    def daily(
        self,
        pipeline: str,
        written: Sequence[int | None],
        *,
        hour: int = 2,
        before: datetime = TODAY,
        **more: Any,
    ) -> list[RunRecord]:
        """One run a day at ``hour`` UTC, the last of ``written`` on the day before ``before``."""
        first = before - timedelta(days=len(written))
        return [
            self.run(pipeline, first + timedelta(days=i, hours=hour), written=w, **more)
            for i, w in enumerate(written)
        ]


@contextmanager
def ledger(url: str) -> Iterator[LedgerBuilder]:
    """A migrated ledger at ``url``; what the block writes commits when it ends."""
    with open_warehouse(url).session() as session:
        migrate(session, LEDGER)
        yield LedgerBuilder(session)


@contextmanager
def reading(url: str) -> Iterator[Session]:
    with open_warehouse(url).session(write=False) as session:
        yield session


# what today's writers add for the tenant keys: a conflict target led by the tenant, and a
# probe of the declared tenant (PostgreSQL's setting, SQLite's function)
_LED = re.compile(r"ON CONFLICT \(tenant, ")
_DECLARED = re.compile(
    r"(\w+\.)?tenant = (\(SELECT current_setting\('pipeledger\.tenant', true\)\)"
    r"|pipeledger_tenant\(\)) AND "
)


class _Earlier:
    """A session that writes as the releases before migration 16 wrote: today's writer
    SQL without the tenant in its conflict targets and probes (those keys did not exist
    yet). For building a ledger's history on an earlier schema."""

    def __init__(self, session: Session) -> None:
        self._session = session

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)

    def execute(self, statement: str, params: Sequence[Any] = ()) -> int:
        return self._session.execute(earlier(statement), params)

    def query(self, statement: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self._session.query(earlier(statement), params)


def earlier(statement: str) -> str:
    return _DECLARED.sub("", _LED.sub("ON CONFLICT (", statement))


def as_earlier(session: Session) -> Session:
    return cast(Session, _Earlier(session))
