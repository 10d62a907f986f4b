"""A reconciliation as a run: the comparison's body (:mod:`pipeledger.runs.reconcile.compare`)
and what the ledger keeps of it. A reconcile is a run of its pipeline with
``trigger_type = "reconcile"`` (it loads nothing: the ledger's frontier, freshness and
volume questions pass it by); its findings are a row of ``reconciliations``, one
``RECONCILIATION_MISMATCH`` audit event per window that differs and, for a SQL source,
the late rows it found (``extra.lateness`` and ``LATE_ROW_DROPPED``)."""

from __future__ import annotations

from datetime import UTC, datetime

from pipeledger.ledger.run import Run
from pipeledger.ledger.vocabulary import TriggerType
from pipeledger.runs.reconcile.compare import Reconcile, ReconcileRequest
from pipeledger.runs.reconcile.result import Reconciliation
from pipeledger.runs.record import record_lateness
from pipeledger.runs.scaffold import RunSpec, Trigger, run_job
from pipeledger.runs.site import Site
from pipeledger.warehouse.session import Session


class ReconcileJob:
    """Compare pipeline ``request.pipeline``'s source with its target, recorded."""

    def __init__(self, request: ReconcileRequest, site: Site, run_id: str) -> None:
        self.body = Reconcile(request, site.config, run_id)
        self.warehouse = site.warehouse

    @property
    def target(self) -> None:
        """It publishes into no target (the commit log must not wake models up)."""
        return None

    def execute(self, session: Session, run: Run) -> Reconciliation:
        with run.task("reconcile") as task:
            result = self.body.count_missed(session, self._compare(session))
            task.rows_in, task.rows_out = result.rows_read, result.target_rows
        record_reconciliation(run, result)
        return result

    def _compare(self, session: Session) -> Reconciliation:
        """Where the warehouse has snapshot transactions, the comparison runs in one of its
        own, so that every read sees one moment: the run's transaction cannot be that
        snapshot, since its final record updates the run's row, which the heartbeat renews
        meanwhile (a serialization failure). Elsewhere the run's transaction already holds
        the only write lock."""
        if session.dialect.snapshot_statement is None:
            return self.body.execute(session)
        with self.warehouse.session() as reading:
            reading.mark_rollback()  # it made temporary tables, nothing else
            return self.body.execute(reading)

    def failed(self, run: Run, error: BaseException) -> None:
        """The reconcile task carries the error; the source rows read so far are counted."""
        run.set_counts(rows_read=self.body.rows_read)

    def consequence(self) -> str:
        return (
            f"pipeline {self.body.name} (reconcile run {self.body.run_id}): nothing was "
            "changed; the target and the watermark are as they were"
        )


def record_reconciliation(run: Run, result: Reconciliation) -> None:
    """Everything the ledger keeps of a reconciliation (module docstring)."""
    run.set_counts(rows_read=result.rows_read)
    totals = result.totals()
    run.record.extra.update(
        mode="reconcile",
        status=result.status,
        by=result.grain.name,
        windows_differing=len(result.windows),
        **totals,
    )
    run.reconciliations.append(
        {
            "run_id": run.run_id,
            "pipeline": result.pipeline,
            "target_table": result.target,
            "status": result.status,
            "range_start": result.start,
            "range_end": result.end,
            "window_by": result.grain.name,
            "windows_compared": result.windows_compared,
            "windows_differing": len(result.windows),
            "source_rows": result.source_rows,
            "target_rows": result.target_rows,
            **totals,
            "windows": [w.to_json() for w in result.windows],
            "created_at": datetime.now(UTC),
        }
    )
    for window in result.windows:
        run.audit(
            "RECONCILIATION_MISMATCH",
            target_table=result.target,
            record_count=window.differing_rows,
            metadata=window.to_json(),
        )
    record_lateness(run, result.lateness, result.target)


def reconciled(site: Site, request: ReconcileRequest) -> Reconciliation:
    """One comparison of ``request.pipeline``'s source and target, as a run of its own."""
    spec = RunSpec(pipeline=request.pipeline, trigger=Trigger(trigger_type=TriggerType.RECONCILE))
    return run_job(site, spec, lambda run_id: ReconcileJob(request, site, run_id))
