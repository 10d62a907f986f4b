"""A quarantine replay as a run: the replay's body (:mod:`pipeledger.runs.replay`) and what the
ledger keeps of it, like a load's record: counts, the (unmoved) watermark, audit events and
a snapshot of the target."""

from __future__ import annotations

import time
from dataclasses import replace

from pipeledger.config.model import Config
from pipeledger.ledger.ledger import Run
from pipeledger.ledger.vocabulary import RunStatus
from pipeledger.runs.record import Written, take_snapshot, watermark_text
from pipeledger.runs.replay import ReplayResult, consequence, replay_in
from pipeledger.state.tables import read_watermarks
from pipeledger.state.watermark import to_text
from pipeledger.transform.conform import Shape
from pipeledger.warehouse.session import Session


class ReplayJob:
    """Replay pipeline ``name``'s unresolved quarantined rows (of one run, if
    ``run_filter``), recorded with ``trigger_type = "replay"``."""

    def __init__(self, config: Config, name: str, run_id: str, run_filter: str | None) -> None:
        self.config = config
        self.name = name
        self.run_id = run_id
        self.run_filter = run_filter
        self.began = time.monotonic()

    @property
    def target(self) -> str:
        return self.config.pipeline(self.name).target

    def execute(self, session: Session, run: Run) -> ReplayResult:
        with run.task("replay") as task:
            result, shape = replay_in(session, self.config, self.name, self.run_id,
                                      self.run_filter)  # fmt: skip
            task.rows_in, task.rows_rejected = result.replayed, result.still_failing
            task.rows_out = result.published
        result = replace(result, duration_s=time.monotonic() - self.began)
        self._record(run, session, result, shape)
        return result

    def failed(self, run: Run, error: BaseException) -> None:
        """The replay task carries the error; nothing else was done."""

    def consequence(self) -> str:
        return consequence(self.name, self.run_id)

    def _record(
        self, run: Run, session: Session, result: ReplayResult, shape: Shape | None
    ) -> None:
        c = result.counts
        run.set_counts(
            rows_read=result.replayed, rows_inserted=c.inserted, rows_updated=c.updated,
            rows_unchanged=c.unchanged + c.superseded, rows_rejected=result.still_failing,
        )  # fmt: skip
        partitioned = self.config.pipeline(self.name).partition_by is not None
        marks = {p: to_text(v) for p, v in read_watermarks(session, self.name).items()}
        run.record.watermark_before = run.record.watermark_after = watermark_text(
            marks, partitioned
        )
        run.record.extra.update({"mode": "replay", "run_filter": result.run_filter})
        run.audit("QUARANTINE_REPLAY", target_table=result.target, record_count=result.replayed,
                  metadata=result.to_json())  # fmt: skip
        if c.inserted:
            run.audit("RECORD_INSERTED", target_table=result.target, record_count=c.inserted)
        if c.updated:
            run.audit("RECORD_UPDATED", target_table=result.target, record_count=c.updated)
        if shape is not None and run.ledger.records:
            previous = run.ledger.previous_snapshot(result.target, session)
            written = Written(c.inserted, result.replayed)
            run.snapshots.append(
                take_snapshot(session, run.run_id, result.target, shape, written, previous)
            )
        if result.still_failing:
            run.mark(RunStatus.PARTIAL, f"{result.still_failing} row(s) still quarantined")
