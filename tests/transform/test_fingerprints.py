"""Row fingerprints, and the backfill shortcut that uses them (``pipeledger.runs.load.known``)."""

from __future__ import annotations

import hashlib
import json
import struct
import threading
import uuid
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pyarrow as pa
import pytest

from pipeledger.common.columns import Column, TableName, sql_type_for
from pipeledger.runs.load import known
from pipeledger.state import guard_sql
from pipeledger.transform.fingerprint import row_hashes, with_row_hash
from pipeledger.warehouse.dialect import SQLITE
from tests.helpers import Project, order, orders_pipeline

# -- the definition, read literally in plain Python ------------------------------------


def columns(schema: pa.Schema) -> list[Column]:
    return [Column(field.name, sql_type_for(field.type)) for field in schema]


M = 1 << 64


def mix(h: int) -> int:
    h ^= h >> 33
    h = h * 0xFF51AFD7ED558CCD % M
    h ^= h >> 33
    h = h * 0xC4CEB9FE1A85EC53 % M
    return h ^ (h >> 33)


def column_seed(column: Column) -> int:
    text = f"{column.name}\0{column.sql_type}".encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "little")


def text_word(data: bytes) -> int:
    seed = 0x243F6A8885A308D3
    total = 0
    for k in range(0, (len(data) + 7) // 8):
        word = int.from_bytes(data[8 * k : 8 * k + 8], "little")  # short: zero-padded
        total += mix(word ^ mix((k * 0x9E3779B97F4A7C15 + seed) % M))
    return mix((mix(len(data) ^ seed) + total) % M)


def value_word(value: Any, kind: pa.DataType) -> int:
    if isinstance(value, str):  # text, and jsonb: the JSON text
        return text_word(value.encode())
    if isinstance(value, bytes):  # bytea
        return text_word(value)
    if isinstance(value, uuid.UUID):
        first = int.from_bytes(value.bytes[:8], "little")
        second = int.from_bytes(value.bytes[8:], "little")
        return (mix(first ^ 0xA4093822299F31D0) + second) % M
    if isinstance(value, time):
        return ((value.hour * 60 + value.minute) * 60 + value.second) * 10**6 + value.microsecond
    if isinstance(value, timedelta):
        return ((value.days * 86_400 + value.seconds) * 10**6 + value.microseconds) % M
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, float):
        return int.from_bytes(struct.pack("<d", value), "little")
    if isinstance(value, Decimal) and kind.precision > 38:  # decimal256: its text
        return text_word(str(pa.array([value], kind).cast(pa.string())[0]).encode())
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
            kind = schema.field(name).type
            column = Column(name, sql_type_for(kind))
            total += mix(value_word(value, kind) ^ column_seed(column))
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
    assert row_hashes(batch, columns(TYPES)).to_pylist() == expected
    # a slice (an offset into the buffers) sees the same values
    assert row_hashes(batch.slice(5, 11), columns(TYPES)).to_pylist() == expected[5:16]
    # large_string is the same text
    large = batch.set_column(9, "note", batch.column("note").cast(pa.large_string()))
    assert row_hashes(large, columns(TYPES)).to_pylist() == expected
    # values of up to 32 bytes take a shorter path to the same definition
    texts = [{"note": t} for t in ["", "a", "abcdefgh", "x" * 31, "y" * 32, None, "é" * 16]]
    short = pa.RecordBatch.from_pylist(texts, schema=pa.schema([("note", pa.string())]))
    expected = [reference(row, short.schema) for row in texts]
    assert row_hashes(short, columns(short.schema)).to_pylist() == expected


def test_fingerprints_are_pinned_across_releases() -> None:
    """Changing the definition makes every stored fingerprint stale (backfills then stage
    every row until rows are rewritten): it must be a deliberate change."""
    batch = pa.RecordBatch.from_pylist(
        [{"order_id": 1, "amount": Decimal("10.00"), "status": "completed"}],
        schema=pa.schema(
            [("order_id", pa.int64()), ("amount", pa.decimal128(12, 2)), ("status", pa.string())]
        ),
    )
    assert row_hashes(batch, columns(batch.schema)).to_pylist() == [reference(
        {"order_id": 1, "amount": Decimal("10.00"), "status": "completed"}, batch.schema
    )] == [PINNED]  # fmt: skip


PINNED = 7886997300583190821

NEWER = pa.schema(
    [
        ("raw", pa.binary()),
        ("ident", pa.uuid()),
        ("doc", pa.json_()),
        ("clock", pa.time64("us")),
        ("span", pa.duration("us")),
        ("huge", pa.decimal256(50, 4)),
    ]
)


def newer_rows() -> list[dict[str, Any]]:
    return [
        {
            "raw": None if i % 5 == 2 else bytes(range(i * 7 % 256)) * (i % 3),
            "ident": None if i % 4 == 1 else uuid.UUID(int=(i * 0x9E3779B97F4A7C15) << 40),
            "doc": None if i % 6 == 3 else json.dumps({"i": i, "tags": ["a"] * i}),
            "clock": None if i % 7 == 4 else time(i % 24, i % 60, i % 60, i * 911 % 10**6),
            "span": None if i % 3 == 0 else timedelta(days=i - 9, microseconds=i * 12345),
            "huge": None if i % 8 == 5 else Decimal(f"{(-1) ** i * 7**i}.{i:04d}"),
        }
        for i in range(20)
    ]


def newer_batch(rows: list[dict[str, Any]]) -> pa.RecordBatch:
    data = {name: [row[name] for row in rows] for name in NEWER.names}
    doc = pa.ExtensionArray.from_storage(pa.json_(), pa.array(data.pop("doc"), pa.string()))
    arrays = {n: pa.array(v, NEWER.field(n).type) for n, v in data.items()}
    return pa.RecordBatch.from_pydict({**arrays, "doc": doc}, schema=NEWER)


def test_fingerprints_of_the_newer_types_are_their_definition() -> None:
    rows = newer_rows()
    batch = newer_batch(rows)
    expected = [reference(row, NEWER) for row in rows]
    assert row_hashes(batch, columns(NEWER)).to_pylist() == expected
    assert row_hashes(batch.slice(3, 9), columns(NEWER)).to_pylist() == expected[3:12]


def test_fingerprints_of_the_newer_types_are_pinned() -> None:
    row = {
        "raw": b"\x00\x01pipeledger",
        "ident": uuid.UUID("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"),
        "doc": '{"a":[1,2.50]}',
        "clock": time(12, 30, 0, 1),
        "span": timedelta(days=1, hours=12),
        "huge": Decimal("-12345678901234567890123456789012345678901234.5678"),
    }
    batch = newer_batch([row])
    assert (
        row_hashes(batch, columns(NEWER)).to_pylist() == [reference(row, NEWER)] == [PINNED_NEWER]
    )


PINNED_NEWER = 361400869132114823


def test_a_value_has_one_fingerprint_whatever_arrow_type_carried_it() -> None:
    """Conformed first: dictionary or plain, string view or large string, a uuid as
    fixed_size_binary[16] or the extension, bytes of any binary kind, a time in ms or us."""
    from pipeledger.sources.base import SourceBatch
    from pipeledger.transform.conform import conform as conform_batch
    from pipeledger.transform.conform import infer_shape

    idents = [uuid.UUID(int=7 << 70), None, uuid.UUID(int=12345)]
    plain = pa.record_batch(
        {
            "k": pa.array([1, 2, 3]),
            "t": pa.array([datetime(2024, 1, d, tzinfo=UTC) for d in (1, 2, 3)]),
            "name": pa.array(["a", None, "ccc"]),
            "ident": pa.array(idents, pa.uuid()),
            "raw": pa.array([b"x", b"", None]),
            "clock": pa.array([time(1), time(2, 0, 0, 500000), None], pa.time64("us")),
        }
    )
    shape = infer_shape(plain.schema, {}, ["k"], "t", None)
    other = pa.record_batch(
        {
            "k": plain.column("k"),
            "t": plain.column("t"),
            "name": plain.column("name").dictionary_encode(),
            "ident": pa.array([None if u is None else u.bytes for u in idents], pa.binary(16)),
            "raw": plain.column("raw").cast(pa.large_binary()),
            "clock": pa.array([3_600_000, 7_200_500, None], pa.time32("ms")),
        }
    )
    views = other.set_column(2, "name", plain.column("name").cast(pa.string_view()))
    views = views.set_column(4, "raw", plain.column("raw").cast(pa.binary_view()))
    large = views.set_column(2, "name", plain.column("name").cast(pa.large_string()))
    hashes = [
        row_hashes(
            conform_batch(SourceBatch(batch=b, origin="x"), shape), shape.columns
        ).to_pylist()
        for b in (plain, other, views, large)
    ]
    assert hashes[0] == hashes[1] == hashes[2] == hashes[3]


def test_an_added_null_column_keeps_a_fingerprint_swapped_values_and_types_do_not() -> None:
    table = pa.record_batch({"a": pa.array([5, -3]), "b": pa.array([7, 8])})
    before = row_hashes(table, columns(table.schema)).to_pylist()
    evolved = table.append_column("c", pa.array([None, None], pa.string()))
    assert row_hashes(evolved, columns(evolved.schema)).to_pylist() == before
    swapped = pa.record_batch({"a": pa.array([7, 8]), "b": pa.array([5, -3])})
    assert set(row_hashes(swapped, columns(swapped.schema)).to_pylist()).isdisjoint(before)
    # the same numbers under another type: a target retyped by hand is compared in full
    narrow = [Column("a", "integer"), Column("b", "bigint")]
    assert set(row_hashes(table, narrow).to_pylist()).isdisjoint(before)
    cents = pa.record_batch({"x": pa.array([Decimal("10.50")], pa.decimal128(12, 2))})
    scaled = pa.record_batch({"x": pa.array([Decimal("0.1050")], pa.decimal128(12, 4))})
    assert row_hashes(cents, columns(cents.schema)) != row_hashes(scaled, columns(scaled.schema))


def test_long_text_costs_no_python_loop_and_every_byte_counts() -> None:
    base = "é" + "x" * 2998
    values = [base, base[:-1] + "y", "y" + base[1:], base + "\0", base[:-8], None] * 2000
    batch = pa.record_batch({"note": pa.array(values)})
    hashes = row_hashes(batch, columns(batch.schema)).to_pylist()
    assert len(set(hashes)) == 6  # five texts and a null, whatever the length
    assert hashes[:6] == [reference({"note": v}, batch.schema) for v in values[:6]]


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
        hashes = with_row_hash(table, columns(table.schema)).column("_pipeledger_row_hash")
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
    # the ledger keeps what was compared: the audit event of the backfill says 0 staged
    audit = project.table("pipeledger.audit_events")
    sql = f"SELECT metadata FROM {audit} WHERE event_type = 'BACKFILL' AND run_id = %s"
    (metadata,) = project.query(sql, [same["run_id"]])[0]
    metadata = json.loads(metadata) if isinstance(metadata, str) else metadata
    assert (metadata["rows_staged"], metadata["start"]) == (0, "2024-01-01")
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
    assert (shortcut["rows_read"], shortcut["rows_staged"]) == (3, 1)
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


def test_a_dropped_trigger_comes_back_and_rows_it_missed_are_compared(project: Project) -> None:
    """The trigger is dropped (say for a bulk fix) and a row is edited meanwhile: its stale
    fingerprint must not be trusted when the trigger is back."""
    project.configure(orders=orders_pipeline(on_conflict="update"))
    project.write_csv("orders_1.csv", [order(i, day(i)) for i in range(1, 6)])
    project.run()
    drop_trigger(project)
    project.execute(f"UPDATE {project.table()} SET status = 'typo' WHERE order_id = 3")
    assert fingerprint_of(project, 3) is not None  # stale: nothing cleared it
    repaired = backfill(project)  # re-creates the trigger, trusts rows loaded from now on
    assert (repaired["rows_staged"], repaired["rows_updated"]) == (5, 1)
    assert ("3", "completed", "10.00") in project.rows()
    assert backfill(project)["rows_staged"] == 5  # still older than the trigger's return
    project.write_csv("orders_2.csv", [order(3, day(25), status="again")])
    project.run()
    assert backfill(project)["rows_staged"] == 5  # order 3, rewritten since, is trusted
    # (5 of 6 read: orders 1, 2, 4 and 5 from before, and order 3's older version)


def test_full_compare_repairs_an_edit_no_trigger_could_see(project: Project) -> None:
    project.configure(orders=orders_pipeline(on_conflict="update"))
    project.write_csv("orders_1.csv", [order(i, day(i)) for i in range(1, 6)])
    project.run()
    edit = f"UPDATE {project.table()} SET status = 'typo' WHERE order_id = 3"
    if project.backend == "postgres":  # an edited copy put back in place of the row
        assert project.warehouse_url is not None
        with psycopg.connect(project.warehouse_url) as conn:
            table = project.table()
            conn.execute(f"CREATE TEMP TABLE copy AS SELECT * FROM {table} WHERE order_id = 3")
            conn.execute("UPDATE copy SET status = 'typo'")  # its fingerprint comes along
            conn.execute(f"DELETE FROM {table} WHERE order_id = 3")
            conn.execute(f"INSERT INTO {table} SELECT * FROM copy")
    else:  # the same trigger put back by hand: the guard cannot tell
        drop_trigger(project)
        project.execute(edit)
        project.execute(guard_sql.forget_hash_trigger(SQLITE, TableName("analytics", "orders")))
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
    # the other four have none yet, and order 2's older version (orders_1.csv) is staged
    # (its stored version goes back to the stage beside it, not counted as read)
    assert backfill(project)["rows_staged"] == 5
    # and the trigger is back: an outside edit clears a fingerprint again
    project.execute(f"UPDATE {project.table()} SET qty = 2 WHERE order_id = 2")
    assert fingerprint_of(project, 2) is None


def test_a_gated_backfill_stages_every_row(project: Project) -> None:
    project.configure(orders=orders_pipeline(checks={"not_null": ["status"]}))
    project.write_csv("orders_1.csv", [order(i, day(i)) for i in range(1, 6)])
    project.run()
    result = backfill(project)
    assert (result["rows_staged"], result["rows_unchanged"]) == (5, 5)


@pytest.mark.parametrize("policy", ["update", "newer_wins", "ignore"])
def test_the_shortcut_counts_and_merges_exactly_like_a_full_compare(
    project: Project, policy: str
) -> None:
    """Two pipelines over the same files: one backfills with the shortcut, one compares
    every row. Duplicates of a stored row, and other versions beside it, must come out the
    same in the table and in every count."""
    pipelines = {
        name: orders_pipeline(on_conflict=policy, target=f"analytics.orders_{name}")
        for name in ("short", "full")
    }
    project.configure(pipelines=pipelines)
    project.write_csv("orders_1.csv", [order(i, day(10)) for i in range(1, 6)])
    project.run()
    project.write_csv(
        "orders_2.csv",
        [
            order(1, day(10)),  # a copy of the stored row
            order(1, day(10)),  # and another
            order(2, day(10)),  # a copy of the stored row of a key that also...
            order(2, day(12), status="shipped"),  # ...arrives newer
            order(3, day(4), status="pending"),  # an older version beside the stored one
            order(9, day(11)),  # a new key
        ],
    )
    short = project.run_json("backfill", "short", *BACKFILL)[0]
    full = project.run_json("backfill", "full", *BACKFILL, "--full-compare")[0]
    assert (short["rows_read"], full["rows_read"]) == (11, 11)
    assert full["rows_staged"] == 11 and short["rows_staged"] < 11
    counted = ("rows_inserted", "rows_updated", "rows_unchanged", "rows_superseded")
    assert {k: short[k] for k in counted} == {k: full[k] for k in counted}
    assert sum(short[k] for k in counted) == 11
    columns = "order_id, status, amount, updated_at"
    assert project.rows(columns, "analytics.orders_short") == project.rows(
        columns, "analytics.orders_full"
    )


class FetchSizes:
    """The sizes of the target's fingerprint chunks a backfill read: a real session of the
    warehouse, whose ``fetch_int64`` answers are measured on their way through."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.sizes: list[int] = []
        original = known.stored_buckets

        def measured(session: Any, *args: Any) -> known.Buckets:
            outer = self

            class Measured:
                def __getattr__(self, name: str) -> Any:
                    return getattr(session, name)

                def fetch_int64(self, statement: str, params: Any = ()) -> Any:
                    hashes = session.fetch_int64(statement, params)
                    outer.sizes.append(len(hashes))
                    return hashes

            return original(Measured(), *args)

        monkeypatch.setattr(known, "stored_buckets", measured)


def xmins(project: Project, name: str = "analytics.orders") -> list[tuple[Any, ...]]:
    """Each row's identity as stored: PostgreSQL's row version (xmin changes with any
    UPDATE, even one to the same values), SQLite's rowid with the run and load time."""
    if project.backend == "postgres":
        columns = "order_id, xmin::text, _pipeledger_run_id, _pipeledger_loaded_at"
    else:
        columns = "order_id, rowid, _pipeledger_run_id, _pipeledger_loaded_at"
    return project.query(f"SELECT {columns} FROM {project.table(name)} ORDER BY 1")


def test_a_range_bigger_than_a_chunk_is_read_in_chunks_and_writes_nothing_unchanged(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The target's fingerprints are read at most CHUNK_ROWS at a time (PostgreSQL: whole
    pages, so at most what a page holds when that is more), whatever the range holds; an
    unchanged range is read once, stages nothing, touches no row and no watermark."""
    monkeypatch.setattr(known, "CHUNK_ROWS", 40)
    sizes = FetchSizes(monkeypatch)
    project.configure(orders=orders_pipeline(on_conflict="update"))
    project.write_csv("orders_1.csv", [order(i, day(1 + i % 28)) for i in range(1, 1001)])
    project.run()
    before, marks = xmins(project), project.watermarks()
    same = backfill(project)
    assert (same["rows_read"], same["rows_staged"], same["rows_unchanged"]) == (1000, 0, 1000)
    assert (same["rows_inserted"], same["rows_updated"]) == (0, 0)
    assert xmins(project) == before and project.watermarks() == marks
    assert sum(sizes.sizes) == 1000
    per_page = 291 if project.backend == "postgres" else 40  # a page is read whole
    assert max(sizes.sizes) <= per_page and len(sizes.sizes) >= 1000 // per_page
    if project.backend == "sqlite":  # rowids 1..1000, 40 at a time
        assert len(sizes.sizes) == 25


def short_and_full(project: Project) -> None:
    """Two pipelines of one source: ``short`` backfills with the shortcut, ``full`` with
    ``--full-compare``."""
    pipelines = {
        name: orders_pipeline(on_conflict="update", target=f"analytics.orders_{name}")
        for name in ("short", "full")
    }
    project.configure(pipelines=pipelines)


def assert_like_full_compare(project: Project, short: dict[str, Any], full: dict[str, Any]) -> None:
    """The shortcut's backfill counted and wrote what the full comparison did."""
    counted = ("rows_inserted", "rows_updated", "rows_unchanged", "rows_superseded")
    assert {k: short[k] for k in counted} == {k: full[k] for k in counted}
    columns = "order_id, status, amount, updated_at"
    assert project.rows(columns, "analytics.orders_short") == project.rows(
        columns, "analytics.orders_full"
    )


@pytest.mark.parametrize("held", [1 << 20, 0])
def test_changed_rows_are_found_by_bucket_and_merge_like_a_full_compare(
    project: Project, monkeypatch: pytest.MonkeyPatch, held: int
) -> None:
    """Few buckets (16): a correction makes some of them differ, and the source is read
    again for those; new rows are staged at once. With the target's fingerprints of those
    buckets held, only the rows that differ are staged; without (``HELD = 0``: too many
    to hold), every row of those buckets. Either way counts and rows come out as a full
    comparison gives them."""
    monkeypatch.setattr(known, "BITS", 4)
    monkeypatch.setattr(known, "CHUNK_ROWS", 50)
    monkeypatch.setattr(known, "HELD", held)
    short_and_full(project)
    rows = [order(i, day(1 + i % 28)) for i in range(1, 301)]
    project.write_csv("orders_1.csv", rows)
    project.run()
    rows[6] = order(7, day(8), status="refunded")  # a correction
    project.write_csv("orders_1.csv", [*rows, order(301, day(3)), order(7, day(2))])
    short = project.run_json("backfill", "short", *BACKFILL)[0]
    full = project.run_json("backfill", "full", *BACKFILL, "--full-compare")[0]
    assert (short["rows_read"], full["rows_staged"]) == (302, 302)
    if held:  # order 7's new version and older one, order 301
        assert short["rows_staged"] == 3
    else:  # two to four buckets of 16 differ, each ~19 rows
        assert 3 < short["rows_staged"] <= 302 * 5 // 16
    assert_like_full_compare(project, short, full)
    assert (short["rows_inserted"], short["rows_updated"]) == (1, 1)
    before = xmins(project, "analytics.orders_short")
    again = project.run_json("backfill", "short", *BACKFILL)[0]
    # order 7's older version is never in the target: its bucket differs every time
    assert again["rows_staged"] == 1 if held else 1 <= again["rows_staged"] <= 2 * 302 // 16
    assert (again["rows_unchanged"], again["rows_superseded"]) == (301, 1)
    assert (again["rows_inserted"], again["rows_updated"]) == (0, 0)
    assert xmins(project, "analytics.orders_short") == before


def _counted_on(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The threads that counted the target's rows by bucket, one name per count."""
    threads: list[str] = []
    original = known.stored_buckets

    def counted(*args: Any) -> known.Buckets:
        threads.append(threading.current_thread().name)
        return original(*args)

    monkeypatch.setattr(known, "stored_buckets", counted)
    return threads


def test_a_big_target_is_counted_beside_the_first_read_which_stages_new_rows_after(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A target bigger than one range of its storage is counted by bucket on another
    connection and thread while the source is read (PostgreSQL); that read stages nothing
    (it cannot tell new rows yet), and the second stages what the first would have: the
    rows written and counted are a full comparison's. SQLite, one connection, counts
    first."""
    monkeypatch.setattr(known, "CHUNK_ROWS", 50)
    threads = _counted_on(monkeypatch)
    short_and_full(project)
    rows = [order(i, day(1 + i % 28)) for i in range(1, 601)]
    project.write_csv("orders_1.csv", rows)
    project.run()
    rows[6] = order(7, day(8), status="refunded")
    project.write_csv("orders_1.csv", [*rows, order(601, day(3)), order(602, day(4))])

    short = project.run_json("backfill", "short", *BACKFILL)[0]
    full = project.run_json("backfill", "full", *BACKFILL, "--full-compare")[0]

    beside = project.backend == "postgres"
    assert threads == ["pipeledger-known-rows" if beside else "MainThread"]
    assert (short["rows_read"], short["rows_staged"]) == (602, 3)  # 7, 601 and 602
    assert_like_full_compare(project, short, full)
    assert (short["rows_inserted"], short["rows_updated"]) == (2, 1)


def test_a_guard_that_changes_while_the_target_is_counted_beside_stages_every_row(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the target's trigger is found changed once the target is counted (PostgreSQL:
    beside the first read, which staged nothing; SQLite: before it), its fingerprints
    are not trusted: every row read is staged and compared, and the backfill still
    writes nothing unchanged."""
    from pipeledger.runs.load import loader
    from pipeledger.state.guard import read_guard

    monkeypatch.setattr(known, "CHUNK_ROWS", 50)
    project.configure(orders=orders_pipeline(on_conflict="update"))
    project.write_csv("orders_1.csv", [order(i, day(1 + i % 28)) for i in range(1, 301)])
    project.run()
    before = xmins(project)
    reads: list[int] = []
    original = read_guard

    def changing(*args: Any) -> Any:
        reads.append(1)
        found = original(*args)
        return None if len(reads) > 1 else found  # as if the trigger changed meanwhile

    monkeypatch.setattr(loader, "read_guard", changing)

    same = backfill(project)

    assert (same["rows_read"], same["rows_staged"], same["rows_unchanged"]) == (300, 300, 300)
    assert (same["rows_inserted"], same["rows_updated"]) == (0, 0)
    assert xmins(project) == before


def test_a_source_that_changes_between_the_two_reads_fails_and_writes_nothing(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second read must find what the first did: a file rewritten in between (here,
    when the second read opens the source) fails the backfill, nothing written."""
    monkeypatch.setattr(known, "BITS", 4)
    project.configure(orders=orders_pipeline(on_conflict="update"))
    rows = [order(i, day(1 + i % 28)) for i in range(1, 101)]
    project.write_csv("orders_1.csv", rows)
    project.run()
    rows[3] = order(4, day(5), status="refunded")
    project.write_csv("orders_1.csv", rows)
    before = xmins(project)
    finish = known.KnownRows.finish

    def finish_then_change(self: known.KnownRows) -> None:
        finish(self)
        project.write_csv("orders_1.csv", [*rows, order(500, day(6))])

    monkeypatch.setattr(known.KnownRows, "finish", finish_then_change)
    code, out, err = project.cli("backfill", "orders", *BACKFILL)
    assert code == 75, (out, err)  # transient: the same run may succeed later
    assert "changed while the backfill read it twice" in err
    assert "nothing was written" in err
    assert xmins(project) == before


def test_a_role_that_may_write_but_not_alter_an_old_target_still_loads(
    postgres_url: str, tmp_path: Path
) -> None:
    """A target made before fingerprints, loaded by a role without ownership: the column
    and the trigger cannot be added, so rows go without fingerprints and backfills compare
    every row, instead of the run failing."""
    owner = Project(tmp_path, postgres_url)
    owner.configure(orders=orders_pipeline())
    owner.write_csv("orders_1.csv", [order(i, day(i)) for i in range(1, 6)])
    owner.run()
    drop_trigger(owner)  # as a target made before fingerprints
    owner.execute(f"ALTER TABLE {owner.table()} DROP COLUMN _pipeledger_row_hash")
    role = f"writer_{uuid.uuid4().hex[:8]}"  # roles are server-wide: one of its own
    for statement in (
        f"CREATE ROLE {role} LOGIN",
        f"GRANT USAGE ON SCHEMA analytics, pipeledger TO {role}",
        "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA analytics, pipeledger "
        f"TO {role}",
    ):
        owner.execute(statement)
    try:
        _load_as(Project(tmp_path, postgres_url.replace("postgres@", f"{role}@", 1)), owner, role)
    finally:
        owner.execute(f"DROP OWNED BY {role}")
        owner.execute(f"DROP ROLE {role}")


def _load_as(writer: Project, owner: Project, role: str) -> None:
    writer.configure(orders=orders_pipeline())
    writer.write_csv("orders_2.csv", [order(2, day(20), status="late"), order(9, day(21))])
    result = writer.run()
    assert (result["rows_inserted"], result["rows_updated"]) == (1, 1)
    assert "_pipeledger_row_hash" not in {
        name for (name,) in owner.query(
            "SELECT attname FROM pg_attribute WHERE attrelid = 'analytics.orders'::regclass"
        )
    }  # fmt: skip
    full = writer.run_json("backfill", "orders", *BACKFILL)[0]
    assert (full["rows_read"], full["rows_staged"], full["rows_updated"]) == (7, 7, 0)
    # a pending migration (as after upgrading pipeledger) stops this role, and says why
    owner.execute(
        "DELETE FROM pipeledger.schema_migrations WHERE component = 'state' AND version = 3"
    )
    owner.execute("DROP TABLE pipeledger.fingerprint_guards")
    code, out, err = writer.cli("run", "orders")
    assert code == 1
    assert "need migration 3" in err and "pipeledger ledger migrate" in err, out + err
    owner.configure(orders=orders_pipeline())  # the same folder: its config names the owner
    assert owner.cli("ledger", "migrate")[0] == 0
    owner.execute(f"GRANT SELECT, INSERT, UPDATE ON pipeledger.fingerprint_guards TO {role}")
    writer.configure(orders=orders_pipeline())
    assert writer.run()["status"] == "success"


def test_a_database_of_the_previous_state_version_is_migrated_and_trusts_no_old_row(
    project: Project,
) -> None:
    project.configure(orders=orders_pipeline(on_conflict="update"))
    project.write_csv("orders_1.csv", [order(i, day(i)) for i in range(1, 6)])
    project.run()
    migrations, guards = (
        project.table("pipeledger.schema_migrations"),
        project.table("pipeledger.fingerprint_guards"),
    )
    # as a database migrated by a development build was: version 4 not applied, and a
    # guards table of an earlier shape
    project.execute(f"DELETE FROM {migrations} WHERE component = 'state' AND version = 4")
    project.execute(f"DROP TABLE {guards}")
    stamp = "timestamptz" if project.backend == "postgres" else "text"
    project.execute(f"CREATE TABLE {guards} (target text PRIMARY KEY, since {stamp} NOT NULL)")
    first = backfill(project)  # migrates, then guards the target from its newest row on
    assert (first["rows_staged"], first["rows_updated"]) == (5, 0)
    assert project.query(f"SELECT count(*) FROM {guards}")[0][0] == 1
    project.write_csv("orders_2.csv", [order(6, day(26))])
    project.run()
    assert backfill(project)["rows_staged"] == 5  # order 6, loaded since, is trusted


def test_a_trigger_disabled_or_switched_to_replica_mode_voids_the_guard(
    postgres_url: str, tmp_path: Path
) -> None:
    """The usual bulk fix: disable the trigger, edit, enable it again. The guard names the
    trigger's version, so the rows loaded before are no longer trusted."""
    project = Project(tmp_path, postgres_url)
    project.configure(orders=orders_pipeline(on_conflict="update"))
    project.write_csv("orders_1.csv", [order(i, day(i)) for i in range(1, 6)])
    project.run()
    table = project.table()
    project.execute(f'ALTER TABLE {table} DISABLE TRIGGER "_pipeledger_forget_row_hash"')
    project.execute(f"UPDATE {table} SET status = 'typo' WHERE order_id = 3")
    project.execute(f'ALTER TABLE {table} ENABLE TRIGGER "_pipeledger_forget_row_hash"')
    repaired = backfill(project)
    assert (repaired["rows_staged"], repaired["rows_updated"]) == (5, 1)
    assert ("3", "completed", "10.00") in project.rows()
    project.execute(f'ALTER TABLE {table} ENABLE REPLICA TRIGGER "_pipeledger_forget_row_hash"')
    assert backfill(project)["rows_staged"] == 5  # a replica-only trigger guards nothing
    # the run made it fire always again: an edit in replica mode (as logical replication
    # applies changes) clears the fingerprint too
    project.write_csv("orders_2.csv", [order(4, day(24), status="late")])
    project.run()
    assert project.warehouse_url is not None
    with psycopg.connect(project.warehouse_url) as conn:
        conn.execute("SET session_replication_role = replica")
        conn.execute(f"UPDATE {table} SET qty = 9 WHERE order_id = 4")
    assert fingerprint_of(project, 4) is None


def test_a_sqlite_target_without_rowid_loads_without_the_shortcut(tmp_path: Path) -> None:
    """The trigger finds rows by rowid: a target someone rebuilt WITHOUT ROWID gets none,
    keeps loading (updates included), and its backfills compare every row."""
    project = Project(tmp_path, None)
    project.configure(orders=orders_pipeline())
    project.write_csv("orders_1.csv", [order(i, day(i)) for i in range(1, 6)])
    project.run()
    (ddl,) = project.query(
        "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'analytics.orders'"
    )[0]
    # a new target's key is a unique index: a table without rowid declares it instead
    keyed = str(ddl).removesuffix(")") + ', PRIMARY KEY ("order_id"))'
    rebuilt = keyed.replace('"analytics.orders"', '"rebuilt"', 1) + " WITHOUT ROWID"
    for statement in (
        rebuilt,
        'INSERT INTO "rebuilt" SELECT * FROM "analytics.orders"',
        'DROP TABLE "analytics.orders"',
        'ALTER TABLE "rebuilt" RENAME TO "analytics.orders"',
    ):
        project.execute(statement)
    project.write_csv("orders_2.csv", [order(2, day(20), status="late")])
    assert project.run()["rows_updated"] == 1
    again = backfill(project)
    assert (again["rows_read"], again["rows_staged"], again["rows_updated"]) == (6, 6, 0)
