"""What the ledger knows of scheduled runs (``pipeledger schedule``, ``run --due``), asked
for every scheduled pipeline in a few statements (migration 15): the same answers as the
per-pipeline queries asked before, a number of statements that does not grow with the
pipelines, and plans that read the runs through an index."""

from __future__ import annotations

import random
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from pipeledger.ledger.reads.recent import ScheduledRuns, scheduled_runs_of
from pipeledger.ledger.tables import HOLDS_KEY, RUNS, stored_datetime
from pipeledger.warehouse.session import Session, observe_statements
from tests.ledger.test_reads_at_scale import _whole_tables
from tests.ledger_fixtures import NOW, ledger, reading

STATES = ["success", "success", "failed", "partial", "skipped", "cancelled", "running"]


def seed(url: str, pipelines: Sequence[str], hours: int = 12) -> dict[str, list[str]]:
    """Hourly scheduled runs of mixed states (a run that does not hold its key, a key a
    later attempt holds again), manual runs without keys and keys of other kinds; the
    keys each pipeline is asked about (some held, some not, some never run)."""
    rng = random.Random(15)
    asked: dict[str, list[str]] = {}
    with ledger(url) as b:
        for i, name in enumerate(pipelines):
            b.pipeline(name)
            if i % 4 == 3:  # a pipeline with no scheduled run at all
                b.run(name, NOW - timedelta(hours=1), trigger="manual")
                asked[name] = [_key(NOW - timedelta(hours=1))]
                continue
            for h in range(hours, 0, -1):
                end = NOW - timedelta(hours=h)
                if rng.random() < 0.2:  # an interval never run
                    continue
                status = rng.choice(STATES)
                b.run(
                    name,
                    end + timedelta(minutes=1),
                    status=status,
                    idempotency_key=_key(end),
                    data_interval_start=end - timedelta(hours=1),
                    data_interval_end=end,
                )
            b.run(name, NOW, trigger="manual", idempotency_key=f"manual:{name}")
            asked[name] = [_key(NOW - timedelta(hours=h)) for h in range(hours + 2, 0, -1)]
    return asked


def _key(end: Any) -> str:
    return f"schedule:{end.isoformat()}"


def one_at_a_time(session: Session, name: str, keys: Sequence[str]) -> ScheduledRuns:
    """The answer as it was asked before migration 15: three statements per pipeline."""
    d, p = session.dialect, session.dialect.param
    runs = d.table(RUNS)
    holds = "status IN (" + ", ".join(f"'{s}'" for s in HOLDS_KEY) + ")"
    scheduled = "substr(idempotency_key, 1, 9) = 'schedule:'"
    since, until = session.query(
        f"SELECT min(data_interval_end), max(data_interval_end) FROM {runs} "
        f"WHERE pipeline = {p} AND {scheduled} AND {holds}",
        [name],
    )[0]
    held = session.query(
        f"SELECT idempotency_key FROM {runs} WHERE pipeline = {p} "
        f"AND idempotency_key IN ({d.marks(len(keys))}) AND {holds}",
        [name, *keys],
    )
    latest = session.query(
        f"SELECT run_id, status, data_interval_start, data_interval_end FROM {runs} "
        f"WHERE pipeline = {p} AND {scheduled} "
        "ORDER BY data_interval_end DESC, started_at DESC LIMIT 1",
        [name],
    )
    last: dict[str, Any] = {}
    if latest:
        run_id, status, start, end = latest[0]
        last = {
            "run_id": str(run_id),
            "status": str(status),
            "start": stored_datetime(start),
            "end": stored_datetime(end),
        }
    return ScheduledRuns(
        held_since=stored_datetime(since),
        held_until=stored_datetime(until),
        held=frozenset(str(r[0]) for r in held),
        latest=last,
    )


def test_every_pipeline_at_once_answers_as_one_at_a_time(warehouse_url: str) -> None:
    names = [f"s{i:02d}" for i in range(16)]
    asked = seed(warehouse_url, names)
    with reading(warehouse_url) as session:
        together = scheduled_runs_of(session, asked)
        alone = {name: one_at_a_time(session, name, keys) for name, keys in asked.items()}
    assert together == alone
    assert sum(1 for r in together.values() if r.latest) == 12  # 4 never ran on schedule
    assert all(r.held and r.held < set(asked[n]) for n, r in together.items() if r.latest)


def test_the_statements_do_not_grow_with_the_pipelines(warehouse_url: str) -> None:
    names = [f"n{i:03d}" for i in range(420)]  # more than one chunk of SQLite's names
    asked = seed(warehouse_url, names, hours=2)
    seen: list[str] = []
    with reading(warehouse_url) as session, observe_statements(lambda k, s, t: seen.append(s)):
        found = scheduled_runs_of(session, asked)
        chunks = 1 if session.dialect.array_params else 2
    assert len(found) == len(names)
    assert len(seen) == 1 + 3 * chunks  # the columns of the runs, then 3 per chunk


def test_the_scheduled_reads_use_indexes(warehouse_url: str) -> None:
    from pipeledger.ledger import sql as lsql

    names = [f"x{i:02d}" for i in range(8)]
    asked = seed(warehouse_url, names, hours=4)
    keys = sorted({k for ks in asked.values() for k in ks})
    with reading(warehouse_url) as session:
        d = session.dialect
        bound: list[Any] = [names] if d.array_params else list(names)
        keyed: list[Any] = [keys] if d.array_params else keys
        statements = {
            "spans": (lsql.scheduled_spans(d, len(names)), bound),
            "held": (lsql.held_keys(d, len(names), len(keys)), [*bound, *keyed]),
            "latest": (lsql.latest_scheduled(d, len(names)), bound),
        }
        for what, (sql, params) in statements.items():
            assert _whole_tables(session, sql, params) == set(), what
