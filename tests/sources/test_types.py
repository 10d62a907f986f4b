"""Every Arrow type a real file carries lands exactly, on both backends, or is refused before
anything is written with a message that says what to declare."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any
from uuid import UUID

import psycopg
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeledger.common.columns import UnmappedType, sql_type_for
from pipeledger.errors import SchemaError
from pipeledger.transform.conform import infer_shape
from tests.helpers import Project

ROWS_PER_FILE = 6
BASE = datetime(2024, 1, 1, tzinfo=UTC)


def _uuid(i: int) -> UUID:
    return UUID(int=(i * 0x9E3779B97F4A7C15_2545F4914F6CDD1D) % (1 << 128))


def _null(i: int, every: int) -> bool:
    return i % every == every - 1


def expected_row(i: int) -> dict[str, Any]:
    """Row ``i`` as the Python values the target must give back (JSON as parsed objects)."""
    text = ["a", "é", "", "x" * 300, "日本語", 'q"u,o\nte'][i % 6]
    raw = bytes([i % 256, 0, 255]) * (i % 4)
    return {
        "id": i,
        "updated_at": BASE + timedelta(hours=i),
        "sv": None if _null(i, 5) else text,
        "ls": None if _null(i, 4) else text + "!",
        "dict_s": None if _null(i, 3) else ["red", "green", "blue"][i % 3],
        "bin": None if _null(i, 5) else raw,
        "lbin": None if _null(i, 4) else raw + b"L",
        "bview": None if _null(i, 3) else raw + b"V",
        "fsb8": None if _null(i, 5) else i.to_bytes(8, "big"),
        "fsb16": None if _null(i, 4) else _uuid(i + 1000),
        "uid": None if _null(i, 3) else _uuid(i),
        "js": None if _null(i, 5) else {"n": i, "tags": ["a", "b"][: i % 3], "ok": i % 2 == 0},
        "t32": None if _null(i, 4) else time(i % 24, 30, 15, (i * 1000) % 10**6),
        "t64": None if _null(i, 3) else time(23, 59, 59, 999999 - i),
        "t64ns": None if _null(i, 5) else time(0, 0, i, 7),
        "dur": None if _null(i, 4) else timedelta(days=i - 5, microseconds=i * 1001),
        "dur_s": None if _null(i, 3) else timedelta(seconds=-i * 3601),
        "dur_ns": None if _null(i, 5) else timedelta(hours=40, microseconds=i),
        "lst": None if _null(i, 4) else list(range(i % 4)),
        "llst": None if _null(i, 3) else [text, None],
        "lview": None if _null(i, 5) else [i, -i],
        "fsl": None if _null(i, 4) else [i + 0.5, -1.25],
        "st": None
        if _null(i, 3)
        else {
            "x": i,
            "y": None if i % 2 else text,
            "b": "\\x" + raw.hex(),
            "d": Decimal(f"{i}.50"),
            "at": (BASE + timedelta(minutes=i))
            .replace(tzinfo=None)
            .isoformat(timespec="microseconds")
            + "+00:00",
            "day": (date(2024, 2, 1) + timedelta(days=i)).isoformat(),
            "l": [i, i + 1],
        },
        "mp": None if _null(i, 5) else {"k": i, "z": -i},
        "mpi": None if _null(i, 4) else [[i, "x"], [i + 1, None]],
        "d32": None if _null(i, 3) else Decimal(f"{(-1) ** i * i * 111}.25"),
        "d64": None if _null(i, 5) else Decimal(f"{i * 10**9}.123"),
        "d128": None if _null(i, 4) else Decimal(f"{(-1) ** i * 7**i}.0123456789"),
        "d256": None if _null(i, 3) else Decimal(f"{(-1) ** i * 13**i}{'9' * 25}.{i:020d}"),
        "nul": None,
    }


SQL_TYPES = {
    "id": "bigint", "updated_at": "timestamptz", "sv": "text", "ls": "text", "dict_s": "text",
    "bin": "bytea", "lbin": "bytea", "bview": "bytea", "fsb8": "bytea", "fsb16": "uuid",
    "uid": "uuid", "js": "jsonb", "t32": "time", "t64": "time", "t64ns": "time",
    "dur": "interval", "dur_s": "interval", "dur_ns": "interval", "lst": "jsonb",
    "llst": "jsonb", "lview": "jsonb", "fsl": "jsonb", "st": "jsonb", "mp": "jsonb",
    "mpi": "jsonb", "d32": "numeric(7,2)", "d64": "numeric(15,3)", "d128": "numeric(38,10)",
    "d256": "numeric(60,20)", "nul": "text",
}  # fmt: skip

STRUCT = pa.struct(
    [
        ("x", pa.int64()),
        ("y", pa.string()),
        ("b", pa.binary()),
        ("d", pa.decimal128(5, 2)),
        ("at", pa.timestamp("us", tz="UTC")),
        ("day", pa.date32()),
        ("l", pa.list_(pa.int64())),
    ]
)


def _micros(value: time | timedelta) -> int:
    if isinstance(value, time):
        return ((value.hour * 60 + value.minute) * 60 + value.second) * 10**6 + value.microsecond
    return (value.days * 86_400 + value.seconds) * 10**6 + value.microseconds


def arrow_table(ids: range) -> pa.Table:
    """The rows as pyarrow writes them: each column in the Arrow type under test."""
    rows = [expected_row(i) for i in ids]

    def col(name: str) -> list[Any]:
        return [row[name] for row in rows]

    structs: list[dict[str, Any] | None] = []
    for row in rows:
        value = row["st"]
        if value is None:
            structs.append(None)
            continue
        i = row["id"]
        structs.append(
            {
                "x": i,
                "y": value["y"],
                "b": bytes.fromhex(value["b"][2:]),
                "d": value["d"],
                "at": BASE + timedelta(minutes=i),
                "day": date(2024, 2, 1) + timedelta(days=i),
                "l": value["l"],
            }
        )
    ns_times = [None if v is None else _micros(v) * 1000 for v in col("t64ns")]
    return pa.table(
        {
            "id": pa.array(col("id"), pa.int64()),
            "updated_at": pa.array(col("updated_at"), pa.timestamp("us", tz="UTC")),
            "sv": pa.array(col("sv"), pa.string_view()),
            "ls": pa.array(col("ls"), pa.large_string()),
            "dict_s": pa.array(col("dict_s")).dictionary_encode(),
            "bin": pa.array(col("bin"), pa.binary()),
            "lbin": pa.array(col("lbin"), pa.large_binary()),
            "bview": pa.array(col("bview"), pa.binary_view()),
            "fsb8": pa.array(col("fsb8"), pa.binary(8)),
            "fsb16": pa.array(
                [None if u is None else u.bytes for u in col("fsb16")], pa.binary(16)
            ),
            "uid": pa.array(col("uid"), pa.uuid()),
            "js": pa.ExtensionArray.from_storage(
                pa.json_(), pa.array([None if v is None else json.dumps(v) for v in col("js")])
            ),
            "t32": pa.array(
                [None if v is None else _micros(v) // 1000 for v in col("t32")], pa.time32("ms")
            ),
            "t64": pa.array(col("t64"), pa.time64("us")),
            "t64ns": pa.array(ns_times, pa.time64("ns")),
            "dur": pa.array(col("dur"), pa.duration("us")),
            "dur_s": pa.array(
                [None if v is None else _micros(v) // 10**6 for v in col("dur_s")],
                pa.duration("s"),
            ),
            "dur_ns": pa.array(
                [None if v is None else _micros(v) * 1000 for v in col("dur_ns")],
                pa.duration("ns"),
            ),
            "lst": pa.array(col("lst"), pa.list_(pa.int64())),
            "llst": pa.array(col("llst"), pa.large_list(pa.string())),
            "lview": pa.array(col("lview"), pa.list_view(pa.int64())),
            "fsl": pa.array(col("fsl"), pa.list_(pa.float64(), 2)),
            "st": pa.array(structs, STRUCT),
            "mp": pa.array(
                [None if v is None else list(v.items()) for v in col("mp")],
                pa.map_(pa.string(), pa.int64()),
            ),
            "mpi": pa.array(
                [None if v is None else [tuple(p) for p in v] for v in col("mpi")],
                pa.map_(pa.int64(), pa.string()),
            ),
            "d32": pa.array(col("d32"), pa.decimal32(7, 2)),
            "d64": pa.array(col("d64"), pa.decimal64(15, 3)),
            "d128": pa.array(col("d128"), pa.decimal128(38, 10)),
            "d256": pa.array(col("d256"), pa.decimal256(60, 20)),
            "nul": pa.nulls(len(rows)),
        }
    )


# -- reading the target back as Python values ---------------------------------------------


def _json(text: Any) -> Any:
    return None if text is None else json.loads(text, parse_float=Decimal)


def sqlite_reader(sql_type: str) -> Callable[[Any], Any]:
    """How the embedded warehouse stores each type (README: The embedded default)."""
    readers: dict[str, Callable[[Any], Any]] = {
        "uuid": UUID,
        "time": time.fromisoformat,
        "interval": lambda v: timedelta(microseconds=v),
        "jsonb": _json,
        "bytea": bytes,
        "timestamptz": datetime.fromisoformat,
    }
    if sql_type.startswith("numeric"):
        return Decimal
    return readers.get(sql_type, lambda v: v)


def read_back(project: Project, table: str, types: dict[str, str]) -> list[dict[str, Any]]:
    names = list(types)
    convert: dict[str, Callable[[Any], Any]]
    if project.backend == "postgres":
        selected = [f"{n}::text" if types[n] == "jsonb" else n for n in names]
        rows = project.query(f"SELECT {', '.join(selected)} FROM {project.table(table)} ORDER BY 1")
        convert = {n: (_json if types[n] == "jsonb" else (lambda v: v)) for n in names}
    else:
        rows = project.query(f"SELECT {', '.join(names)} FROM {project.table(table)} ORDER BY 1")
        convert = {n: sqlite_reader(types[n]) for n in names}
    return [
        {n: None if v is None else convert[n](v) for n, v in zip(names, row, strict=True)}
        for row in rows
    ]


def column_types(project: Project, table: str) -> dict[str, str]:
    if project.backend == "postgres":
        rows = project.query(
            "SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a "
            "WHERE a.attrelid = to_regclass(%s) AND a.attnum > 0 AND NOT a.attisdropped",
            [table],
        )
    else:
        rows = project.query(f"SELECT name, type FROM pragma_table_info('{table}')")
    return {str(name): str(kind) for name, kind in rows}


def parquet_pipeline(path: str, target: str = "analytics.types", **extra: Any) -> dict[str, Any]:
    return {
        "source": {"kind": "parquet", "path": path},
        "target": target,
        "key": ["id"],
        "cursor": "updated_at",
        "on_conflict": "update",
        **extra,
    }


# -- every type -----------------------------------------------------------------------


def test_every_arrow_type_a_file_carries_lands_and_reads_back_equal(project: Project) -> None:
    folder = project.root / "data" / "types"
    folder.mkdir()
    pq.write_table(arrow_table(range(0, ROWS_PER_FILE)), folder / "part-0.parquet")
    pq.write_table(arrow_table(range(ROWS_PER_FILE, 2 * ROWS_PER_FILE)), folder / "part-1.parquet")
    assert pq.read_schema(folder / "part-0.parquet").field("sv").type == pa.string_view()
    project.configure(types=parquet_pipeline("data/types"))
    first = project.run("types")
    assert first["rows_inserted"] == 2 * ROWS_PER_FILE

    expected = [expected_row(i) for i in range(2 * ROWS_PER_FILE)]
    got = read_back(project, "analytics.types", SQL_TYPES)
    for want, have in zip(expected, got, strict=True):
        for name in SQL_TYPES:
            assert have[name] == want[name], (name, have[name], want[name])

    declared = column_types(project, "analytics.types")
    if project.backend == "postgres":
        shown = {"timestamptz": "timestamp with time zone", "time": "time without time zone"}
        for name, sql_type in SQL_TYPES.items():
            assert declared[name] == shown.get(sql_type, sql_type), name
    else:
        assert (declared["uid"], declared["bin"], declared["js"]) == (
            "UUID_TEXT",
            "BLOB",
            "JSON_TEXT",
        )
        assert (declared["t64"], declared["dur"]) == ("TIME_TEXT", "INTERVAL_MICROS")
        assert declared["d256"] == "DECIMAL_TEXT(60,20)"

    # identical input changes nothing: the values compare equal in SQL, every type
    again = project.run_json("backfill", "types", "--start", "2024-01-01", "--end", "2024-01-02")[0]
    assert (again["rows_staged"], again["rows_unchanged"]) == (0, 2 * ROWS_PER_FILE)
    full = project.run_json(
        "backfill", "types", "--start", "2024-01-01", "--end", "2024-01-02", "--full-compare"
    )[0]
    assert (full["rows_staged"], full["rows_updated"]) == (2 * ROWS_PER_FILE, 0)
    assert full["rows_unchanged"] == 2 * ROWS_PER_FILE


def test_duckdb_style_strings_load_as_text_with_one_fingerprint(project: Project) -> None:
    """DuckDB writes dictionary-encoded strings, and string views; another tool plain
    strings: the same values are the same rows."""
    names = ["north", "south", None, "north"]
    ids = pa.array([1, 2, 3, 4], pa.int64())
    at = pa.array([BASE + timedelta(days=d) for d in range(4)], pa.timestamp("us", tz="UTC"))
    duck = pa.table(
        {
            "id": ids,
            "region": pa.array(names).dictionary_encode(),
            "note": pa.array(["é", "", None, "x" * 40], pa.string_view()),
            "updated_at": at,
        }
    )
    plain = duck.set_column(1, "region", pa.array(names)).set_column(
        2, "note", pa.array(["é", "", None, "x" * 40])
    )
    path = project.root / "data" / "regions.parquet"
    pq.write_table(duck, path)
    assert pa.types.is_dictionary(pq.read_schema(path).field("region").type)
    project.configure(regions=parquet_pipeline("data/regions.parquet", "regions"))
    assert project.run("regions")["rows_inserted"] == 4
    rows = project.query(f"SELECT id, region, note FROM {project.table('regions')} ORDER BY 1")
    assert [tuple(r) for r in rows] == [(1, "north", "é"), (2, "south", ""), (3, None, None),
                                        (4, "north", "x" * 40)]  # fmt: skip
    hashes = project.query(
        f"SELECT _pipeledger_row_hash FROM {project.table('regions')} ORDER BY id"
    )
    pq.write_table(plain, path)
    again = project.run_json("backfill", "regions", "--start", "2024-01-01", "--end", "2024-01-04")
    assert (again[0]["rows_staged"], again[0]["rows_unchanged"]) == (0, 4)
    assert (
        project.query(f"SELECT _pipeledger_row_hash FROM {project.table('regions')} ORDER BY id")
        == hashes
    )


# -- refused before anything is written ---------------------------------------------------


class Temperature(pa.ExtensionType):  # type: ignore[misc]  # pyarrow ships no types
    """An extension type pipeledger does not know (registered in this process only)."""

    def __init__(self) -> None:
        super().__init__(pa.float64(), "test.temperature")

    def __arrow_ext_serialize__(self) -> bytes:
        return b""

    @classmethod
    def __arrow_ext_deserialize__(cls, storage_type: pa.DataType, serialized: bytes) -> Temperature:
        return cls()


@pytest.fixture
def temperature() -> Any:
    kind = Temperature()
    pa.register_extension_type(kind)
    yield kind
    pa.unregister_extension_type("test.temperature")


def test_a_type_without_sql_type_stops_the_run_before_anything_is_written(
    project: Project, temperature: pa.DataType
) -> None:
    folder = project.root / "data" / "readings"
    folder.mkdir()
    at = pa.array([BASE, BASE + timedelta(hours=1)], pa.timestamp("us", tz="UTC"))
    good = pa.table(
        {"id": pa.array([1, 2], pa.int64()), "updated_at": at, "u": pa.array([20.0, 20.5])}
    )
    pq.write_table(good, folder / "a.parquet")
    celsius = pa.ExtensionArray.from_storage(temperature, pa.array([21.5, None]))
    later = pa.table({"id": pa.array([3, 4], pa.int64()), "updated_at": at, "u": celsius})
    pq.write_table(later, folder / "b.parquet")
    project.configure(readings=parquet_pipeline("data/readings", "analytics.readings"))
    code, _, err = project.cli("run", "readings")
    assert code == 1
    assert "b.parquet, column 'u': Arrow type extension<test.temperature" in err
    assert 'has no SQL type; declare it under [pipelines.readings.columns], e.g. u = "text"' in err
    assert not project.exists("analytics.readings")
    # declared, it loads (from the extension's storage)
    project.configure(
        readings=parquet_pipeline(
            "data/readings", "analytics.readings", columns={"u": "double precision"}
        )
    )
    assert project.run("readings")["rows_inserted"] == 4
    rows = project.query(f"SELECT id, u FROM {project.table('analytics.readings')} ORDER BY 1")
    assert [tuple(r) for r in rows] == [(1, 20.0), (2, 20.5), (3, 21.5), (4, None)]


def test_a_union_has_no_sql_type_and_says_what_to_declare() -> None:
    union = pa.dense_union([pa.field("i", pa.int64()), pa.field("s", pa.string())])
    with pytest.raises(UnmappedType, match="dense_union"):
        sql_type_for(union)
    schema = pa.schema([("id", pa.int64()), ("t", pa.date32()), ("u", union)])
    with pytest.raises(SchemaError, match=r"column 'u': Arrow type dense_union.* u = \"text\""):
        infer_shape(schema, {}, ["id"], "t", None)
    assert infer_shape(schema, {"u": "jsonb"}, ["id"], "t", None).columns[2].sql_type == "jsonb"


def test_nanoseconds_are_refused_not_truncated(project: Project) -> None:
    at = pa.array([BASE, BASE + timedelta(hours=1)], pa.timestamp("us", tz="UTC"))
    table = pa.table(
        {
            "id": pa.array([1, 2], pa.int64()),
            "updated_at": at,
            "t": pa.array([5_000, 1_001], pa.time64("ns")),  # 1001 ns: sub-microsecond digits
        }
    )
    pq.write_table(table, project.root / "data" / "clock.parquet")
    project.configure(clock=parquet_pipeline("data/clock.parquet", "clock"))
    code, _, err = project.cli("run", "clock")
    assert code == 1
    assert "clock.parquet, column 't': cannot store" in err
    assert "00:00:00.000001001" in err and "nanoseconds" in err
    assert not project.exists("clock")


# -- declared types from text, keys, partitions --------------------------------------------


def test_text_columns_declared_as_the_newer_types_land_exactly(project: Project) -> None:
    header = ["id", "ident", "raw", "doc", "clock", "span", "updated_at"]
    rows = [
        [1, "A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11", "\\x00ff10", '{"a": [1, 2.5]}', "12:30",
         "1 day 02:00:00", "2024-01-01T00:00:00Z"],
        [2, "{a0eebc999c0b4ef8bb6d6bb9bd380a12}", "\\x", "[]", "23:59:59.999999", "PT1H30M",
         "2024-01-01T01:00:00Z"],
        [3, "", "", "", "", "", "2024-01-01T02:00:00Z"],
        [4, "NULL", "\\xDEADbeef", '"text"', "00:00:00.5", "-36:00:00.25",
         "2024-01-01T03:00:00Z"],
    ]  # fmt: skip
    project.write_csv("kinds.csv", rows, header)
    declared = {"ident": "uuid", "raw": "bytea", "doc": "jsonb", "clock": "time",
                "span": "interval"}  # fmt: skip
    project.configure(
        kinds={
            "source": {"kind": "csv", "path": "data/kinds.csv"},
            "target": "kinds",
            "key": ["id"],
            "cursor": "updated_at",
            "on_conflict": "update",
            "columns": declared,
        }
    )
    assert project.run("kinds")["rows_inserted"] == 4
    got = read_back(project, "kinds", {"id": "bigint", **declared})
    assert got == [
        {"id": 1, "ident": UUID("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"), "raw": b"\x00\xff\x10",
         "doc": {"a": [1, Decimal("2.5")]}, "clock": time(12, 30),
         "span": timedelta(days=1, hours=2)},
        {"id": 2, "ident": UUID("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a12"), "raw": b"", "doc": [],
         "clock": time(23, 59, 59, 999999), "span": timedelta(hours=1, minutes=30)},
        {"id": 3, "ident": None, "raw": None, "doc": None, "clock": None, "span": None},
        {"id": 4, "ident": None, "raw": b"\xde\xad\xbe\xef", "doc": "text",
         "clock": time(0, 0, 0, 500000), "span": -timedelta(hours=36, microseconds=250000)},
    ]  # fmt: skip
    # a value the type cannot hold is refused with its row, and nothing is written
    later = "2024-01-02T00:00:00Z"
    project.write_csv("kinds.csv", [*rows, [5, "not-a-uuid", "", "", "", "", later]], header)
    code, _, err = project.cli("run", "kinds")
    assert code == 1
    assert "kinds.csv row 5 (line 6), column 'ident'" in err and "'not-a-uuid' is not a uuid" in err
    project.write_csv("kinds.csv", [[6, "", "", "", "", "1 mon", later]], header)
    code, _, err = project.cli("run", "kinds")
    assert code == 1 and "'1 mon' counts months or years" in err
    assert project.count("kinds") == 4


def test_uuid_and_bytea_keys_merge_a_jsonb_key_is_refused(project: Project) -> None:
    ids = [_uuid(1), _uuid(2)]
    at = pa.array([BASE, BASE + timedelta(hours=1)], pa.timestamp("us", tz="UTC"))
    table = pa.table(
        {
            "id": pa.array(ids, pa.uuid()),
            "code": pa.array([b"\x00a", b"\x00b"]),
            "doc": pa.array([{"v": 1}, {"v": 2}]),
            "updated_at": at,
        }
    )
    path = project.root / "data" / "things.parquet"
    pq.write_table(table, path)
    project.configure(things=parquet_pipeline("data/things.parquet", "things", key=["id", "code"]))
    assert project.run("things")["rows_inserted"] == 2
    changed = table.set_column(2, "doc", pa.array([{"v": 1}, {"v": 3}])).set_column(
        3, "updated_at", pa.array([BASE, BASE + timedelta(hours=2)], pa.timestamp("us", tz="UTC"))
    )
    pq.write_table(changed, path)
    second = project.run("things")
    assert (second["rows_updated"], second["rows_unchanged"]) == (1, 0)
    docs = read_back(project, "things", {"updated_at": "timestamptz", "doc": "jsonb"})
    assert [d["doc"] for d in docs] == [{"v": 1}, {"v": 3}]

    project.configure(bad=parquet_pipeline("data/things.parquet", "bad", key=["doc"]))
    code, _, err = project.cli("run", "bad")
    assert code == 1 and "key column 'doc' is jsonb" in err
    project.configure(part=parquet_pipeline("data/things.parquet", "part", partition_by="id"))
    code, _, err = project.cli("run", "part")
    assert code == 1 and "partition_by column 'id' is uuid" in err
    assert not project.exists("bad") and not project.exists("part")


# -- a SQL source carrying the newer types ----------------------------------------------------


def test_a_postgres_table_with_the_newer_types_loads(project: Project, postgres_url: str) -> None:
    with psycopg.connect(postgres_url) as conn:
        conn.execute(
            "CREATE TABLE things (id bigint PRIMARY KEY, raw bytea, ident uuid, doc jsonb, "
            "plain json, clock time, span interval, huge numeric(50,5), "
            "updated_at timestamptz NOT NULL)"
        )
        conn.execute(
            "INSERT INTO things VALUES "
            "(1, '\\x00ff'::bytea, 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', "
            '\'{"b": 1, "a": [true, null, 2.50]}\', \'{"z": 1, "z": 2}\', \'13:14:15.161718\', '
            "'1 day 02:03:04.5', 123456789012345678901234567890123456789012345.12345, "
            "'2024-01-01 00:00+00'), "
            "(2, NULL, NULL, NULL, NULL, NULL, '-36:00:00', NULL, '2024-01-01 01:00+00')"
        )
    project.configure(
        things={
            "source": {"kind": "sql", "url": postgres_url, "table": "things"},
            "target": "copied",
            "key": ["id"],
            "cursor": "updated_at",
            "on_conflict": "update",
        }
    )
    assert project.run("things")["rows_inserted"] == 2
    types = {"id": "bigint", "raw": "bytea", "ident": "uuid", "doc": "jsonb", "plain": "jsonb",
             "clock": "time", "span": "interval", "huge": "numeric(50,5)"}  # fmt: skip
    assert read_back(project, "copied", types) == [
        {"id": 1, "raw": b"\x00\xff", "ident": UUID("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"),
         "doc": {"a": [True, None, Decimal("2.50")], "b": 1}, "plain": {"z": 2},
         "clock": time(13, 14, 15, 161718), "span": timedelta(days=1, hours=2, seconds=184.5),
         "huge": Decimal("123456789012345678901234567890123456789012345.12345")},
        {"id": 2, "raw": None, "ident": None, "doc": None, "plain": None, "clock": None,
         "span": -timedelta(hours=36), "huge": None},
    ]  # fmt: skip
    with psycopg.connect(postgres_url) as conn:
        conn.execute("INSERT INTO things (id, span, updated_at) VALUES (3, '1 mon', now())")
    code, _, err = project.cli("run", "things")
    assert code == 1 and "counts months or years" in err
    assert project.count("copied") == 2


# -- a gated pipeline: checks, quarantine and replay with the newer types ----------------------


def test_a_gated_pipeline_with_the_newer_types_quarantines_and_replays(project: Project) -> None:
    at = pa.array([BASE + timedelta(hours=h) for h in range(3)], pa.timestamp("us", tz="UTC"))
    table = pa.table(
        {
            "id": pa.array([_uuid(1), _uuid(2), _uuid(3)], pa.uuid()),
            "raw": pa.array([b"\x00\x01", None, b"\xff"]),
            "doc": pa.array(
                [{"a": [1, 2]}, {"a": []}, None], pa.struct([("a", pa.list_(pa.int64()))])
            ),
            "clock": pa.array([time(1), time(2, 30, 0, 5), None], pa.time64("us")),
            "span": pa.array([timedelta(hours=30), None, -timedelta(microseconds=5)]),
            "amount": pa.array(
                [Decimal("1.50"), Decimal("-2.00"), Decimal("3.25")], pa.decimal128(9, 2)
            ),
            "updated_at": at,
        }
    )
    pq.write_table(table, project.root / "data" / "gated.parquet")

    def configure(minimum: float) -> None:
        project.configure(
            gated=parquet_pipeline(
                "data/gated.parquet",
                "gated",
                checks={"range": {"amount": {"min": minimum}}, "on_fail": "quarantine"},
            )
        )

    configure(0)
    first = project.run("gated")
    assert (first["status"], first["rows_inserted"]) == ("partial", 2)
    code, out, err = project.cli("quarantine", "gated", "--json")
    assert code == 0, err
    (entry,) = json.loads(out)
    assert entry["row"]["raw"] is None and entry["row"]["doc"] == {"a": []}
    assert entry["row"]["clock"].startswith("02:30:00.000005")
    configure(-10)
    code, out, err = project.cli("quarantine", "replay", "gated", "--json")
    assert code == 0, err
    types = {"id": "uuid", "raw": "bytea", "doc": "jsonb", "clock": "time", "span": "interval",
             "amount": "numeric(9,2)"}  # fmt: skip
    got = sorted(read_back(project, "gated", types), key=lambda r: str(r["id"]))
    want: list[dict[str, Any]] = [
        {"id": _uuid(1), "raw": b"\x00\x01", "doc": {"a": [1, 2]}, "clock": time(1),
         "span": timedelta(hours=30), "amount": Decimal("1.50")},
        {"id": _uuid(2), "raw": None, "doc": {"a": []}, "clock": time(2, 30, 0, 5),
         "span": None, "amount": Decimal("-2.00")},
        {"id": _uuid(3), "raw": b"\xff", "doc": None, "clock": None,
         "span": -timedelta(microseconds=5), "amount": Decimal("3.25")},
    ]  # fmt: skip
    assert got == sorted(want, key=lambda r: str(r["id"]))


def test_sqlite_stores_each_type_so_that_sql_orders_and_compares_it(tmp_path: Path) -> None:
    """A check on the storage itself: times sort as text, intervals as integers."""
    project = Project(tmp_path, None)
    at = pa.array([BASE + timedelta(hours=h) for h in range(3)], pa.timestamp("us", tz="UTC"))
    table = pa.table(
        {
            "id": pa.array([1, 2, 3], pa.int64()),
            "clock": pa.array([time(10), time(9, 59, 59, 999999), time(0)], pa.time64("us")),
            "span": pa.array([timedelta(days=1), -timedelta(hours=1), timedelta(seconds=5)]),
            "updated_at": at,
        }
    )
    pq.write_table(table, tmp_path / "data" / "order.parquet")
    project.configure(order=parquet_pipeline("data/order.parquet", "ordered"))
    project.run("order")
    conn = sqlite3.connect(tmp_path / ".pipeledger" / "warehouse.db")
    try:
        by_clock = [r[0] for r in conn.execute('SELECT id FROM "ordered" ORDER BY clock')]
        by_span = [r[0] for r in conn.execute('SELECT id FROM "ordered" ORDER BY span')]
    finally:
        conn.close()
    assert by_clock == [3, 2, 1] and by_span == [2, 3, 1]
