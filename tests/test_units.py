"""Pure pieces, input -> expected: the window rule, SQL text, config parsing, redaction."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest

from pipeledger.common.columns import Column, TableName, canonical_type
from pipeledger.common.secrets import redact
from pipeledger.config.model import parse_config, parse_duration
from pipeledger.errors import BackfillRangeError, ConfigError
from pipeledger.publish import merge_sql as sql
from pipeledger.sources.sql import window_predicate
from pipeledger.state.ranges import backfill_window
from pipeledger.state.watermark import (
    WatermarkTracker,
    Window,
    arrow_filter,
    from_text,
    incremental_window,
    to_text,
)
from pipeledger.warehouse.dialect import POSTGRES, SQLITE

T = datetime(2024, 1, 2, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("30s", timedelta(seconds=30)),
        ("2h", timedelta(hours=2)),
        ("400d", timedelta(days=400)),
        ("1d12h", timedelta(days=1, hours=12)),
        ("1w", timedelta(weeks=1)),
    ],
)
def test_durations(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["", "2 hours", "h", "-1d", "1y"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


def test_incremental_window_is_closed_and_subtracts_lateness() -> None:
    window = incremental_window({"": T}, timedelta(hours=2), partitioned=False)
    assert window == Window(lower=T - timedelta(hours=2))
    batch = pa.record_batch(
        {
            "c": pa.array(
                [T - timedelta(hours=2, microseconds=1), T - timedelta(hours=2), T],
                pa.timestamp("us", tz="UTC"),
            )
        }
    )
    expression = arrow_filter(window, "c", batch.schema.field("c").type, None)
    assert batch.filter(expression).num_rows == 2


def test_first_run_reads_everything() -> None:
    assert incremental_window({}, timedelta(hours=2), partitioned=False).is_full
    assert arrow_filter(Window(), "c", pa.int64(), None) is None


def test_integer_cursor_takes_integer_lateness() -> None:
    assert incremental_window({"": 100}, 5, partitioned=False).lower == 95
    with pytest.raises(ValueError):
        incremental_window({"": 100}, timedelta(hours=1), partitioned=False)


@pytest.mark.parametrize(
    "value",
    [7, date(2024, 1, 2), datetime(2024, 1, 2, 3, 4, 5, 6), datetime(2024, 1, 2, 3, tzinfo=UTC)],
)
def test_cursor_text_round_trips(value: object) -> None:
    assert from_text(to_text(value)) == value  # type: ignore[arg-type]


def test_tracker_keeps_the_greatest_cursor_per_partition() -> None:
    tracker = WatermarkTracker("c", "p")
    tracker.observe(pa.record_batch({"p": ["a", "b", "a"], "c": [3, 9, 5]}))
    tracker.observe(pa.record_batch({"p": ["a"], "c": [4]}))
    assert tracker.seen == {"a": 5, "b": 9}
    assert tracker.advanced({"a": 7, "b": 2}) == {"b": 9}


def test_window_predicate_for_sql_sources_binds_values() -> None:
    window = Window(partition_lower={"eu": 5})
    text, params = window_predicate(POSTGRES, window, "version", "region")
    assert text == (
        '(CAST("region" AS TEXT) IS NULL OR CAST("region" AS TEXT) NOT IN (%s) '
        'OR (CAST("region" AS TEXT) = %s AND "version" >= %s))'
    )
    assert params == ["eu", "eu", 5]
    text, params = window_predicate(SQLITE, Window(lower=1, upper=9), "v", None)
    assert (text, params) == ('"v" >= ? AND "v" <= ?', [1, 9])


def test_backfill_window_rules() -> None:
    window = backfill_window("2024-01-01", "2024-01-31", timedelta(days=31), "orders")
    assert (window.lower, window.upper, window.backfill) == (
        date(2024, 1, 1),
        date(2024, 1, 31),
        True,
    )
    with pytest.raises(BackfillRangeError, match="after --end"):
        backfill_window("2024-02-01", "2024-01-01", None, "orders")
    with pytest.raises(BackfillRangeError, match="max_backfill"):
        backfill_window("2024-01-01", "2024-03-01", timedelta(days=30), "orders")
    with pytest.raises(BackfillRangeError):
        backfill_window("yesterday", "today", None, "orders")


@pytest.mark.parametrize(
    "start",
    [
        "2024-01-01T09:00:00Z",
        "2024-01-01T23:59:59.999999+00:00",
        "2024-01-01 12:00:00",
        "2024-01-01",
    ],
)
def test_a_date_only_backfill_end_covers_its_whole_day(start: str) -> None:
    window = backfill_window(start, "2024-01-01", None, "orders")
    assert (window.lower, window.upper) == (from_text(start), date(2024, 1, 1))


@pytest.mark.parametrize(
    ("start", "end"),
    [
        ("2024-01-02T00:00:00Z", "2024-01-01"),  # the first instant after the end's day
        ("2024-01-02", "2024-01-01"),
        ("2024-01-01T10:00:00Z", "2024-01-01T09:59:59Z"),  # a timestamp end is exact
        ("2024-01-01T01:00:00+02:00", "2023-12-31T23:59:00+01:00"),  # 23:00Z after 22:59Z
    ],
)
def test_an_end_before_the_start_is_refused(start: str, end: str) -> None:
    with pytest.raises(BackfillRangeError, match="after --end"):
        backfill_window(start, end, None, "orders")


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
    stage = sql.create_promotable_stage(run_id, SPEC.columns, "updated_at", updates=True)
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


def test_sqlite_has_no_schemas_so_the_name_is_one_identifier() -> None:
    assert SQLITE.table(TableName("analytics", "orders")) == '"analytics.orders"'
    assert POSTGRES.table(TableName(None, "orders")) == '"orders"'
    assert SQLITE.column_type("numeric(12,2)") == "DECIMAL_TEXT(12,2)"


@pytest.mark.parametrize(
    ("declared", "canonical"),
    [
        ("NUMERIC(12, 2)", "numeric(12,2)"),
        ("int", "integer"),
        ("timestamp with time zone", "timestamptz"),
        ("character varying(40)", "text"),
        ("double", "double precision"),
        ("int8", "bigint"),
        ("UUID", "uuid"),
        ("blob", "bytea"),
        ("JSONB", "jsonb"),
        ("time without time zone", "time"),
        ("time(6)", "time"),
        ("interval", "interval"),
        ("numeric(50, 10)", "numeric(50,10)"),  # carried as decimal256
    ],
)
def test_canonical_types(declared: str, canonical: str) -> None:
    assert canonical_type(declared) == canonical


@pytest.mark.parametrize(
    "bad", ["numeric(12,2)); drop table x", "json", "text; --", "numeric(77,2)", "timetz"]
)
def test_unsupported_types_are_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        canonical_type(bad)


def _pipeline(**extra: object) -> dict[str, object]:
    return {
        "source": {"kind": "csv", "path": "x.csv"},
        "target": "t",
        "key": ["id"],
        "cursor": "u",
        "on_conflict": "update",
        **extra,
    }


def test_config_lists_every_problem_with_its_key() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(
            {
                "pipelines": {
                    "orders": _pipeline(lateness="2 hours", keys=["id"]),
                    "bad name": _pipeline(),
                }
            },
            Path("p.toml"),
        )
    message = str(caught.value)
    assert "pipelines.orders.lateness" in message
    assert "pipelines.orders.keys: unknown key" in message
    assert "pipeline name 'bad name'" in message


def test_config_sql_source_needs_exactly_one_of_table_or_query() -> None:
    with pytest.raises(ConfigError, match="exactly one of 'table' or 'query'"):
        parse_config(
            {"pipelines": {"o": _pipeline(source={"kind": "sql", "url": "sqlite:///x"})}},
            Path("p.toml"),
        )


def test_config_cursor_cannot_be_the_key() -> None:
    with pytest.raises(ConfigError, match="cannot also be a key"):
        parse_config({"pipelines": {"o": _pipeline(cursor="id")}}, Path("p.toml"))


def test_missing_environment_variable_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NOPE_NOT_SET", raising=False)
    with pytest.raises(ConfigError, match=r"warehouse\.url: environment variable NOPE_NOT_SET"):
        parse_config({"warehouse": {"url": "postgresql://u:${NOPE_NOT_SET}@h/db"}}, Path("p.toml"))


def test_redaction() -> None:
    assert redact("postgresql://me:pw@host/db failed") == "postgresql://me:***@host/db failed"
    assert redact("host=x password=hunter2 user=y") == "host=x password=*** user=y"
