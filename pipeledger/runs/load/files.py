"""``incremental = "files"``: which of a pipeline's files a run reads, each new or changed
file exactly once, whatever its cursors.

::

    list the source's files: path, size, modification time       (no file is opened)
    against the files the pipeline has taken (state.files):
      unchanged    the same path, size and time                    passed by
      touched      another size or time, the same content hash     taken again, not read
      new/changed  anything else                                   read whole
    nothing new: the run ends here, without the loader (or pyarrow)
    else the load reads exactly those files (no cursor window); once its rows are merged
    they are taken, in the run's transaction: rows, watermark and files commit together

A run that fails or is killed takes no file, so the next run reads the same files again,
and the merge, keyed, loads each row once. A file whose size or time changes while the run
reads it (still being written) fails the run as a transient error (retried): what was
read is not the file that would be recorded as taken. A backfill reads every file in its
range and takes none.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from pipeledger.common.columns import TableName
from pipeledger.common.files import FileSeen, content_hash, list_files
from pipeledger.config.model import Config, PipelineConfig, SqlSource
from pipeledger.errors import SourceChanged
from pipeledger.runs.load.request import LoadRequest, texts
from pipeledger.runs.load.result import FilesRead, LoadResult
from pipeledger.runs.steps import StepClock
from pipeledger.state.files import TakenFile, take, taken
from pipeledger.state.lateness import RunLateness, seconds
from pipeledger.state.tables import read_watermarks
from pipeledger.warehouse.session import Session


def by_files(pipeline: PipelineConfig, request: LoadRequest) -> bool:
    """Whether this run reads new files only: an incremental run (or its dry run) of an
    ``incremental = "files"`` pipeline."""
    return pipeline.incremental == "files" and request.mode in ("incremental", "check")


@dataclass(frozen=True)
class FilesPlan:
    """Which files one run reads, which it takes again without reading, and how many it
    passes by (module docstring). Files are named relative to ``base`` (the config's
    folder) when they are under it, so that a project moved elsewhere keeps its files."""

    base: Path
    read: tuple[TakenFile, ...]
    touched: tuple[TakenFile, ...]
    unchanged: int

    @property
    def paths(self) -> list[str]:
        """The files to read, as the source lists them."""
        return [str(self.base / f.seen.path) for f in self.read]

    def summary(self) -> FilesRead:
        names = tuple(f.seen.path for f in self.read)
        return FilesRead(read=names, touched=len(self.touched), unchanged=self.unchanged)

    def check_unchanged(self, name: str) -> None:
        """The files read are still as planned (else: still being written)."""
        for f in self.read:
            path = self.base / f.seen.path
            now = _seen(path, self.base) if path.exists() else None
            if now != f.seen:
                raise SourceChanged(
                    f"pipeline {name}: {path} changed while it was read (is it still being "
                    "written?); nothing was written and no file was taken: a later run reads "
                    "it again"
                )

    def take(
        self, session: Session, name: str, rows: Mapping[str, int], run_id: str, at: datetime
    ) -> None:
        """Record the files read (with their rows) and touched as taken by this run."""
        read = [replace(f, rows=rows.get(str(self.base / f.seen.path), 0)) for f in self.read]
        take(session, name, [*read, *self.touched], run_id, at)


def source_files(pipeline: PipelineConfig, config: Config) -> list[Path]:
    source = pipeline.source
    assert not isinstance(source, SqlSource), "incremental = 'files' takes a file source"
    return list_files(config.resolve(source.path))


def _seen(path: Path, base: Path) -> FileSeen:
    """``path`` as seen, named relative to ``base`` when it is under it."""
    seen = FileSeen.of(path)
    if path.is_relative_to(base):
        return replace(seen, path=str(path.relative_to(base)))
    return seen


def plan_files(
    session: Session, name: str, paths: Sequence[Path], base: Path, target: TableName
) -> FilesPlan:
    """Compare the listed files with those the pipeline has taken (module docstring); only
    a file whose size or time changed, or that is new, is hashed. A target that is not
    there (dropped to start again) holds none of them: every file is read."""
    known = taken(session, name) if session.table_columns(target) is not None else {}
    read: list[TakenFile] = []
    touched: list[TakenFile] = []
    unchanged = 0
    for path in paths:
        seen = _seen(path, base)
        before = known.get(seen.path)
        if before is not None and before.seen == seen:
            unchanged += 1
            continue
        digest = content_hash(path)
        if before is not None and before.content_hash == digest:
            touched.append(TakenFile(seen=seen, content_hash=digest))
        else:
            read.append(TakenFile(seen=seen, content_hash=digest))
    return FilesPlan(base, tuple(read), tuple(touched), unchanged)


def nothing_new(
    session: Session,
    request: LoadRequest,
    pipeline: PipelineConfig,
    plan: FilesPlan,
    *,
    run_id: str,
    clock: StepClock,
    began: float,
    started_at: datetime,
) -> LoadResult:
    """A run whose files are all taken already: it takes the touched ones again and
    reads nothing (the watermark stays where it is)."""
    name = request.pipeline
    with clock.measure("extract"):
        if request.mode == "incremental":
            plan.take(session, name, {}, run_id, datetime.now(UTC))
        marks = texts(read_watermarks(session, name))
    clock.finish("extract")
    measured = request.mode == "incremental" and bool(marks)
    return LoadResult(
        pipeline=name,
        run_id=run_id,
        mode=request.mode,
        status="success",
        target=pipeline.target,
        started_at=started_at,
        duration_s=time.monotonic() - began,
        watermark_before=marks,
        watermark_after=marks,
        partitioned=pipeline.partition_by is not None,
        steps=tuple(clock.results({"extract": (None, 0)}, 0)),
        lateness=RunLateness(buffer_s=seconds(pipeline.lateness), measured=measured),
        files=plan.summary(),
    )
