"""A model run: compute the model's SQL in the warehouse into a stage, gate it, publish it, and
record which upstream runs it consumed, all in the run's one transaction.

::

    BEGIN
      lock the model
      the upstream runs it has not consumed yet            (the warehouse's commit log)
      incremental: the rows those runs wrote, and the versions they replaced (before-images)
        merge, one output row per input row: the query over just those rows
        merge that aggregates, partition_overwrite: the keys / partitions those rows touch,
          recomputed whole from the full query
      full (a new target, --full-refresh, replace, an upstream pipeledger does not write):
        the whole query;  backfill: the query within a partition or cursor range
      stage -> quality gate -> publish:
        merge               the loads' merge under on_conflict
        scd2                the loads' SCD2 history (load.history): a changed row is a
                            new version
        partition_overwrite the touched partitions get exactly the recomputed rows
        replace             the whole target gets exactly the recomputed rows
      the consumed upstream runs                           (pipeledger.model_inputs)
    COMMIT

Exactly once, without one snapshot for the whole run (a REPEATABLE READ transaction could
not write the run's final record once the heartbeat had renewed its lease): an upstream
run is consumed only if the list of pending runs, read first, names it; the new rows are
read by those runs' ids, so a run that commits meanwhile is neither half-read nor marked
consumed, and the next model run takes it. A recomputation of touched partitions (or
keys) may already see that later run's rows: it is recomputed again next time with the
same result, which is never counted twice. An upstream load still running is not seen at
all (it has not committed). ``partition_overwrite`` and ``replace`` rewrite only rows that
differ, so an unchanged partition keeps its rows and their run ids.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Literal

from pipeledger.common.columns import (
    RESERVED_PREFIX,
    RUN_ID_COLUMN,
    Column,
    TableName,
    canonical_type,
)
from pipeledger.common.sqltext import ModelSql
from pipeledger.config.model import HISTORY_COLUMNS, ChecksConfig, Config, ModelConfig
from pipeledger.errors import SchemaError
from pipeledger.publish import merge_sql as load_sql
from pipeledger.publish.before import before_table, ensure_before_table, keep_before_images
from pipeledger.publish.counts import MergeCounts
from pipeledger.publish.merge import first_load, merge_staged
from pipeledger.quality.gate import GateSpec, run_gate
from pipeledger.quality.report import GateReport
from pipeledger.runs.model import sql
from pipeledger.runs.model.columns import output_columns
from pipeledger.runs.steps import StepClock, StepResult
from pipeledger.state.tables import pending_runs, record_input
from pipeledger.state.watermark import Window
from pipeledger.transform.conform import Shape
from pipeledger.warehouse.dialect import Dialect, quote
from pipeledger.warehouse.session import Session
from pipeledger.warehouse.stage import create_schema, create_stage, drop_stage

ModelMode = Literal["incremental", "full_refresh", "backfill"]
_BIND_LIMIT = 500  # touched partitions bound as values (lets the planner push them down)


@dataclass(frozen=True, kw_only=True)
class ModelRequest:
    model: str
    mode: ModelMode = "incremental"
    window: Window | None = None  # backfill: a range of partition_by (or, merge: the cursor)


@dataclass(frozen=True, kw_only=True)
class ModelResult:
    """What one model run did."""

    pipeline: str  # the model's name (the node)
    run_id: str
    mode: ModelMode
    materialized: str
    status: Literal["success", "partial"]
    target: str
    started_at: datetime
    duration_s: float
    rows_computed: int = 0
    counts: MergeCounts = field(default_factory=MergeCounts)
    consumed: tuple[str, ...] = ()  # upstream run ids
    touched: int | None = None  # partitions or keys recomputed (None: all)
    full: bool = False
    quality: GateReport | None = None
    steps: tuple[StepResult, ...] = ()
    target_created: bool = False
    ledger_error: str | None = None  # committed, but the ledger could not record it

    @property
    def exit_code(self) -> int:
        """0, or 5 when the rows committed but the ledger could not record the run."""
        return 5 if self.ledger_error else 0

    def with_ledger_error(self, message: str) -> ModelResult:
        return replace(self, ledger_error=message)

    @property
    def _recomputed(self) -> str | int:
        """What was computed: everything, the rows of the upstream runs it consumed, or
        this many touched partitions (or keys), recomputed whole."""
        if self.full:
            return "all"
        return "changed rows" if self.touched is None else self.touched

    def to_json(self) -> dict[str, Any]:
        c = self.counts
        return {
            "pipeline": self.pipeline,
            "kind": "model",
            "run_id": self.run_id,
            "mode": self.mode,
            "materialized": self.materialized,
            "status": self.status,
            "target": self.target,
            "rows_read": self.rows_computed,
            "rows_inserted": c.inserted,
            "rows_updated": c.updated,
            "rows_unchanged": c.unchanged,
            "rows_deleted": c.deleted,
            "rows_superseded": c.superseded,
            "upstream_runs": len(self.consumed),
            "recomputed": self._recomputed,
            "started_at": self.started_at.isoformat(),
            "duration_s": round(self.duration_s, 3),
            "error": None,
            "ledger_error": self.ledger_error,
            "quality": self.quality.to_json() if self.quality else None,
        }


@dataclass
class Upstream:
    """A table the model reads: its columns, and the runs in it the model has not consumed
    (None: not a pipeledger table, so every run reads it whole)."""

    name: TableName
    columns: list[str]
    pending: list[str] | None


@dataclass(frozen=True)
class Scope:
    """The output rows a run recomputes (None of these: all of them): those whose
    ``columns`` take one of ``values``, are in the touched table, or fall in ``window``."""

    columns: tuple[str, ...]
    values: list[Any] | None = None
    window: Window | None = None

    def where(self, d: Dialect, alias: str) -> tuple[str, list[Any]]:
        if self.window is not None:
            return sql.in_range(d, f"{alias}.{quote(self.columns[0])}", self.window)
        if self.values is not None:
            where = sql.in_values(d, f"{alias}.{quote(self.columns[0])}", len(self.values))
            return where, [self.values] if d.array_params else list(self.values)
        return sql.in_touched(d, alias, self.columns), []


@dataclass
class Model:
    """One run of one model, inside the caller's transaction (see the module docstring)."""

    request: ModelRequest
    config: Config
    run_id: str
    clock: StepClock = field(default_factory=StepClock)
    began: float = field(default_factory=time.monotonic)
    started_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    columns: tuple[Column, ...] = ()
    upstreams: list[Upstream] = field(default_factory=list)
    scope: Scope | None = None
    touched: int | None = None
    full: bool = False
    created: bool = False
    rows: int = 0
    counts: MergeCounts = field(default_factory=MergeCounts)
    report: GateReport | None = None

    @property
    def name(self) -> str:
        return self.request.model

    @property
    def model(self) -> ModelConfig:
        return self.config.model(self.name)

    @property
    def query(self) -> ModelSql:
        return self.config.model_sql(self.name)

    def execute(self, session: Session) -> ModelResult:
        session.lock_pipeline(self.name)
        existing = session.table_columns(self.model.target_name)
        with self.clock.measure("extract"):
            self.upstreams = [self._upstream(session, t) for t in self.query.tables]
        self.full = self._full(existing)
        if not self.full and not self._consumed:
            self.clock.finish("extract")
            return self._result()
        if existing is not None and self._rebuild:
            self._drop(session)
            existing = None
        self.columns = self._output(session, existing)
        with self.clock.measure("transform"):
            self._stage(session)
        self.clock.finish("extract", "transform")
        if self.model.checks is not None:
            with self.clock.measure("quality"):
                self.report = run_gate(session, self._gate_spec())
        with self.clock.measure("load"):
            self._publish(session, existing)
            self._record_inputs(session)
        self.clock.finish("quality", "load")
        return self._result()

    # -- planning ---------------------------------------------------------------------
    def _upstream(self, session: Session, table: TableName) -> Upstream:
        columns = session.table_columns(table)
        if columns is None:
            raise SchemaError(
                f"model {self.name} reads {table}, which does not exist (has its upstream "
                "loaded anything yet?)"
            )
        names = [name for name, _ in columns]
        if RUN_ID_COLUMN not in names:
            return Upstream(table, names, None)
        rows = session.query(pending_runs(session.dialect, 1), [str(table), self.name])
        return Upstream(table, names, [str(run_id) for run_id, _ in rows])

    @property
    def _consumed(self) -> list[tuple[str, TableName]]:
        return [(r, u.name) for u in self.upstreams for r in u.pending or []]

    @property
    def _changed(self) -> list[Upstream]:
        return [u for u in self.upstreams if u.pending]

    def _full(self, existing: list[tuple[str, str]] | None) -> bool:
        """Whether this run computes the whole query (else only what changed upstream)."""
        if self.request.mode != "incremental" or existing is None:
            return True
        return self.model.materialized == "replace" or any(
            u.pending is None for u in self.upstreams
        )

    @property
    def _rebuild(self) -> bool:
        """``--full-refresh``: the target is made anew (its columns may have changed)."""
        return self.request.mode == "full_refresh"

    def _output(
        self, session: Session, existing: list[tuple[str, str]] | None
    ) -> tuple[Column, ...]:
        """The model's columns: the target's once it exists (``replace``: the query's),
        else the query's, typed (``columns`` overrides); pipeledger's own columns of an
        upstream are not carried over."""
        if existing is not None and self.model.materialized != "replace":
            added = HISTORY_COLUMNS if self.model.materialized == "scd2" else ()
            return tuple(
                Column(name, canonical_type(kind))
                for name, kind in existing
                if not name.startswith(RESERVED_PREFIX) and name not in added
            )
        inferred = output_columns(session, self.query, self.model.columns, self.name)
        return tuple(c for c in inferred if not c.name.startswith(RESERVED_PREFIX))

    # -- computing --------------------------------------------------------------------
    def _stage(self, session: Session) -> None:
        d = session.dialect
        for statement in [*drop_stage(d), create_stage(d, self.columns)]:
            session.execute(statement)
        query = self._computation(session)
        where, params = self.scope.where(d, "q") if self.scope else ("", [])
        staging = sql.stage_model(d, self.columns, query, where, binds=bool(params))
        session.execute(staging, params)
        self.rows = int(session.query(f"SELECT count(*) FROM {d.stage()}")[0][0])

    def _computation(self, session: Session) -> str:
        """The query to stage from; sets :attr:`scope` when only some rows are recomputed."""
        if self.full:
            if self.request.mode == "backfill" and self.request.window is not None:
                self.scope = Scope((self._range_column,), window=self.request.window)
            return _render(session, self.query)
        if self._merges and not self.query.aggregates:
            parts = [self.query.replacing({str(u.name): self._new_rows(u)}) for u in self._changed]
            return " UNION ALL ".join(_render(session, part) for part in parts)
        self.scope = self._touched(session)
        return _render(session, self.query)

    @property
    def _range_column(self) -> str:
        m = self.model
        column = m.partition_by if m.materialized == "partition_overwrite" else m.cursor
        return column or ""

    def _new_rows(self, upstream: Upstream) -> str:
        return sql.written_by(upstream.name, upstream.columns, upstream.pending or [])

    def _touched(self, session: Session) -> Scope:
        """The partitions (or keys) that the changed upstream rows touch, as they are now
        and as they were before (their before-images)."""
        d = session.dialect
        group = tuple(self._group_columns)
        changed = " UNION ALL ".join(
            f"SELECT * FROM ({self._delta(session, u)}) AS part" for u in self._changed
        )
        if len(group) == 1:
            values = [row[0] for row in session.query(sql.touched(group, changed))]
            self.touched = len(values)
            if len(values) <= _BIND_LIMIT:
                return Scope(group, values=values)
        keyed = [c for c in self.columns if c.name in group]
        session.execute(sql.create_touched(d, keyed, changed))
        self.touched = int(session.query(f"SELECT count(*) FROM {d.temp(sql.TOUCHED)}")[0][0])
        return Scope(group)

    def _delta(self, session: Session, upstream: Upstream) -> str:
        rows = self._new_rows(upstream)
        kept = session.table_columns(before_table(upstream.name))
        if kept is not None:
            names = [name for name, _ in kept]
            old = sql.replaced_by(upstream.name, upstream.columns, names, upstream.pending or [])
            rows = f"{rows} UNION ALL {old}"
        replaced = self.query.replacing({str(upstream.name): rows})
        return _render(session, replaced)

    @property
    def _group_columns(self) -> list[str]:
        m = self.model
        if m.materialized == "partition_overwrite" and m.partition_by:
            return [m.partition_by]
        return list(m.key)

    # -- publishing -------------------------------------------------------------------
    @property
    def _merges(self) -> bool:
        """Published by the loads' merge (``merge``, ``scd2``), not by a sync."""
        return self.model.materialized in ("merge", "scd2")

    def _publish(self, session: Session, existing: list[tuple[str, str]] | None) -> None:
        m = self.model
        if self._merges:
            kept = self.rows - (self.report.quarantined_rows if self.report else 0)
            spec = load_sql.MergeSpec(
                target=m.target_name,
                columns=self.columns,
                key=tuple(m.key),
                cursor=m.cursor or "",
                policy=m.on_conflict or "update",
                fingerprints=False,
                before_images=self._downstream,
                history=m.materialized == "scd2",
            )
            self.created = existing is None
            publish = first_load if self.created else merge_staged
            self.counts = publish(session, spec, kept, self.run_id, self.started_at)
            return
        if existing is not None and m.materialized == "replace" and not self._same(existing):
            self._drop(session)
            existing = None
        if existing is None:
            self._create(session)
        self.counts = self._sync(session)

    def _create(self, session: Session) -> None:
        d, m = session.dialect, self.model
        statement = create_schema(d, m.target_name)
        if statement:
            session.execute(statement)
        session.execute(sql.create_model_target(d, m.target_name, self.columns, m.key))
        self.created = True

    def _drop(self, session: Session) -> None:
        """The target goes (``--full-refresh``, or ``replace`` with other columns); what
        it held is kept as before-images when a model downstream needs them."""
        d, target = session.dialect, self.model.target_name
        if self._downstream:
            columns = session.table_columns(target) or []
            names = [n for n, _ in columns if not n.startswith(RESERVED_PREFIX)]
            typed = [Column(n, canonical_type(k)) for n, k in columns if n in names]
            ensure_before_table(session, target, typed)
            session.execute(keep_before_images(d, target, names, "1 = 1"), [self.run_id])
        session.execute(f"DROP TABLE {d.table(target)}")

    def _same(self, existing: list[tuple[str, str]]) -> bool:
        names = [name for name, _ in existing if not name.startswith(RESERVED_PREFIX)]
        return names == [c.name for c in self.columns]

    def _sync(self, session: Session) -> MergeCounts:
        """Make the target's rows in scope (the recomputed partitions, or all of them)
        exactly the staged rows, rewriting only the rows that differ."""
        d, target = session.dialect, self.model.target_name
        names = [c.name for c in self.columns]
        scope, params = self.scope.where(d, "t") if self.scope else ("1 = 1", [])
        vanished = f"({scope}) AND NOT EXISTS ({sql.same_row(d, names, 's', d.stage(), 't')})"
        if self._downstream:
            ensure_before_table(session, target, self.columns)
            session.execute(keep_before_images(d, target, names, vanished), [self.run_id, *params])
        deleted = session.execute(load_sql.delete_where(d, target, vanished), params)
        new = f"NOT EXISTS ({sql.same_row(d, names, 't', d.table(target), 's')} AND ({scope}))"
        inserted = session.execute(
            sql.insert_staged(d, target, names, new), [self.run_id, self.started_at, *params]
        )
        return MergeCounts(inserted=inserted, unchanged=self.rows - inserted, deleted=deleted)

    @property
    def _downstream(self) -> bool:
        """A model downstream needs the versions this one replaces (before-images)."""
        return self.config.needs_before_images(self.model.target_name)

    def _record_inputs(self, session: Session) -> None:
        now = datetime.now(UTC)
        for run_id, table in self._consumed:
            params = [self.name, run_id, str(table), self.run_id, now]
            session.execute(record_input(session.dialect), params)

    # -- result -----------------------------------------------------------------------
    def _gate_spec(self) -> GateSpec:
        m = self.model
        key = tuple(m.key) or (self.columns[0].name,)
        cursor = m.cursor or m.partition_by or self.columns[0].name
        if m.materialized == "scd2":  # one row per version: per key and cursor
            key = (*key, cursor)
        shape = Shape(self.columns, key, cursor)
        return GateSpec(
            pipeline=self.name,
            run_id=self.run_id,
            target=m.target_name,
            shape=shape,
            checks=m.checks or ChecksConfig(),
        )

    def _result(self) -> ModelResult:
        m = self.model
        partial = self.report is not None and bool(self.report.new_entries)
        return ModelResult(
            pipeline=self.name,
            run_id=self.run_id,
            mode=self.request.mode,
            materialized=m.materialized,
            status="partial" if partial else "success",
            target=m.target,
            started_at=self.started_at,
            duration_s=time.monotonic() - self.began,
            rows_computed=self.rows,
            counts=self.counts,
            consumed=tuple(r for r, _ in self._consumed),
            touched=None if self.full else self.touched,
            full=self.full,
            quality=self.report,
            steps=tuple(self.clock.results({}, 0)),
            target_created=self.created,
        )

    def consequence(self) -> str:
        return (
            f"model {self.name} (run {self.run_id}): nothing was written; the upstream runs "
            "it has not consumed wait for its next run"
        )


def _render(session: Session, query: ModelSql) -> str:
    """The query in the warehouse's SQL, translated with the upstreams' column types."""
    return query.render(session.dialect.translates_models, session.table_columns)
