"""``tasks`` bounded (``--days``, ``--limit``): the slowest tasks of the window, each with
all its days, in the order of the whole answer; without a limit, the whole answer."""

from __future__ import annotations

from datetime import timedelta

from pipeledger.ledger.reads.queries import TaskTrend, task_trends
from pipeledger.warehouse.session import observe_statements
from tests.ledger_fixtures import NOW, ledger, reading

# pipeline -> the duration (ms) of its "extract" task each day, newest last
DURATIONS = {
    "a_fast": [100, 100, 100],
    "b_slow_long_ago": [9000, 100, 100],  # its slowest day is outside a 2-day window
    "c_slow_today": [100, 100, 5000],
    "d_medium": [3000, 3000, 3000],
}


def seed(url: str) -> None:
    with ledger(url) as b:
        for name, durations in DURATIONS.items():
            b.pipeline(name)
            for back, ms in enumerate(reversed(durations)):
                run = b.run(name, NOW - timedelta(days=back, minutes=30))
                b.task(run, "extract", 1, duration_ms=ms)
                b.task(run, "load", 2, duration_ms=10)


def series(trends: list[TaskTrend]) -> list[tuple[str, str]]:
    seen: list[tuple[str, str]] = []
    for t in trends:
        key = (t.pipeline, t.task)
        if key not in seen:
            seen.append(key)
    return seen


def test_the_limit_keeps_the_slowest_tasks_with_all_their_days(warehouse_url: str) -> None:
    seed(warehouse_url)
    with reading(warehouse_url) as session:
        whole = task_trends(session, NOW, days=14)
        two = task_trends(session, NOW, days=14, limit=2)
        recent = task_trends(session, NOW, days=2, limit=2)
        of_one = task_trends(session, NOW, "d_medium", days=14, limit=1)
        everything = task_trends(session, NOW, days=14, limit=100)
    assert len(whole) == 4 * 2 * 3
    assert everything == whole  # a limit above the tasks is the whole answer
    assert series(two) == [("b_slow_long_ago", "extract"), ("c_slow_today", "extract")]
    assert two == [t for t in whole if (t.pipeline, t.task) in series(two)]  # every day
    assert series(recent) == [("c_slow_today", "extract"), ("d_medium", "extract")]
    assert {t.day for t in recent} == {t.day for t in whole[-2:]}
    assert series(of_one) == [("d_medium", "extract")] and len(of_one) == 3


def test_a_bounded_answer_is_one_statement(warehouse_url: str) -> None:
    seed(warehouse_url)
    seen: list[str] = []
    with reading(warehouse_url) as session, observe_statements(lambda k, s, t: seen.append(s)):
        task_trends(session, NOW, days=14, limit=3)
    assert len(seen) == 1
