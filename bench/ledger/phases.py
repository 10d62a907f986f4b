"""What the run ledger adds to a load, seen through its statements: each statement the
sessions report (``observe_statements``) or the server logs, classed by what it does for
the ledger. The classes match the text the ledger's builders write
(``pipeledger/ledger/sql.py``; the snapshot reads of ``pipeledger/ledger/ledger.py`` and
``pipeledger/runs/record.py``): ``tests/bench/test_statement_classes.py`` keeps them in
step with it.
"""

from __future__ import annotations

import re

from bench.load.phases import StatementClass, server_class

RUNS = r'"pipeledger"\."pipeline_runs"'
SNAPSHOT = "dataset snapshot: the previous one, the row count and greatest cursor"
CLASSES = (
    StatementClass(  # migrations.migrate: the migrators' lock, what was applied
        "migrations check (the migration lock, applied versions)",
        re.compile(r'^SELECT pg_advisory_xact_lock\(|"schema_migrations" WHERE'),
    ),
    StatementClass(  # sql.running_runs, sql.abandon_run, queue.abandon_dead_waiters
        "watchdog: runs whose lease expired",
        re.compile(
            rf"FROM {RUNS} WHERE (tenant = .* AND )?status = 'running'"
            rf"|^UPDATE {RUNS} SET status = 'abandoned'"
        ),
    ),
    StatementClass(  # sql.ensure_pipeline, upsert_pipeline, delete/insert_dependency
        "register the pipeline and its dependencies",
        re.compile(
            r'^INSERT INTO "pipeledger"\."(pipelines|pipeline_dependencies)" \([^)]*\) VALUES '
            r'|^DELETE FROM "pipeledger"\."pipeline_dependencies" '
        ),
    ),
    StatementClass(  # sql.upsert_run
        "record `running`", re.compile(rf"^INSERT INTO {RUNS} ")
    ),
    StatementClass(  # sql.heartbeat
        "heartbeat", re.compile(rf"^UPDATE {RUNS} SET heartbeat_at ")
    ),
    StatementClass(  # Ledger.previous_snapshot, record.measure_target
        SNAPSHOT,
        re.compile(
            r'^SELECT row_count, max_cursor FROM "pipeledger"\."dataset_snapshots" '
            r'|^SELECT (count\(\*\), )?max\("(?!_pipeledger_)[^"]+"\) FROM (?!"pipeledger"\.)\S+$'
        ),
    ),
    StatementClass(  # sql.finish_run, insert_task, insert_event, insert_snapshot, insert_quality
        "final record: the run, its tasks, audit events, snapshot row",
        re.compile(
            rf"^UPDATE {RUNS} SET logical_run_id "
            r'|^INSERT INTO "pipeledger"\."'
            r"(task_runs|audit_events|dataset_snapshots|quality_results)\""
        ),
    ),
)
LABELS = tuple(c.label for c in CLASSES)
NOT_LEDGER = "the load's and the state's statements"
MIGRATIONS_DDL = "migrations DDL (a database's first run only)"
_DDL = re.compile(
    r'^(CREATE|DROP|ALTER) .*\bpipeledger"?\.|^CREATE SCHEMA IF NOT EXISTS pipeledger'
)


def ledger_class(sql: str) -> str | None:
    text = sql.lstrip()
    return next((c.label for c in CLASSES if c.matches(text)), None)


def classify(kind: str, sql: str) -> str:
    """A statement's phase, from the hook's kind and text: a ledger class, or not the
    ledger's (every statement is counted)."""
    return ledger_class(sql) or NOT_LEDGER


def server_label(sql: str) -> str:
    """A statement of the server's log: a ledger class, the one-time DDL, COMMIT, or the
    load's classes (:func:`bench.load.phases.server_class`)."""
    text = sql.lstrip()
    if text.upper().startswith("COMMIT"):
        return "COMMIT"
    if _DDL.search(text):
        return MIGRATIONS_DDL
    return ledger_class(text) or server_class(text)
