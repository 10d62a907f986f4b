"""Row fingerprints, and the backfill shortcut that uses them (``pipeledger.load.known``)."""

from __future__ import annotations

import hashlib
import struct
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from pipeledger.transform.fingerprint import row_hashes, with_row_hash

from .helpers import Project, order, orders_pipeline

# -- the definition, read literally in plain Python ------------------------------------

M = 1 << 64


def mix(h: int) -> int:
    h ^= h >> 33
    h = h * 0xFF51AFD7ED558CCD % M
    h ^= h >> 33
    h = h * 0xC4CEB9FE1A85EC53 % M
    return h ^ (h >> 33)


def name_seed(name: str) -> int:
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "little")


def text_word(data: bytes) -> int:
    h = mix(len(data) ^ 0x243F6A8885A308D3)
    if len(data) > 256:
        return h ^ int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")
    for start in range(0, len(data), 8):
        h = (mix(h ^ int.from_bytes(data[start : start + 8], "little")) + 0x9E3779B97F4A7C15) % M
    return h


def value_word(value: Any, kind: pa.DataType) -> int:
    if isinstance(value, str):
        return text_word(value.encode())
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, float):
        return int.from_bytes(struct.pack("<d", value), "little")
    if isinstance(value, Decimal):
        unscaled = int(value.scaleb(kind.scale)) % (1 << 128)
        return (mix((unscaled % M) ^ 0x13198A2E03707344) + (unscaled >> 64)) % M
    if isinstance(value, datetime):
        return int((value - datetime(1970, 1, 1, tzinfo=UTC)).total_seconds() * 1_000_000) % M
    if isinstance(value, date):
        return (value - date(1970, 1, 1)).days % M
    assert isinstance(value, int)
    return value % M


def reference(row: dict[str, Any], schema: pa.Schema) -> int:
    total = 0
    for name, value in row.items():
        if value is not None:
            total += mix(value_word(value, schema.field(name).type) ^ name_seed(name))
    h = mix(total % M)
    return h - M if h >= 1 << 63 else h


TYPES = pa.schema(
    [
        ("id", pa.int64()),
        ("small", pa.int16()),
        ("n", pa.int32()),
        ("ratio", pa.float64()),
        ("half", pa.float32()),
        ("flag", pa.bool_()),
        ("amount", pa.decimal128(12, 2)),
        ("day", pa.date32()),
        ("at", pa.timestamp("us", tz="UTC")),
        ("note", pa.string()),
    ]
)
TEXTS = ["", "a", "abcdefg", "abcdefgh", "abcdefghi", "é" * 9, "x" * 256, "y" * 257, "日本語"]


def sample_rows() -> list[dict[str, Any]]:
    rows = []
    for i, text in enumerate(TEXTS * 3):
        rows.append(
            {
                "id": i * 7919 - 40_000,
                "small": (-1) ** i * i,
                "n": None if i % 5 == 0 else i * 1_000_003,
                "ratio": i / 7 - 1.5,
                "half": 0.5 * i,
                "flag": None if i % 4 == 0 else i % 2 == 0,
                "amount": Decimal(f"{(-1) ** i * i * 12345.67:.2f}"),
                "day": date(1969 + i, 1 + i % 12, 1 + i % 28),
                "at": datetime(2024, 1, 1, i % 24, i % 60, i % 60, i * 37, tzinfo=UTC),
                "note": None if i % 7 == 3 else text,
            }
        )
    return rows


def test_fingerprint_is_the_definition_for_every_type_null_and_text_length() -> None:
    rows = sample_rows()
    batch = pa.RecordBatch.from_pylist(rows, schema=TYPES)
    expected = [reference(row, TYPES) for row in rows]
    assert row_hashes(batch, TYPES.names).to_pylist() == expected
    # a slice (an offset into the buffers) sees the same values
    assert row_hashes(batch.slice(5, 11), TYPES.names).to_pylist() == expected[5:16]
    # large_string is the same text
    large = batch.set_column(9, "note", batch.column("note").cast(pa.large_string()))
    assert row_hashes(large, TYPES.names).to_pylist() == expected


def test_fingerprints_are_pinned_across_releases() -> None:
    """Changing the definition makes every stored fingerprint stale (backfills then stage
    every row until rows are rewritten): it must be a deliberate change."""
    batch = pa.RecordBatch.from_pylist(
        [{"order_id": 1, "amount": Decimal("10.00"), "status": "completed"}],
        schema=pa.schema(
            [("order_id", pa.int64()), ("amount", pa.decimal128(12, 2)), ("status", pa.string())]
        ),
    )
    assert row_hashes(batch, batch.schema.names).to_pylist() == [reference(
        {"order_id": 1, "amount": Decimal("10.00"), "status": "completed"}, batch.schema
    )] == [PINNED]  # fmt: skip


PINNED = 7576051501570342412


def test_width_and_an_added_null_column_keep_a_fingerprint_swapped_values_do_not() -> None:
    narrow = pa.record_batch({"a": pa.array([5, -3], pa.int32()), "b": pa.array([7, 8])})
    wide = pa.record_batch({"a": pa.array([5, -3], pa.int64()), "b": pa.array([7, 8])})
    assert row_hashes(narrow, ["a", "b"]).equals(row_hashes(wide, ["a", "b"]))
    evolved = wide.append_column("c", pa.array([None, None], pa.string()))
    assert row_hashes(evolved, ["a", "b", "c"]).equals(row_hashes(wide, ["a", "b"]))
    swapped = pa.record_batch({"a": pa.array([7, 8]), "b": pa.array([5, -3])})
    assert set(row_hashes(swapped, ["a", "b"]).to_pylist()).isdisjoint(
        row_hashes(wide, ["a", "b"]).to_pylist()
    )


def test_near_identical_rows_get_distinct_fingerprints() -> None:
    n = 200_000
    batch = pa.record_batch(
        {
            "id": pa.array(range(n)),
            "status": pa.array([("ab" * (i % 40))[: i % 13] for i in range(n)]),
            "amount": pa.array([Decimal(i % 1000) / 100 for i in range(n)], pa.decimal128(12, 2)),
        }
    )
    same_key = batch.set_column(0, "id", pa.array([0] * n))  # only the values differ
    for table in (batch, same_key):
        hashes = with_row_hash(table, table.schema.names).column("_pipeledger_row_hash")
        distinct = len(set(hashes.to_pylist()))
        values = zip(*table.to_pydict().values(), strict=True)
        expected = n if table is batch else len({(row[1], row[2]) for row in values})
        assert distinct == expected


# -- the backfill shortcut, on both backends -------------------------------------------


def day(i: int) -> str:
    return f"2024-01-{i:02d}T10:00:00Z"


BACKFILL = ("--start", "2024-01-01", "--end", "2024-01-31")


def backfill(project: Project, *extra: str) -> dict[str, Any]:
    return project.run_json("backfill", "orders", *BACKFILL, *extra)[0]


def run_ids(project: Project) -> list[tuple[Any, ...]]:
    return project.query(f"SELECT order_id, _pipeledger_run_id FROM {project.table()} ORDER BY 1")


@pytest.mark.parametrize("policy", ["update", "newer_wins"])
def test_backfill_stages_only_rows_the_target_does_not_hold(project: Project, policy: str) -> None:
    project.configure(orders=orders_pipeline(on_conflict=policy))
    rows = [order(i, day(i)) for i in range(1, 21)]
    project.write_csv("orders_1.csv", rows)
    project.run()
    before = run_ids(project)
    same = backfill(project)
    assert (same["rows_read"], same["rows_staged"]) == (20, 0)
    assert (same["rows_inserted"], same["rows_updated"], same["rows_unchanged"]) == (0, 0, 20)
    assert run_ids(project) == before
    # a correction of two rows (same cursors) and one new row
    rows[4] = order(5, day(5), status="refunded")
    rows[9] = order(10, day(10), amount="99.50")
    project.write_csv("orders_1.csv", [*rows, order(21, day(21))])
    fixed = backfill(project)
    assert (fixed["rows_read"], fixed["rows_staged"]) == (21, 3)
    assert (fixed["rows_inserted"], fixed["rows_updated"], fixed["rows_unchanged"]) == (1, 2, 18)
    assert {("5", "refunded", "10.00"), ("10", "completed", "99.50")} <= set(project.rows())
    # the rewritten rows carry their new fingerprints: nothing is staged the next time
    again = backfill(project)
    assert (again["rows_staged"], again["rows_unchanged"]) == (0, 21)


def test_a_key_in_two_versions_is_merged_as_if_every_row_were_staged(project: Project) -> None:
    """The stored version of a key is skipped, an older version of it arrives beside it:
    under ``update`` the greatest cursor still wins (the skipped row is staged again)."""
    project.configure(orders=orders_pipeline(on_conflict="update"))
    project.write_csv("orders_1.csv", [order(1, day(9), status="shipped"), order(2, day(9))])
    project.run()
    project.write_csv("orders_0.csv", [order(1, day(3), status="pending")])  # older version
    shortcut = backfill(project)
    assert (shortcut["rows_read"], shortcut["rows_staged"]) == (3, 2)
    assert shortcut["rows_updated"] == 0
    assert project.rows() == [("1", "shipped", "10.00"), ("2", "completed", "10.00")]
    full = backfill(project, "--full-compare")
    assert (full["rows_staged"], full["rows_updated"]) == (3, 0)
    assert {k: shortcut[k] for k in ("rows_inserted", "rows_updated")} == {
        k: full[k] for k in ("rows_inserted", "rows_updated")
    }


def fingerprint_of(project: Project, order_id: int) -> Any:
    sql = f"SELECT _pipeledger_row_hash FROM {project.table()} WHERE order_id = %s"
    return project.query(sql, [order_id])[0][0]


def test_a_row_edited_by_hand_is_compared_in_full_by_the_next_backfill(project: Project) -> None:
    project.configure(orders=orders_pipeline(on_conflict="update"))  # the source is the truth
    project.write_csv("orders_1.csv", [order(i, day(i)) for i in range(1, 6)])
    project.run()
    project.execute(f"UPDATE {project.table()} SET status = 'typo' WHERE order_id = 3")
    # the target's trigger cleared the fingerprint that no longer describes the row
    assert fingerprint_of(project, 3) is None and fingerprint_of(project, 2) is not None
    repaired = backfill(project)
    assert (repaired["rows_staged"], repaired["rows_updated"]) == (1, 1)
    assert ("3", "completed", "10.00") in project.rows()
    assert fingerprint_of(project, 3) is not None
    assert backfill(project)["rows_staged"] == 0


def drop_trigger(project: Project) -> None:
    if project.backend == "postgres":
        project.execute(f'DROP TRIGGER "_pipeledger_forget_row_hash" ON {project.table()}')
    else:
        project.execute('DROP TRIGGER "_pipeledger_forget_row_hash:analytics.orders"')


def test_full_compare_repairs_an_edit_the_trigger_did_not_see(project: Project) -> None:
    project.configure(orders=orders_pipeline(on_conflict="update"))
    project.write_csv("orders_1.csv", [order(i, day(i)) for i in range(1, 6)])
    project.run()
    drop_trigger(project)
    project.execute(f"UPDATE {project.table()} SET status = 'typo' WHERE order_id = 3")
    assert backfill(project)["rows_updated"] == 0  # its stale fingerprint still matches
    assert ("3", "typo", "10.00") in project.rows()
    repaired = backfill(project, "--full-compare")
    assert (repaired["rows_staged"], repaired["rows_updated"]) == (5, 1)
    assert ("3", "completed", "10.00") in project.rows()


def test_a_target_without_fingerprints_gets_the_column_and_is_compared_in_full(
    project: Project,
) -> None:
    project.configure(orders=orders_pipeline())
    project.write_csv("orders_1.csv", [order(i, day(i)) for i in range(1, 6)])
    project.run()
    drop_trigger(project)  # as a target made before fingerprints
    project.execute(f"ALTER TABLE {project.table()} DROP COLUMN _pipeledger_row_hash")
    first = backfill(project)  # the column comes back, empty: every row is compared
    assert (first["rows_staged"], first["rows_updated"], first["rows_unchanged"]) == (5, 0, 5)
    project.write_csv("orders_2.csv", [order(2, day(20), status="late")])
    assert project.run()["rows_updated"] == 1  # a written row gets its fingerprint
    stored = project.query(
        f"SELECT order_id FROM {project.table()} WHERE _pipeledger_row_hash IS NOT NULL"
    )
    assert [int(r[0]) for r in stored] == [2]
    # the other four have none yet; order 2's older version (orders_1.csv) is staged, and
    # with it the stored version it is resolved against
    assert backfill(project)["rows_staged"] == 6
    # and the trigger is back: an outside edit clears a fingerprint again
    project.execute(f"UPDATE {project.table()} SET qty = 2 WHERE order_id = 2")
    assert fingerprint_of(project, 2) is None


def test_a_gated_backfill_stages_every_row(project: Project) -> None:
    project.configure(orders=orders_pipeline(checks={"not_null": ["status"]}))
    project.write_csv("orders_1.csv", [order(i, day(i)) for i in range(1, 6)])
    project.run()
    result = backfill(project)
    assert (result["rows_staged"], result["rows_unchanged"]) == (5, 5)
