"""A model as a run: the model's body (:mod:`pipeledger.runs.model.build`) and what the ledger
keeps of it: counts, tasks, the upstream runs it consumed, audit events and a snapshot."""

from __future__ import annotations

from pipeledger.ledger.run import Run
from pipeledger.runs.model.build import Model, ModelRequest, ModelResult
from pipeledger.runs.record import Written, record_events, record_quality, take_snapshot, task_from
from pipeledger.runs.site import Site
from pipeledger.transform.shape import Shape
from pipeledger.warehouse.session import Session
from pipeledger.warehouse.stage import ensure_schema


class ModelJob:
    """One run of one model, recorded."""

    def __init__(self, request: ModelRequest, site: Site, run_id: str) -> None:
        warehouse = site.warehouse
        self.model = Model(
            request,
            site.config,
            run_id,
            prepare_schema=lambda target: ensure_schema(warehouse, target),
        )

    @property
    def target(self) -> str:
        return self.model.model.target

    def execute(self, session: Session, run: Run) -> ModelResult:
        result = self.model.execute(session)
        self._record(run, session, result)
        return result

    def failed(self, run: Run, error: BaseException) -> None:
        for step in self.model.clock.results({}, 0):
            run.add_task(task_from(run.run_id, step))
        report = getattr(error, "report", None)
        if report is not None:
            record_quality(run, report, self.target)

    def consequence(self) -> str:
        return self.model.consequence()

    def _record(self, run: Run, session: Session, result: ModelResult) -> None:
        c = result.counts
        run.set_counts(
            rows_read=result.rows_computed,
            rows_inserted=c.inserted,
            rows_updated=c.updated,
            rows_unchanged=c.unchanged + c.superseded,
            rows_deleted=c.deleted,
            rows_rejected=result.quality.quarantined_rows if result.quality else 0,
        )
        run.record.extra.update(
            mode=result.mode,
            kind="model",
            materialized=result.materialized,
            upstream_runs=list(result.consumed),
            recomputed="all" if result.touched is None else result.touched,
        )
        for step in result.steps:
            run.add_task(task_from(run.run_id, step))
        if result.quality is not None:
            record_quality(run, result.quality, result.target)
        self._events(run, result)
        copied = result.materialized != "view"  # a view holds no rows to snapshot
        if run.ledger.recording and copied and (result.rows_computed or result.target_created):
            self._snapshot(run, session, result)

    def _events(self, run: Run, result: ModelResult) -> None:
        target = result.target
        record_events(run, target, result.counts)
        if result.consumed:
            run.audit(
                "UPSTREAM_CONSUMED",
                target_table=target,
                record_count=len(result.consumed),
                metadata={"runs": list(result.consumed)},
            )

    def _snapshot(self, run: Run, session: Session, result: ModelResult) -> None:
        m = self.model.model
        columns = self.model.columns
        shape = Shape(columns, tuple(m.key) or (columns[0].name,), m.cursor or "")
        previous = run.ledger.previous_snapshot(result.target, session)
        c = result.counts
        written = Written(
            inserted=c.inserted,
            staged_rows=result.rows_computed,
            target_created=result.target_created,
            deleted=c.deleted,
            growth=c.growth,
        )
        run.snapshots.append(
            take_snapshot(session, run.run_id, result.target, shape, written, previous)
        )
