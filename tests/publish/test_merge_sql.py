"""The merge statement's text: what each conflict policy compares, updates and counts."""

from __future__ import annotations

from datetime import UTC, datetime

from pipeledger.common.columns import Column, TableName
from pipeledger.publish import merge_sql as sql
from pipeledger.warehouse.dialect import POSTGRES, SQLITE

SPEC = sql.MergeSpec(
    target=TableName("analytics", "orders"),
    columns=(Column("id", "bigint"), Column("status", "text"), Column("updated_at", "timestamptz")),
    key=("id",),
    cursor="updated_at",
    policy="newer_wins",
)


def test_merge_sql_postgres_skips_identical_rows_and_counts() -> None:
    text = sql.merge(POSTGRES, SPEC, '"_pipeledger_stage"')
    assert 'INSERT INTO "analytics"."orders" AS t ("id", "status", "updated_at"' in text
    assert 'ON CONFLICT ("id") DO UPDATE SET "status" = excluded."status"' in text
    assert 'WHERE excluded."updated_at" > t."updated_at" OR' in text
    assert "RETURNING (xmax = 0) AS inserted" in text


def test_an_incremental_merge_goes_straight_from_the_stage() -> None:
    """Unfiltered (an incremental batch): no join before ON CONFLICT; filtered (a backfill):
    the staged keys are joined to the target first."""
    stage = '"_pipeledger_stage"'
    text = sql.merge(POSTGRES, SPEC, stage, filtered=False)
    assert f'FROM {stage} AS s ON CONFLICT ("id") DO UPDATE SET' in text
    assert "JOIN" not in text and "RETURNING (xmax = 0) AS inserted" in text
    assert f'FROM {stage} AS s LEFT JOIN "analytics"."orders" AS cur' in sql.merge(
        POSTGRES, SPEC, stage
    )


def test_targets_of_policies_that_update_leave_room_on_each_page() -> None:
    """PostgreSQL then updates a row within its page (no new index entry)."""
    assert sql.create_target(POSTGRES, SPEC).endswith("\n) WITH (fillfactor = 90)")
    ignore = sql.MergeSpec(
        target=SPEC.target, columns=SPEC.columns, key=SPEC.key, cursor=SPEC.cursor, policy="ignore"
    )
    assert sql.create_target(POSTGRES, ignore).endswith("\n)")
    assert sql.create_target(SQLITE, SPEC).endswith("\n)")
    run_id = "00000000-0000-4000-8000-000000000000"
    at = datetime(2024, 1, 1, tzinfo=UTC)
    stage = sql.create_promotable_stage(
        POSTGRES, run_id, SPEC.columns, "updated_at", loaded_at=at, updates=True
    )
    assert stage[-1].endswith(") WITH (fillfactor = 90)")


def test_update_policy_compares_every_value_column() -> None:
    spec = sql.MergeSpec(
        target=SPEC.target, columns=SPEC.columns, key=SPEC.key, cursor=SPEC.cursor, policy="update"
    )
    assert sql.update_condition(POSTGRES, spec) == (
        '(t."status", t."updated_at") IS DISTINCT FROM (excluded."status", excluded."updated_at")'
    )
    assert sql.update_condition(SQLITE, spec) == (
        '(t."status", t."updated_at") IS NOT (excluded."status", excluded."updated_at")'
    )
    ignore = sql.MergeSpec(
        target=SPEC.target, columns=SPEC.columns, key=SPEC.key, cursor=SPEC.cursor, policy="ignore"
    )
    assert sql.update_condition(POSTGRES, ignore) is None
    assert "DO NOTHING" in sql.merge(SQLITE, ignore, "s")
