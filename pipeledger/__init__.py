"""pipeledger: idempotent, incremental batch loads whose watermark commits with the rows.

The public API is what ``__all__`` lists; everything else may change without notice.
Names are imported on first use, so that ``import pipeledger`` (and every ``pipeledger``
command, which imports it first) does not load pyarrow, numpy or the loader before a
command needs them.
"""

import importlib
import sys
import types
import typing

from pipeledger.common.version import __version__

if typing.TYPE_CHECKING:
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
        SchemaError,
        SourceError,
        Terminal,
        Transient,
        WarehouseError,
    )
    from pipeledger.ledger.ledger import Ledger, PipelineInfo, Run, RunCancelled
    from pipeledger.ledger.vocabulary import RunStatus, TriggerType
    from pipeledger.publish.counts import MergeCounts
    from pipeledger.runs.load.result import LoadResult
    from pipeledger.runs.runner import (
        WatermarkRow,
        backfill,
        lateness,
        reconcile,
        run,
        run_one,
        state,
    )

_HOMES = {
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
        "SchemaError",
        "SourceError",
        "Terminal",
        "Transient",
        "WarehouseError",
    ),
    "pipeledger.ledger.ledger": ("Ledger", "PipelineInfo", "Run", "RunCancelled"),
    "pipeledger.ledger.vocabulary": ("RunStatus", "TriggerType"),
    "pipeledger.publish.counts": ("MergeCounts",),
    "pipeledger.runs.load.result": ("LoadResult",),
    "pipeledger.runs.runner": (
        "WatermarkRow",
        "backfill",
        "lateness",
        "reconcile",
        "run",
        "run_one",
        "state",
    ),
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
    "lateness",
    "load_config",
    "parse_config",
    "reconcile",
    "run",
    "run_one",
    "state",
]


class _Package(types.ModuleType):
    """``pipeledger.run``, ``.lateness`` and ``.reconcile`` name both public functions and
    modules. Importing a module sets it as an attribute of its package; for these three the
    package declines, so the names stay the functions' (found by ``__getattr__`` below)
    without importing the modules up front. ``from pipeledger.state.lateness import X`` still
    reaches the module."""

    def __setattr__(self, name: str, value: object) -> None:
        if name in _SHADOWED and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


_SHADOWED = frozenset({"run", "lateness", "reconcile", "state"})
sys.modules[__name__].__class__ = _Package


def __getattr__(name: str) -> typing.Any:
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module 'pipeledger' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # imported once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOME})
