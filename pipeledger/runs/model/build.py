"""A model run: compute the model's SQL in the warehouse into a stage, gate it, publish it, and
record which upstream runs it consumed, all in the run's one transaction.

::

    BEGIN
      lock the model
      the upstream runs it has not consumed yet            (the warehouse's commit log)
      incremental: the rows those runs wrote, and the versions they replaced or deleted
        (before-images): the output keys (merge, scd2) or partitions (partition_overwrite)
        they touch (common.lineage: traced through the SQL, or recomputed over those
        rows), and the full query for just those keys or partitions
      full (a new target, --full-refresh, replace, fallback = "full", an upstream
        pipeledger does not write): the whole query;  backfill: a partition or cursor range
      stage -> quality gate -> publish, a sync of the recomputed scope:
        merge               the loads' merge under on_conflict (with a cursor), or rows
                            compared with the stored ones (without); a key of the scope
                            the recomputation no longer produces is deleted (soft_delete:
                            marked)
        scd2                the loads' SCD2 history (load.history): a changed row is a
                            new version, a key gone closes its current version
        partition_overwrite the touched partitions get exactly the recomputed rows
        replace             the whole target gets exactly the recomputed rows
      the consumed upstream runs                           (pipeledger.model_inputs)
    COMMIT

A view (``materialized = "view"``) is created or replaced in the run's transaction, and
copies no rows; the models reading it read the tables under it (``Config.expanded_sql``).

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

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from pipeledger.common.columns import (
    DELETED_AT_COLUMN,
    RESERVED_PREFIX,
    ROW_HASH,
    RUN_ID_COLUMN,
    Column,
    TableName,
    canonical_type,
)
from pipeledger.common.sqltext import READ, ModelSql
from pipeledger.config.model import HISTORY_COLUMNS, ChecksConfig, Config, ModelConfig
from pipeledger.errors import ConfigError, SchemaError, WarehouseError
from pipeledger.publish import merge_sql as load_sql
from pipeledger.publish.before import before_table, ensure_before_table, keep_before_images
from pipeledger.publish.counts import MergeCounts
from pipeledger.publish.deletes import Vanished, find_vanished
from pipeledger.publish.merge import estimated_rows, first_load, merge_staged
from pipeledger.quality.report import GateReport
from pipeledger.runs.model import sql
from pipeledger.runs.steps import StepClock, StepResult
from pipeledger.state.tables import pending_runs, record_input
from pipeledger.state.watermark import Window
from pipeledger.transform.shape import Shape
from pipeledger.warehouse.dialect import Dialect, quote
from pipeledger.warehouse.session import Session
from pipeledger.warehouse.stage import create_schema, create_stage, drop_stage, qualified

if TYPE_CHECKING:  # the gate is Arrow's: imported only by models with checks
    from pipeledger.common.lineage import Coverage, Plan
    from pipeledger.quality.gate import GateSpec

log = logging.getLogger("pipeledger.model")
ModelMode = Literal["incremental", "full_refresh", "backfill"]
_BIND_LIMIT = 500  # touched partitions bound as values (lets the planner push them down)
# touched keys from at least this share of an upstream's rows: the query reads the rows its
# pending runs wrote (one filtered scan: 0.13 s a 1M-row table here) rather than the
# planner matching the whole upstream to the touched keys (a probe of its key is ~3 us,
# so a scan wins from ~40k keys in 1M; the match it chose for 150k: 0.48 s)
_SCAN_SHARE = 0.05


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

    @property
    def changed_target(self) -> bool:
        """Whether the run left anything in its target for the models reading it (a view's
        readers read its SQL in its place, but its run counts as a change, to be safe)."""
        return self.target_created or self.materialized == "view" or self.counts.wrote

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

    def unstaged(self, d: Dialect, alias: str, key: Sequence[str]) -> tuple[str, list[Any]]:
        """:meth:`where`, for finding the keys in scope the stage lacks: when the scope is
        a table of touched keys (``key``), those of its keys that no staged row carries,
        found first from the two temporary tables, so that the target is matched against
        those alone (150k touched keys, 14k of them unstaged, 900k target rows: 0.45 s ->
        0.26 s; PostgreSQL still merge-joins the target's whole key to find them)."""
        if self.keys_table(d, key) is None:
            return self.where(d, alias)
        return sql.in_touched_unstaged(d, alias, self.columns), []

    def keys_table(self, d: Dialect, key: Sequence[str]) -> str | None:
        """The temporary table of touched keys, when the scope is exactly that (each key
        once) and joins to it are hashed: the deletes' search looks its keys up in the
        target (publish.deletes)."""
        if self.values is not None or self.window is not None or not d.hash_joins:
            return None
        return d.temp(sql.TOUCHED) if tuple(self.columns) == tuple(key) else None


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
    vanished: Vanished | None = None  # merge, scd2: the keys of the scope no longer produced
    dropped: int = 0  # --full-refresh: the rows the old target held
    # a new merge target: staged into a table that becomes the target (its schema named)
    promoted: TableName | None = None
    # makes the target's schema in a short transaction of its own (two first runs into
    # one new schema would race on the catalog inside their long transactions)
    prepare_schema: Callable[[TableName], None] | None = None

    @property
    def name(self) -> str:
        return self.request.model

    @property
    def model(self) -> ModelConfig:
        return self.config.model(self.name)

    @property
    def query(self) -> ModelSql:
        """The model's SQL with the project's views it reads written out."""
        return self.config.expanded_sql(self.name)

    @property
    def plan(self) -> Plan:
        return self.config.recompute(self.name)

    def execute(self, session: Session) -> ModelResult:
        session.lock_pipeline(self.name)
        if self.prepare_schema is not None:
            self.prepare_schema(self.model.target_name)
        if self.model.materialized == "view":
            return self._view(session)
        if self.request.mode == "backfill" and not self._range_column:
            raise ConfigError(
                f"model {self.name}: a backfill recomputes a range of partition_by "
                "(partition_overwrite) or of the cursor (merge, scd2), and it has neither; "
                "nothing was written: run it, or run it with --full-refresh"
            )
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
            self._stage(session, existing)
            self._find_vanished(session, existing)
        self.clock.finish("extract", "transform")
        if self.model.checks is not None:
            from pipeledger.quality.gate import run_gate  # Arrow's: only with checks

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
        if self.model.materialized == "replace" or any(u.pending is None for u in self.upstreams):
            return True
        changed = [str(u.name) for u in self._changed]
        if not changed:  # nothing to recompute: no plan needed (nor the SQL parser)
            return False
        return self.plan.fallback == "full" and self.plan.falls_back(changed)

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
        from pipeledger.runs.model.columns import output_columns  # the SQL parser's

        inferred = output_columns(session, self.query, self.model.columns, self.name)
        return tuple(c for c in inferred if not c.name.startswith(RESERVED_PREFIX))

    # -- computing --------------------------------------------------------------------
    def _stage(self, session: Session, existing: list[tuple[str, str]] | None) -> None:
        d = session.dialect
        self.promoted = self._promotable(session, existing)
        if self.promoted is None:
            stage = [*drop_stage(d), create_stage(d, self.columns)]
        else:  # as a load's first run: the rows are written once, where they stay
            stage = load_sql.create_promotable_stage(
                d,
                self.run_id,
                [*self.columns, ROW_HASH],
                self.model.cursor or "",  # NOT NULL as the target's (_fill_declared)
                loaded_at=self.started_at,
                updates=self._spec().updates,
            )
        for statement in stage:
            session.execute(statement)
        query, narrow = self._computation(session)
        where, params = narrow.where(d, "q") if narrow else ("", [])
        staging = sql.stage_model(d, self.columns, query, where, binds=bool(params))
        if self._declares_cursor:
            staged = self._fill_declared(session, staging, (query, where, params))
        else:
            staged = session.execute(staging, params)
        self.rows = staged  # the statement's own count (a count(*) of 857k rows: 0.04-0.06 s)
        log.info("model %s: staged %d recomputed row(s); publishing", self.name, self.rows)

    @property
    def _declares_cursor(self) -> bool:
        """The stage declares the cursor NOT NULL: a promoted one (it becomes the target)."""
        return self.promoted is not None and bool(self.model.cursor)

    def _fill_declared(
        self, session: Session, staging: str, computed: tuple[str, str, list[Any]]
    ) -> int:
        """Stage into a stage that refuses a NULL cursor (no pass over the staged rows to
        look for one, no ALTER of the promoted target: 0.16 s of a 1M-row first build); a
        refusal is named as :meth:`_refuse_null_cursor` names it."""
        query, where, params = computed
        try:
            with session.savepoint():
                return session.execute(staging, params)
        except WarehouseError as exc:
            if exc.sqlstate != WarehouseError.NOT_NULL_VIOLATION:
                raise
            refused = exc
        d, cursor = session.dialect, self.model.cursor or ""
        source = d.verbatim(query) if params else query  # as the staging bound it
        statement = sql.null_cursor_in(d, source, where, cursor, self.model.key)
        self._null_cursor_found(session.query(statement, params))
        raise refused

    def _promotable(
        self, session: Session, existing: list[tuple[str, str]] | None
    ) -> TableName | None:
        """The target, its schema named, when a merge model makes it in this run and its
        stage can become it (a rename instead of a copy of every row: a third of a 1M-row
        first build); None otherwise. A soft-deleting or SCD2 target has columns the
        stage lacks."""
        d, m = session.dialect, self.model
        if existing is not None or not self._merges or not d.promotes_stage:
            return None
        if m.materialized != "merge" or m.soft_delete:
            return None
        return qualified(session, m.target_name)

    def _computation(self, session: Session) -> tuple[str, Scope | None]:
        """The query to stage from, and the scope its rows are filtered by (None: all of
        them); sets :attr:`scope` when only some rows are recomputed."""
        if self.full:
            if self.request.mode == "backfill" and self.request.window is not None:
                self.scope = Scope((self._range_column,), window=self.request.window)
            return _render(session, self.query), self.scope
        self.scope = self._touched(session)
        return self._over_changes(session) or (_render(session, self.query), self.scope)

    @property
    def _range_column(self) -> str:
        m = self.model
        column = m.partition_by if m.materialized == "partition_overwrite" else m.cursor
        return column or ""

    def _touched(self, session: Session) -> Scope:
        """The keys (or partitions) that the changed upstream rows touch, as they are now
        and as they were before (their before-images): read from those rows where the
        scope is a copy of their columns, else recomputed over them."""
        d = session.dialect
        coverage = self._coverage
        group = coverage.scope
        changed = " UNION ALL ".join(
            f"SELECT * FROM ({part}) AS part"
            for u in self._changed
            for part in self._touched_by(session, u, coverage)
        )
        # the touched values are computed once, into a temporary table (reading them into
        # Python first and, when there are many, computing them again cost a whole pass)
        keyed = [c for c in self.columns if c.name in group]
        session.execute(sql.create_touched(d, keyed, changed))
        for statement in d.analyze(d.temp(sql.TOUCHED)):
            session.execute(statement)
        self.touched = int(session.query(f"SELECT count(*) FROM {d.temp(sql.TOUCHED)}")[0][0])
        if len(group) == 1 and self.touched <= _BIND_LIMIT:  # bound: the planner prunes
            values = session.query(sql.touched(group, f"SELECT * FROM {d.temp(sql.TOUCHED)}"))
            return Scope(group, values=[row[0] for row in values])
        return Scope(group)

    def _over_changes(self, session: Session) -> tuple[str, Scope | None] | None:
        """The query over its one changed upstream's changed rows alone (the rows its
        pending runs wrote), when those are every upstream row of the touched values
        (:meth:`_keyed_upstream`) and so many values are touched that reading them beats
        matching the whole upstream to the touched keys; None otherwise. Without an outer
        join every row it yields has a touched value, so it needs no filter by the scope;
        with one, an unmatched row's NULLs are still filtered out by the scope."""
        upstream = self._keyed_upstream(session)
        if upstream is None:
            return None
        from pipeledger.common.lineage import inline_ctes, outer_joins, substitute

        name = str(upstream.name)
        traced = self._coverage.traced[name]
        rows = sql.written_by(upstream.name, upstream.columns, upstream.pending or [], traced)
        tree = inline_ctes(self.query.tree)
        text = substitute(tree, lambda table, _: rows if table == name else None, READ)
        log.info("model %s: recomputed over the changed rows of %s alone", self.name, name)
        narrow = self.scope if outer_joins(tree) else None
        return _render(session, ModelSql(text, self.query.where)), narrow

    def _keyed_upstream(self, session: Session) -> Upstream | None:
        """The changed upstream (the only one) whose rows are unique on the columns the
        scope copies (traced; a unique index of the table says so), with many of its rows
        touched. A touched value then has at most one upstream row, and that row is one
        its pending runs wrote (every write sets the row's run id; a row they deleted is
        gone): the changed rows carry every upstream row the recomputation needs."""
        d, scope, changed = session.dialect, self.scope, self._changed
        if scope is None or scope.values is not None or len(changed) != 1:
            return None
        upstream = changed[0]
        traced = self._coverage.traced.get(str(upstream.name))
        indexes = sql.unique_columns(d)
        if traced is None or indexes is None:
            return None
        rows = estimated_rows(session, upstream.name)
        if rows is None or (self.touched or 0) < _SCAN_SHARE * rows:
            return None
        unique: dict[int, set[str]] = {}
        for index, column in session.query(indexes, [d.table(upstream.name)]):
            unique.setdefault(int(index), set()).add(str(column))
        return upstream if any(c <= set(traced) for c in unique.values()) else None

    @property
    def _coverage(self) -> Coverage:
        """By key (or partition), or by the fallback's partitions when a changed upstream
        is one the key's lineage cannot follow."""
        plan = self.plan
        changed = [str(u.name) for u in self._changed]
        if plan.by_partition is not None and plan.falls_back(changed):
            return plan.by_partition
        assert plan.coverage is not None  # incremental runs have one (common.lineage.plan)
        return plan.coverage

    def _touched_by(self, session: Session, upstream: Upstream, coverage: Coverage) -> list[str]:
        """Queries (the warehouse's SQL) yielding the scope values ``upstream``'s changed
        rows touch: its traced columns, or the model's query over those rows, one read of
        the upstream at a time, every other changed upstream with its old versions too."""
        name = str(upstream.name)
        if name in coverage.traced:
            columns = coverage.traced[name]
            selected = ", ".join(
                f"{quote(c)} AS {quote(s)}" for c, s in zip(columns, coverage.scope, strict=True)
            )
            rows = self._delta(session, upstream)
            return [_render(session, ModelSql(f"SELECT {selected} FROM ({rows}) AS d", ""))]
        from pipeledger.common.lineage import inline_ctes, substitute, table_name, upstream_reads

        tree = inline_ctes(self.query.tree)
        others = {str(u.name): self._with_old(session, u) for u in self._changed}
        reads = sum(1 for t in upstream_reads(tree) if table_name(t) == name)
        queries = []
        for n in range(reads):

            def choose(table: str, index: int, n: int = n) -> str | None:
                if table == name and index == n:
                    return self._delta(session, upstream)
                return others.get(table)

            group = ", ".join(f"q.{quote(c)}" for c in coverage.scope)
            text = substitute(tree, choose, READ)
            queries.append(_render(session, ModelSql(f"SELECT {group} FROM ({text}) AS q", "")))
        return queries

    def _new_rows(self, upstream: Upstream) -> str:
        return sql.written_by(upstream.name, upstream.columns, upstream.pending or [])

    def _old_rows(self, session: Session, upstream: Upstream) -> str | None:
        kept = session.table_columns(before_table(upstream.name))
        if kept is None:
            return None
        names = [name for name, _ in kept]
        return sql.replaced_by(upstream.name, upstream.columns, names, upstream.pending or [])

    def _delta(self, session: Session, upstream: Upstream) -> str:
        """PostgreSQL text: the upstream's rows its pending runs wrote, and the versions
        they replaced or deleted."""
        old = self._old_rows(session, upstream)
        new = self._new_rows(upstream)
        return new if old is None else f"{new} UNION ALL {old}"

    def _with_old(self, session: Session, upstream: Upstream) -> str:
        """PostgreSQL text: the upstream as it is, and the versions its pending runs
        replaced or deleted (a superset of every state it had since the last run)."""
        names = ", ".join(quote(c) for c in upstream.columns)
        table = sql.pg_table(upstream.name)
        old = self._old_rows(session, upstream)
        now = f"SELECT {names} FROM {table}"
        return now if old is None else f"{now} UNION ALL {old}"

    @property
    def _group_columns(self) -> list[str]:
        m = self.model
        if m.materialized == "partition_overwrite" and m.partition_by:
            return [m.partition_by]
        return list(m.key)

    # -- publishing -------------------------------------------------------------------
    @property
    def _merges(self) -> bool:
        """Published by the loads' merge (``merge`` with a cursor, ``scd2``), not by a sync."""
        m = self.model
        return m.materialized == "scd2" or (m.materialized == "merge" and m.cursor is not None)

    def _spec(self) -> load_sql.MergeSpec:
        m = self.model
        return load_sql.MergeSpec(
            target=m.target_name,
            columns=self.columns,
            key=tuple(m.key),
            cursor=m.cursor or "",
            policy=m.policy,
            fingerprints=False,
            before_images=self._downstream,
            soft_delete=m.soft_delete,
            history=m.materialized == "scd2",
        )

    def _find_vanished(self, session: Session, existing: list[tuple[str, str]] | None) -> None:
        """Right after staging (before the gate sets rows aside): the keys of the recomputed
        scope that the target holds and the recomputation no longer produces."""
        if not self._merges:
            return
        self._refuse_null_cursor(session)
        if existing is None or self.request.mode == "backfill":
            # a backfill recomputes a cursor range: a key whose cursor left the range is
            # not gone, so it deletes nothing (incremental runs retract)
            return
        d = session.dialect
        where = self.scope.unstaged(d, "t", self.model.key) if self.scope else ("1 = 1", [])
        spec = self._spec()
        if not spec.history or spec.cursor_type in ("timestamptz", "timestamp", "date"):
            # no mass-delete gate here: a retraction is the model's answer, not a risk
            scope = None if spec.history else self.scope
            among = scope.keys_table(d, self.model.key) if scope else None
            self.vanished = find_vanished(
                session, spec, where, self.started_at, share=False, among=among
            )
            return
        # an scd2 history closes a version at the run's time, which its cursor cannot hold
        current = (f'({where[0]}) AND t."{HISTORY_COLUMNS[2]}"', where[1])
        plain = replace(spec, history=False)
        gone = find_vanished(session, plain, current, self.started_at, share=False)
        if gone.count:
            raise SchemaError(
                f"model {self.name}: {gone.count} key(s) are no longer produced (e.g. "
                f"{', '.join(gone.sample)}), but an scd2 model closes a version at the run's "
                f"time and its cursor {spec.cursor!r} is {spec.cursor_type}: nothing was "
                "written; use a date or timestamp cursor"
            )

    def _refuse_null_cursor(self, session: Session) -> None:
        if self._declares_cursor:  # the stage refused any already
            return
        d, cursor = session.dialect, self.model.cursor or ""
        self._null_cursor_found(session.query(sql.null_cursor(d, cursor, self.model.key)))

    def _null_cursor_found(self, found: list[tuple[Any, ...]]) -> None:
        cursor = self.model.cursor or ""
        if found:
            key = ", ".join(str(v) for v in found[0][:-1])
            raise SchemaError(
                f"model {self.name}: {found[0][-1]} recomputed row(s) have no cursor "
                f"({cursor} is NULL, e.g. key ({key})); nothing was written. A merge "
                "model's cursor must never be NULL: leave cursor out (the model then "
                "compares rows and takes the recomputed one) or coalesce it in the SQL"
            )

    def _publish(self, session: Session, existing: list[tuple[str, str]] | None) -> None:
        m = self.model
        if self._merges:
            kept = self.rows - (self.report.quarantined_rows if self.report else 0)
            spec = self._spec()
            self.created = existing is None
            if self.created:
                self._make_schema(session)
                self.counts = self._first(session, spec, kept)
            else:
                # the rows of touched keys mostly change: each goes straight to ON CONFLICT
                # (one probe of the key, not two); a full recomputation mostly repeats rows
                filtered = self.full or self.request.mode != "incremental"
                self.counts = merge_staged(
                    session, spec, kept, self.run_id, self.started_at, self.vanished, filtered
                )
            return
        if existing is not None and m.materialized == "replace" and not self._same(existing):
            self._drop(session)
            existing = None
        if existing is None:
            self._create(session)
        self.counts = self._sync(session)

    def _first(self, session: Session, spec: load_sql.MergeSpec, kept: int) -> MergeCounts:
        """The new target: the stage promoted (keyed as it becomes the target, its cursor
        then declared NOT NULL as a created target's is), else created and filled."""
        if self.promoted is None:
            return first_load(session, spec, kept, self.run_id, self.started_at)
        spec = replace(spec, target=self.promoted)
        return first_load(session, spec, kept, self.run_id, self.started_at, promotable=True)

    def _make_schema(self, session: Session) -> None:
        if self.prepare_schema is not None:
            self.prepare_schema(self.model.target_name)
        statement = create_schema(session.dialect, self.model.target_name)
        if statement:  # made already (prepare_schema): this only makes sure
            session.execute(statement)

    def _create(self, session: Session) -> None:
        d, m = session.dialect, self.model
        self._make_schema(session)
        session.execute(sql.create_model_target(d, m.target_name, self.columns, m.key))
        self.created = True

    def _drop(self, session: Session) -> None:
        """The target goes (``--full-refresh``, or ``replace`` with other columns); what
        it held is kept as before-images when a model downstream needs them, and counted
        as deleted (its recomputed rows are then inserted anew)."""
        d, target = session.dialect, self.model.target_name
        present = "1 = 1"
        if self.model.soft_delete:
            present = f"{quote(DELETED_AT_COLUMN)} IS NULL"
        self.dropped = int(
            session.query(f"SELECT count(*) FROM {d.table(target)} WHERE {present}")[0][0]
        )
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
        """Make the target's rows in scope (the recomputed keys or partitions, or all of
        them) exactly the staged rows, rewriting only the rows that differ: by key when
        the model has one, else by the rows' text (hashed, or indexed where joins loop)."""
        if self.model.key:
            return self._sync_by_key(session)
        return self._sync_by_text(session)

    def _sync_by_key(self, session: Session) -> MergeCounts:
        """PostgreSQL: the target's keys in scope that no staged row repeats exactly are
        listed (hashing the stage), deleted, and the staged rows whose key the target then
        lacks inserted. Where joins loop (SQLite): as without a key (pairs of equal rows,
        by an index led by the key), and a key staged twice is found by the insert."""
        d = session.dialect
        if not d.hash_joins:
            return self._sync_by_pairs(session)
        target, key = self.model.target_name, list(self.model.key)
        names = [c.name for c in self.columns]
        values = [n for n in names if n not in key]
        self._refuse_repeated_keys(session)
        scope, params = self.scope.where(d, "t") if self.scope else ("1 = 1", [])
        session.execute(sql.drop_temp(d, sql.DROPPED))
        session.execute(sql.create_dropped(d, target, key, values, scope), params)
        dropped = sql.in_dropped(d, key)
        if self._downstream:
            ensure_before_table(session, target, self.columns)
            session.execute(keep_before_images(d, target, names, dropped), [self.run_id])
        session.execute(load_sql.delete_where(d, target, dropped))
        updated, gone = (int(n or 0) for n in session.query(sql.count_dropped(d))[0])
        new = sql.key_not_in_target(d, target, key, scope)
        inserted = session.execute(
            sql.insert_staged(d, target, names, new), [self.run_id, self.started_at, *params]
        )
        return MergeCounts(
            inserted=inserted - updated,
            updated=updated,
            unchanged=self.rows - inserted,
            deleted=gone,
            net_rows=inserted - updated - gone,
        )

    def _refuse_repeated_keys(self, session: Session) -> None:
        """A key the query produced twice names no one output row."""
        d, key = session.dialect, self.model.key
        found = session.query(sql.repeated_keys(d, key))
        if found:
            shown = ", ".join(str(v) for v in found[0][:-1])
            raise SchemaError(
                f"model {self.name}: the query produced key ({shown}) {found[0][-1]} times; "
                f"a key ({', '.join(key)}) must name one output row. Nothing was written"
            )

    def _sync_by_text(self, session: Session) -> MergeCounts:
        """Without a key: a target row in scope stays if the stage has an equal row (nulls
        equal), and a staged row is inserted if no target row in scope equals it."""
        if not session.dialect.hash_joins:
            return self._sync_by_pairs(session)
        d, target = session.dialect, self.model.target_name
        names = [c.name for c in self.columns]
        scope, params = self.scope.where(d, "t") if self.scope else ("1 = 1", [])
        vanished = f"({scope}) AND NOT EXISTS ({sql.same_row(d, names, 's', d.stage(), 't')})"
        if self._downstream:
            ensure_before_table(session, target, self.columns)
            session.execute(keep_before_images(d, target, names, vanished), [self.run_id, *params])
        deleted = session.execute(load_sql.delete_where(d, target, vanished), params)
        twin = f"{sql.same_row(d, names, 't', d.table(target), 's')} AND ({scope})"
        inserted = session.execute(
            sql.insert_staged(d, target, names, f"NOT EXISTS ({twin})"),
            [self.run_id, self.started_at, *params],
        )
        return MergeCounts(inserted=inserted, unchanged=self.rows - inserted, deleted=deleted)

    def _sync_by_pairs(self, session: Session) -> MergeCounts:
        """Where joins loop (SQLite): every target row in scope probes an index on all the
        staged columns (the key first) once for an equal staged row, and the pairs found
        decide both what goes and what comes (never a scan inside a scan). With a key, a
        target row that goes while its key is staged is an update."""
        d, target, key = session.dialect, self.model.target_name, list(self.model.key)
        names = [c.name for c in self.columns]
        ordered = [*key, *(n for n in names if n not in key)]
        scope, params = self.scope.where(d, "t") if self.scope else ("1 = 1", [])
        for statement in sql.pair_rows_setup(d, ordered):
            session.execute(statement)
        session.execute(sql.pair_rows(d, target, ordered, scope), params)
        unpaired = sql.unpaired_target(d)
        updated = 0
        if key:
            updated = int(session.query(sql.count_restaged(d, target, key))[0][0])
        if self._downstream:
            ensure_before_table(session, target, self.columns)
            session.execute(keep_before_images(d, target, names, unpaired), [self.run_id])
        deleted = session.execute(load_sql.delete_where(d, target, unpaired))
        try:
            with session.savepoint():
                inserted = session.execute(
                    sql.insert_staged(d, target, names, sql.unpaired_stage(d)),
                    [self.run_id, self.started_at],
                )
        except WarehouseError as exc:
            if exc.sqlstate == WarehouseError.UNIQUE_VIOLATION and key:
                self._refuse_repeated_keys(session)
            raise
        return MergeCounts(
            inserted=inserted - updated,
            updated=updated,
            unchanged=self.rows - inserted,
            deleted=deleted - updated,
            net_rows=inserted - deleted,
        )

    @property
    def _downstream(self) -> bool:
        """A model downstream needs the versions this one replaces (before-images)."""
        return self.config.needs_before_images(self.model.target_name)

    def _record_inputs(self, session: Session) -> None:
        now = datetime.now(UTC)
        for run_id, table in self._consumed:
            params = [self.name, run_id, str(table), self.run_id, now]
            session.execute(record_input(session.dialect), params)
        for upstream in self._changed:
            self._prune(session, upstream)

    def _prune(self, session: Session, upstream: Upstream) -> None:
        """The upstream's before-images that no model needs any more (every model reading
        the upstream has consumed the runs that replaced them)."""
        if session.table_columns(before_table(upstream.name)) is None:
            return
        readers = self.config.before_image_readers(upstream.name)
        if not readers:
            return
        statement = sql.prune_before_images(session.dialect, upstream.name, len(readers))
        session.execute(statement, readers)

    # -- a view ---------------------------------------------------------------------
    def _view(self, session: Session) -> ModelResult:
        """Create or replace the view in the run's transaction: no rows are copied."""
        d, target = session.dialect, self.model.target_name
        with self.clock.measure("load"):
            kind = session.query(sql.relation_kind(d), sql.relation_kind_params(d, target))
            if kind and kind[0][0] not in ("v", "view"):
                raise SchemaError(
                    f"model {self.name}: {target} exists and is a table, not a view; nothing "
                    "was changed (drop the table, or give the view another target)"
                )
            self.created = not kind
            text = _render(session, self.config.model_sql(self.name))
            statement = create_schema(d, target)
            if statement:
                session.execute(statement)
            self._replace_view(session, target, text)
        self.full = True
        self.clock.finish("load")
        return self._result()

    def _replace_view(self, session: Session, target: TableName, text: str) -> None:
        """Replaced in place (views built on it stay); one whose columns changed is
        dropped and made anew (PostgreSQL refuses to drop a column of a view)."""
        d = session.dialect
        try:
            with session.savepoint():
                for step in sql.create_view(d, target, text):
                    session.execute(step)
        except WarehouseError:
            if not d.replaces_views or self.created:
                raise
            session.execute(sql.drop_view(d, target))
            session.execute(f"CREATE VIEW {d.table(target)} AS {text}")

    # -- result -----------------------------------------------------------------------
    def _gate_spec(self) -> GateSpec:
        from pipeledger.quality.gate import GateSpec

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
            counts=replace(self.counts, deleted=self.counts.deleted + self.dropped),
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
    d = session.dialect
    return query.render(not d.has_schemas, session.table_columns, translate=d.translates_models)
