"""Each conflict policy's semantics, and order independence under newer_wins."""

from __future__ import annotations

import itertools
import json

import pytest

from tests.helpers import Project, order, orders_pipeline

BATCHES = {
    "a.csv": [
        order(1, "2024-01-01T10:00:00Z", status="processing"),
        order(2, "2024-01-01T10:00:00Z", status="processing"),
    ],
    "b.csv": [order(1, "2024-01-02T10:00:00Z", status="shipped"), order(3, "2024-01-02T10:00:00Z")],
    "c.csv": [
        order(1, "2024-01-03T10:00:00Z", status="completed"),
        order(2, "2024-01-01T10:00:00Z", status="cancelled"),
    ],  # same cursor, other content
}


def _load_in_order(project: Project, run: int, names: tuple[str, ...]) -> list[tuple[str, ...]]:
    pipeline, target = f"p{run}", f"analytics.orders_{run}"
    for name in names:
        project.write_csv(f"{run}_{name}", BATCHES[name])
        source = {"kind": "csv", "path": f"data/{run}_{name}"}
        load = orders_pipeline(
            on_conflict="newer_wins", target=target, lateness="7d", source=source
        )
        project.configure(pipelines={pipeline: load})
        project.run(pipeline)
    return project.rows("order_id, status, updated_at", name=target)


def test_newer_wins_converges_whatever_the_order(project: Project) -> None:
    finals = {
        tuple(_load_in_order(project, run, permutation))
        for run, permutation in enumerate(itertools.permutations(BATCHES))
    }
    assert len(finals) == 1, finals
    final = finals.pop()
    assert final[0][1] == "completed"  # the newest cursor wins for order 1
    assert len(final) == 3


def test_newer_wins_ignores_an_older_row_and_reports_it_unchanged(project: Project) -> None:
    project.configure(orders=orders_pipeline(on_conflict="newer_wins"))
    project.write_csv("orders_1.csv", [order(1, "2024-01-05T10:00:00Z", status="shipped")])
    project.run()
    project.write_csv(
        "orders_1.csv",
        [
            order(1, "2024-01-05T10:00:00Z", status="shipped"),
            order(1, "2024-01-04T10:00:00Z", status="processing"),
        ],
    )
    result = project.run_json("backfill", "orders", "--start", "2024-01-01", "--end", "2024-01-31")[
        0
    ]
    assert (result["rows_inserted"], result["rows_updated"]) == (0, 0)
    assert project.rows() == [("1", "shipped", "10.00")]


def test_update_policy_last_writer_wins(project: Project) -> None:
    project.configure(orders=orders_pipeline(on_conflict="update"))
    project.write_csv("orders_1.csv", [order(1, "2024-01-05T10:00:00Z", status="shipped")])
    project.run()
    # the source is the truth: an older cursor still overwrites (e.g. a corrected extract)
    project.write_csv("orders_1.csv", [order(1, "2024-01-04T10:00:00Z", status="cancelled")])
    result = project.run_json("backfill", "orders", "--start", "2024-01-01", "--end", "2024-01-31")[
        0
    ]
    assert result["rows_updated"] == 1
    assert project.rows() == [("1", "cancelled", "10.00")]
    again = project.run_json("backfill", "orders", "--start", "2024-01-01", "--end", "2024-01-31")[
        0
    ]
    assert (again["rows_updated"], again["rows_unchanged"]) == (0, 1)


def test_ignore_policy_first_write_wins(project: Project) -> None:
    project.configure(orders=orders_pipeline(on_conflict="ignore"))
    project.write_csv("orders_1.csv", [order(1, "2024-01-01T10:00:00Z", status="processing")])
    project.run()
    project.write_csv(
        "orders_2.csv",
        [order(1, "2024-01-02T10:00:00Z", status="shipped"), order(2, "2024-01-02T10:00:00Z")],
    )
    result = project.run()
    assert (result["rows_inserted"], result["rows_updated"]) == (1, 0)
    assert project.rows()[0] == ("1", "processing", "10.00")


def test_error_policy_refuses_changed_rows_and_writes_nothing(project: Project) -> None:
    project.configure(orders=orders_pipeline(on_conflict="error"))
    project.write_csv(
        "orders_1.csv", [order(1, "2024-01-01T10:00:00Z"), order(2, "2024-01-01T11:00:00Z")]
    )
    project.run()
    again = project.run()  # identical re-seen rows are a no-op: re-runs stay idempotent
    assert (again["status"], again["rows_updated"]) == ("success", 0)
    project.write_csv(
        "orders_2.csv",
        [order(2, "2024-01-01T11:00:00Z", status="cancelled"), order(3, "2024-01-02T10:00:00Z")],
    )
    code, _, err = project.cli("run")
    assert code == 1
    assert "order_id=2" in err and "different content" in err
    assert "nothing was written" in err and "2024-01-01T11:00:00" in err
    assert project.count() == 2  # order 3 was not published either
    assert project.watermarks() == {"": "2024-01-01T11:00:00.000000+00:00"}


def test_error_policy_refuses_two_versions_of_a_key_in_one_run(project: Project) -> None:
    project.configure(orders=orders_pipeline(on_conflict="error"))
    project.write_csv(
        "orders_1.csv",
        [
            order(1, "2024-01-01T10:00:00Z", status="processing"),
            order(1, "2024-01-02T10:00:00Z", status="shipped"),
            order(2, "2024-01-01T10:00:00Z"),
            order(2, "2024-01-01T10:00:00Z"),
        ],
    )  # identical: fine
    code, _, err = project.cli("run")
    assert code == 1
    assert "1 key(s) arrived with different content in this run" in err and "order_id=1" in err
    assert not project.exists() or project.count() == 0


@pytest.mark.parametrize("policy", ["update", "newer_wins", "ignore"])
def test_duplicate_keys_in_an_incremental_batch_resolve_to_the_greatest_cursor(
    project: Project, policy: str
) -> None:
    """Into an existing target: the staged keys are proven unique first, and a key staged
    twice is resolved to its greatest cursor before the merge."""
    project.configure(orders=orders_pipeline(on_conflict=policy))
    project.write_csv(
        "orders_1.csv",
        [order(1, "2024-01-01T10:00:00Z", status="processing"), order(2, "2024-01-01T10:00:00Z")],
    )
    project.run()
    project.write_csv(
        "orders_2.csv",
        [
            order(1, "2024-01-03T10:00:00Z", status="completed"),
            order(1, "2024-01-02T10:00:00Z", status="shipped"),
            order(3, "2024-01-05T10:00:00Z", status="new"),
            order(3, "2024-01-04T10:00:00Z", status="old"),
        ],
    )
    result = project.run()  # also re-reads the two rows at the watermark
    updated = 0 if policy == "ignore" else 1
    counted = ("rows_read", "rows_inserted", "rows_updated", "rows_unchanged", "rows_superseded")
    assert tuple(result[k] for k in counted) == (6, 1, updated, 2 - updated, 3)
    statuses = {row[0]: row[1] for row in project.rows()}
    assert statuses == {"1": "completed" if updated else "processing", "2": "completed", "3": "new"}


def test_an_older_version_beside_the_reread_stored_one_does_not_win(project: Project) -> None:
    """The stored version is re-read (at the watermark) in the same run as an older one:
    the first changes nothing, and an upsert would not refuse the second; the versions
    are resolved first, so the stored newest stays."""
    project.configure(orders=orders_pipeline(lateness="1d"))
    project.write_csv("orders_1.csv", [order(1, "2024-01-02T10:00:00Z", status="completed")])
    project.run()
    project.write_csv("orders_2.csv", [order(1, "2024-01-02T09:00:00Z", status="shipped")])

    result = project.run()

    assert (result["rows_updated"], result["rows_superseded"]) == (0, 1)
    assert [(row[0], row[1]) for row in project.rows()] == [("1", "completed")]


@pytest.mark.parametrize("policy", ["update", "newer_wins", "ignore"])
def test_duplicate_keys_in_one_batch_resolve_to_the_greatest_cursor(
    project: Project, policy: str
) -> None:
    project.configure(orders=orders_pipeline(on_conflict=policy))
    project.write_csv(
        "orders_1.csv",
        [
            order(1, "2024-01-01T10:00:00Z", status="processing"),
            order(1, "2024-01-03T10:00:00Z", status="completed"),
            order(1, "2024-01-02T10:00:00Z", status="shipped"),
            order(2, "2024-01-01T10:00:00Z"),
        ],
    )
    code, out, err = project.cli("run", "--json")
    assert code == 0, err
    result = json.loads(out)[0]
    assert (result["rows_read"], result["rows_inserted"], result["rows_superseded"]) == (4, 2, 2)
    assert project.rows()[0] == ("1", "completed", "10.00")
