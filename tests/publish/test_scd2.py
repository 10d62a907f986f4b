"""SCD2 history (``history = "scd2"``, ``materialized = "scd2"``) against an independent model
of what the history must be, on both backends: changes, identical re-sends, a late change,
deletes, two versions of a key in one batch, re-runs and a full backfill."""

from __future__ import annotations

import itertools
import json
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest

from tests.helpers import Project

HEADER = ["customer_id", "name", "tier", "credit", "updated_at", "op"]
Content = tuple[str, str, str]  # name, tier, credit
Event = tuple[int, str, Content | None]  # key, cursor, content (None: a delete)
Version = tuple[datetime, datetime | None, Content]


def at(day: int, hour: int) -> str:
    return f"2024-01-{day:02d}T{hour:02d}:00:00Z"


def put(key: int, cursor: str, name: str, tier: str = "basic", credit: str = "10.00") -> Event:
    return (key, cursor, (name, tier, credit))


def delete(key: int, cursor: str) -> Event:
    return (key, cursor, None)


# five batches: changes, identical re-sends, a late change, deletes, two versions of a key
BATCHES: list[list[Event]] = [
    [*(put(k, at(1, 10), f"c{k}") for k in range(1, 7)), delete(7, at(1, 11))],
    [
        put(1, at(2, 10), "c1", "gold"),  # a change
        put(2, at(2, 10), "c2"),  # the same content at a newer cursor: a repeat
        put(3, at(1, 10), "c3"),  # the very same row again
        put(4, at(2, 10), "c4", credit="20.00"),  # two versions in one batch
        put(4, at(2, 12), "c4", credit="30.00"),
        delete(5, at(2, 11)),
    ],
    [
        put(1, at(1, 18), "c1", "silver"),  # late: older than the current version
        put(2, at(1, 20), "c2", "silver"),  # late, before the repeat of Jan 2
        put(5, at(3, 10), "c5", "back"),  # comes back after its delete
        put(6, at(3, 10), "c6", "gold"),  # changed and deleted at one cursor: deleted
        delete(6, at(3, 10)),
    ],
    [
        put(1, at(2, 10), "c1", "gold"),  # batch 2 again, in part
        put(4, at(2, 12), "c4", credit="30.00"),
        put(4, at(4, 10), "c4", credit="40.00"),
        put(8, at(4, 10), "c8"),
        delete(1, at(1, 19)),  # a late delete in the middle of the history
    ],
    [
        put(3, at(5, 10), "c3", "gold"),
        put(2, at(5, 10), "c2", "silver"),  # repeats the late version's content
        delete(8, at(5, 11)),
        delete(8, at(5, 12)),  # deleted twice: nothing more
        put(9, at(5, 10), "c9"),
    ],
]


def expected_history(batches: list[list[Event]]) -> dict[int, list[Version]]:
    """The history the rows imply, computed as a replay of every row in cursor order (not
    the SQL restated): at one cursor a delete wins; a version equal to the open one is no
    change; a delete closes the open version; a version closes the open one."""
    seen: dict[int, dict[datetime, Content | None]] = {}
    for key, cursor, content in itertools.chain.from_iterable(batches):
        rows = seen.setdefault(key, {})
        when = _instant(cursor)
        rows[when] = None if content is None or (when in rows and rows[when] is None) else content
    history: dict[int, list[Version]] = {}
    for key, rows in seen.items():
        versions: list[list[Any]] = []
        open_version: list[Any] | None = None
        for when in sorted(rows):
            content = rows[when]
            if content is None or open_version is None or open_version[2] != content:
                if open_version is not None:
                    open_version[1] = when
                open_version = None
            if content is not None and open_version is None:
                open_version = [when, None, content]
                versions.append(open_version)
        if versions:
            history[key] = [(v[0], v[1], v[2]) for v in versions]
    return history


def _instant(value: Any) -> datetime:
    if isinstance(value, datetime):
        return value.astimezone(UTC)
    return datetime.fromisoformat(str(value).replace("Z", "+00:00")).astimezone(UTC)


def csv_rows(events: list[Event]) -> list[list[Any]]:
    rows = []
    for key, cursor, content in events:
        name, tier, credit = content or ("", "", "")
        rows.append([key, name, tier, credit, cursor, "D" if content is None else "U"])
    return rows


def configure(project: Project, **overrides: Any) -> None:
    project.configure(customers={
        "source": {"kind": "csv", "path": "data/batch*.csv"}, "target": "dim.customers",
        "key": ["customer_id"], "cursor": "updated_at", "on_conflict": "newer_wins",
        "columns": {"credit": "numeric(12,2)"}, "lateness": "30d", "history": "scd2",
        "deleted": {"column": "op", "values": ["D"]}, **overrides,
    })  # fmt: skip


def load(project: Project, events: list[Event]) -> dict[str, Any]:
    """One run that reads exactly ``events`` (the batch file is replaced)."""
    project.write_csv("batch.csv", csv_rows(events), HEADER)
    return project.run()


def history(project: Project) -> dict[int, list[Version]]:
    rows = project.query(
        "SELECT customer_id, name, tier, credit, updated_at, valid_from, valid_to, is_current "
        f"FROM {project.table('dim.customers')} ORDER BY customer_id, valid_from"
    )
    found: dict[int, list[Version]] = {}
    for key, name, tier, credit, cursor, valid_from, valid_to, current in rows:
        assert _instant(valid_from) == _instant(cursor)  # valid_from is the version's cursor
        assert bool(current) == (valid_to is None)
        end = None if valid_to is None else _instant(valid_to)
        content = (name, tier, f"{Decimal(str(credit)):.2f}")
        found.setdefault(int(key), []).append((_instant(valid_from), end, content))
    return found


def assert_invariants(found: dict[int, list[Version]]) -> None:
    for versions in found.values():
        assert sum(1 for v in versions if v[1] is None) <= 1  # one current version at most
        for (start, end, _), (later, _, _) in itertools.pairwise(versions):
            assert end is not None and start < end <= later  # no overlap


def written(outcome: dict[str, Any]) -> tuple[int, int, int]:
    return outcome["rows_inserted"], outcome["rows_updated"], outcome["rows_deleted"]


def test_the_history_equals_an_independent_replay_and_reruns_change_nothing(
    project: Project,
) -> None:
    configure(project)
    outcomes = [load(project, batch) for batch in BATCHES]
    expected = expected_history(BATCHES)
    assert history(project) == expected
    assert_invariants(expected)
    assert expected[1] == [  # the late change and the late delete, in their places
        (_instant(at(1, 10)), _instant(at(1, 18)), ("c1", "basic", "10.00")),
        (_instant(at(1, 18)), _instant(at(1, 19)), ("c1", "silver", "10.00")),
        (_instant(at(2, 10)), None, ("c1", "gold", "10.00")),
    ]
    assert written(outcomes[1]) == (3, 3, 1)  # 1 and 4 (twice) new; 1, 4, 5 closed; 5 deleted
    for batch in BATCHES:  # re-running every batch
        assert written(load(project, batch)) == (0, 0, 0)
    project.write_csv("batch.csv", csv_rows([e for b in BATCHES for e in b]), HEADER)
    for args in ([], ["--full-compare"]):
        code, out, err = project.cli("backfill", "customers", "--start", "2024-01-01",
                                     "--end", "2024-01-05", "--json", *args)  # fmt: skip
        assert code == 0, err
        assert written(json.loads(out)[0]) == (0, 0, 0)
    assert history(project) == expected


def test_any_order_of_the_batches_gives_the_same_history(project: Project) -> None:
    configure(project)
    for batch in reversed(BATCHES):
        load(project, batch)
    assert history(project) == expected_history(BATCHES)


def test_every_batch_at_once_gives_the_same_history(project: Project) -> None:
    configure(project)
    outcome = load(project, [e for b in BATCHES for e in b])
    assert history(project) == expected_history(BATCHES)
    assert outcome["rows_superseded"] == 4  # rows read twice at one cursor (3, 6, 1, 4)


def test_without_markers_a_change_closes_the_current_version(project: Project) -> None:
    project.configure(customers={
        "source": {"kind": "csv", "path": "data/batch*.csv"}, "target": "dim.customers",
        "key": ["customer_id"], "cursor": "updated_at", "on_conflict": "update",
        "history": "scd2", "lateness": "30d",
    })  # fmt: skip
    header = HEADER[:-1]
    project.write_csv("batch.csv", [[1, "a", "basic", "1.00", at(1, 10)]], header)
    project.run()
    project.write_csv("batch.csv", [[1, "a", "gold", "1.00", at(2, 10)]], header)
    outcome = project.run()
    assert written(outcome) == (1, 1, 0)
    rows = project.rows("tier, is_current", name="dim.customers")
    assert sorted(rows) == [("basic", "False"), ("gold", "True")] or sorted(rows) == [
        ("basic", "0"), ("gold", "1")]  # fmt: skip


def test_a_full_snapshot_closes_the_version_of_a_key_it_lacks(project: Project) -> None:
    project.configure(customers={
        "source": {"kind": "csv", "path": "data/batch*.csv"}, "target": "dim.customers",
        "key": ["customer_id"], "cursor": "updated_at", "on_conflict": "newer_wins",
        "history": "scd2", "sync": "full",
    })  # fmt: skip
    header = HEADER[:-1]
    project.write_csv("batch.csv", [[k, f"c{k}", "basic", "1.00", at(1, 10)] for k in (1, 2, 3)],
                      header)  # fmt: skip
    project.run()
    before = datetime.now(UTC)
    project.write_csv("batch.csv", [[k, f"c{k}", "basic", "1.00", at(1, 10)] for k in (1, 2)],
                      header)  # fmt: skip
    outcome = project.run()
    after = datetime.now(UTC)
    assert written(outcome) == (0, 1, 1)
    (closed,) = [v for v in history(project)[3]]
    assert closed[1] is not None and before <= closed[1] <= after
    assert written(project.run()) == (0, 0, 0)
    project.write_csv("batch.csv", [[k, f"c{k}", "basic", "1.00", at(1, 10)] for k in (1, 2, 3)],
                      header)  # fmt: skip
    # the snapshot holds key 3 again as it was: it had not really gone, its version is
    # current again
    assert written(project.run()) == (0, 1, 0)
    assert [v[1] for v in history(project)[3]] == [None]
    project.write_csv("batch.csv", [[k, f"c{k}", "basic", "1.00", at(1, 10)] for k in (1, 2)],
                      header)  # fmt: skip
    assert written(project.run()) == (0, 1, 1)
    project.write_csv("batch.csv", [[k, f"c{k}", "basic", "1.00", at(1, 10)] for k in (1, 2)]
                      + [[3, "c3", "gold", "1.00", at(6, 10)]], header)  # fmt: skip
    back = project.run()
    # the snapshot holds key 3 again, changed on Jan 6 (before the deletion was seen): the
    # deletion is withdrawn, and the change closes the old version
    assert written(back) == (1, 1, 0)
    assert [(v[0].day, v[1] and v[1].day) for v in history(project)[3]] == [(1, 6), (6, None)]


def test_a_history_edited_into_overlaps_fails_the_run_and_writes_nothing(
    project: Project,
) -> None:
    configure(project)
    load(project, [put(1, at(1, 10), "a"), put(1, at(2, 10), "b")])
    table = project.table("dim.customers")
    project.execute(f"UPDATE {table} SET is_current = true WHERE name = 'a'")  # two current
    before = project.rows("name, valid_to, is_current", name="dim.customers")
    project.write_csv("batch.csv", csv_rows([put(1, at(4, 10), "c")]), HEADER)
    code, _, err = project.cli("run")
    assert code == 1 and "breaks its invariants" in err and "customer_id=1" in err
    assert project.rows("name, valid_to, is_current", name="dim.customers") == before


@pytest.mark.parametrize("policy", ["update", "ignore"])
def test_on_conflict_decides_a_version_read_again_with_other_content(
    project: Project, policy: str
) -> None:
    configure(project, on_conflict=policy)
    load(project, [put(1, at(1, 10), "a")])
    load(project, [put(1, at(1, 10), "corrected")])
    names = [v[2][0] for v in history(project)[1]]
    assert names == (["corrected"] if policy == "update" else ["a"])


GOLD_SQL = "select customer_id, name, tier, updated_at from bronze.customers"


def test_an_scd2_model_keeps_the_history_of_its_output(project: Project) -> None:
    project.configure(
        models={"customer_history": {"query": GOLD_SQL, "target": "gold.customer_history",
                                     "materialized": "scd2", "key": ["customer_id"],
                                     "cursor": "updated_at"}},
        bronze={"source": {"kind": "csv", "path": "data/batch*.csv"},
                "target": "bronze.customers", "key": ["customer_id"], "cursor": "updated_at",
                "on_conflict": "newer_wins", "columns": {"credit": "numeric(12,2)"}},
    )  # fmt: skip
    header = HEADER[:-1]
    project.write_csv("batch.csv", [[k, f"c{k}", "basic", "1.00", at(1, 10)] for k in (1, 2)],
                      header)  # fmt: skip
    project.run_json("run")
    project.write_csv("batch_2.csv", [[1, "c1", "gold", "1.00", at(2, 10)]], header)
    outcomes = {o["pipeline"]: o for o in project.run_json("run")}
    assert written(outcomes["customer_history"]) == (1, 1, 0)
    rows = project.query(
        "SELECT customer_id, tier, valid_to IS NULL FROM "
        f"{project.table('gold.customer_history')} ORDER BY 1, valid_from"
    )
    assert [(int(k), t, bool(c)) for k, t, c in rows] == [
        (1, "basic", False), (1, "gold", True), (2, "basic", True)]  # fmt: skip
    again = {o["pipeline"]: o for o in project.run_json("run")}
    assert written(again["customer_history"]) == (0, 0, 0)


def test_a_quarantined_version_replayed_joins_the_history(project: Project) -> None:
    configure(project, checks={"not_null": ["tier"], "on_fail": "quarantine"})
    load(project, [put(1, at(1, 10), "a"), put(1, at(2, 10), "a", tier="")])
    assert [v[1] for v in history(project)[1]] == [None]
    project.write_csv("batch.csv", [], HEADER)
    configure(project, checks={"on_fail": "quarantine"})  # the empty tier is allowed now
    code, _, err = project.cli("quarantine", "replay", "customers", "--json")
    assert code == 0, err
    assert [(v[0].day, v[1] and v[1].day, v[2][1]) for v in history(project)[1]] == [
        (1, 2, "basic"), (2, None, "")]  # fmt: skip
