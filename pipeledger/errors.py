"""The error tree. Every error pipeledger raises is a ``PipeledgerError``.

::

    PipeledgerError
    ├── Transient                  retrying the same run unchanged may succeed (exit 75)
    │   ├── ConcurrentRunError     another run of the pipeline holds its lock (skipped, exit 4)
    │   │   └── WarehouseBusy      an embedded file is busy: another load holds SQLite's write
    │   │                            lock, or another process has a DuckDB file open (retried)
    │   ├── QueueFull              the tenant's runs are at max_concurrent_runs and its queue
    │   │                            holds queue_capacity runs: recorded ``rejected`` (exit 7)
    │   ├── QueueTimedOut          a ``queued`` run waited past queue_timeout for a slot:
    │   │                            recorded ``timed_out``, nothing was read (exit 8)
    │   ├── RunAbandonedError      the watchdog declared the run abandoned while it worked
    │   ├── SourceChanged          a source file changed while it was read (still being
    │   │                            written?); nothing was written, no file was taken
    │   └── TransientWarehouseError  connection lost, deadlock, serialization failure,
    │                                lock or statement timeout, the database busy
    │       └── CommitUnknown      the connection was lost during COMMIT (exit 6)
    ├── Terminal                   fails again until a person changes input or config (exit 1)
    │   ├── InvalidInput           a name, type, duration or cursor value that is not valid
    │   ├── ConfigError            the config file is wrong (exit 2); nothing read or written
    │   │   ├── BackfillRangeError   a backfill range is inverted or wider than max_backfill
    │   │   │                          (recorded ``rejected``)
    │   │   ├── NothingToRetry       --retry asked for, but the latest run did not fail
    │   │   ├── NothingToCancel      `pipeledger cancel` named a run that is not running
    │   │   ├── UnknownRun           no run in the ledger has the id (or prefix) given
    │   │   ├── AmbiguousRunId       a run id prefix matches several runs
    │   │   └── UntranslatableSql    a model's SQL has a construct SQLite cannot compute
    │   │                              (the embedded default); the construct and line named
    │   ├── SourceError            a source file/row/column is unusable; nothing was written
    │   ├── SchemaError            the source does not fit the target's fixed schema
    │   ├── ConflictError          on_conflict = "error" met a re-seen key with other content
    │   ├── HistoryError           an SCD2 target's history would break its invariants
    │   ├── GateFailed             the quality gate halted the run (exit 3); carries the report
    │   ├── LimitExceeded          max_rows or max_bytes passed while staging: halted before
    │   │                            publish, nothing written, recorded ``rejected`` (exit 3)
    │   ├── UsageError             the Python API was used against its rules (an unknown
    │   │                            counter; a final state changed)
    │   └── TerminalWarehouseError the database refused the statement
    │       └── InsufficientPrivilege  the role may not do it
    ├── RunStopped                 stopped from outside while it worked; it rolled back
    │   ├── RunTimedOut            it ran past its pipeline's ``timeout`` (exit 124)
    │   └── CancelRequested        ``pipeledger cancel RUN_ID`` stopped it (exit 130)
    ├── DuplicateRun               its idempotency key already ran, or runs now: this
    │                              trigger did nothing (skipped: exit 0, or 4 while the first
    │                              runs; its ledger record is ``rejected``)
    └── LedgerNotWritten           the run committed, the ledger could not record it (exit 5)

    WarehouseError                 the base of both warehouse errors above (``except
                                   WarehouseError`` catches both); ``sqlstate`` says how

    BaseException
    └── RunCancelled               SIGTERM (or every run of the process stopped at once): the
                                   run rolls back and is recorded ``cancelled`` (exit 143)

``RunCancelled`` is a ``BaseException``, as asyncio's ``CancelledError`` is, so that no
``except Exception`` on the way (a node's outcome, a best-effort cleanup) can swallow a cancel.

Adapters translate driver errors into these where they meet the driver (``raise ... from``).
"""

from __future__ import annotations

from typing import Any


class PipeledgerError(Exception):
    """Root of every error pipeledger raises. ``run_id``: the run it failed, once known."""

    exit_code = 1
    run_id: str | None = None


class Transient(PipeledgerError):
    """Retrying the same run unchanged may succeed."""

    exit_code = 75  # EX_TEMPFAIL


class Terminal(PipeledgerError):
    """Retrying will fail the same way until the input or the config changes."""


class InvalidInput(Terminal, ValueError):
    """A name, type, duration or cursor value that is not valid (also a ``ValueError``, so
    that config validation reports it as one of the file's problems)."""


class ConfigError(Terminal):
    """The configuration is invalid. Raised before any I/O."""

    exit_code = 2


class UntranslatableSql(ConfigError):
    """A model's PostgreSQL SQL uses a construct the embedded SQLite warehouse cannot compute
    as PostgreSQL does: ``construct`` (its text) and ``line`` (in the model's SQL) say
    which. Found by ``pipeledger check`` and before a run starts any node."""

    def __init__(self, message: str, *, construct: str, line: int | None) -> None:
        super().__init__(message)
        self.construct = construct
        self.line = line


class SourceError(Terminal):
    """A source cannot be read: missing file, bad row, unparsable value, null key."""


class SchemaError(Terminal):
    """The source columns or types do not fit the target table."""


class ConflictError(Terminal):
    """A re-seen key arrived with different content under ``on_conflict = "error"``."""


class HistoryError(Terminal):
    """An SCD2 target's history would break its invariants (overlapping versions, two
    current ones): the run writes nothing."""


class BackfillRangeError(ConfigError):
    """A backfill range is inverted or exceeds ``max_backfill`` (recorded ``rejected``)."""

    reason = "backfill_range"


class NothingToRetry(ConfigError):
    """``--retry`` was asked but the latest run did not fail."""


class NothingToCancel(ConfigError):
    """``pipeledger cancel`` named a run that is not running."""


class UnknownRun(ConfigError):
    """No run in the ledger has the id (or id prefix) given."""


class AmbiguousRunId(ConfigError):
    """A run id prefix matches more than one run."""


class UsageError(Terminal, ValueError):
    """The Python API was called against its rules (an unknown counter, a final state
    changed); also a ``ValueError``, as Python's own misuse errors are."""


class GateFailed(Terminal):
    """The quality gate halted the run: nothing was published (exit code 3)."""

    exit_code = 3

    def __init__(self, message: str, *, report: Any = None) -> None:
        super().__init__(message)
        self.report = report


class LimitExceeded(Terminal):
    """A run staged more rows or bytes than its ``max_rows`` / ``max_bytes`` allow: it
    halted before publish (exit 3, as a halted gate) and is recorded ``rejected``.
    ``limit`` names the key, ``observed`` what the run had staged when it stopped,
    ``maximum`` the limit."""

    exit_code = 3
    reason = "limit_exceeded"

    def __init__(self, message: str, *, limit: str, observed: int, maximum: int) -> None:
        super().__init__(message)
        self.limit = limit
        self.observed = observed
        self.maximum = maximum

    def details(self) -> dict[str, Any]:
        return {"limit": self.limit, "observed": self.observed, "maximum": self.maximum}


class QueueFull(Transient):
    """The tenant runs ``max_concurrent_runs`` runs and ``queue_capacity`` more wait: this
    trigger is recorded ``rejected`` and nothing was read (exit 7)."""

    exit_code = 7
    reason = "queue_full"

    def __init__(self, message: str, *, tenant: str, running: int, queued: int) -> None:
        super().__init__(message)
        self.tenant = tenant
        self.running = running
        self.queued = queued

    def details(self) -> dict[str, Any]:
        return {"tenant": self.tenant, "running": self.running, "queued": self.queued}


class QueueTimedOut(Transient):
    """A ``queued`` run waited ``queue_timeout`` without a free slot: recorded
    ``timed_out`` and nothing was read (exit 8)."""

    exit_code = 8


class ConcurrentRunError(Transient):
    """Another run of the same pipeline is active: this one did nothing (``skipped``)."""

    exit_code = 4


class WarehouseBusy(ConcurrentRunError):
    """The embedded warehouse is busy with another load, of any pipeline (or, DuckDB, with
    another process of any kind): unlike a held pipeline lock, the rows are not being
    loaded by someone else, so ``retries`` retry."""


class RunAbandonedError(Transient):
    """The watchdog marked this run abandoned (its lease expired); its work rolls back."""


class SourceChanged(Transient):
    """A source file changed while the run read it (a writer still at work): what was read
    is not what would be recorded as read. Nothing was written; a later run reads it again."""


class WarehouseError(PipeledgerError):
    """The warehouse (or ledger) database failed; ``sqlstate`` says how, where known."""

    UNIQUE_VIOLATION = "23505"
    NOT_NULL_VIOLATION = "23502"
    CARDINALITY_VIOLATION = "21000"
    INSUFFICIENT_PRIVILEGE = "42501"
    LOCK_NOT_AVAILABLE = "55P03"
    DUPLICATE_COLUMN = "42701"
    DUPLICATE_OBJECT = "42710"
    DUPLICATE_SCHEMA = "42P06"
    QUERY_CANCELED = "57014"
    WRONG_OBJECT_TYPE = "42809"
    TOO_MANY_COLUMNS = "54011"
    FEATURE_NOT_SUPPORTED = "0A000"

    def __init__(self, message: str, *, sqlstate: str | None = None) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate


class TransientWarehouseError(WarehouseError, Transient):
    """Connection lost, deadlock, serialization failure, a lock or statement timeout, or
    the database busy: the same run may succeed when retried."""


class CommitUnknown(TransientWarehouseError):
    """The connection was lost while COMMIT was on its way: the run may or may not have
    committed. The next run (or ``pipeledger watchdog``) settles it from the warehouse."""

    exit_code = 6


class TerminalWarehouseError(WarehouseError, Terminal):
    """The database refused the statement (a constraint, a type, a missing object)."""


class InsufficientPrivilege(TerminalWarehouseError):
    """The database role may not do what the run needs."""


class LedgerNotWritten(PipeledgerError):
    """The run committed its rows and watermark, but its final record could not be
    written to the ledger (nor spooled). The data is right; the ledger is behind until the
    next run or ``pipeledger watchdog`` reconciles it from the warehouse."""

    exit_code = 5

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.result: Any = None  # what the run did (it committed)


class RunStopped(PipeledgerError):
    """The run was stopped from outside while it worked: its statement was cancelled on
    the server, its transaction rolled back and its lock released. Not retried."""


class RunTimedOut(RunStopped):
    """The run went on past its pipeline's ``timeout`` (recorded ``timed_out``)."""

    exit_code = 124  # as timeout(1)


class CancelRequested(RunStopped):
    """``pipeledger cancel RUN_ID`` (or ``Ledger.request_cancel``) asked the run to stop
    (recorded ``cancelled``)."""

    exit_code = 130


class DuplicateRun(PipeledgerError):
    """A run was triggered with an idempotency key that a run of the same pipeline holds:
    running now, or succeeded. This trigger did nothing (recorded ``rejected``);
    ``duplicate_of`` is that run."""

    def details(self) -> dict[str, Any]:
        return {"duplicate_of": self.duplicate_of, "holder_status": self.status}

    def __init__(self, message: str, *, duplicate_of: str, status: str) -> None:
        super().__init__(message)
        self.duplicate_of = duplicate_of
        self.status = status  # the first run's: running, success or partial
        self.reason = "duplicate_trigger"  # as the ``rejected`` record of this trigger says
        # nothing needs doing once it succeeded; while it runs, as for a lock (skipped)
        self.exit_code = 4 if status == "running" else 0


class RunCancelled(BaseException):
    """Every run of this process is being stopped (SIGTERM in the main thread, or
    :func:`pipeledger.runs.interrupt.interrupt_all`): each rolls back and says ``cancelled``.
    Not an ``Exception``: code that catches ``Exception`` must not swallow a cancel."""
