"""Column names read from a target's catalog are checked like the config's: a table made by
hand with a name that could carry SQL is refused before any statement names it."""

from __future__ import annotations

import pytest

from tests.helpers import Project, order, orders_pipeline


def _create_by_hand(project: Project, odd_column: str) -> None:
    """The target as someone made it at a SQL prompt, with one oddly named column."""
    odd = '"' + odd_column.replace('"', '""') + '"'
    if project.backend == "postgres":
        project.execute("CREATE SCHEMA analytics")
    else:
        (project.root / ".pipeledger").mkdir(exist_ok=True)
    project.execute(
        f"CREATE TABLE {project.table()} (order_id bigint PRIMARY KEY, "
        f"updated_at timestamptz NOT NULL, {odd} text)"
    )


def _columns(project: Project) -> list[str]:
    if project.backend == "postgres":
        rows = project.query(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = 'analytics' "
            "AND table_name = 'orders' ORDER BY ordinal_position"
        )
    else:
        rows = project.query("SELECT name FROM pragma_table_info('analytics.orders')")
    return [str(r[0]) for r in rows]


@pytest.mark.parametrize("odd_column", ['a"b', "x'); drop table t; --"])
def test_a_target_column_that_is_no_identifier_is_refused_before_any_sql(
    project: Project, odd_column: str
) -> None:
    _create_by_hand(project, odd_column)
    project.configure(orders=orders_pipeline(columns={}))
    project.write_csv("orders_1.csv", [order(1, "2024-01-01T10:00:00Z")])
    before = _columns(project)

    code, _, err = project.cli("run")

    assert code == 1, err
    assert "target analytics.orders: column" in err and repr(odd_column) in err, err
    assert "is not a valid identifier" in err and "Traceback" not in err
    assert "nothing was written" in err
    # refused before anything was done to the table: not even its fingerprint column added
    assert _columns(project) == before
    assert project.count() == 0


def test_a_target_column_of_a_type_pipeledger_cannot_carry_is_refused(project: Project) -> None:
    if project.backend == "postgres":
        project.execute("CREATE SCHEMA analytics")
    else:
        (project.root / ".pipeledger").mkdir(exist_ok=True)
    project.execute(
        f"CREATE TABLE {project.table()} (order_id bigint PRIMARY KEY, "
        "updated_at timestamptz NOT NULL, tags tsvector)"
    )
    project.configure(orders=orders_pipeline(columns={}))
    project.write_csv("orders_1.csv", [order(1, "2024-01-01T10:00:00Z")])

    code, _, err = project.cli("run")

    assert code == 1, err
    assert "target analytics.orders" in err and "unsupported column type 'tsvector'" in err, err
    assert "unexpected" not in err and "Traceback" not in err
