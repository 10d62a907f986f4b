"""Where a load's time goes, from what pipeledger records rather than from its internals:
the steps of its result (``LoadResult.steps``: extract, transform, quality, load; see
``pipeledger/runs/steps.py``) and its statements as the sessions report them
(``pipeledger.warehouse.session.observe_statements``), each classed by what it is.

The classes match the text their builders write (``pipeledger/publish/merge_sql.py``,
``pipeledger/warehouse/stage.py``): ``tests/bench/test_statement_classes.py`` checks each
against the builders' own output, so a change to a builder that a class no longer
recognises fails there rather than moving seconds into ``other`` unnoticed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

STEPS = {
    "extract": "extract: read the CSV, window filter",
    "transform": "transform: conform, fingerprint",
    "quality": "quality gate",
}
STAGE = "stage: encode and COPY the batches (client and server)"
OTHER_SQL = "sql: other (lock, state, DDL, settings, migrate, ledger)"
REST = "rest (connect, commit, Python outside statements)"
SERVER_COPY = "COPY into staging (until the client's last batch)"


@dataclass(frozen=True)
class StatementClass:
    label: str
    pattern: re.Pattern[str]  # searched for in the statement's text

    def matches(self, sql: str) -> bool:
        return self.pattern.search(sql) is not None


# the first class that matches a statement names it; the builders are named beside each
CLASSES = (
    StatementClass(  # merge_sql.merge
        "sql: merge (INSERT .. ON CONFLICT, counted)", re.compile(r"^WITH merged AS \(INSERT ")
    ),
    StatementClass(  # merge_sql.insert_new
        "sql: plain INSERT into the new target",
        re.compile(
            r'^INSERT INTO (?!"_pipeledger_stage)\S+ \(.*\) SELECT .* '
            r'FROM "_pipeledger_stage"$'
        ),
    ),
    StatementClass(  # merge_sql.add_primary_key, the last of merge_sql.promote_stage
        "sql: build primary key", re.compile(r"^ALTER TABLE \S+ ADD PRIMARY KEY ")
    ),
    StatementClass(  # stage.unique_key_index
        "sql: unique index on staged keys",
        re.compile(r'^CREATE UNIQUE INDEX IF NOT EXISTS \S+ ON "_pipeledger_stage'),
    ),
    StatementClass(  # merge_sql.dedupe_stage
        "sql: dedupe staging", re.compile(r'^CREATE TEMP TABLE "_pipeledger_stage_unique" ')
    ),
    StatementClass(  # merge_sql.stored_hashes_within, merge_sql.staged_key_hashes
        "sql: stored fingerprints (backfill shortcut)",
        re.compile(r'SELECT (t\.)?"_pipeledger_row_hash" FROM '),
    ),
)


def statement_class(sql: str) -> str:
    """The label of the class of ``sql``, or ``OTHER_SQL``."""
    text = sql.lstrip()
    return next((c.label for c in CLASSES if c.matches(text)), OTHER_SQL)


def classify(kind: str, sql: str) -> str:
    """A statement's phase, from the hook's kind and text."""
    return STAGE if kind == "stage" else statement_class(sql)


def server_class(sql: str) -> str:
    """A statement of the server's log (``--server-log``), in the same classes."""
    if sql.lstrip().startswith("COPY"):
        return SERVER_COPY
    return statement_class(sql).removeprefix("sql: ")


def breakdown(
    steps: Mapping[str, float], statements: Mapping[str, float], total: float
) -> dict[str, float]:
    """Seconds per phase of a load that took ``total``: its extract, transform and quality
    steps, its statements by class (those all run in the load step: the benchmark's
    pipeline has no checks, whose queries would count in the quality step as well), and
    the rest, largest first."""
    phases = {label: steps.get(step, 0.0) for step, label in STEPS.items()}
    phases |= statements
    phases[REST] = max(0.0, total - sum(phases.values()))
    ordered = sorted(phases.items(), key=lambda kv: -kv[1])
    return {k: round(v, 3) for k, v in ordered if v > 0}
