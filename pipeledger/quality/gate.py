"""The quality gate: evaluate every check on the staged rows, then make one decision.

* **publish**: nothing failed (warn-only checks may have);
* **halt**: a batch-level check failed (row count, schema drift under ``fail``), or a
  row-level check failed under ``on_fail = "halt"``: nothing is published (exit 3);
* **quarantine**: only row-level checks failed under ``on_fail = "quarantine"``: the bad
  rows move to ``<target>_quarantine`` and the rest is published (the run is ``partial``).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from pipeledger.common.columns import TableName
from pipeledger.config.model import ChecksConfig, RowCountCheck
from pipeledger.errors import GateFailed, WarehouseError
from pipeledger.quality import checks as q
from pipeledger.quality.report import CheckResult, CheckStatus, Decision, GateReport
from pipeledger.transform.conform import Shape
from pipeledger.warehouse.session import Session
from pipeledger.warehouse.stage import create_schema, unique_key_index


@dataclass(frozen=True, kw_only=True)
class GateSpec:
    pipeline: str
    run_id: str
    target: TableName
    shape: Shape
    checks: ChecksConfig
    recent_counts: Sequence[int] | None = None  # rows staged by earlier successful runs
    drift: dict[str, list[str]] = field(default_factory=dict)
    # a new PostgreSQL target proves key uniqueness with the primary key it builds anyway:
    # the gate then checks duplicates only if that fails (see recheck_keys)
    key_proven_by_target: bool = False
    # staged rows (SQL over alias s) that only the key's checks judge: a delete marker's
    # rows, which often carry nothing but their key
    exempt: str | None = None


def _key_text(row: Sequence[object]) -> str:
    return "(" + ", ".join(str(v) for v in row) + ")"


def _row_result(session: Session, spec: GateSpec, check: q.RowCheck, failing: int) -> CheckResult:
    sample: tuple[str, ...] = ()
    if failing:
        rows = session.query(
            q.sample_keys(session.dialect, spec.shape.key, check.predicate), list(check.params)
        )
        sample = tuple(_key_text(r) for r in rows)
    status: CheckStatus = "pass" if not failing else ("warn" if check.warn_only else "fail")
    return CheckResult(
        name=check.name,
        kind=check.kind,
        level="row",
        status=status,
        observed=f"{failing:,} failing row(s)",
        expected=check.expected,
        failing_rows=failing,
        sample_keys=sample,
        warn_only=check.warn_only,
    )


def _duplicates(session: Session, spec: GateSpec, warn: bool) -> CheckResult:
    """Key uniqueness: a unique index on the staged keys proves it in one cheap step (and
    the merge reuses it); only when it fails are the duplicates counted and sampled."""
    d = session.dialect
    name = "key_unique:" + ",".join(spec.shape.key)
    if _proven_unique(session, spec.shape.key):
        return CheckResult(
            name=name,
            kind="key",
            level="row",
            status="pass",
            observed="0 duplicated key(s)",
            expected="unique keys",
        )
    predicate = q.duplicate_predicate(d, spec.shape.key)
    failing = int(session.query(f"SELECT count(*) FROM {d.stage()} AS s WHERE {predicate}")[0][0])
    check = q.RowCheck(
        name=name,
        kind="key",
        predicate=predicate,
        params=(),
        expected="unique keys",
        warn_only=warn,
    )
    return _row_result(session, spec, check, failing)


def _proven_unique(session: Session, key: Sequence[str]) -> bool:
    """Whether a unique index on the staged keys could be built (False: keys repeat). Not
    tried where a failed statement loses the transaction (no partial rollback)."""
    if not session.dialect.partial_rollback:
        return False
    try:
        with session.savepoint():
            session.execute(unique_key_index(session.dialect, key))
        return True
    except WarehouseError as exc:
        if exc.sqlstate != WarehouseError.UNIQUE_VIOLATION:
            raise
        return False


def _row_count(spec: GateSpec, staged: int, rule: RowCountCheck) -> CheckResult:
    warn = "row_count" in spec.checks.warn
    if rule.auto:
        history = list(spec.recent_counts or [])
        if len(history) < rule.min_history:
            return CheckResult(
                name="row_count",
                kind="row_count",
                level="batch",
                status="not_learned",
                observed=f"{staged:,}",
                expected=f"a band learned from {rule.min_history} successful runs "
                f"(only {len(history)} so far)",
                warn_only=warn,
            )
        mean = statistics.fmean(history)
        spread = max(statistics.stdev(history), 0.01 * mean)  # identical history: 1% band
        low, high = max(0.0, mean - rule.sigma * spread), mean + rule.sigma * spread
        expected = (
            f"{low:,.0f}..{high:,.0f} (mean {mean:,.0f} +/- {rule.sigma:g} sd, n={len(history)})"
        )
    else:
        low = float(rule.min) if rule.min is not None else 0.0
        high = float(rule.max) if rule.max is not None else float("inf")
        upper = "unbounded" if rule.max is None else f"{rule.max:,}"
        expected = f"{rule.min or 0:,}..{upper}"
    status: CheckStatus = "pass" if low <= staged <= high else ("warn" if warn else "fail")
    return CheckResult(
        name="row_count",
        kind="row_count",
        level="batch",
        status=status,
        observed=f"{staged:,} rows",
        expected=expected,
        warn_only=warn,
    )


def _drift(spec: GateSpec) -> CheckResult | None:
    if not spec.drift:
        return None
    policy = spec.checks.schema_drift
    fails = policy == "fail" or (policy == "evolve" and "retyped" in spec.drift)
    warn = "schema_drift" in spec.checks.warn or not fails
    observed = "; ".join(f"{kind}: {', '.join(cols)}" for kind, cols in spec.drift.items())
    status: CheckStatus = "warn" if warn else "fail"
    return CheckResult(
        name="schema_drift",
        kind="schema_drift",
        level="batch",
        status=status,
        observed=observed,
        expected=f"the columns of the last load (schema_drift = {policy})",
        warn_only=warn,
    )


def evaluate(session: Session, spec: GateSpec) -> tuple[GateReport, list[q.RowCheck]]:
    """Run every check; return the report and the row checks that failed (not warn-only)."""
    d = session.dialect
    row_checks = [_exempting(c, spec.exempt) for c in q.row_checks(d, spec.checks, spec.shape)]
    sql, params = q.count_failures(d, row_checks)
    counts = session.query(sql, params)[0]
    staged = int(counts[0])
    results = [
        _row_result(session, spec, c, int(n)) for c, n in zip(row_checks, counts[1:], strict=True)
    ]
    failing = [c for c, r in zip(row_checks, results, strict=True) if r.status == "fail"]
    if spec.key_proven_by_target and not failing:
        # nothing else fails, so no row leaves staging before the primary key is built
        name = "key_unique:" + ",".join(spec.shape.key)
        unique = CheckResult(
            name=name,
            kind="key",
            level="row",
            status="pass",
            observed="proven by the new target's primary key",
            expected="unique keys",
        )
    else:
        unique = _duplicates(session, spec, "key" in spec.checks.warn)
    results.append(unique)
    if unique.status == "fail":
        failing.append(
            q.RowCheck(
                name=unique.name,
                kind="key",
                predicate=q.duplicate_predicate(d, spec.shape.key),
                params=(),
                expected="unique keys",
            )
        )
    batch = [r for r in (_drift(spec),) if r is not None]
    if spec.checks.row_count is not None:
        batch.append(_row_count(spec, staged, spec.checks.row_count))
    results = batch + results
    decision = _decide(spec.checks, batch, failing)
    return GateReport(
        results=tuple(results), decision=decision, schema_changes=dict(spec.drift)
    ), failing


def _exempting(check: q.RowCheck, exempt: str | None) -> q.RowCheck:
    if exempt is None or check.kind == "key":
        return check
    return replace(check, predicate=f"NOT ({exempt}) AND ({check.predicate})")


def _decide(checks: ChecksConfig, batch: list[CheckResult], failing: list[q.RowCheck]) -> Decision:
    if any(r.status == "fail" for r in batch):
        return "halt"
    if failing:
        return "halt" if checks.on_fail == "halt" else "quarantine"
    return "publish"


def quarantine(session: Session, spec: GateSpec, failing: list[q.RowCheck]) -> tuple[int, int]:
    """Move the failing rows out of staging into the quarantine table. Returns (rows held
    back, quarantine entries added or reopened): a row already set aside by an earlier run
    is held back again but is not news."""
    d = session.dialect
    schema = create_schema(d, spec.target)
    if schema:
        session.execute(schema)
    session.execute(q.create_quarantine(d, spec.target))
    now = datetime.now(UTC)
    entries = 0
    for check in failing:
        reason = f"{check.name}: expected {check.expected}"
        entries += session.execute(
            q.quarantine_rows(d, spec.target, spec.shape, check, check.predicate),
            [
                spec.run_id,
                spec.pipeline,
                check.name,
                reason,
                now,
                spec.run_id,
                check.name,
                *check.params,
            ],
        )
    params = [p for check in failing for p in check.params]
    held = session.execute(q.delete_failing(d, [c.predicate for c in failing]), params)
    return held, entries


def run_gate(session: Session, spec: GateSpec) -> GateReport:
    """Evaluate, then act on the decision: raise GateFailed, quarantine, or pass."""
    report, failing = evaluate(session, spec)
    if report.decision == "halt":
        raise GateFailed(_halt_message(spec, report), report=report)
    if report.decision == "quarantine":
        held, entries = quarantine(session, spec, failing)
        return GateReport(
            results=report.results,
            decision="quarantine",
            quarantined_rows=held,
            schema_changes=report.schema_changes,
            new_entries=entries,
        )
    return report


def recheck_keys(session: Session, spec: GateSpec, report: GateReport) -> GateReport:
    """The new target's primary key refused duplicate staged keys: check them for real,
    then halt or quarantine them as the gate would have."""
    d = session.dialect
    unique = _duplicates(session, spec, "key" in spec.checks.warn)
    results = tuple(unique if r.name == unique.name else r for r in report.results)
    if unique.status != "fail":
        return replace(report, results=results)
    if spec.checks.on_fail == "halt":
        halted = replace(report, results=results, decision="halt")
        raise GateFailed(_halt_message(spec, halted), report=halted)
    check = q.RowCheck(
        name=unique.name,
        kind="key",
        predicate=q.duplicate_predicate(d, spec.shape.key),
        params=(),
        expected="unique keys",
    )
    held, entries = quarantine(session, spec, [check])
    return GateReport(
        results=results,
        decision="quarantine",
        quarantined_rows=report.quarantined_rows + held,
        schema_changes=report.schema_changes,
        new_entries=report.new_entries + entries,
    )


def _halt_message(spec: GateSpec, report: GateReport) -> str:
    lines = [f"pipeline {spec.pipeline}: quality gate failed; nothing was published"]
    lines += [
        f"  {r.line()}" for r in report.results if r.status in ("fail", "warn", "not_learned")
    ]
    return "\n".join(lines)
