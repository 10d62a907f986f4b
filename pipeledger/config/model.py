"""``pipeledger.toml``: a typed model, validated completely before any I/O.

Unknown keys are errors, every message names the file, the pipeline and the key, and
``${ENV_VAR}`` is interpolated into strings (the values are registered as secrets so they
are never printed).
"""

from __future__ import annotations

import codecs
import os
import re
from datetime import timedelta
from functools import cached_property
from graphlib import CycleError, TopologicalSorter
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from pipeledger.common.columns import TableName, canonical_type, check_identifier
from pipeledger.common.durations import parse_duration, span
from pipeledger.common.secrets import redact, register_secret
from pipeledger.config.locate import (
    DEFAULT_CONFIG,
    DEFAULT_TENANT,
    DUCKDB_PREFIX,
    EMBEDDED_DIR,
    TENANT_ENV,
    check_tenant,
    default_ledger_url,
    embedded_url,
    interpolate,
    read_document,
    register_urls,
)
from pipeledger.errors import ConfigError
from pipeledger.schedule.cron import Cron, check_cron, check_zone

if TYPE_CHECKING:  # sqlglot is imported when a model's query is read: not for a config alone
    from pipeledger.common.lineage import Plan
    from pipeledger.common.sqltext import ModelSql
    from pipeledger.config.facts import ModelFacts


ConflictPolicy = Literal["update", "newer_wins", "ignore", "error"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


def _encoding(value: str) -> str:
    try:
        codecs.lookup(value)
    except LookupError:
        raise ValueError(
            f"unknown encoding {value!r}: give a name Python knows, such as "
            '"utf-8", "latin-1", "cp1252" or "utf-16"'
        ) from None
    return value


Encoding = Annotated[str, AfterValidator(_encoding)]


class CsvSource(_Strict):
    kind: Literal["csv"]
    path: str
    delimiter: str = Field(default=",", min_length=1, max_length=1)
    encoding: Encoding = "utf-8"  # a byte-order mark is honoured (sources.csv)


class ParquetSource(_Strict):
    kind: Literal["parquet"]
    path: str


class SqlSource(_Strict):
    kind: Literal["sql"]
    url: str
    table: str | None = None
    query: str | None = None

    @model_validator(mode="after")
    def _one_of_table_or_query(self) -> SqlSource:
        if (self.table is None) == (self.query is None):
            raise ValueError("give exactly one of 'table' or 'query'")
        if self.table is not None:
            TableName.parse(self.table)
        return self


SourceConfig = Annotated[CsvSource | ParquetSource | SqlSource, Field(discriminator="kind")]


CheckName = Literal[
    "row_count", "not_null", "key", "range", "accepted_values", "matches", "schema_drift"
]


class RowCountCheck(_Strict):
    """A fixed band (``min``/``max``) or one learned from the ledger (``auto = true``)."""

    min: int | None = Field(default=None, ge=0)
    max: int | None = Field(default=None, ge=0)
    auto: bool = False
    sigma: float = Field(default=3.0, gt=0)
    min_history: int = Field(default=7, ge=2)

    @model_validator(mode="after")
    def _band(self) -> RowCountCheck:
        if not self.auto and self.min is None and self.max is None:
            raise ValueError("give min and/or max, or auto = true")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError("min is greater than max")
        return self


class RangeBound(_Strict):
    min: float | None = None
    max: float | None = None

    @model_validator(mode="after")
    def _some(self) -> RangeBound:
        if self.min is None and self.max is None:
            raise ValueError("give min and/or max")
        return self


class ChecksConfig(_Strict):
    """Quality gates on the staged rows, evaluated in SQL before anything is published."""

    row_count: RowCountCheck | None = None
    not_null: list[str] = Field(default_factory=list)
    range: dict[str, RangeBound] = Field(default_factory=dict)
    accepted_values: dict[str, list[str | int | float | bool]] = Field(default_factory=dict)
    matches: dict[str, str] = Field(default_factory=dict)
    on_fail: Literal["halt", "quarantine"] = "halt"
    schema_drift: Literal["fail", "evolve", "ignore"] = "fail"
    warn: list[CheckName] = Field(default_factory=list)

    @field_validator("not_null")
    @classmethod
    def _names(cls, value: list[str]) -> list[str]:
        return [check_identifier(name, "column") for name in value]

    @field_validator("range", "accepted_values", "matches")
    @classmethod
    def _columns(cls, value: dict[str, Any]) -> dict[str, Any]:
        for name in value:
            check_identifier(name, "column")
        return value

    @field_validator("accepted_values")
    @classmethod
    def _non_empty(cls, value: dict[str, list[Any]]) -> dict[str, list[Any]]:
        empty = [name for name, values in value.items() if not values]
        if empty:
            raise ValueError(f"no accepted values given for {empty}")
        return value

    @field_validator("matches")
    @classmethod
    def _patterns(cls, value: dict[str, str]) -> dict[str, str]:
        for name, pattern in value.items():
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"matches.{name}: not a valid regular expression: {exc}") from None
        return value


def _target(value: str) -> str:
    TableName.parse(value)
    return value


def _key_columns(value: list[str]) -> list[str]:
    for name in value:
        check_identifier(name, "key column")
    if len(set(value)) != len(value):
        raise ValueError("key columns must be distinct")
    return value


def _duration(value: Any) -> Any:
    return parse_duration(value) if isinstance(value, str) else value


def _tags(value: list[str]) -> list[str]:
    for tag in value:
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", tag):
            raise ValueError(f"tag {tag!r}: use letters, digits, '_', '-' and '.'")
    return value


def _index_lists(value: Any) -> Any:
    """A single-column index may be written as its column's name."""
    if isinstance(value, list):
        return [[entry] if isinstance(entry, str) else entry for entry in value]
    return value


def _indexes(indexes: list[list[str]]) -> list[list[str]]:
    for columns in indexes:
        if not columns:
            raise ValueError("an index needs at least one column")
        for name in columns:
            check_identifier(name, "index column")
        if len(set(columns)) != len(columns):
            raise ValueError(f"index {columns}: its columns must be distinct")
    return indexes


Target = Annotated[str, AfterValidator(_target)]
Indexes = Annotated[list[list[str]], BeforeValidator(_index_lists), AfterValidator(_indexes)]
KeyColumns = Annotated[list[str], AfterValidator(_key_columns)]
ColumnName = Annotated[str, AfterValidator(lambda name: check_identifier(name, "column"))]
ColumnTypes = Annotated[
    dict[str, str],
    AfterValidator(
        lambda value: {check_identifier(k, "column"): canonical_type(v) for k, v in value.items()}
    ),
]
Upstreams = Annotated[
    list[str],
    AfterValidator(lambda value: [check_identifier(n, "upstream pipeline") for n in value]),
]
Duration = Annotated[timedelta, BeforeValidator(_duration)]
Tags = Annotated[list[str], AfterValidator(_tags)]
CronExpression = Annotated[str, AfterValidator(check_cron)]
TimeZone = Annotated[str, AfterValidator(check_zone)]
HISTORY_COLUMNS = ("valid_from", "valid_to", "is_current")  # what history = "scd2" adds


class DeleteMarker(_Strict):
    """A source column that says a row was deleted: one of ``values`` (a CDC feed's
    operation column, ``values = ["D"]``), or, without ``values``, a true boolean
    (``is_deleted``). It is read from the source, never stored in the target."""

    column: ColumnName
    values: list[str | int | bool] | None = Field(default=None, min_length=1)


AlertKind = Literal[
    "failed",
    "timed_out",
    "abandoned",
    "gate_halt",
    "quarantine",
    "volume_anomaly",
    "freshness_breach",
    "reconciliation_mismatch",
    "slow_run",
]
ALERT_KINDS: tuple[AlertKind, ...] = get_args(AlertKind)


def _channel_name(name: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
        raise ValueError(f"channel {name!r}: use letters, digits, '_', '-' and '.'")
    return name


def _http_url(url: str) -> str:
    """A URL the HTTP client that sends alerts accepts (:func:`pipeledger.common.http.endpoint`:
    credentials become basic auth; the path is masked in all output). Imported here: only a
    config with alert channels needs the HTTP client (and ssl, http.client)."""
    from pipeledger.common.http import endpoint

    endpoint(url)
    return url


def _webhooks(value: dict[str, str]) -> dict[str, str]:
    problems = []
    for name, url in value.items():
        _channel_name(name)
        try:
            _http_url(url)
        except ValueError as exc:
            problems.append(f"webhook {name}: {exc}")
    if problems:
        raise ValueError("; ".join(problems))
    return value


Webhooks = Annotated[dict[str, str], AfterValidator(_webhooks)]
HttpUrl = Annotated[str, AfterValidator(_http_url)]
ChannelName = Annotated[str, AfterValidator(_channel_name)]


def _secret(value: str | None) -> str | None:
    if value:
        register_secret(value)
    return value


Secret = Annotated[str, AfterValidator(_secret)]
PAGERDUTY_EVENTS = "https://events.pagerduty.com/v2/enqueue"
Severity = Literal["critical", "error", "warning", "info"]


class PagerDutyChannel(_Strict):
    """A PagerDuty service (Events API v2): each alert triggers an incident, deduplicated
    by the alert's id (:mod:`pipeledger.alerts.channels.pagerduty`)."""

    routing_key: Secret = Field(min_length=1)  # the integration key of the service
    url: HttpUrl = PAGERDUTY_EVENTS
    severity: Severity | None = None  # None: by event (failures "error", the rest "warning")
    on: list[AlertKind] | None = None  # None: [alerts] on


def _address(value: str) -> str:
    if value.count("@") != 1 or any(c.isspace() or c in "<>,;" for c in value):
        raise ValueError(f"{value!r} is not an email address (name@example.com)")
    return value


Address = Annotated[str, AfterValidator(_address)]


class EmailChannel(_Strict):
    """Plain email over SMTP: one message per alert (:mod:`pipeledger.alerts.channels.email`)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, defer_build=True)

    host: str = Field(min_length=1)
    port: int | None = Field(default=None, ge=1, le=65535)  # None: 587, 465 (ssl) or 25 (none)
    security: Literal["starttls", "ssl", "none"] = "starttls"
    username: str | None = None
    password: Secret | None = None
    sender: Address = Field(alias="from")
    to: list[Address] = Field(min_length=1)
    on: list[AlertKind] | None = None  # None: [alerts] on

    @property
    def smtp_port(self) -> int:
        return self.port or {"starttls": 587, "ssl": 465, "none": 25}[self.security]

    @model_validator(mode="after")
    def _login(self) -> EmailChannel:
        if (self.username is None) != (self.password is None):
            raise ValueError("give both username and password, or neither")
        return self


ChannelKind = Literal["webhook", "pagerduty", "email"]


def _positive(value: timedelta | None) -> timedelta | None:
    if value is not None and value <= timedelta():
        raise ValueError("must be longer than zero")
    return value


PositiveDuration = Annotated[timedelta, BeforeValidator(_duration), AfterValidator(_positive)]


def _whole_seconds(value: timedelta | None) -> timedelta | None:
    if value is not None and (value < timedelta() or value.microseconds):
        raise ValueError(
            f"{span(abs(value.total_seconds()))}: give whole seconds (the ledger keeps this "
            "in seconds: 0.5s would be 0s)"
        )
    return value


Seconds = Annotated[timedelta, BeforeValidator(_duration), AfterValidator(_whole_seconds)]


class Operated(_Strict):
    """How a node runs unattended (the same keys for loads and models): when
    (``schedule``), how often it is retried, and how long a run may take.

    ``schedule``: a cron expression read in ``timezone``; ``pipeledger run --due`` runs the
    interval that has just ended, and with ``catchup`` every interval missed since the last
    scheduled run (at most ``max_catchup``, the latest ones), oldest first. ``retries``:
    attempts after a transient failure, ``retry_delay * 2**(n-1)`` apart (+-25% jitter, at
    most ``max_retry_delay``), while the pipeline has had fewer than
    ``max_attempts_per_day`` attempts in the last 24 hours. ``timeout``: a run still
    working after it is stopped, rolled back and recorded ``timed_out``.
    """

    schedule: CronExpression | None = None
    timezone: TimeZone = "UTC"
    catchup: bool = False
    max_catchup: int = Field(default=30, ge=1, le=1000)
    retries: int = Field(default=0, ge=0, le=100)
    retry_delay: PositiveDuration = timedelta(seconds=30)
    max_retry_delay: PositiveDuration = timedelta(minutes=10)
    max_attempts_per_day: int | None = Field(default=None, ge=1)
    timeout: PositiveDuration | None = None

    @property
    def cron(self) -> Cron | None:
        return Cron(self.schedule, self.timezone) if self.schedule else None


class PipelineConfig(Operated):
    """One pipeline: where rows come from, where they land, and how re-seen keys merge."""

    source: SourceConfig
    target: Target
    key: KeyColumns = Field(min_length=1)
    cursor: ColumnName | None = None  # may be left out by sync = "full", incremental = "files"
    on_conflict: ConflictPolicy
    lateness: timedelta | int = 0
    partition_by: ColumnName | None = None
    columns: ColumnTypes = Field(default_factory=dict)
    indexes: Indexes = Field(default_factory=list)  # on the target (publish/indexes.py)
    max_backfill: Duration | None = None
    max_rows: int | None = Field(default=None, ge=1)  # per run, else [limits] max_rows
    max_bytes: int | None = Field(default=None, ge=1)  # per run, else [limits] max_bytes
    description: str | None = None
    owner: str | None = None
    depends_on: Upstreams = Field(default_factory=list)
    tags: Tags = Field(default_factory=list)
    freshness_sla: Seconds | None = None
    max_duration: Seconds | None = None
    checks: ChecksConfig | None = None
    mode: Literal["merge", "append"] = "merge"
    history: Literal["scd2"] | None = None
    deleted: DeleteMarker | None = None
    soft_delete: bool = False
    sync: Literal["incremental", "full"] = "incremental"
    max_delete_fraction: float = Field(default=0.5, gt=0, le=1)
    on_mass_delete: Literal["halt", "warn"] = "halt"
    incremental: Literal["cursor", "files"] = "cursor"

    @field_validator("lateness", mode="before")
    @classmethod
    def _lateness(cls, value: Any) -> Any:
        if isinstance(value, str):
            return parse_duration(value)
        if isinstance(value, bool) or (isinstance(value, int) and value < 0):
            raise ValueError("must be a duration like '2h' or a non-negative integer")
        return value

    @model_validator(mode="after")
    def _cursor_not_key(self) -> PipelineConfig:
        if self.cursor is None:
            return self._without_cursor()
        if self.cursor in self.key:
            raise ValueError(f"cursor {self.cursor!r} cannot also be a key column")
        if self.partition_by is not None and self.partition_by == self.cursor:
            raise ValueError("partition_by cannot be the cursor column")
        return self

    def _without_cursor(self) -> PipelineConfig:
        """What a pipeline without a cursor can do: compare whole snapshots by key
        (``sync = "full"``) or read each new file once (``incremental = "files"``)."""
        if self.sync != "full" and self.incremental != "files":
            raise ValueError(
                "cursor is required: the change cursor, a date, timestamp or integer column "
                "(a source without one loads whole with sync = 'full', or file by file with "
                "incremental = 'files')"
            )
        needs = {
            "on_conflict = 'newer_wins'": self.on_conflict == "newer_wins",
            "mode = 'append'": self.mode == "append",
            "history": self.history is not None,
            "deleted": self.deleted is not None,
            "partition_by": self.partition_by is not None,
            "lateness": bool(self.lateness),
            "max_backfill": self.max_backfill is not None,
        }
        wanting = [key for key, given in needs.items() if given]
        if wanting:
            raise ValueError(
                f"{', '.join(wanting)} need(s) a cursor: without one, rows have no order, "
                "no watermark and no range to backfill; give cursor or drop them"
            )
        return self

    @model_validator(mode="after")
    def _by_files(self) -> PipelineConfig:
        """``incremental = "files"``: each new or changed file is read once, whole."""
        if self.incremental != "files":
            return self
        if isinstance(self.source, SqlSource):
            raise ValueError("incremental = 'files' needs a file source (csv or parquet)")
        if self.sync == "full":
            raise ValueError(
                "sync = 'full' reads every file on every run; incremental = 'files' reads "
                "each new file once: choose one"
            )
        if self.lateness:
            raise ValueError(
                "incremental = 'files' reads every new file whole, whatever its cursors: "
                "lateness has nothing to do (drop it)"
            )
        return self

    @model_validator(mode="after")
    def _deletes_and_history(self) -> PipelineConfig:
        """Which of append, SCD2, delete markers, full snapshots and soft deletes go
        together (load.deletes, load.history)."""
        if self.mode == "append" and (self.history or self.deleted or self.sync == "full"):
            raise ValueError(
                "mode = 'append' keeps every version as it arrives: it takes no history, "
                "deleted or sync = 'full' (use history = 'scd2')"
            )
        if self.soft_delete and not self.deletes:
            raise ValueError("soft_delete needs deletes: a 'deleted' marker or sync = 'full'")
        if self.soft_delete and self.history:
            raise ValueError("history = 'scd2' keeps deleted versions already: drop soft_delete")
        marker = self.deleted.column if self.deleted else None
        if marker is not None and marker in {*self.key, self.cursor, self.partition_by}:
            raise ValueError(
                f"deleted.column {marker!r} cannot be a key, cursor or partition column"
            )
        if marker is not None and marker in self.columns:
            raise ValueError(
                f"deleted.column {marker!r} is not stored in the target: do not declare it "
                "under columns"
            )
        clash = sorted(set(HISTORY_COLUMNS) & {*self.key, self.cursor, *self.columns})
        if self.history and clash:
            raise ValueError(
                f"history = 'scd2' adds the columns {list(HISTORY_COLUMNS)}: the pipeline "
                f"cannot use {clash} itself"
            )
        return self

    @property
    def deletes(self) -> bool:
        """Whether runs delete keys from the target (a marker, or full snapshots)."""
        return self.deleted is not None or self.sync == "full"

    @property
    def identity(self) -> list[str]:
        """What identifies one row of the target: the key, and with ``mode = "append"`` or
        ``history = "scd2"`` (every version kept) the key and the cursor."""
        versions = self.mode == "append" or self.history is not None
        return [*self.key, self.cursor] if versions and self.cursor else list(self.key)

    @property
    def target_name(self) -> TableName:
        return TableName.parse(self.target)


PipelineName = Annotated[str, AfterValidator(lambda name: check_identifier(name, "pipeline name"))]
ModelName = Annotated[str, AfterValidator(lambda name: check_identifier(name, "model name"))]
Materialization = Literal["merge", "partition_overwrite", "replace", "scd2", "view"]
ModelFallback = Literal["partitions", "full"]
_NOT_FOR_VIEWS = (
    "key",
    "cursor",
    "on_conflict",
    "partition_by",
    "columns",
    "checks",
    "fallback",
    "soft_delete",
)


class ModelConfig(Operated):
    """A SQL transform in the warehouse: a SELECT over other targets, published into its own
    target like a load (staged, gated, merged or overwritten, in one transaction)."""

    sql: str | None = None  # a file holding the query (relative to the config's folder)
    query: str | None = None  # or the query itself
    target: Target
    materialized: Materialization = "merge"
    key: KeyColumns = Field(default_factory=list)
    cursor: ColumnName | None = None
    on_conflict: ConflictPolicy | None = None
    partition_by: ColumnName | None = None
    columns: ColumnTypes = Field(default_factory=dict)
    indexes: Indexes = Field(default_factory=list)  # on the target (publish/indexes.py)
    description: str | None = None
    owner: str | None = None
    depends_on: Upstreams = Field(default_factory=list)
    tags: Tags = Field(default_factory=list)
    freshness_sla: Seconds | None = None
    max_duration: Seconds | None = None
    checks: ChecksConfig | None = None
    fallback: ModelFallback | None = None  # what a change the lineage cannot follow recomputes
    soft_delete: bool = False  # merge: a key the recomputation no longer produces is kept, marked

    @model_validator(mode="after")
    def _materialization(self) -> ModelConfig:
        if (self.sql is None) == (self.query is None):
            raise ValueError("give exactly one of 'sql' (a file) or 'query'")
        if self.materialized == "view":
            given = [k for k in _NOT_FOR_VIEWS if k in self.model_fields_set]
            if given:
                raise ValueError(
                    f"materialized = 'view' copies no rows: {', '.join(given)} does not apply"
                )
        if self.materialized in ("merge", "scd2"):
            needs = ["key", *(["cursor"] if self.materialized == "scd2" else [])]
            missing = [k for k in needs if not getattr(self, k)]
            if missing:
                needed = ", ".join(missing)
                raise ValueError(f"materialized = {self.materialized!r} needs {needed}")
            if self.cursor in self.key:
                raise ValueError(f"cursor {self.cursor!r} cannot also be a key column")
        self._without_cursor()
        if self.fallback == "partitions" and self.materialized not in ("merge", "scd2"):
            raise ValueError("fallback = 'partitions' is for merge and scd2 models")
        if self.fallback == "partitions" and self.partition_by is None:
            raise ValueError("fallback = 'partitions' needs partition_by (an output column)")
        if self.fallback is not None and self.materialized in ("replace", "view"):
            raise ValueError(f"materialized = {self.materialized!r} always recomputes it all")
        clash = sorted(set(HISTORY_COLUMNS) & {*self.key, self.cursor or "", *self.columns})
        if self.materialized == "scd2" and clash:
            raise ValueError(
                f"materialized = 'scd2' adds the columns {list(HISTORY_COLUMNS)}: the model "
                f"cannot use {clash} itself"
            )
        if self.materialized == "partition_overwrite" and self.partition_by is None:
            raise ValueError("materialized = 'partition_overwrite' needs partition_by")
        return self

    def _without_cursor(self) -> None:
        """A merge model without a cursor compares its recomputed rows with the stored
        ones (fingerprints) and takes the recomputed: no policy that needs a cursor."""
        if self.materialized != "merge" or self.cursor is not None:
            if self.soft_delete and self.materialized != "merge":
                raise ValueError("soft_delete is for materialized = 'merge'")
            return
        if self.on_conflict not in (None, "update"):
            raise ValueError(
                f"on_conflict = {self.on_conflict!r} needs a cursor (an output column that "
                "orders a key's versions, never NULL); without one a merge model takes "
                "the recomputed row: leave on_conflict out or set it to 'update'"
            )
        if self.soft_delete:
            raise ValueError("soft_delete needs a cursor (a merge model without one deletes)")

    @property
    def policy(self) -> ConflictPolicy:
        """How a recomputed row replaces the stored one (default: it does)."""
        return self.on_conflict or "update"

    @property
    def target_name(self) -> TableName:
        return TableName.parse(self.target)


class WarehouseConfig(_Strict):
    url: str | None = None


class LedgerConfig(_Strict):
    """Where runs are recorded. By default in the warehouse, committed with the rows."""

    url: str | None = None
    enabled: bool = True
    on_unavailable: Literal["spool", "fail"] = "spool"
    lease: timedelta = timedelta(minutes=5)
    heartbeat: timedelta = timedelta(seconds=30)
    write_timeout: timedelta = timedelta(seconds=10)  # then the ledger counts as down
    environment: str = "production"
    spool: str = f"{EMBEDDED_DIR}/ledger-spool.jsonl"
    # whose ledger rows these are (row-level security) and whose slots the queue counts;
    # PIPELEDGER_TENANT overrides it (config.locate.tenant_of reads it the same way)
    tenant: str = Field(default=DEFAULT_TENANT, validate_default=True)

    @field_validator("tenant", mode="before")
    @classmethod
    def _tenant(cls, value: Any) -> Any:
        override = os.environ.get(TENANT_ENV)
        return check_tenant(override or value, TENANT_ENV if override else "ledger.tenant")

    @field_validator("lease", "heartbeat", "write_timeout", mode="before")
    @classmethod
    def _duration(cls, value: Any) -> Any:
        return parse_duration(value) if isinstance(value, str) else value

    @model_validator(mode="after")
    def _heartbeat_within_lease(self) -> LedgerConfig:
        if self.heartbeat >= self.lease:
            raise ValueError("heartbeat must be shorter than lease")
        return self


class LimitsConfig(_Strict):
    """What the ledger's tenant may do at once, and the per-run defaults of every load.

    ``max_rows`` / ``max_bytes``: a load staging more rows (or more bytes of Arrow data)
    halts before publish (a node's own keys win). ``max_concurrent_runs``: the tenant's
    runs at once (None: no limit, no queue); a run without a slot waits ``queued`` in the
    ledger, first come first served, at most ``queue_capacity`` of them (one more is
    rejected), each at most ``queue_timeout`` (then ``timed_out``), looking again every
    ``queue_poll``."""

    max_rows: int | None = Field(default=None, ge=1)
    max_bytes: int | None = Field(default=None, ge=1)
    max_concurrent_runs: int | None = Field(default=None, ge=1)
    queue_capacity: int = Field(default=100, ge=0)
    queue_timeout: PositiveDuration = timedelta(hours=1)
    queue_poll: PositiveDuration = timedelta(seconds=1)


class AlertsConfig(_Strict):
    """Where alerts go and which events raise one (:mod:`pipeledger.alerts`): channels
    (webhooks, PagerDuty services, email), one namespace of names across the three."""

    webhooks: Webhooks = Field(default_factory=dict)  # name -> URL
    pagerduty: dict[ChannelName, PagerDutyChannel] = Field(default_factory=dict)
    email: dict[ChannelName, EmailChannel] = Field(default_factory=dict)
    on: list[AlertKind] = Field(default_factory=lambda: list(ALERT_KINDS))
    timeout: PositiveDuration = timedelta(seconds=5)  # per delivery attempt, in total
    retry_delay: Duration = timedelta(seconds=30)  # doubling after each failed attempt
    max_retry_delay: Duration = timedelta(hours=1)

    @model_validator(mode="after")
    def _distinct_names(self) -> AlertsConfig:
        kinds = (self.webhooks, self.pagerduty, self.email)
        names = [name for channels in kinds for name in channels]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"channel names {twice} are used twice: each names one channel")
        return self

    @property
    def channels(self) -> dict[str, ChannelKind]:
        """Every channel's name and kind."""
        found: dict[str, ChannelKind] = dict.fromkeys(self.webhooks, "webhook")
        found.update(dict.fromkeys(self.pagerduty, "pagerduty"))
        found.update(dict.fromkeys(self.email, "email"))
        return found

    def wanting(self, kind: AlertKind) -> list[str]:
        """The channels that get events of ``kind``, sorted."""
        own: dict[str, list[AlertKind] | None] = {n: None for n in self.webhooks}
        own.update({n: c.on for n, c in self.pagerduty.items()})
        own.update({n: c.on for n, c in self.email.items()})
        return sorted(n for n, on in own.items() if kind in (self.on if on is None else on))


class LineageConfig(_Strict):
    """Where OpenLineage events of the runs go (:mod:`pipeledger.lineage`). Without
    ``transport``, the OpenLineage client's own configuration (``OPENLINEAGE_URL``,
    ``OPENLINEAGE__TRANSPORT__*``, ``OPENLINEAGE_CONFIG``)."""

    enabled: bool = True
    transport: Literal["http", "file", "console"] | None = None
    url: str | None = None  # http: the receiver (Marquez: http://host:5000)
    endpoint: str = "api/v1/lineage"
    api_key: Annotated[str | None, AfterValidator(_secret)] = None
    path: str = f"{EMBEDDED_DIR}/openlineage-events.jsonl"  # file: one event per line
    namespace: str | None = None  # the jobs' namespace (else $OPENLINEAGE_NAMESPACE)
    timeout: PositiveDuration = timedelta(seconds=2)
    spool: str | None = None  # undelivered events (default: beside the ledger's spool)
    dag_job: str | None = None  # the job of a DAG run, the nodes' parent (default: folder)

    @model_validator(mode="after")
    def _http_has_url(self) -> LineageConfig:
        if self.transport == "http" and not self.url:
            raise ValueError('transport = "http" needs url')
        if self.url and not self.url.startswith(("http://", "https://")):
            raise ValueError("url must start with http:// or https://")
        return self


class Config(_Strict):
    """A whole ``pipeledger.toml``. ``base_dir`` anchors relative paths (the file's folder)."""

    warehouse: WarehouseConfig = WarehouseConfig()
    ledger: LedgerConfig = LedgerConfig()
    limits: LimitsConfig = LimitsConfig()
    alerts: AlertsConfig = AlertsConfig()
    lineage: LineageConfig | None = None
    pipelines: dict[PipelineName, PipelineConfig] = Field(default_factory=dict)
    models: dict[ModelName, ModelConfig] = Field(default_factory=dict)
    base_dir: Path = Path(".")
    source_file: Path = Path(DEFAULT_CONFIG)

    @model_validator(mode="after")
    def _known_upstreams(self) -> Config:
        both = set(self.pipelines) & set(self.models)
        if both:
            raise ValueError(f"{sorted(both)}: a pipeline and a model cannot share a name")
        for section, nodes in (("pipelines", self.pipelines), ("models", self.models)):
            for name, node in nodes.items():
                unknown = [u for u in node.depends_on if u not in self.nodes]
                if unknown:
                    raise ValueError(
                        f"{section}.{name}.depends_on: no pipeline or model named {unknown}"
                    )
                if name in node.depends_on:
                    raise ValueError(f"{section}.{name}.depends_on: it cannot depend on itself")
        return self

    @model_validator(mode="after")
    def _ledger_not_in_duckdb(self) -> Config:
        if (self.ledger.url or "").startswith(DUCKDB_PREFIX):
            raise ValueError(
                "ledger.url: the ledger cannot live in a DuckDB file (one process at a time "
                "may open it, and the ledger is read while runs write); leave ledger.url out "
                "for a SQLite ledger beside the warehouse, or name a sqlite:/// or "
                "postgresql:// database"
            )
        return self

    @model_validator(mode="after")
    def _acyclic(self) -> Config:
        """Loads and models form one graph without cycles (the cycle is named); a model
        reading its own target is one."""
        facts = self.model_facts
        for name, model in self.models.items():
            query = self.model_sql(name)
            if str(model.target_name) in {str(t) for t in query.tables}:
                raise ValueError(
                    f"the pipelines and models form a cycle: {name} -> {name} (models.{name} "
                    f"reads its own target {model.target})"
                )
            facts.remember_tables(query.text, query.tables)
        order = TopologicalSorter({name: self.upstreams(name) for name in self.nodes})
        try:
            order.prepare()
        except CycleError as exc:
            cycle = " -> ".join(exc.args[1])
            raise ValueError(f"the pipelines and models form a cycle: {cycle}") from None
        for name in self.models:  # planned once for this SQL and these settings
            self.plan_json(name)
        facts.save()
        return self

    def plan_json(self, name: str) -> dict[str, Any]:
        """What an incremental run of model ``name`` recomputes, as JSON (``Plan.to_json``),
        planned once for its SQL and settings (:attr:`model_facts`)."""
        key = self._plan_key(name)
        found = self.model_facts.get("plan", key)
        if isinstance(found, dict):
            return found
        planned = self.recompute(name).to_json()
        self.model_facts.put("plan", key, planned)
        return planned

    @cached_property
    def model_facts(self) -> ModelFacts:
        """What reading the models' SQL found before (:mod:`pipeledger.config.facts`), kept
        beside a config read from a file."""
        from pipeledger.config.facts import FACTS_FILE, ModelFacts

        if not self.source_file.is_file():
            return ModelFacts(None)
        return ModelFacts(self.base_dir / EMBEDDED_DIR / FACTS_FILE)

    def _plan_key(self, name: str) -> str:
        """What model ``name``'s incremental plan depends on: its SQL, its settings and the
        SQL of the project's views it reads (through other views too)."""
        from pipeledger.config.facts import fact_key

        m = self.model(name)
        views = self._views_read(name, set())
        texts = [self.model_sql(v).text for v in sorted(views)]
        settings = [m.materialized, list(m.key), m.partition_by, m.fallback]
        return fact_key("plan", self.model_sql(name).text, settings, texts)

    def _views_read(self, name: str, seen: set[str]) -> set[str]:
        by_target = self._views_beside(name)
        for table in self.model_sql(name).tables:
            view = by_target.get(str(table))
            if view is not None and view not in seen:
                seen.add(view)
                self._views_read(view, seen)
        return seen

    @cached_property
    def _producers(self) -> dict[str, str]:
        """Target table (as written, and with its schema) -> the node that writes it."""
        return {str(node.target_name): name for name, node in self.nodes.items()}

    def model_sql(self, name: str) -> ModelSql:
        """A model's query, read from its file or its config, with ``{{ ref('x') }}``
        resolved to node ``x``'s target (cached: read once per configuration)."""
        cached = self._model_sql.get(name)
        if cached is not None:
            return cached
        from pipeledger.common.sqltext import ModelSql, resolve_refs

        model = self.model(name)
        if model.query is not None:
            text, where = model.query, f"models.{name}.query"
        else:
            path = self.resolve(model.sql or "")
            try:
                text = path.read_text(encoding="utf-8")
            except OSError as exc:
                raise ConfigError(
                    f"models.{name}.sql: cannot read {path}: {exc.strerror}"
                ) from None
            where = f"models.{name} ({path})"
        targets = {n: node.target_name for n, node in self.nodes.items()}
        resolved = resolve_refs(text, targets, where)
        query = ModelSql(resolved, where, known=self.model_facts.tables(resolved))
        self._model_sql[name] = query
        return query

    @cached_property
    def _model_sql(self) -> dict[str, ModelSql]:
        return {}

    def recompute(self, name: str) -> Plan:
        """What an incremental run of model ``name`` recomputes (``common.lineage``)."""
        cached = self._plans.get(name)
        if cached is not None:
            return cached
        from pipeledger.common.lineage import plan
        from pipeledger.common.sqltext import READ

        model = self.model(name)
        self._plans[name] = found = plan(
            tree=self.expanded_sql(name).tree,
            read=READ,
            materialized=model.materialized,
            key=model.key,
            partition_by=model.partition_by,
            fallback=model.fallback,
            where=f"models.{name}",
        )
        return found

    @cached_property
    def _plans(self) -> dict[str, Plan]:
        return {}

    def warehouse_table(self, source: SourceConfig) -> TableName | None:
        """The table a ``table`` source reads, when it is in the warehouse itself (a load
        reading another node's target)."""
        if isinstance(source, SqlSource) and source.table and self._is_warehouse(source.url):
            return TableName.parse(source.table)
        return None

    def _is_warehouse(self, url: str) -> bool:
        """Whether ``url`` names the warehouse (SQLite: the same file, however written)."""
        if url == self.warehouse_url:
            return True
        prefix = "sqlite:///"
        if not (url.startswith(prefix) and self.warehouse_url.startswith(prefix)):
            return False
        path = Path(url.removeprefix(prefix))
        mine = Path(self.warehouse_url.removeprefix(prefix))
        return self.resolve(str(path)).resolve() == self.resolve(str(mine)).resolve()

    def needs_before_images(self, target: TableName) -> bool:
        """Whether a model reads ``target`` (directly or through views) in a way that must
        know the versions its writers replace or delete: every incremental model but
        ``replace`` does, to recompute the keys or partitions those versions left
        (``publish.before``)."""
        return bool(self.before_image_readers(target))

    def before_image_readers(self, target: TableName) -> list[str]:
        """The models that need ``target``'s before-images (see :meth:`needs_before_images`):
        a version is kept until each of them has consumed the run that replaced it."""
        return [
            name
            for name, model in self.models.items()
            if model.materialized not in ("replace", "view")
            and str(target) in {str(t) for t in self.expanded_sql(name).tables}
        ]

    def expanded_sql(self, name: str) -> ModelSql:
        """A model's query with every view of this project that it reads written out as a
        subquery (a view keeps no rows of its own, so its model follows the tables under it)."""
        query = self.model_sql(name)
        views = self._views_beside(name)
        if not any(str(t) in views for t in query.tables):
            return query
        from pipeledger.common.lineage import substitute
        from pipeledger.common.sqltext import READ, ModelSql

        def view_text(table: str, _: int) -> str | None:
            return self.expanded_sql(views[table]).tree.sql(READ) if table in views else None

        return ModelSql(substitute(query.tree, view_text, READ), query.where)

    def _views_beside(self, name: str) -> dict[str, str]:
        """The project's views other than ``name``, by target table (as written)."""
        return {
            str(node.target_name): view
            for view, node in self.models.items()
            if node.materialized == "view" and view != name
        }

    def upstreams(self, name: str) -> tuple[str, ...]:
        """The nodes ``name`` reads from: ``depends_on``, the tables its SQL names (models)
        or its ``table`` source in the warehouse (loads), where another node writes them."""
        node = self.node(name)
        tables: tuple[TableName, ...] = ()
        if isinstance(node, ModelConfig):
            tables = self.model_sql(name).tables
        elif (table := self.warehouse_table(node.source)) is not None:
            tables = (table,)
        found = {self._producers[str(t)] for t in tables if str(t) in self._producers}
        return tuple(sorted((found | set(node.depends_on)) - {name}))

    @property
    def nodes(self) -> dict[str, PipelineConfig | ModelConfig]:
        """Loads and models: the nodes of one graph."""
        return {**self.pipelines, **self.models}

    def node(self, name: str) -> PipelineConfig | ModelConfig:
        if name not in self.nodes:
            known = ", ".join(sorted(self.nodes)) or "none"
            raise ConfigError(
                f"{self.source_file}: no pipeline or model named {name!r} (defined: {known})"
            )
        return self.nodes[name]

    def model(self, name: str) -> ModelConfig:
        if name not in self.models:
            known = ", ".join(sorted(self.models)) or "none"
            raise ConfigError(f"{self.source_file}: no model named {name!r} (defined: {known})")
        return self.models[name]

    @property
    def looked_after(self) -> bool:
        """Whether anything is looked after once a run ends (:mod:`pipeledger.alerts`): a
        channel, a freshness SLA or a max_duration, and a ledger to read them from."""
        slas = any(n.freshness_sla or n.max_duration for n in self.nodes.values())
        return self.ledger.enabled and (bool(self.alerts.channels) or slas)

    @property
    def ledger_url(self) -> str:
        """The ledger's database: its own ``[ledger] url``, or the warehouse; a DuckDB
        warehouse's is a SQLite file beside it (``<name>.ledger.db``): DuckDB lets one
        process at a time open its file, and the ledger is read while runs write."""
        return self.ledger.url or default_ledger_url(self.warehouse_url)

    @property
    def separate_ledger(self) -> bool:
        return self.ledger_url != self.warehouse_url

    @property
    def warehouse_url(self) -> str:
        """The warehouse URL, or the embedded default file next to the config."""
        if self.warehouse.url:
            return self.warehouse.url
        return embedded_url(self.base_dir)

    def resolve(self, path: str) -> Path:
        candidate = Path(path).expanduser()
        return candidate if candidate.is_absolute() else self.base_dir / candidate

    def pipeline(self, name: str) -> PipelineConfig:
        if name not in self.pipelines:
            known = ", ".join(sorted(self.pipelines)) or "none"
            raise ConfigError(f"{self.source_file}: no pipeline named {name!r} (defined: {known})")
        return self.pipelines[name]


def _describe(error: dict[str, Any]) -> str:
    loc = [str(p) for p in error["loc"] if p not in ("csv", "parquet", "sql", "timedelta", "int")]
    where = ".".join(loc)
    if error["type"] == "extra_forbidden":
        return f"{where}: unknown key (check its spelling)"
    if error["type"] == "missing":
        return f"{where}: required key is missing"
    if error["type"] == "union_tag_not_found":  # a source without its kind
        return f'{where}: needs kind = "csv", "parquet" or "sql"'
    message = str(error["msg"]).removeprefix("Value error, ")
    return f"{where}: {message}" if where else message


def parse_config(data: dict[str, Any], source_file: Path) -> Config:
    """Validate a parsed TOML document. Raises ``ConfigError`` listing every problem."""
    where = source_file.name
    try:
        data = interpolate(data, "")
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    register_urls(data)
    try:
        return Config.model_validate(
            {**data, "base_dir": source_file.parent.resolve(), "source_file": source_file}
        )
    except ValidationError as exc:
        problems = sorted({_describe(dict(e)) for e in exc.errors()})
        lines = "\n".join(f"  - {redact(p)}" for p in problems)
        raise ConfigError(f"{source_file}: invalid configuration:\n{lines}") from None


def load_config(path: str | os.PathLike[str] | None = None) -> Config:
    """Read and validate ``pipeledger.toml`` (or ``path``). Nothing else is touched."""
    document = read_document(None if path is None else Path(path))
    return parse_config(document.data, document.source_file)
