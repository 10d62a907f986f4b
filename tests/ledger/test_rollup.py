"""The daily rollup that status and anomalies read (ledger migration 6): every run counts
once, when it ends, whoever writes its record; a ledger made before the rollup gets its
runs rolled up by the migration; and the 7-day window is exact at its first day."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

from pipeledger.ledger import store as st
from pipeledger.ledger.tables import DAYS, LEDGER, RUNS, ledger_migrations
from pipeledger.ledger.vocabulary import RunStatus
from pipeledger.ledger.watchdog import abandon_expired
from pipeledger.warehouse.adapters import open_warehouse
from pipeledger.warehouse.migrations import Component, migrate
from pipeledger.warehouse.session import Session
from tests.ledger.test_queries import KEPT, MOVED, statuses
from tests.ledger_fixtures import NOW, TODAY, LedgerBuilder, as_earlier, ledger, reading

DAY = timedelta(days=1)
HOUR = timedelta(hours=1)
# a ledger made before the rollup: every migration but 6 (7 and 8 came first on main), 11,
# which re-creates 6's triggers, and 13 on (13 gives its table a tenant, which 15 indexes)
BEFORE_6 = Component(
    "ledger",
    lambda d: [m for m in ledger_migrations(d) if m[0] not in (6, 11) and m[0] < 13],
    RUNS,
)


def rollup(session: Session) -> dict[tuple[str, str], tuple[int, ...]]:
    rows = session.query(
        "SELECT pipeline, day, finished, succeeded, success_rows, samples, sample_rows, "
        f"sample_squares FROM {session.dialect.table(DAYS)}"
    )
    return {(str(r[0]), str(r[1])): tuple(int(v) for v in r[2:]) for r in rows}


def recount(session: Session) -> dict[tuple[str, str], tuple[int, ...]]:
    """The rollup computed here from the runs, by the definitions in words."""
    rows = session.query(
        "SELECT pipeline, started_at, status, trigger_type, rows_inserted, rows_updated, "
        f"watermark_before, watermark_after FROM {session.dialect.table(RUNS)}"
    )
    found: dict[tuple[str, str], Counter[str]] = {}
    for pipeline, started, status, trigger, inserted, updated, before, after in rows:
        if status in ("running", "skipped") or trigger == "reconcile":
            continue
        day = str(started)[:10]
        written = (inserted or 0) + (updated or 0)
        no_op = written == 0 and before == after
        sample = status in ("success", "partial") and trigger not in ("backfill", "replay")
        sample = sample and not no_op
        c = found.setdefault((pipeline, day), Counter())
        c["finished"] += 1
        c["succeeded"] += status == "success"
        c["success_rows"] += written if status == "success" else 0
        c["samples"] += sample
        c["sample_rows"] += written if sample else 0
        c["squares"] += written * written if sample else 0
    names = ("finished", "succeeded", "success_rows", "samples", "sample_rows", "squares")
    return {key: tuple(c[n] for n in names) for key, c in found.items()}


def mixed_runs(b: LedgerBuilder) -> None:
    """Runs of every kind, written as each writer writes them."""
    b.daily("orders", [100, 0, 250, None, 80], **MOVED)
    b.run("orders", TODAY + HOUR, written=0, **KEPT)  # a no-op re-run
    b.run("orders", TODAY + 2 * HOUR, written=40, trigger="backfill")
    b.run("orders", TODAY + 3 * HOUR, status="partial", written=30, **MOVED)
    b.run("orders", TODAY + 4 * HOUR, status="failed", written=None)
    b.run("orders", TODAY + 5 * HOUR, status="skipped", written=None)
    b.run("models", TODAY - DAY, written=7)
    b.run("models", TODAY - DAY + HOUR, written=0)  # a model that brought nothing new
    b.run("orders", TODAY + 8 * HOUR, written=None, trigger="reconcile")  # loads nothing


def test_every_run_counts_once_whoever_records_it(warehouse_url: str) -> None:
    with ledger(warehouse_url) as b:
        mixed_runs(b)
        # a run recorded running, then finished in the load's transaction
        load = b.run("orders", TODAY + 6 * HOUR, status="running", written=None)
        load.status, load.ended_at, load.rows_inserted = RunStatus.SUCCESS, NOW, 12
        load.watermark_before, load.watermark_after = (
            MOVED["watermark_before"],
            MOVED["watermark_after"],
        )
        assert st.finish(b.session, load)
        for _ in range(2):  # the spool replayed twice: a final state never changes
            st.apply(b.session, st.run_op(load))
        # a run whose process died: the watchdog settles it
        b.run("orders", TODAY + 7 * HOUR, status="running", written=None, host="gone-host",
              pid=1, lease_expires_at=TODAY)  # fmt: skip
        assert list(abandon_expired(b.session, now=NOW).values()) == ["abandoned"]
    with reading(warehouse_url) as session:
        found, expected = rollup(session), recount(session)
    assert found == expected
    today = TODAY.date().isoformat()
    # no-op, backfill, partial, failed, the load, abandoned; samples: the partial and the load
    assert found["orders", today][:4] == (6, 3, 52, 2)


def test_migration_6_rolls_up_the_runs_already_recorded(warehouse_url: str) -> None:
    database = open_warehouse(warehouse_url)
    with database.session() as session:
        migrate(session, BEFORE_6)
        mixed_runs(LedgerBuilder(as_earlier(session)))  # as that release wrote
    with database.session() as session:
        assert migrate(session, LEDGER) == [6, 11, 13, 14, 15, 16, 17]
        assert rollup(session) == recount(session) != {}
        LedgerBuilder(session).run("orders", TODAY + 9 * HOUR, written=5, run_id="new", **MOVED)
    with database.session() as session:
        assert rollup(session) == recount(session)


def test_the_status_window_is_exact_at_its_first_day(warehouse_url: str) -> None:
    """7 days before noon: the morning of that day is out, its afternoon in (from the
    runs), the days after it whole (from the rollup)."""
    start = NOW - 7 * DAY
    with ledger(warehouse_url) as b:
        b.run("orders", start - timedelta(minutes=1), status="failed")
        b.run("orders", start + timedelta(minutes=1), status="failed")
        b.run("orders", start + 12 * HOUR - timedelta(minutes=1), written=10, **MOVED)
        for day in range(1, 7):
            b.run("orders", start + day * DAY - 12 * HOUR, written=10, **MOVED)
        b.run("orders", NOW - HOUR, status="skipped")
    s = statuses(warehouse_url)["orders"]
    assert (s.runs_7d, s.successes_7d, s.avg_rows_7d) == (8, 7, 10.0)
