"""The library face, called directly as a Python pipeline would, on both backends: every verb
and every question of :mod:`pipeledger.api`, and what one invocation builds."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from pipeledger import api
from pipeledger.errors import BackfillRangeError, GateFailed, NothingToCancel
from pipeledger.ledger.ledger import Ledger
from pipeledger.runs.interrupt import interrupt_all
from pipeledger.warehouse.adapters.postgres import PostgresWarehouse
from pipeledger.warehouse.adapters.sqlite import SqliteWarehouse
from tests.helpers import Project, order, orders_pipeline

GOLD = """
select order_date, count(*) as orders, sum(amount) as revenue
from analytics.orders group by order_date
"""


def _configure(project: Project, **extra: Any) -> api.Config:
    """A load with a quarantining gate and a model over it; returns the validated config."""
    checks = {"accepted_values": {"status": ["completed", "shipped"]}, "on_fail": "quarantine"}
    orders = orders_pipeline(lateness="1d", checks=checks, schedule="0 2 * * *", **extra)
    (project.root / "models").mkdir(exist_ok=True)
    (project.root / "models" / "daily.sql").write_text(GOLD)
    daily = {"sql": "models/daily.sql", "target": "analytics.daily", "key": ["order_date"],
             "materialized": "replace"}  # fmt: skip
    path = project.configure(orders=orders, models={"daily": daily})
    return api.load_config(path)


def _first_rows(project: Project) -> None:
    project.write_csv(
        "orders_1.csv",
        [
            order(1, "2024-01-01T10:00:00Z"),
            order(2, "2024-01-01T11:00:00Z", status="lost"),  # quarantined
            order(3, "2024-01-02T12:00:00Z", order_date="2024-01-02"),
        ],
    )


def test_the_verbs_run_loads_and_models(project: Project) -> None:
    config = _configure(project)
    _first_rows(project)
    outcomes = api.run(config)
    assert [o.to_json()["status"] for o in outcomes] == ["partial", "success"]
    assert api.exit_code(outcomes) == 0 and api.exit_code(outcomes, strict=True) == 3
    assert project.count() == 2 and project.count("analytics.daily") == 2

    again = api.run_one(config, "orders")
    assert (again.counts.inserted, again.counts.updated) == (0, 0)
    rebuilt = api.run_model(config, "daily", full_refresh=True)
    assert rebuilt.mode == "full_refresh"

    with pytest.raises(GateFailed):  # the dry run sees the bad row; nothing is recorded
        api.check(project.configure(orders=orders_pipeline(lateness="7d", checks={
            "accepted_values": {"status": ["completed"]}})), "orders")  # fmt: skip


def test_backfill_replay_reconcile_and_lateness(project: Project) -> None:
    config = _configure(project)
    _first_rows(project)
    api.run(config)
    done = api.backfill(config, "orders", "2024-01-01", "2024-01-02")
    assert done.mode == "backfill" and done.counts.inserted == 0

    entries = api.quarantined(config, "orders")
    assert [e.key_values for e in entries] == [{"order_id": 2}]
    relaxed = _configure(project, columns={"amount": "numeric(12,2)"})
    replayed = api.replay(relaxed, "orders")
    assert replayed.replayed == 1 and replayed.still_failing == 1  # still 'lost'

    found = api.reconcile(config, "orders")  # the quarantined row is not in the target
    assert found.status == "mismatch"
    assert sum(w.missing_rows for w in found.windows) == 1
    assert api.lateness(config, "orders").pipeline == "orders"
    marks = api.watermarks(config, "orders")
    assert [m.pipeline for m in marks] == ["orders"]


def test_running_unattended(project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    config = _configure(project, catchup=True, max_catchup=2)
    _first_rows(project)
    monkeypatch.setenv("PIPELEDGER_NOW", "2024-01-03T03:00:00+00:00")
    schedules = api.schedule_status(config)
    assert [s["node"] for s in schedules] == ["orders"] and schedules[0]["overdue"] >= 1
    due = api.run_due(config)
    assert [o.node for o in due] == ["orders"] * schedules[0]["overdue"]
    assert api.run_due(config) == []  # each interval once

    rounds: list[int] = []

    def report(outcomes: list[api.ScheduledOutcome]) -> None:
        rounds.append(len(outcomes))
        interrupt_all()  # the loop ends at its next wait

    api.serve(config, report, poll=timedelta(seconds=1))
    assert rounds == [0]
    assert api.watchdog(config) == {}
    finished = due[0].outcome.run_id
    assert finished is not None
    with pytest.raises(NothingToCancel):
        api.cancel(config, finished)


def test_the_questions_answer_from_the_ledger(project: Project) -> None:
    config = _configure(project)
    assert not api.has_ledger(config)
    assert api.recent_runs(config) == [] and api.status(config) == []
    _first_rows(project)
    api.run(config)
    where = api.locate(config.source_file)
    assert api.has_ledger(where)

    runs = api.recent_runs(where, "orders")
    assert [r.pipeline for r in runs] == ["orders"]
    assert api.show(where, runs[0].run_id[:8]).run.run_id == runs[0].run_id
    assert {s.pipeline for s in api.status(where)} == {"orders", "daily"}
    assert isinstance(api.anomalies(where), list)
    assert api.sla(where).to_json().keys() == {"breaches", "reliability"}
    assert api.recent_alerts(where) == []
    assert {t.task for t in api.tasks(where, "orders")} >= {"extract", "load"}
    assert api.audit(where, "analytics.orders")[0].target_table == "analytics.orders"
    (blocked,) = api.blocked(where)  # orders only ever ended partial (a row quarantined)
    assert (blocked.downstream, blocked.upstream) == ("daily", "orders")
    graph = api.graph(config)
    assert {n["name"] for n in graph["nodes"]} == {"orders", "daily"}
    assert api.query(where, f"SELECT count(*) FROM {project.table()}") == [(2,)]

    assert api.migrate(config) == {"ledger": [], "state": []}  # up to date
    kept = api.prune(where, timedelta(days=1), dry_run=True)
    assert kept is not None and kept.pipeline_runs == 0


def _count_constructions(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Count each Ledger, and each warehouse by its URL, as they are built."""
    made: Counter[str] = Counter()
    for cls in (PostgresWarehouse, SqliteWarehouse):
        original = cls.__init__

        def counted(self: Any, url: str, *args: Any, _original: Any = original) -> None:
            made[f"warehouse {url}"] += 1
            _original(self, url, *args)

        monkeypatch.setattr(cls, "__init__", counted)
    ledger_init = Ledger.__init__

    def counted_ledger(self: Ledger, *args: Any, **kwargs: Any) -> None:
        made["ledger"] += 1
        ledger_init(self, *args, **kwargs)

    monkeypatch.setattr(Ledger, "__init__", counted_ledger)
    return made


@pytest.mark.parametrize("separate", [False, True], ids=["shared", "separate-ledger"])
def test_a_node_run_builds_one_ledger_and_one_warehouse_per_url(
    project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, separate: bool
) -> None:
    ledger_url = f"sqlite:///{tmp_path / 'ledger.db'}"
    raw = f'\n[ledger]\nurl = "{ledger_url}"\n' if separate else ""
    project.write_csv("orders_1.csv", [order(1, "2024-01-01T10:00:00Z")])
    config = api.load_config(project.configure(raw, orders=orders_pipeline()))
    made = _count_constructions(monkeypatch)
    (outcome,) = api.run(config, ["orders"])
    assert outcome.to_json()["status"] == "success"
    urls = {config.warehouse_url, config.ledger_url}
    assert made == Counter({"ledger": 1, **{f"warehouse {url}": 1 for url in urls}})
    assert len(urls) == (2 if separate else 1)


def _open_connections(project: Project) -> int:
    """Connections this process holds to the project's warehouse: sessions of the server's
    database on PostgreSQL (from this process: the query's own is left out), open files of
    the database on SQLite."""
    if project.backend == "postgres":
        statement = (
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND backend_type = 'client backend' AND pid <> pg_backend_pid()"
        )
        return int(project.query(statement)[0][0])
    database = str(project.root / ".pipeledger" / "warehouse.db")
    fds = Path("/proc/self/fd")
    return sum(str(fd.readlink()).startswith(database) for fd in fds.iterdir() if fd.is_symlink())


def test_a_call_leaves_no_connection_behind(project: Project) -> None:
    """An invocation keeps its connections between sessions (a node opens several), and
    closes them when the call returns: a long-lived process calling the API does not
    hold sessions on the server, nor the SQLite file open, between calls."""
    project.write_csv("orders_1.csv", [order(1, "2024-01-01T10:00:00Z")])
    config = api.load_config(project.configure(orders=orders_pipeline()))
    assert api.run_one(config, "orders").counts.inserted == 1
    assert _open_connections(project) == 0
    (outcome,) = api.run(config, ["orders"])
    assert outcome.to_json()["status"] == "success"
    api.backfill(config, "orders", "2024-01-01", "2024-01-01")
    assert _open_connections(project) == 0
    # refused work is recorded first; the error kept by its caller holds the call's frames
    with pytest.raises(BackfillRangeError) as refused:
        api.backfill(config, "orders", "2024-01-02", "2024-01-01")
    assert _open_connections(project) == 0 and refused.value.__traceback__ is not None


def test_a_question_reads_without_validating_the_config(project: Project) -> None:
    """A located config is enough for a question: its other sections are not read."""
    path = project.configure("\n[alerts]\nnot_a_key = 1\n", orders=orders_pipeline())
    with pytest.raises(api.ConfigError):
        api.load_config(path)
    assert api.recent_runs(path) == []
    assert api.status(path, now=datetime.now(UTC)) == []
