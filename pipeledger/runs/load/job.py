"""A load as a run: the load's body (:mod:`pipeledger.runs.load.loader`) and what the ledger keeps
of it (:mod:`pipeledger.runs.record`)."""

from __future__ import annotations

from pipeledger.ledger.run import Run
from pipeledger.runs.load.loader import Load, LoadRequest, ProgressCallback
from pipeledger.runs.load.result import LoadResult
from pipeledger.runs.record import record_load, record_load_failure
from pipeledger.runs.site import Site
from pipeledger.warehouse.session import Session


class LoadJob:
    """One load of one pipeline, recorded."""

    def __init__(
        self,
        request: LoadRequest,
        site: Site,
        run_id: str,
        on_progress: ProgressCallback | None = None,
    ) -> None:
        self.load = Load(
            request=request,
            config=site.config,
            warehouse=site.warehouse,
            run_id=run_id,
            on_progress=on_progress,
        )

    @property
    def target(self) -> str:
        return self.load.pipeline.target

    def execute(self, session: Session, run: Run) -> LoadResult:
        result = self.load.execute(session)
        record_load(run, session, result, self.load.shape)
        return result

    def failed(self, run: Run, error: BaseException) -> None:
        record_load_failure(run, self.load.failure(str(error)), error)

    def consequence(self) -> str:
        return self.load.consequence()
