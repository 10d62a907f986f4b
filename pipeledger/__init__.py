"""pipeledger: idempotent, incremental batch loads whose watermark commits with the rows.

The public API is what ``__all__`` lists; everything else may change without notice.
"""

from pipeledger.__about__ import __version__
from pipeledger.config import Config, PipelineConfig, load_config, parse_config
from pipeledger.errors import (
    BackfillRangeError,
    ConcurrentRunError,
    ConfigError,
    ConflictError,
    NothingToRetry,
    PipeledgerError,
    RunAbandonedError,
    SchemaError,
    SourceError,
    Terminal,
    Transient,
    WarehouseError,
)
from pipeledger.ledger.api import Ledger, PipelineInfo, Run, RunCancelled
from pipeledger.ledger.model import RunStatus, TriggerType
from pipeledger.load.result import LoadResult, MergeCounts
from pipeledger.runner import WatermarkRow, backfill, lateness, reconcile, run, run_one, state

__all__ = [
    "BackfillRangeError",
    "ConcurrentRunError",
    "Config",
    "ConfigError",
    "ConflictError",
    "Ledger",
    "LoadResult",
    "MergeCounts",
    "NothingToRetry",
    "PipeledgerError",
    "PipelineConfig",
    "PipelineInfo",
    "Run",
    "RunAbandonedError",
    "RunCancelled",
    "RunStatus",
    "SchemaError",
    "SourceError",
    "Terminal",
    "Transient",
    "TriggerType",
    "WarehouseError",
    "WatermarkRow",
    "__version__",
    "backfill",
    "lateness",
    "load_config",
    "parse_config",
    "reconcile",
    "run",
    "run_one",
    "state",
]
