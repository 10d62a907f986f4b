"""The error tree. Every error pipeledger raises on purpose is a ``PipeledgerError``.

::

    PipeledgerError
    ├── ConfigError          the config file is wrong (exit 2); nothing was read or written
    ├── SourceError          a source file/row/column is unusable; nothing was written
    ├── SchemaError          the source does not fit the target's fixed schema
    ├── ConflictError        on_conflict = "error" met a re-seen key with other content
    ├── GateFailed           the quality gate halted the run (exit 3); carries the report
    ├── BackfillRangeError   a backfill range is inverted or wider than max_backfill
    ├── ConcurrentRunError   another run of the same pipeline holds its lock (Transient)
    ├── RunAbandonedError    the watchdog declared the run abandoned while it worked
    ├── NothingToRetry       --retry asked for, but the latest run did not fail (exit 2)
    └── WarehouseError       the database refused or lost us (Transient or Terminal)

``Transient`` marks errors that are safe to retry as they are; ``Terminal`` marks errors
that will fail again until a person changes the input or the config.
"""

from __future__ import annotations

from typing import Any


class PipeledgerError(Exception):
    """Root of every error pipeledger raises on purpose."""

    exit_code = 1


class Transient(PipeledgerError):
    """Retrying the same run unchanged may succeed."""


class Terminal(PipeledgerError):
    """Retrying will fail the same way until the input or config changes."""


class ConfigError(Terminal):
    """The configuration is invalid. Raised before any I/O."""

    exit_code = 2


class SourceError(Terminal):
    """A source cannot be read: missing file, bad row, unparsable value, null key."""


class SchemaError(Terminal):
    """The source columns or types do not fit the target table."""


class ConflictError(Terminal):
    """A re-seen key arrived with different content under ``on_conflict = "error"``."""


class BackfillRangeError(Terminal):
    """A backfill range is inverted or exceeds ``max_backfill``."""

    exit_code = 2


class GateFailed(Terminal):
    """The quality gate halted the run: nothing was published (exit code 3)."""

    exit_code = 3

    def __init__(self, message: str, *, report: Any = None) -> None:
        super().__init__(message)
        self.report = report


class ConcurrentRunError(Transient):
    """Another run of the same pipeline is active."""


class RunAbandonedError(Transient):
    """The watchdog marked this run abandoned (its lease expired); its work rolls back."""


class NothingToRetry(Terminal):
    """``--retry`` was asked but the latest run did not fail."""

    exit_code = 2


class WarehouseError(PipeledgerError):
    """The warehouse database failed; see ``transient`` to know if a retry may help."""

    UNIQUE_VIOLATION = "23505"
    CARDINALITY_VIOLATION = "21000"
    INSUFFICIENT_PRIVILEGE = "42501"
    LOCK_NOT_AVAILABLE = "55P03"
    DUPLICATE_COLUMN = "42701"
    DUPLICATE_OBJECT = "42710"
    QUERY_CANCELED = "57014"
    WRONG_OBJECT_TYPE = "42809"
    TOO_MANY_COLUMNS = "54011"
    FEATURE_NOT_SUPPORTED = "0A000"

    def __init__(self, message: str, *, transient: bool = False, sqlstate: str | None = None):
        super().__init__(message)
        self.transient = transient
        self.sqlstate = sqlstate
