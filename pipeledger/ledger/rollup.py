"""Daily rollups of the runs: what ``status`` and ``anomalies`` read instead of every run.

One row per pipeline and UTC day of the runs' start in ``pipeledger.pipeline_days``: how
many runs finished, how many succeeded and the rows they wrote, and the volume samples
(how many, and the sum and sum of squares of their rows written). The words (finished,
rows written, a volume sample, a no-op re-run) are defined in
:mod:`pipeledger.ledger.reads.queries`; their SQL is here, once, for the triggers, for the
migration that rolls up the runs already recorded, and for the queries.

Triggers on ``pipeline_runs`` keep the rollup, so it changes in the transaction of the
run's final record whoever writes that record (a load, the spool's replay, the watchdog,
a Python pipeline): a run counts once, when it leaves ``running`` or is inserted final,
and a final state never changes; a reconcile (it loads nothing) is not counted. ``ledger
prune`` leaves the rollups alone: they hold counts, not runs.
"""

from __future__ import annotations

from pipeledger.warehouse.dialect import Dialect, quote

# a queued run has not started; rejected work was refused, not failed (counted apart)
UNFINISHED = ("running", "skipped", "queued", "rejected")
FAILURES = ("failed", "timed_out", "abandoned")  # the states of a run that went wrong
PUBLISHED = "('success', 'partial')"  # the runs whose rows were published
COMPARES = "'reconcile'"  # runs that load nothing (``pipeledger reconcile`` compares)
NOT_FRONTIER = f"('backfill', 'replay', {COMPARES})"  # runs that re-load old data, or none
FUNCTION = "roll_up_run"
TRIGGERS = ("pipeline_runs_roll_up_insert", "pipeline_runs_roll_up_update")


def written(alias: str) -> str:
    """SQL for the rows a run wrote."""
    return f"(COALESCE({alias}.rows_inserted, 0) + COALESCE({alias}.rows_updated, 0))"


def no_op(d: Dialect, alias: str) -> str:
    """SQL: the run changed nothing (wrote no rows, left the watermark where it was)."""
    same = f"NOT ({alias}.watermark_after {d.distinct_operator} {alias}.watermark_before)"
    return f"({written(alias)} = 0 AND {same})"


def sample(d: Dialect, alias: str) -> str:
    """SQL: the run is a volume sample (published, not a backfill, replay or reconcile, no
    no-op)."""
    return (
        f"({alias}.status IN {PUBLISHED} AND {alias}.trigger_type NOT IN {NOT_FRONTIER} "
        f"AND NOT {no_op(d, alias)})"
    )


def _finished() -> str:
    return "(" + ", ".join(f"'{s}'" for s in UNFINISHED) + ")"


def finished(alias: str) -> str:
    """SQL: the run has finished (every state but ``running`` and ``skipped``) and it
    loads (a reconcile is no run of the pipeline's health: it compares, it loads nothing)."""
    return f"{alias}.status NOT IN {_finished()} AND {alias}.trigger_type <> {COMPARES}"


def counts(d: Dialect, alias: str) -> list[tuple[str, str]]:
    """The rollup's counters and what one finished run adds to each."""
    ok, w, s = f"{alias}.status = 'success'", written(alias), sample(d, alias)
    return [
        ("finished", "1"),
        ("succeeded", f"CASE WHEN {ok} THEN 1 ELSE 0 END"),
        ("success_rows", f"CASE WHEN {ok} THEN {w} ELSE 0 END"),
        ("samples", f"CASE WHEN {s} THEN 1 ELSE 0 END"),
        ("sample_rows", f"CASE WHEN {s} THEN {w} ELSE 0 END"),
        ("sample_squares", f"CASE WHEN {s} THEN {d.exact_square(w)} ELSE 0 END"),
    ]


def fill(d: Dialect, days: str, runs: str) -> str:
    """Roll up the runs already recorded (the migration that adds the rollup)."""
    pairs = counts(d, "r")
    day = d.utc_day("r.started_at")
    names = ", ".join(name for name, _ in pairs)
    sums = ", ".join(f"sum({expression})" for _, expression in pairs)
    return (
        f"INSERT INTO {days} (pipeline, day, {names}) SELECT r.pipeline, {day}, {sums} "
        f"FROM {runs} r WHERE {finished('r')} GROUP BY r.pipeline, {day}"
    )


def _add(d: Dialect, days: str, existing: str, tenant: bool, keyed: bool = False) -> str:
    """One run's counts added to its day (``existing``: how the stored row is named;
    ``tenant``: the day's row carries the run's tenant, ledger migration 13; ``keyed``:
    the tenant leads the day's key, migration 16)."""
    pairs = counts(d, "NEW")
    names = ", ".join(name for name, _ in pairs)
    values = ", ".join(expression for _, expression in pairs)
    sets = ", ".join(f"{name} = {existing}{name} + excluded.{name}" for name, _ in pairs)
    keys, key_values = ("tenant, ", "NEW.tenant, ") if tenant else ("", "")
    return (
        f"INSERT INTO {days}{' AS t' if existing else ''} ({keys}pipeline, day, {names}) "
        f"VALUES ({key_values}NEW.pipeline, {d.utc_day('NEW.started_at')}, {values}) "
        f"ON CONFLICT ({'tenant, ' if keyed else ''}pipeline, day) DO UPDATE SET {sets}"
    )


def recreate_triggers(
    d: Dialect, schema: str, days: str, runs: str, *, tenant: bool = False, keyed: bool = False
) -> list[str]:
    """Migration 11: the triggers again, now that ``queued`` and ``rejected`` runs are not
    finished ones (the triggers hold the words of :func:`finished` as they were made);
    migration 13 (``tenant``): again, each day's row now the run's tenant's; migration 16
    (``keyed``): again, the day's key led by the tenant."""
    on = f" ON {runs}" if d.triggers_call_functions else ""
    drops = [f"DROP TRIGGER IF EXISTS {quote(name)}{on}" for name in TRIGGERS]
    return [*drops, *triggers(d, schema, days, runs, tenant=tenant, keyed=keyed)]


def triggers(
    d: Dialect, schema: str, days: str, runs: str, *, tenant: bool = False, keyed: bool = False
) -> list[str]:
    """The triggers that roll up a run when it is inserted final or leaves ``running``
    (``tenant``: into its tenant's row, from ledger migration 13 on; ``keyed``: the
    tenant leads the day's key, from 16 on)."""
    insert, update = (quote(name) for name in TRIGGERS)
    new_final = f"({finished('NEW')})"
    left_running = f"OLD.status = 'running' AND {new_final}"
    if d.triggers_call_functions:
        function = f"{quote(schema)}.{quote(FUNCTION)}()"
        body = f"BEGIN {_add(d, days, 't.', tenant, keyed)}; RETURN NULL; END"
        return [
            f"CREATE OR REPLACE FUNCTION {function} RETURNS trigger LANGUAGE plpgsql "
            f"AS $$ {body} $$",
            f"CREATE TRIGGER {insert} AFTER INSERT ON {runs} FOR EACH ROW "
            f"WHEN ({new_final}) EXECUTE PROCEDURE {function}",
            f"CREATE TRIGGER {update} AFTER UPDATE OF status ON {runs} FOR EACH ROW "
            f"WHEN ({left_running}) EXECUTE PROCEDURE {function}",
        ]
    # a trigger's INSERT takes no alias: bare names are the stored row
    add = _add(d, days, "", tenant, keyed)
    return [
        f"CREATE TRIGGER IF NOT EXISTS {insert} AFTER INSERT ON {runs} FOR EACH ROW "
        f"WHEN {new_final} BEGIN {add}; END",
        f"CREATE TRIGGER IF NOT EXISTS {update} AFTER UPDATE OF status ON {runs} FOR EACH ROW "
        f"WHEN {left_running} BEGIN {add}; END",
    ]


# -- the tasks' daily rollup (migration 12) ----------------------------------------------

TASK_FUNCTION = "roll_up_task"
TASK_TRIGGER = "task_runs_roll_up_insert"


def task_counts(alias: str) -> list[tuple[str, str]]:
    """The task rollup's counters and what one task adds to each: the parts of a mean
    (``avg`` skips NULLs: sums and counts of the values present) and the maximum."""
    present = "CASE WHEN {a}.{c} IS NULL THEN 0 ELSE 1 END"
    return [
        ("runs", "1"),
        ("duration_n", present.format(a=alias, c="duration_ms")),
        ("duration_sum", f"COALESCE({alias}.duration_ms, 0)"),
        ("duration_max", f"{alias}.duration_ms"),
        ("rows_out_n", present.format(a=alias, c="rows_out")),
        ("rows_out_sum", f"COALESCE({alias}.rows_out, 0)"),
    ]


def _larger(old: str, new: str) -> str:
    """The larger of two values, either NULL (SQLite's two-argument max() is NULL then)."""
    return f"CASE WHEN {old} IS NULL OR {new} > {old} THEN {new} ELSE {old} END"


def fill_tasks(d: Dialect, task_days: str, tasks: str, runs: str) -> str:
    """Roll up the tasks already recorded (the migration that adds the rollup)."""
    pairs = task_counts("t")
    day = d.utc_day("t.started_at")
    names = ", ".join(name for name, _ in pairs)
    sums = ", ".join(f"max({e})" if name == "duration_max" else f"sum({e})" for name, e in pairs)
    return (
        f"INSERT INTO {task_days} (pipeline, task, day, {names}) "
        f"SELECT r.pipeline, t.name, {day}, {sums} FROM {tasks} t "
        f"JOIN {runs} r ON r.run_id = t.run_id GROUP BY r.pipeline, t.name, {day}"
    )


def _add_task(
    d: Dialect, task_days: str, runs: str, existing: str, tenant: bool, keyed: bool = False
) -> str:
    pairs = task_counts("NEW")
    names = ", ".join(name for name, _ in pairs)
    values = ", ".join(expression for _, expression in pairs)
    sets = ", ".join(
        f"{name} = "
        + (
            _larger(f"{existing}{name}", f"excluded.{name}")
            if name == "duration_max"
            else f"{existing}{name} + excluded.{name}"
        )
        for name, _ in pairs
    )
    if keyed:  # migration 16: the task row's tenant is right when it is inserted
        pipeline = (
            f"(SELECT r.pipeline FROM {runs} r "
            "WHERE r.tenant = NEW.tenant AND r.run_id = NEW.run_id)"
        )
        keys, key_values = ("tenant, ", "NEW.tenant, ")
    else:
        pipeline = f"(SELECT r.pipeline FROM {runs} r WHERE r.run_id = NEW.run_id)"
        # the run's tenant, not the task row's: on SQLite a writer's own trigger tags the
        # task row after this one may have run (adapters.sqlite._scope_to_tenant)
        keys, key_values = (
            ("tenant, ", f"(SELECT r.tenant FROM {runs} r WHERE r.run_id = NEW.run_id), ")
            if tenant
            else ("", "")
        )
    return (
        f"INSERT INTO {task_days}{' AS t' if existing else ''} "
        f"({keys}pipeline, task, day, {names}) "
        f"SELECT {key_values}{pipeline}, NEW.name, {d.utc_day('NEW.started_at')}, {values} "
        f"WHERE {pipeline} IS NOT NULL "
        f"ON CONFLICT ({'tenant, ' if keyed else ''}pipeline, task, day) DO UPDATE SET {sets}"
    )


def task_triggers(
    d: Dialect,
    schema: str,
    task_days: str,
    tasks: str,
    runs: str,
    *,
    tenant: bool = False,
    keyed: bool = False,
) -> list[str]:
    """The trigger that rolls up a task when it is recorded (tasks are inserted once,
    finished; ``ON CONFLICT DO NOTHING`` of a task recorded twice inserts nothing);
    ``tenant``: into its run's tenant's row, from ledger migration 13 on."""
    trigger = quote(TASK_TRIGGER)
    if d.triggers_call_functions:
        function = f"{quote(schema)}.{quote(TASK_FUNCTION)}()"
        body = f"BEGIN {_add_task(d, task_days, runs, 't.', tenant, keyed)}; RETURN NULL; END"
        return [
            f"CREATE OR REPLACE FUNCTION {function} RETURNS trigger LANGUAGE plpgsql "
            f"AS $$ {body} $$",
            f"CREATE TRIGGER {trigger} AFTER INSERT ON {tasks} FOR EACH ROW "
            f"EXECUTE PROCEDURE {function}",
        ]
    add = _add_task(d, task_days, runs, "", tenant, keyed)
    return [
        f"CREATE TRIGGER IF NOT EXISTS {trigger} AFTER INSERT ON {tasks} FOR EACH ROW "
        f"BEGIN {add}; END"
    ]


def recreate_task_triggers(
    d: Dialect, schema: str, task_days: str, tasks: str, runs: str, *, keyed: bool = False
) -> list[str]:
    """Migration 13: the task trigger again, each day's row now its run's tenant's;
    migration 16 (``keyed``): again, the day's key led by the tenant."""
    on = f" ON {tasks}" if d.triggers_call_functions else ""
    return [
        f"DROP TRIGGER IF EXISTS {quote(TASK_TRIGGER)}{on}",
        *task_triggers(d, schema, task_days, tasks, runs, tenant=True, keyed=keyed),
    ]
