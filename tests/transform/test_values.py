"""The conversions Arrow has no cast for (``transform/values.py``): text forms and JSON."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from uuid import UUID

import pyarrow as pa
import pytest

from pipeledger.common import values


def test_nested_values_render_as_json_by_the_documented_rules() -> None:
    kind = pa.struct(
        [
            ("b", pa.binary()),
            ("d", pa.decimal128(6, 2)),
            ("f", pa.float64()),
            ("at", pa.timestamp("us", tz="Europe/Paris")),
            ("naive", pa.timestamp("ms")),
            ("day", pa.date32()),
            ("t", pa.time64("us")),
            ("span", pa.duration("s")),
            ("u", pa.uuid()),
            ("m", pa.map_(pa.int32(), pa.string())),
            ("z", pa.string()),  # after "m": field order is kept
        ]
    )
    value = {
        "b": b"\x00\xab",
        "d": Decimal("1.50"),
        "f": 0.1,
        "at": datetime(2024, 6, 1, 12, tzinfo=UTC),
        "naive": datetime(2024, 6, 1, 12, 0, 0, 5000),
        "day": date(2024, 6, 1),
        "t": time(1, 2, 3, 4),
        "span": timedelta(hours=-36),
        "u": UUID(int=1),
        "m": [(2, "two"), (1, None)],
        "z": 'é"',
    }
    children = [pa.array([value[f.name]], f.type) for f in kind]
    (text,) = values.json_texts(pa.StructArray.from_arrays(children, fields=list(kind))).to_pylist()
    assert text == (
        '{"b":"\\\\x00ab","d":1.50,"f":0.1,"at":"2024-06-01T12:00:00.000000+00:00",'
        '"naive":"2024-06-01T12:00:00.005000","day":"2024-06-01","t":"01:02:03.000004",'
        '"span":"-36:00:00","u":"00000000-0000-0000-0000-000000000001",'
        '"m":[[2,"two"],[1,null]],"z":"é\\""}'
    )
    assert json.loads(text)["b"] == "\\x00ab"


@pytest.mark.parametrize(
    ("array", "row", "words"),
    [
        (pa.array([[1.0], [float("nan")]]), 1, "nan is not a number JSON can hold"),
        (pa.array([["a"], ["b\x00"]]), 1, "NUL character"),
        (pa.array([[1000], [1001]], pa.list_(pa.time64("ns"))), 1, "nanoseconds"),
        (pa.array([{"t": 5}, {"t": 7}], pa.struct([("t", pa.duration("ns"))])), 0, "nanoseconds"),
    ],
)
def test_json_refuses_what_jsonb_cannot_hold_naming_the_row(
    array: pa.Array, row: int, words: str
) -> None:
    with pytest.raises(values.Unfit, match=words) as caught:
        values.json_texts(array)
    assert caught.value.index == row


def test_json_text_is_validated_and_kept_as_written() -> None:
    ok = values.json_from_text(pa.array(['{"a": 1.50 }', None, '"x\\\\u0000"']))
    assert ok.storage.to_pylist() == ['{"a": 1.50 }', None, '"x\\\\u0000"']
    for bad, row in [(["[]", "{a:1}"], 1), (["NaN"], 0), (['"\\u0000"'], 0)]:
        with pytest.raises(values.Unfit) as caught:
            values.json_from_text(pa.array(bad))
        assert caught.value.index == row


def test_text_forms_read_and_write_back() -> None:
    uuids = values.uuid_from_text(
        pa.array(
            ["A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11", None, "{a0eebc999c0b4ef8bb6d6bb9bd380a11}"]
        )
    )
    assert values.uuid_text(uuids).to_pylist() == [
        "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", None, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
    ]  # fmt: skip
    raw = values.bytes_from_text(pa.array(["\\x00FF", "\\x", None]))
    assert raw.to_pylist() == [b"\x00\xff", b"", None]
    assert values.bytes_text(raw).to_pylist() == ["\\x00ff", "\\x", None]
    times = values.time_from_text(pa.array(["00:00", "23:59:59.999999", "12:30:01.5", None]))
    assert times.to_pylist() == [time(0), time(23, 59, 59, 999999), time(12, 30, 1, 500000), None]
    for text, micros in [
        ("36:00:00", 36 * 3600 * 10**6),
        ("1 day 02:00:00", 26 * 3600 * 10**6),
        ("-1 days +02:00:00.5", -(22 * 3600 - 0.5) * 10**6),
        ("-00:00:00.000001", -1),
        ("P1DT2H", 26 * 3600 * 10**6),
        ("PT0.5S", 500_000),
        ("-PT1M", -60 * 10**6),
        ("P2W", 14 * 86_400 * 10**6),
    ]:
        assert values.interval_micros(text) == micros, text
        assert values.interval_micros(values.interval_text(int(micros))) == micros
    assert values.interval_text(36 * 3600 * 10**6 + 5) == "36:00:00.000005"
    for bad, words in [
        ("1 mon", "months or years"), ("P1Y", "months or years"), ("PT", "not an interval"),
        ("soon", "not an interval"),
    ]:  # fmt: skip
        with pytest.raises(values.Unfit, match=words):
            values.interval_micros(bad)
    for array, words in [
        (pa.array(["12:60"]), "not a time"),
        (pa.array(["24:00:00"]), "not a time"),
        (pa.array(["abc"]), "not a uuid"),
    ]:
        with pytest.raises(values.Unfit, match=words):
            kind = "time" if words == "not a time" else "uuid"
            values.conform_array(array, kind, pa.time64("us") if kind == "time" else pa.uuid())
    with pytest.raises(values.Unfit, match="not bytea text"):
        values.bytes_from_text(pa.array(["\\x0"]))
