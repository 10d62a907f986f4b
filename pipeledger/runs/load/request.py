"""What one load is asked to do, and what a failed one left behind in words: both known
before the loader (and with it pyarrow) is imported, so that a run that finds nothing new
to read (``incremental = "files"``: :mod:`pipeledger.runs.load.files`) never imports it."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from pipeledger.config.model import PipelineConfig
from pipeledger.runs.load.result import Mode
from pipeledger.state.tables import STATE_TABLE, read_watermarks
from pipeledger.state.watermark import CursorValue, Window, to_text
from pipeledger.warehouse.session import Warehouse

ProgressCallback = Callable[[str, int], None]


@dataclass(frozen=True, kw_only=True)
class LoadRequest:
    """What one load is asked to do."""

    pipeline: str
    mode: Mode = "incremental"
    window: Window | None = None  # a backfill's range; incremental runs plan their own
    full_compare: bool = False  # backfill: stage every row, even those the target holds
    recent_counts: Sequence[int] | None = None  # rows read by recent runs (a learned band)


def consequence(
    name: str, run_id: str, pipeline: PipelineConfig, marks: Mapping[str, CursorValue] | None
) -> str:
    """What a failure left behind, in words: nothing written, the watermark where it is
    (``marks``: None when it could not be read), or for a pipeline without a cursor, the
    target as the last run left it."""
    if pipeline.cursor is None:
        where = "the target stays as the last committed run left it (the pipeline has no cursor)"
    elif marks is None:
        where = "the watermark stays where it was (it could not be read)"
    elif not marks:
        where = "the watermark stays unset (no run has committed yet)"
    elif pipeline.partition_by is None:
        where = f"the watermark stays at {to_text(marks[''])}"
    else:
        where = "the watermark stays at " + ", ".join(
            f"{k}={to_text(v)}" for k, v in sorted(marks.items())
        )
    if pipeline.incremental == "files":
        where += "; no file was taken (the next run reads the same files)"
    return f"pipeline {name} (run {run_id}): nothing was written; {where}"


def watermarks_now(warehouse: Warehouse, name: str) -> dict[str, CursorValue] | None:
    """The watermarks as committed, read apart from the failed transaction (which may not
    have got as far as reading them, e.g. when another run held the lock)."""
    try:
        with warehouse.session(write=False) as session:
            if session.table_columns(STATE_TABLE) is None:
                return {}
            return read_watermarks(session, name)
    except Exception:  # the failure may be this very database being unreachable
        return None


def texts(marks: Mapping[str, CursorValue]) -> dict[str, str]:
    return {part: to_text(value) for part, value in sorted(marks.items())}
