"""A load's ``max_rows`` and ``max_bytes``, counted as its batches stream to the stage.

The counts are the rows read into the window and the bytes of their Arrow buffers
(``RecordBatch.nbytes``): what the run holds and stages, known batch by batch, so that a run
halts at the first batch past its limit, long before publish, inside the run's transaction
(which rolls back: nothing written, the watermark where it was)."""

from __future__ import annotations

from dataclasses import dataclass

from pipeledger.config.model import Config
from pipeledger.errors import LimitExceeded


@dataclass(frozen=True, kw_only=True)
class RunLimits:
    """The limits of one pipeline's runs: its own keys, else the ``[limits]`` defaults."""

    max_rows: int | None = None
    max_bytes: int | None = None

    @classmethod
    def of(cls, config: Config, name: str) -> RunLimits:
        node = config.pipeline(name)
        return cls(
            max_rows=node.max_rows or config.limits.max_rows,
            max_bytes=node.max_bytes or config.limits.max_bytes,
        )


def check_limits(limits: RunLimits, name: str, run_id: str, rows: int, nbytes: int) -> None:
    """Raise LimitExceeded when ``rows`` or ``nbytes`` (read so far) pass a limit; the run's
    scaffold adds what the failure left behind (nothing written, the watermark)."""
    for key, observed, maximum in (
        ("max_rows", rows, limits.max_rows),
        ("max_bytes", nbytes, limits.max_bytes),
    ):
        if maximum is not None and observed > maximum:
            raise LimitExceeded(
                f"pipeline {name} (run {run_id}): {key} exceeded while staging: {observed} "
                f"{key.removeprefix('max_')} read, the limit is {maximum}; the run halted "
                "before publish",
                limit=key,
                observed=observed,
                maximum=maximum,
            )
