"""A load as a run: the load's body (:mod:`pipeledger.runs.load.loader`) and what the ledger
keeps of it (:mod:`pipeledger.runs.record`).

An ``incremental = "files"`` pipeline first compares its files with those it has taken
(:mod:`pipeledger.runs.load.files`); when none is new, the run ends there, recorded as any
run, without importing the loader (and pyarrow): an unchanged folder costs a listing.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from pipeledger.ledger.run import Run
from pipeledger.runs.load.files import FilesPlan, by_files, nothing_new, plan_files, source_files
from pipeledger.runs.load.request import (
    LoadRequest,
    ProgressCallback,
    consequence,
    watermarks_now,
)
from pipeledger.runs.load.result import LoadResult
from pipeledger.runs.record import record_load, record_load_failure
from pipeledger.runs.site import Site
from pipeledger.runs.steps import StepClock
from pipeledger.warehouse.session import Session

if TYPE_CHECKING:
    from pipeledger.runs.load.loader import Load


class LoadJob:
    """One load of one pipeline, recorded."""

    def __init__(
        self,
        request: LoadRequest,
        site: Site,
        run_id: str,
        on_progress: ProgressCallback | None = None,
    ) -> None:
        self.request = request
        self.site = site
        self.run_id = run_id
        self.on_progress = on_progress
        self.pipeline = site.config.pipeline(request.pipeline)
        self.clock = StepClock()
        self.began = time.monotonic()
        self.started_at = datetime.now(UTC)
        self.load: Load | None = None  # made once there is something to read

    @property
    def target(self) -> str:
        return self.pipeline.target

    def execute(self, session: Session, run: Run) -> LoadResult:
        plan = None
        if by_files(self.pipeline, self.request):
            session.lock_pipeline(self.request.pipeline)
            plan = self._plan(session)
            if not plan.read:
                result = nothing_new(
                    session,
                    self.request,
                    self.pipeline,
                    plan,
                    run_id=self.run_id,
                    clock=self.clock,
                    began=self.began,
                    started_at=self.started_at,
                )
                record_load(run, session, result, None)
                return result
        load = self.load = self._load(plan)
        result = load.execute(session)
        record_load(run, session, result, load.shape)
        return result

    def _plan(self, session: Session) -> FilesPlan:
        with self.clock.measure("extract"):
            config = self.site.config
            paths = source_files(self.pipeline, config)
            target = self.pipeline.target_name
            return plan_files(session, self.request.pipeline, paths, config.base_dir, target)

    def _load(self, plan: FilesPlan | None) -> Load:
        from pipeledger.runs.load.loader import Load

        return Load(
            request=self.request,
            config=self.site.config,
            warehouse=self.site.warehouse,
            run_id=self.run_id,
            on_progress=self.on_progress,
            clock=self.clock,
            began=self.began,
            started_at=self.started_at,
            files=plan,
        )

    def failed(self, run: Run, error: BaseException) -> None:
        if self.load is not None:
            record_load_failure(run, self.load.failure(str(error)), error)
            return
        steps = tuple(self.clock.results({}, 0))
        failure = LoadResult(
            pipeline=self.request.pipeline,
            run_id=self.run_id,
            mode=self.request.mode,
            status="failed",
            target=self.pipeline.target,
            started_at=self.started_at,
            duration_s=time.monotonic() - self.began,
            error=str(error),
            steps=steps,
        )
        record_load_failure(run, failure, error)

    def consequence(self) -> str:
        if self.load is not None:
            return self.load.consequence()
        marks = watermarks_now(self.site.warehouse, self.request.pipeline)
        return consequence(self.request.pipeline, self.run_id, self.pipeline, marks)
