"""Binary COPY (``warehouse/adapters/pg_binary.py``) lands exactly what CSV COPY lands, on a
real server."""

from __future__ import annotations

import itertools
import json
import math
import re
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any
from uuid import UUID

import psycopg
import pyarrow as pa
import pytest

from pipeledger.errors import SourceError
from pipeledger.warehouse.adapters import pg_binary
from pipeledger.warehouse.adapters.postgres import _csv_bytes
from tests.helpers import Project, order, orders_pipeline

COLUMNS = [
    ("id", pa.int64(), "bigint"),
    ("small", pa.int16(), "smallint"),
    ("n", pa.int32(), "integer"),
    ("big", pa.int64(), "bigint"),
    ("f4", pa.float32(), "real"),
    ("f8", pa.float64(), "double precision"),
    ("flag", pa.bool_(), "boolean"),
    ("note", pa.string(), "text"),
    ("day", pa.date32(), "date"),
    ("at", pa.timestamp("us"), "timestamp"),
    ("at_utc", pa.timestamp("us", tz="UTC"), "timestamptz"),
    ("money", pa.decimal128(12, 2), "numeric(12,2)"),
    ("whole", pa.decimal128(18, 0), "numeric(18,0)"),
    ("tiny", pa.decimal128(18, 18), "numeric(18,18)"),
    ("odd", pa.decimal128(10, 5), "numeric(10,5)"),
    ("one", pa.decimal128(5, 1), "numeric(5,1)"),
    ("wide", pa.decimal128(38, 6), "numeric(38,6)"),
    ("wide_whole", pa.decimal128(38, 0), "numeric(38,0)"),
    ("just_wide", pa.decimal128(19, 2), "numeric(19,2)"),
    ("wide_tiny", pa.decimal128(38, 38), "numeric(38,38)"),
    ("wide_odd", pa.decimal128(30, 7), "numeric(30,7)"),
    ("raw", pa.binary(), "bytea"),
    ("ident", pa.uuid(), "uuid"),
    ("doc", pa.json_(), "jsonb"),
    ("clock", pa.time64("us"), "time"),
    ("span", pa.duration("us"), "interval"),
]
SCHEMA = pa.schema([(name, kind) for name, kind, _ in COLUMNS])


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=UTC)


EDGES: dict[str, list[Any]] = {
    "small": [-32768, 32767, 0, None, -1],
    "n": [-(2**31), 2**31 - 1, 0, None, 7],
    "big": [-(2**63), 2**63 - 1, 0, None, -5],
    "f4": [1.5, -0.0, math.inf, None, -math.inf],
    "f8": [1e308, -1e-308, math.pi, None, math.nan],
    "flag": [True, False, None, True, False],
    "note": ["", "héllo wörld", 'a,b"c\nd\\e', None, "x" * 10_000],
    "day": [date(1970, 1, 1), date(1999, 12, 31), date(2000, 1, 1), None, date(1, 1, 1)],
    "at": [
        datetime(1900, 1, 1),
        datetime(2000, 1, 1, 0, 0, 0, 1),
        datetime(9999, 12, 31, 23, 59, 59, 999999),
        None,
        datetime(1999, 12, 31, 23, 59, 59, 999999),
    ],
    "at_utc": [utc(1969, 7, 20, 20, 17), utc(2000, 1, 1), utc(2024, 2, 29, 12), None, utc(1, 1, 1)],
    "money": ["0", "-0.01", "1234567890.12", None, "-9999999999.99"],
    "whole": ["999999999999999999", "-1", "0", None, "-999999999999999999"],
    "tiny": ["0.123456789012345678", "-0.000000000000000001", "0", None, "0.5"],
    "odd": ["12345.67891", "-0.00001", "99999.99999", None, "-1"],
    "one": ["1234.5", "-0.1", "0.0", None, "9999.9"],
    "wide": [
        "99999999999999999999999999999999.999999", "-0.000001", "0", None,
        "-12345678901234567890123456789012.5",
    ],
    "wide_whole": [
        "9" * 38, "-" + "9" * 38, "0", None, "170141183460469231731687303715884105",
    ],
    "just_wide": ["99999999999999999.99", "-0.01", "0", None, "12345678901234567.89"],
    "wide_tiny": ["0." + "9" * 38, "-0." + "0" * 37 + "1", "0", None, "0.5"],
    "wide_odd": ["12345678901234567890123.4567891", "-0.0000001", "0", None, "-1"],
    "raw": [b"", b'\x00\xff\\x,"\n', None, bytes(range(256)) * 40, b"abc"],
    "ident": [
        UUID(int=0), UUID(int=2**128 - 1), None, UUID("12345678-1234-5678-1234-567812345678"),
        UUID("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"),
    ],
    "doc": [
        '{"a": [1, 2.50, "x\\ny"], "b": null}', "[]", None, '"a \\"quoted\\", text"',
        '{"é": {"nested": true}}',
    ],
    "clock": [time(0), time(23, 59, 59, 999999), None, time(12, 0, 0, 1), time(1, 2, 3)],
    "span": [
        timedelta(0), timedelta(microseconds=-1), None,
        timedelta(days=400, hours=5, microseconds=7), timedelta(days=-3, hours=2),
    ],
}  # fmt: skip


def batch() -> pa.RecordBatch:
    rows = len(EDGES["small"])
    data = {"id": pa.array(range(rows), pa.int64())}
    for name, kind, _ in COLUMNS[1:]:
        values = EDGES[name]
        if pa.types.is_decimal(kind):
            values = [None if v is None else Decimal(v) for v in values]
        if kind == pa.json_():
            data[name] = pa.ExtensionArray.from_storage(kind, pa.array(values, pa.string()))
        else:
            data[name] = pa.array(values, kind)
    return pa.RecordBatch.from_pydict(data, schema=SCHEMA)


def copy(conn: psycopg.Connection[Any], table: str, payload: bytes, binary: bool) -> None:
    body = ", ".join(f'"{name}" {sql_type}' for name, _, sql_type in COLUMNS)
    conn.execute(f"CREATE TEMP TABLE {table} ({body})")
    fmt = "binary" if binary else "csv"
    with conn.cursor().copy(f"COPY {table} FROM STDIN (FORMAT {fmt})") as cp:
        cp.write(payload)


def test_binary_copy_lands_what_csv_copy_lands(postgres_url: str) -> None:
    whole = batch()
    assert pg_binary.supports(whole.schema)
    for part in (whole, whole.slice(1, 3)):  # a slice reads the buffers at an offset
        binary = bytes(pg_binary.HEADER) + bytes(pg_binary.encode(part)) + pg_binary.TRAILER
        with psycopg.connect(postgres_url) as conn:
            conn.execute("SET TIME ZONE 'UTC'")
            copy(conn, "via_csv", bytes(_csv_bytes(part)), binary=False)
            copy(conn, "via_binary", binary, binary=True)
            differ = conn.execute(
                "SELECT count(*) FROM via_csv c FULL JOIN via_binary b ON c.id = b.id "
                "WHERE c IS DISTINCT FROM b OR c.id IS NULL OR b.id IS NULL"
            ).fetchone()
            assert differ == (0,)
            rows = conn.execute("SELECT count(*), count(note), min(money) FROM via_binary")
            notes = part.column("note")
            assert rows.fetchone() == (part.num_rows, len(notes) - notes.null_count, _min(part))
        with psycopg.connect(postgres_url) as conn:  # and the values are the ones sent
            copy(conn, "sent", binary, binary=True)
            query = "SELECT tiny, odd, one, at_utc, day FROM sent WHERE id = 1"
            got = conn.execute(query).fetchone()
            assert got == (
                Decimal("-0.000000000000000001"), Decimal("-0.00001"), Decimal("-0.1"),
                utc(2000, 1, 1), date(1999, 12, 31),
            )  # fmt: skip
            _read_back_equal(conn, part)


def _read_back_equal(conn: psycopg.Connection[Any], part: pa.RecordBatch) -> None:
    """Every value of the newer types (and the wide numerics) is the one sent."""
    names = ["wide", "wide_whole", "just_wide", "wide_tiny", "wide_odd", "raw", "ident",
             "clock", "span"]  # fmt: skip
    rows = conn.execute(
        f"SELECT id, {', '.join(names)}, doc::text FROM sent ORDER BY id"
    ).fetchall()
    sent = part.to_pydict()
    for row in rows:
        at = sent["id"].index(row[0])
        for name, value in zip(names, row[1:], strict=False):
            assert value == sent[name][at], (name, value, sent[name][at])
        doc = sent["doc"][at]
        assert (row[-1] is None) == (doc is None)
        if doc is not None:
            assert json.loads(row[-1]) == json.loads(doc)


def _min(part: pa.RecordBatch) -> Decimal:
    values: list[Decimal] = part.column("money").to_pylist()
    return min(v for v in values if v is not None)


def test_what_binary_copy_does_not_cover_goes_as_csv() -> None:
    assert not pg_binary.supports(pa.schema([("x", pa.decimal256(39, 2))]))
    assert not pg_binary.supports(pa.schema([("x", pa.timestamp("ns"))]))
    assert not pg_binary.supports(pa.schema([("x", pa.duration("ns"))]))
    assert not pg_binary.supports(pa.schema([("x", pa.list_(pa.int64()))]))


def test_a_load_with_a_wide_numeric_goes_as_csv_and_lands_exactly(project: Project) -> None:
    project.configure(orders=orders_pipeline(columns={"amount": "numeric(50,2)"}))
    big = "123456789012345678901234567890123456789012.34"  # decimal256: not in binary COPY
    project.write_csv("orders_1.csv", [order(1, "2024-01-01T00:00:00Z", amount=big)])
    assert project.run()["rows_inserted"] == 1
    assert project.rows() == [("1", "completed", big)]


def _raw(kind: pa.DataType, data: bytes, rows: int = 1) -> pa.Array:
    return pa.Array.from_buffers(kind, rows, [None, pa.py_buffer(data)])


def test_values_a_column_cannot_hold_are_refused_not_changed() -> None:
    """Arrow does not enforce a decimal's precision (a Parquet decimal(4,0) can hold
    12345): binary COPY must refuse it, as the server refuses it in text."""
    cases = [
        (pa.decimal128(4, 0), (12345).to_bytes(16, "little", signed=True), "numeric(4,0)"),
        (pa.decimal128(18, 2), (2**64 + 5).to_bytes(16, "little", signed=True), "numeric(18,2)"),
        (pa.decimal128(18, 0), (-(2**63)).to_bytes(16, "little", signed=True), "numeric(18,0)"),
        (pa.date32(), (-(2**31) + 5).to_bytes(4, "little", signed=True), "first date"),
        (pa.timestamp("us"), (-(2**63) + 1).to_bytes(8, "little", signed=True), "first timestamp"),
        (pa.decimal128(38, 0), (10**38).to_bytes(16, "little", signed=True), "numeric(38,0)"),
        (pa.decimal128(38, 2), (-(10**38)).to_bytes(16, "little", signed=True), "numeric(38,2)"),
        (pa.decimal128(20, 2), (10**20).to_bytes(16, "little", signed=True), "numeric(20,2)"),
        (pa.decimal128(38, 38), (-(2**127)).to_bytes(16, "little", signed=True), "(38,38)"),
        (pa.decimal128(21, 3), (10**21).to_bytes(16, "little", signed=True), "numeric(21,3)"),
        (pa.time64("us"), (86_400_000_001).to_bytes(8, "little", signed=True), "00:00 to 24:00"),
        (pa.time64("us"), (-1).to_bytes(8, "little", signed=True), "00:00 to 24:00"),
    ]
    for kind, data, words in cases:
        batch = pa.record_batch({"v": _raw(kind, data)})
        with pytest.raises(SourceError, match=re.escape(words)) as caught:
            pg_binary.encode(batch)
        assert "column 'v'" in str(caught.value)
    assert not pg_binary.supports(pa.schema([("x", pa.decimal128(5, -2))]))
    assert not pg_binary.supports(pa.schema([("x", pa.decimal128(2, 7))]))


def test_encode_takes_empty_batches_and_buffers_longer_than_the_values() -> None:
    assert bytes(pg_binary.encode(batch().slice(0, 0))) == b""
    exact = pa.record_batch({"n": _raw(pa.int32(), (7).to_bytes(4, "little"))})
    padded = pa.record_batch({"n": _raw(pa.int32(), (7).to_bytes(4, "little") + b"\0\0")})
    assert bytes(pg_binary.encode(padded)) == bytes(pg_binary.encode(exact))


def test_wide_numerics_land_exactly_whatever_their_digits(postgres_url: str) -> None:
    """numeric(19..38, s) goes through 128-bit arithmetic in 32-bit limbs, or int64 when a
    batch's values allow: random values of every length, at every scale alignment, land
    as the decimal sent, in batches of large values and of values that fit an int64."""
    import random

    rng = random.Random(20240601)
    kinds = [(19, 0), (20, 1), (23, 2), (26, 5), (29, 8), (33, 13), (38, 0), (38, 19), (38, 37)]
    with psycopg.connect(postgres_url) as conn:
        for (precision, scale), widest in itertools.product(kinds, ("any", "int64")):
            most = precision if widest == "any" else min(precision, 15)
            digits = [rng.randint(1, most) for _ in range(400)]
            unscaled = [rng.choice((-1, 1)) * rng.randrange(10 ** (d - 1), 10**d) for d in digits]
            sent = [Decimal(u).scaleb(-scale) for u in unscaled] + [Decimal(0), None]
            kind = pa.decimal128(precision, scale)
            part = pa.record_batch({"v": pa.array(sent, kind)})
            assert pg_binary._fits_int64(part.column(0)) == (widest == "int64")
            table = f"wide_{precision}_{scale}_{widest}"
            conn.execute(f"CREATE TEMP TABLE {table} (v numeric({precision},{scale}))")
            payload = bytes(pg_binary.HEADER) + bytes(pg_binary.encode(part)) + pg_binary.TRAILER
            with conn.cursor().copy(f"COPY {table} FROM STDIN (FORMAT binary)") as cp:
                cp.write(payload)
            got = [row[0] for row in conn.execute(f"SELECT v FROM {table}").fetchall()]
            assert got == sent, (precision, scale)
