"""Quarantine, end to end on both backends: what the gate set aside is listed, re-runs add
nothing twice, and a replay through a relaxed config publishes exactly the rows that now
pass, once, without moving the watermark."""

from __future__ import annotations

import json
from typing import Any

from tests.helpers import Project, order, orders_pipeline

QUARANTINE = "analytics.orders_quarantine"
RUNS = "pipeledger.pipeline_runs"
EVENTS = "pipeledger.audit_events"


def checks(
    statuses: tuple[str, ...] = ("completed", "shipped"), least: float = 0, **pipeline: Any
) -> Any:
    return orders_pipeline(
        **pipeline,
        lateness="1d",  # every run re-reads the whole day: re-runs see the bad rows again
        checks={
            "range": {"amount": {"min": least}},
            "accepted_values": {"status": list(statuses)},
            "on_fail": "quarantine",
        },
    )


def first_batch() -> list[list[Any]]:
    return [
        order(1, "2024-01-01T10:00:00Z"),
        order(2, "2024-01-01T11:00:00Z", status="lost"),
        order(3, "2024-01-01T12:00:00Z", amount="-5.00"),
        order(4, "2024-01-01T13:00:00Z", status="lost", amount="-1.00"),  # fails both
        order(5, "2024-01-01T14:00:00Z"),
    ]


def listed(project: Project, *args: str) -> list[dict[str, Any]]:
    code, out, err = project.cli("quarantine", "orders", *args, "--json")
    assert code == 0, err
    entries: list[dict[str, Any]] = json.loads(out)
    return entries


def replay(project: Project, *args: str) -> dict[str, Any]:
    code, out, err = project.cli("quarantine", "replay", "orders", *args, "--json")
    assert code == 0, err
    result: dict[str, Any] = json.loads(out)
    return result


def by_key(entries: list[dict[str, Any]]) -> set[tuple[int, str]]:
    return {(int(e["key_values"]["order_id"]), e["check"]) for e in entries}


def test_quarantined_rows_are_listed_once_and_a_rerun_adds_nothing(project: Project) -> None:
    project.configure(orders=checks())
    code, out, _ = project.cli("quarantine", "orders")
    assert code == 0 and "nothing quarantined for orders" in out
    project.write_csv("orders_1.csv", first_batch())
    first = project.run()
    assert first["status"] == "partial" and first["rows_inserted"] == 2
    entries = listed(project)
    assert by_key(entries) == {
        (2, "accepted_values:status"),
        (3, "range:amount"),
        (4, "accepted_values:status"),
        (4, "range:amount"),
    }
    assert {e["run_id"] for e in entries} == {first["run_id"]}
    assert (
        next(e for e in entries if e["key_values"] == {"order_id": 3})["row"]["amount"] == "-5.00"
    )
    code, out, _ = project.cli("quarantine", "orders")
    assert code == 0
    assert "(order_id=3) range:amount: expected >= 0" in out
    assert "replay with: pipeledger quarantine replay orders" in out

    again = project.run()
    assert (again["rows_inserted"], again["rows_updated"]) == (0, 0)
    assert project.count() == 2 and project.count(QUARANTINE) == 4
    assert {e["run_id"] for e in listed(project)} == {first["run_id"]}


def test_replay_publishes_exactly_the_rows_that_now_pass_once(project: Project) -> None:
    project.configure(orders=checks())
    project.write_csv("orders_1.csv", first_batch())
    project.run()
    marks = project.watermarks()

    project.configure(orders=checks(statuses=("completed", "shipped", "lost")))
    result = replay(project)
    assert result["replayed"] == 3  # rows: order 4 has two entries, one row
    assert result["published"] == {"inserted": 1, "updated": 0, "unchanged": 0, "superseded": 0}
    assert (result["still_failing"], result["resolved"]) == (2, 1)
    assert result["failing_checks"] == {"range:amount": 2}
    assert project.count() == 3
    assert project.rows("order_id, status, _pipeledger_run_id")[1] == (
        "2",
        "lost",
        result["run_id"],
    )
    assert project.watermarks() == marks

    unresolved = listed(project)
    assert by_key(unresolved) == {
        (3, "range:amount"),
        (4, "accepted_values:status"),
        (4, "range:amount"),
    }
    assert {e["reason"] for e in unresolved} == {"range:amount: expected >= 0"}
    assert {e["last_checked_run"] for e in unresolved} == {result["run_id"]}
    resolved = [e for e in listed(project, "--all") if e["resolved_at"]]
    assert [(e["key_values"], e["resolved_by_run"]) for e in resolved] == [
        ({"order_id": 2}, result["run_id"])
    ]
    run = project.query(
        f"SELECT trigger_type, status, rows_read, rows_inserted, rows_rejected "
        f"FROM {project.table(RUNS)} WHERE run_id = %s",
        [result["run_id"]],
    )
    assert run == [("replay", "partial", 3, 1, 2)]
    events = project.query(
        f"SELECT record_count FROM {project.table(EVENTS)} "
        "WHERE run_id = %s AND event_type = 'QUARANTINE_REPLAY'",
        [result["run_id"]],
    )
    assert events == [(3,)]

    again = replay(project)
    assert (again["replayed"], again["still_failing"], again["resolved"]) == (2, 2, 0)
    assert again["published"]["inserted"] + again["published"]["updated"] == 0
    assert project.count() == 3

    project.configure(orders=checks(statuses=("completed", "shipped", "lost"), least=-10))
    last = replay(project)
    assert (last["replayed"], last["published"]["inserted"], last["resolved"]) == (2, 2, 3)
    assert project.count() == 5 and listed(project) == []
    code, out, _ = project.cli("quarantine", "replay", "orders")
    assert code == 0 and "nothing to replay" in out
    assert project.count() == 5 and project.watermarks() == marks


def test_run_restricts_listing_and_replay_to_one_run(project: Project) -> None:
    project.configure(orders=checks())
    project.write_csv("orders_1.csv", [order(1, "2024-01-01T10:00:00Z", status="lost")])
    first = project.run()
    project.write_csv("orders_2.csv", [order(2, "2024-01-03T10:00:00Z", status="lost")])
    second = project.run()
    assert by_key(listed(project, "--run", first["run_id"][:8])) == {(1, "accepted_values:status")}
    assert by_key(listed(project, "--run", second["run_id"])) == {(2, "accepted_values:status")}
    code, _, err = project.cli("quarantine", "orders", "--run", "abc")
    assert code == 2 and "first 8+ characters" in err

    project.configure(orders=checks(statuses=("completed", "lost")))
    result = replay(project, "--run", second["run_id"])
    assert (result["replayed"], result["published"]["inserted"]) == (1, 1)
    assert project.rows("order_id") == [("2",)]
    assert by_key(listed(project)) == {(1, "accepted_values:status")}
    assert replay(project)["published"]["inserted"] == 1
    assert project.rows("order_id") == [("1",), ("2",)]


def test_versions_of_one_key_are_resolved_by_the_merge_not_held_back(project: Project) -> None:
    """The gate quarantines every version of a key staged twice; a replay lets the merge
    keep the greatest cursor, as a load does, and checks each version's values."""
    project.configure(orders=checks(on_conflict="newer_wins"))
    project.write_csv(
        "orders_1.csv",
        [
            order(7, "2024-01-01T11:00:00Z", status="shipped"),
            order(7, "2024-01-01T10:00:00Z", status="lost"),
        ],
    )
    assert project.run()["rows_inserted"] == 0
    assert by_key(listed(project)) == {
        (7, "key_unique:order_id"),
        (7, "accepted_values:status"),
    }
    result = replay(project)  # same config: the newer version passes, the other does not
    assert (result["published"]["inserted"], result["still_failing"]) == (1, 1)
    assert project.rows("order_id, status") == [("7", "shipped")]
    project.configure(orders=checks(statuses=("shipped", "lost"), on_conflict="newer_wins"))
    last = replay(project)  # the older version passes now, and loses to the newer one
    assert last["published"] == {"inserted": 0, "updated": 0, "unchanged": 1, "superseded": 0}
    assert project.rows("order_id, status") == [("7", "shipped")] and listed(project) == []
