"""pipeledger: idempotent, incremental batch loads whose watermark commits with the rows.

The public API is what ``__all__`` lists; everything else may change without notice.
Names are imported on first use, so that ``import pipeledger`` (and every ``pipeledger``
command, which imports it first) does not load pyarrow, numpy or the loader before a
command needs them.
"""

import importlib
import typing

from pipeledger.__about__ import __version__

if typing.TYPE_CHECKING:
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
    from pipeledger.runner import WatermarkRow, backfill, run, run_one, state

_HOMES = {
    "pipeledger.config": ("Config", "PipelineConfig", "load_config", "parse_config"),
    "pipeledger.errors": (
        "BackfillRangeError",
        "ConcurrentRunError",
        "ConfigError",
        "ConflictError",
        "NothingToRetry",
        "PipeledgerError",
        "RunAbandonedError",
        "SchemaError",
        "SourceError",
        "Terminal",
        "Transient",
        "WarehouseError",
    ),
    "pipeledger.ledger.api": ("Ledger", "PipelineInfo", "Run", "RunCancelled"),
    "pipeledger.ledger.model": ("RunStatus", "TriggerType"),
    "pipeledger.load.result": ("LoadResult", "MergeCounts"),
    "pipeledger.runner": ("WatermarkRow", "backfill", "run", "run_one", "state"),
}
_HOME = {name: module for module, names in _HOMES.items() for name in names}

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
    "load_config",
    "parse_config",
    "run",
    "run_one",
    "state",
]


# ``pipeledger.run`` names both the public function and the subpackage of the run scaffold.
# Importing a subpackage for the first time sets it as an attribute of its parent, so it
# is imported here, first, and that attribute removed: the name then stays the function's.
importlib.import_module("pipeledger.run")
del globals()["run"]


def __getattr__(name: str) -> typing.Any:
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module 'pipeledger' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # imported once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOME})
