"""pipeledger: idempotent, incremental batch loads whose watermark commits with the rows.

The public API is what ``__all__`` lists (the verbs are those of :mod:`pipeledger.api`,
which also has the ledger's questions); everything else may change without notice. Names
are imported on first use, so that ``import pipeledger`` (and every ``pipeledger``
command, which imports it first) does not load pyarrow, numpy or the loader before a
command needs them. No module of the package is named after one of these names, so
importing a module never hides a function.
"""

import importlib
import typing

from pipeledger.common.version import __version__

if typing.TYPE_CHECKING:
    from pipeledger.api import (
        backfill,
        cancel,
        check,
        lateness,
        reconcile,
        replay,
        run,
        run_due,
        run_model,
        run_one,
        watchdog,
        watermarks,
    )
    from pipeledger.config.model import Config, PipelineConfig, load_config, parse_config
    from pipeledger.errors import (
        BackfillRangeError,
        ConcurrentRunError,
        ConfigError,
        ConflictError,
        DuplicateRun,
        NothingToRetry,
        PipeledgerError,
        RunAbandonedError,
        RunCancelled,
        SchemaError,
        SourceError,
        Terminal,
        Transient,
        WarehouseError,
    )
    from pipeledger.ledger.ledger import Ledger, PipelineInfo
    from pipeledger.ledger.run import Run
    from pipeledger.ledger.vocabulary import RunStatus, TriggerType
    from pipeledger.publish.counts import MergeCounts
    from pipeledger.runs.load.result import LoadResult
    from pipeledger.state.tables import WatermarkRow

_HOMES = {
    "pipeledger.api": (
        "backfill",
        "cancel",
        "check",
        "lateness",
        "reconcile",
        "replay",
        "run",
        "run_due",
        "run_model",
        "run_one",
        "watchdog",
        "watermarks",
    ),
    "pipeledger.config.model": ("Config", "PipelineConfig", "load_config", "parse_config"),
    "pipeledger.errors": (
        "BackfillRangeError",
        "ConcurrentRunError",
        "ConfigError",
        "ConflictError",
        "DuplicateRun",
        "NothingToRetry",
        "PipeledgerError",
        "RunAbandonedError",
        "RunCancelled",
        "SchemaError",
        "SourceError",
        "Terminal",
        "Transient",
        "WarehouseError",
    ),
    "pipeledger.ledger.ledger": ("Ledger", "PipelineInfo"),
    "pipeledger.ledger.run": ("Run",),
    "pipeledger.ledger.vocabulary": ("RunStatus", "TriggerType"),
    "pipeledger.publish.counts": ("MergeCounts",),
    "pipeledger.runs.load.result": ("LoadResult",),
    "pipeledger.state.tables": ("WatermarkRow",),
}
_HOME = {name: module for module, names in _HOMES.items() for name in names}

__all__ = [
    "BackfillRangeError",
    "ConcurrentRunError",
    "Config",
    "ConfigError",
    "ConflictError",
    "DuplicateRun",
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
    "cancel",
    "check",
    "lateness",
    "load_config",
    "parse_config",
    "reconcile",
    "replay",
    "run",
    "run_due",
    "run_model",
    "run_one",
    "watchdog",
    "watermarks",
]


def __getattr__(name: str) -> typing.Any:
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module 'pipeledger' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # imported once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOME})
