"""``pipeledger.toml``: a typed model, validated completely before any I/O.

Unknown keys are errors, every message names the file, the pipeline and the key, and
``${ENV_VAR}`` is interpolated into strings (the values are registered as secrets so they
are never printed).
"""

from __future__ import annotations

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
from pipeledger.common.durations import parse_duration
from pipeledger.common.secrets import redact, register_secret
from pipeledger.config.locate import (
    DEFAULT_CONFIG,
    DUCKDB_PREFIX,
    EMBEDDED_DIR,
    default_ledger_url,
    embedded_url,
    interpolate,
    read_document,
    register_urls,
)
from pipeledger.errors import ConfigError
from pipeledger.schedule.cron import Cron, check_cron, check_zone

if TYPE_CHECKING:  # sqlglot is imported when a model's query is read: not for a config alone
    from pipeledger.common.sqltext import ModelSql


ConflictPolicy = Literal["update", "newer_wins", "ignore", "error"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CsvSource(_Strict):
    kind: Literal["csv"]
    path: str
    delimiter: str = Field(default=",", min_length=1, max_length=1)


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


Target = Annotated[str, AfterValidator(_target)]
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


def _webhooks(value: dict[str, str]) -> dict[str, str]:
    for name, url in value.items():
        register_secret(url)  # a webhook's URL is its credential (Slack's are)
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
            raise ValueError(f"webhook {name!r}: use letters, digits, '_', '-' and '.'")
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"webhook {name}: its URL must start with http:// or https://")
    return value


Webhooks = Annotated[dict[str, str], AfterValidator(_webhooks)]


def _positive(value: timedelta | None) -> timedelta | None:
    if value is not None and value <= timedelta():
        raise ValueError("must be longer than zero")
    return value


PositiveDuration = Annotated[timedelta, BeforeValidator(_duration), AfterValidator(_positive)]


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
    cursor: ColumnName
    on_conflict: ConflictPolicy
    lateness: timedelta | int = 0
    partition_by: ColumnName | None = None
    columns: ColumnTypes = Field(default_factory=dict)
    max_backfill: Duration | None = None
    description: str | None = None
    owner: str | None = None
    depends_on: Upstreams = Field(default_factory=list)
    tags: Tags = Field(default_factory=list)
    freshness_sla: Duration | None = None
    max_duration: Duration | None = None
    checks: ChecksConfig | None = None
    mode: Literal["merge", "append"] = "merge"
    history: Literal["scd2"] | None = None
    deleted: DeleteMarker | None = None
    soft_delete: bool = False
    sync: Literal["incremental", "full"] = "incremental"
    max_delete_fraction: float = Field(default=0.5, gt=0, le=1)
    on_mass_delete: Literal["halt", "warn"] = "halt"

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
        if self.cursor in self.key:
            raise ValueError(f"cursor {self.cursor!r} cannot also be a key column")
        if self.partition_by is not None and self.partition_by == self.cursor:
            raise ValueError("partition_by cannot be the cursor column")
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
        return [*self.key, self.cursor] if versions else list(self.key)

    @property
    def target_name(self) -> TableName:
        return TableName.parse(self.target)


PipelineName = Annotated[str, AfterValidator(lambda name: check_identifier(name, "pipeline name"))]
ModelName = Annotated[str, AfterValidator(lambda name: check_identifier(name, "model name"))]
Materialization = Literal["merge", "partition_overwrite", "replace", "scd2"]


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
    description: str | None = None
    owner: str | None = None
    depends_on: Upstreams = Field(default_factory=list)
    tags: Tags = Field(default_factory=list)
    freshness_sla: Duration | None = None
    max_duration: Duration | None = None
    checks: ChecksConfig | None = None

    @model_validator(mode="after")
    def _materialization(self) -> ModelConfig:
        if (self.sql is None) == (self.query is None):
            raise ValueError("give exactly one of 'sql' (a file) or 'query'")
        if self.materialized in ("merge", "scd2"):
            needs = ["key", "cursor", *(["on_conflict"] if self.materialized == "merge" else [])]
            missing = [k for k in needs if not getattr(self, k)]
            if missing:
                needed = ", ".join(missing)
                raise ValueError(f"materialized = {self.materialized!r} needs {needed}")
            if self.cursor in self.key:
                raise ValueError(f"cursor {self.cursor!r} cannot also be a key column")
        clash = sorted(set(HISTORY_COLUMNS) & {*self.key, self.cursor or "", *self.columns})
        if self.materialized == "scd2" and clash:
            raise ValueError(
                f"materialized = 'scd2' adds the columns {list(HISTORY_COLUMNS)}: the model "
                f"cannot use {clash} itself"
            )
        if self.materialized == "partition_overwrite" and self.partition_by is None:
            raise ValueError("materialized = 'partition_overwrite' needs partition_by")
        return self

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

    @field_validator("lease", "heartbeat", "write_timeout", mode="before")
    @classmethod
    def _duration(cls, value: Any) -> Any:
        return parse_duration(value) if isinstance(value, str) else value

    @model_validator(mode="after")
    def _heartbeat_within_lease(self) -> LedgerConfig:
        if self.heartbeat >= self.lease:
            raise ValueError("heartbeat must be shorter than lease")
        return self


class AlertsConfig(_Strict):
    """Where alerts go and which events raise one (:mod:`pipeledger.alerts`)."""

    webhooks: Webhooks = Field(default_factory=dict)  # name -> URL
    on: list[AlertKind] = Field(default_factory=lambda: list(ALERT_KINDS))
    timeout: Duration = timedelta(seconds=5)  # per delivery attempt
    retry_delay: Duration = timedelta(seconds=30)  # doubling after each failed attempt
    max_retry_delay: Duration = timedelta(hours=1)


class Config(_Strict):
    """A whole ``pipeledger.toml``. ``base_dir`` anchors relative paths (the file's folder)."""

    warehouse: WarehouseConfig = WarehouseConfig()
    ledger: LedgerConfig = LedgerConfig()
    alerts: AlertsConfig = AlertsConfig()
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
        """Loads and models form one graph without cycles (the cycle is named)."""
        order = TopologicalSorter({name: self.upstreams(name) for name in self.nodes})
        try:
            order.prepare()
        except CycleError as exc:
            cycle = " -> ".join(exc.args[1])
            raise ValueError(f"the pipelines and models form a cycle: {cycle}") from None
        return self

    @cached_property
    def _producers(self) -> dict[str, str]:
        """Target table (as written, and with its schema) -> the node that writes it."""
        return {str(node.target_name): name for name, node in self.nodes.items()}

    def model_sql(self, name: str) -> ModelSql:
        """A model's query, read from its file or its config."""
        from pipeledger.common.sqltext import ModelSql

        model = self.model(name)
        if model.query is not None:
            return ModelSql(model.query, f"models.{name}.query")
        path = self.resolve(model.sql or "")
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"models.{name}.sql: cannot read {path}: {exc.strerror}") from None
        return ModelSql(text, f"models.{name} ({path})")

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
        """Whether a model reads ``target`` in a way that must know the versions its writers
        replace: it aggregates, or overwrites partitions (``load.before``)."""
        for name, model in self.models.items():
            query = self.model_sql(name)
            if str(target) in {str(t) for t in query.tables} and (
                query.aggregates or model.materialized == "partition_overwrite"
            ):
                return True
        return False

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
