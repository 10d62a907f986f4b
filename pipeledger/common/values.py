"""Values beyond Arrow's own casts: what files carry, decoded; nested values as JSON; the
text forms of uuid, bytea, time and interval.

Every conversion refuses a value its target cannot hold instead of changing it: it raises
:class:`Unfit` with the value's row, and the caller names the file, the row and the column.

Text forms (accepted from text sources, written where a value must be text):

* **uuid**: 32 hex digits in either case, hyphens anywhere, optionally in braces; written
  in lower case as 8-4-4-4-12 (PostgreSQL's form).
* **bytea**: ``\\x`` followed by pairs of hex digits (PostgreSQL's hex format); written in
  lower case.
* **time**: ``HH:MM``, ``HH:MM:SS`` or ``HH:MM:SS.f`` (up to 6 digits), 00:00 to
  23:59:59.999999; written ``HH:MM:SS.ffffff``.
* **interval**: a fixed length, kept in microseconds. Years and months have no fixed length
  and are refused. Accepted: PostgreSQL's output (``36:00:00``, ``1 day 02:00:00``,
  ``-1 days +02:00:00.5``) and ISO 8601 durations in weeks, days, hours, minutes and
  seconds (``P1DT2H``, ``PT0.5S``, ``-PT1M``). Written as PostgreSQL writes a fixed length:
  ``[-]H:MM:SS[.ffffff]``, with as many hours as it takes (``36:00:00``).
* **JSON** (jsonb) from text: each value must parse as JSON and is kept as written (PostgreSQL
  normalises jsonb; SQLite keeps the text). NaN, Infinity and ``\\u0000`` are refused (jsonb
  cannot hold them).

Nested Arrow values (lists of any kind, structs, maps, unions) and any other value declared
``jsonb`` become JSON text: a struct is an object with its fields in the struct's order; a
map is an object in entry order when its keys are text, else an array of ``[key, value]``
pairs; a union is the value of its member; text is a string; bytes are a ``\\x`` hex string
(as PostgreSQL renders bytea in JSON); a uuid is its text; integers and decimals are numbers,
decimals exactly as written with their scale (``1.50``); floats are the shortest text that
reads back as the same float (NaN and infinities are refused: JSON has no such numbers); a
date is ``YYYY-MM-DD``; a timestamp is ISO 8601 with microseconds (``+00:00`` appended, in UTC,
when it has a time zone); times and durations are their text forms above. A value with
nanoseconds (``timestamp[ns]`` and the like) is refused unless they are zero, as at the top
level: PostgreSQL keeps microseconds.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any
from uuid import UUID

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeledger.common import buffers as buffers
from pipeledger.common.columns import JSON_EXTENSION, UUID_EXTENSION, is_nested

_DAY_US = 86_400_000_000
_HEX = np.frombuffer(b"0123456789abcdef", np.uint8)
# for every byte value: its two lower-case hex digits
_HEX_PAIRS = np.stack([_HEX[np.arange(256) >> 4], _HEX[np.arange(256) & 15]], axis=1)
_NIBBLE = np.full(256, 255, np.uint8)  # hex digit -> its value (255: not a hex digit)
for _i, _c in enumerate(b"0123456789abcdef"):
    _NIBBLE[_c] = _NIBBLE[ord(chr(_c).upper())] = _i
_UUID_DASHES = (8, 12, 16, 20)  # hex digits before each hyphen of 8-4-4-4-12


class Unfit(ValueError):
    """A value its target cannot hold; ``index`` is its row in the array (None: unknown)."""

    def __init__(self, reason: str, index: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.index = index


# -- what an array carries ------------------------------------------------------------


def is_text(kind: pa.DataType) -> bool:
    return bool(
        pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind)
    )


def is_bytes(kind: pa.DataType) -> bool:
    return bool(
        pa.types.is_binary(kind)
        or pa.types.is_large_binary(kind)
        or pa.types.is_binary_view(kind)
        or pa.types.is_fixed_size_binary(kind)
    )


def _extension(kind: pa.DataType) -> str | None:
    return str(kind.extension_name) if isinstance(kind, pa.BaseExtensionType) else None


def decode(array: pa.Array) -> pa.Array:
    """The array's values as plain values: a dictionary or run-end encoded column decoded,
    a canonical extension that adds nothing (bool8, tensors) as its storage. The uuid and
    JSON extensions stay: they mean more than their storage."""
    while True:
        kind = array.type
        if pa.types.is_dictionary(kind):
            array = array.dictionary_decode()
        elif pa.types.is_run_end_encoded(kind):
            array = pc.run_end_decode(array)
        elif _extension(kind) == "arrow.bool8":
            array = pc.not_equal(array.storage, 0)
        elif _extension(kind) in ("arrow.fixed_shape_tensor", "arrow.variable_shape_tensor"):
            array = array.storage
        else:
            return array


# -- conversion to a column's carrier --------------------------------------------------


def conform_array(array: pa.Array, sql_type: str, target: pa.DataType) -> pa.Array:
    """``array`` as the Arrow type ``target`` that carries ``sql_type``, refusing values the
    type cannot hold (:class:`Unfit`, or Arrow's own error from a safe cast)."""
    array = decode(array)
    kind = array.type
    if kind == target:
        return json_from_text(array.storage) if sql_type == "jsonb" else array
    if pa.types.is_null(kind):
        return pa.nulls(len(array), target)
    if sql_type == "jsonb":
        return _to_json(array)
    if sql_type == "text":
        return _to_text(array)
    if sql_type == "bytea":
        return _to_bytes(array)
    if sql_type == "uuid":
        return _to_uuid(array)
    if sql_type == "time" and is_text(kind):
        return time_from_text(array)
    if sql_type == "interval" and is_text(kind):
        return interval_from_text(array)
    extension = _extension(kind)
    if extension is not None:
        array = array.storage
    return array.cast(target)


def _to_text(array: pa.Array) -> pa.Array:
    kind = array.type
    extension = _extension(kind)
    if extension == UUID_EXTENSION or (
        pa.types.is_fixed_size_binary(kind) and kind.byte_width == 16
    ):
        return uuid_text(array)  # a fixed_size_binary[16] is a uuid (schema.sql_type_for)
    if extension == JSON_EXTENSION:
        return array.storage.cast(pa.string())
    if extension is not None or is_nested(kind) or pa.types.is_union(kind):
        return json_texts(array)
    if pa.types.is_duration(kind):
        return _python_column(array, _interval_value_text, pa.string())
    return array.cast(pa.string())


def _to_bytes(array: pa.Array) -> pa.Array:
    kind = array.type
    if _extension(kind) == UUID_EXTENSION:
        return array.storage.cast(pa.binary())
    if is_text(kind):
        return bytes_from_text(array)
    if is_bytes(kind):
        return array.cast(pa.binary())
    raise Unfit(f"{kind} values cannot be bytea")


def _to_uuid(array: pa.Array) -> pa.Array:
    kind = array.type
    if is_text(kind):
        return uuid_from_text(array)
    if is_bytes(kind):
        if not pa.types.is_fixed_size_binary(kind):
            lengths = pc.binary_length(array)
            wrong = pc.fill_null(pc.not_equal(lengths, 16), False)
            if pc.any(wrong).as_py():
                index = pc.index(wrong, True).as_py()
                raise Unfit(
                    f"{array[index].as_py()!r} is {lengths[index].as_py()} bytes, a uuid is 16",
                    index,
                )
        return pa.ExtensionArray.from_storage(pa.uuid(), array.cast(pa.binary(16)))
    raise Unfit(f"{kind} values cannot be a uuid")


def _to_json(array: pa.Array) -> pa.Array:
    kind = array.type
    if is_text(kind):
        return json_from_text(array)
    return pa.ExtensionArray.from_storage(pa.json_(), json_texts(array))


def single(array: pa.Array, index: int) -> pa.Array:
    """Row ``index`` alone, compacted (a slice of a nested array keeps all its children, and
    a cast converts them all)."""
    try:
        return array.take(pa.array([index], pa.int64()))
    except pa.ArrowNotImplementedError:  # views cannot be taken from
        return array.slice(index, 1)


def _first_true(mask: pa.Array) -> int | None:
    mask = pc.fill_null(mask, False)
    return int(pc.index(mask, True).as_py()) if pc.any(mask).as_py() else None


def _python_column(array: pa.Array, convert: Callable[[Any], Any], kind: pa.DataType) -> pa.Array:
    """``convert`` applied to every non-null value, in Python (types that are not hot)."""
    out: list[Any] = []
    for index, value in enumerate(array.to_pylist()):
        if value is None:
            out.append(None)
            continue
        try:
            out.append(convert(value))
        except Unfit as exc:
            raise Unfit(exc.reason, index) from None
    return pa.array(out, kind)


# -- uuid -----------------------------------------------------------------------------


def uuid_text(array: pa.Array) -> pa.Array:
    """A uuid (or fixed_size_binary[16]) array as PostgreSQL's lower-case text."""
    storage = array.storage if _extension(array.type) == UUID_EXTENSION else array
    raw = buffers.values(storage, "u1", lanes=16)
    digits = _HEX_PAIRS[raw].reshape(len(storage), 32)
    text = np.insert(digits, _UUID_DASHES, ord("-"), axis=1)  # (rows, 36)
    offsets = pa.py_buffer(np.arange(0, 36 * len(storage) + 1, 36, dtype=np.int32))
    plain = pa.StringArray.from_buffers(
        len(storage), offsets, pa.py_buffer(np.ascontiguousarray(text))
    )
    return plain if not storage.null_count else pc.if_else(pc.is_valid(storage), plain, None)


def uuid_from_text(array: pa.Array) -> pa.Array:
    text = array.cast(pa.string())
    digits = pc.replace_substring_regex(text, r"^\{(.*)\}$", r"\1")
    digits = pc.replace_substring(digits, "-", "")
    bad = _first_true(pc.invert(pc.match_substring_regex(digits, r"^[0-9a-fA-F]{32}$")))
    if bad is not None:
        raise Unfit(f"{text[bad].as_py()!r} is not a uuid", bad)
    raw = _unhex(pc.fill_null(digits, "0" * 32))
    storage = pa.FixedSizeBinaryArray.from_buffers(pa.binary(16), len(text), [None, raw])
    if text.null_count:
        storage = pc.if_else(pc.is_valid(text), storage, None)
    return pa.ExtensionArray.from_storage(pa.uuid(), storage)


def _unhex(text: pa.Array) -> pa.Buffer:
    """The bytes that a string array of hex digits (an even number per value) spells."""
    offsets, data = buffers.text(text)
    chars = data[int(offsets[0]) : int(offsets[-1])]
    nibbles = _NIBBLE[chars].reshape(-1, 2)
    return pa.py_buffer(np.ascontiguousarray((nibbles[:, 0] << 4) | nibbles[:, 1]))


# -- bytea ----------------------------------------------------------------------------


def bytes_text(array: pa.Array) -> pa.Array:
    """A binary array as PostgreSQL's hex text: ``\\x`` and two lower-case digits a byte."""
    plain = array.cast(pa.binary())
    offsets, data = buffers.text(plain)
    start = int(offsets[0])
    digits = _HEX_PAIRS[data[start : int(offsets[-1])]].reshape(-1)
    hexed = pa.LargeStringArray.from_buffers(
        len(plain),
        pa.py_buffer((offsets - start) * 2),
        pa.py_buffer(np.ascontiguousarray(digits)),
    )
    prefix, nothing = pa.scalar("\\x", pa.large_string()), pa.scalar("", pa.large_string())
    out = pc.binary_join_element_wise(prefix, hexed, nothing)
    out = out.cast(pa.string())
    return out if not plain.null_count else pc.if_else(pc.is_valid(plain), out, None)


def bytes_from_text(array: pa.Array) -> pa.Array:
    text = array.cast(pa.string())
    bad = _first_true(pc.invert(pc.match_substring_regex(text, r"^\\x([0-9a-fA-F]{2})*$")))
    if bad is not None:
        raise Unfit(
            f"{text[bad].as_py()!r} is not bytea text (\\x followed by hex digit pairs)", bad
        )
    digits = pc.utf8_slice_codeunits(pc.fill_null(text, "\\x"), 2)
    offsets, _ = buffers.text(digits)
    data = _unhex(digits)
    halves = ((offsets - offsets[0]) // 2).astype(np.int32)
    out = pa.Array.from_buffers(pa.binary(), len(text), [None, pa.py_buffer(halves), data])
    return out if not text.null_count else pc.if_else(pc.is_valid(text), out, None)


# -- time -----------------------------------------------------------------------------

_TIME = r"^(?P<h>[01]\d|2[0-3]):(?P<m>[0-5]\d)(?::(?P<s>[0-5]\d)(?:\.(?P<f>\d{1,6}))?)?$"


def time_from_text(array: pa.Array) -> pa.Array:
    text = array.cast(pa.string())
    parts = pc.extract_regex(text, _TIME)
    bad = _first_true(pc.and_(pc.is_valid(text), pc.is_null(parts)))
    if bad is not None:
        raise Unfit(f"{text[bad].as_py()!r} is not a time (HH:MM:SS.ffffff)", bad)

    def number(name: str, width: int = 0) -> np.ndarray[Any, Any]:
        field = pc.fill_null(pc.struct_field(parts, name), "")
        if width:
            field = pc.utf8_rpad(field, width, "0")
        field = pc.if_else(pc.equal(field, ""), "0", field)
        return np.asarray(field.cast(pa.int64()).to_numpy(zero_copy_only=False))

    micros = (number("h") * 3600 + number("m") * 60 + number("s")) * 1_000_000 + number("f", 6)
    return pa.array(micros, pa.time64("us"), mask=~buffers.validity(text))


# -- interval -------------------------------------------------------------------------

_PG_INTERVAL = re.compile(
    r"^(?:(?P<days>[+-]?\d+) days? ?)?(?:(?P<sign>[+-])?(?P<h>\d+):(?P<m>\d{2})(?::(?P<s>\d{2})"
    r"(?:\.(?P<f>\d{1,6}))?)?)?$"
)
_ISO_INTERVAL = re.compile(
    r"^(?P<sign>[+-])?P(?!$)(?:(?P<w>\d+)W)?(?:(?P<d>\d+)D)?"
    r"(?:T(?=\d)(?:(?P<h>\d+)H)?(?:(?P<m>\d+)M)?(?:(?P<s>\d+)(?:[.,](?P<f>\d{1,6}))?S)?)?$"
)


def interval_micros(text: str) -> int:
    """The microseconds of an interval's text (module docstring), or :class:`Unfit`."""
    cleaned = text.strip()
    pg = _PG_INTERVAL.match(cleaned)
    if pg and cleaned and (pg["days"] is not None or pg["h"] is not None):
        days = int(pg["days"] or 0)
        clock = (int(pg["h"] or 0) * 60 + int(pg["m"] or 0)) * 60 + int(pg["s"] or 0)
        clock_us = clock * 1_000_000 + int((pg["f"] or "").ljust(6, "0"))
        return days * _DAY_US + (-clock_us if pg["sign"] == "-" else clock_us)
    iso = _ISO_INTERVAL.match(cleaned.upper())
    if iso:
        days = int(iso["w"] or 0) * 7 + int(iso["d"] or 0)
        clock = (int(iso["h"] or 0) * 60 + int(iso["m"] or 0)) * 60 + int(iso["s"] or 0)
        total = days * _DAY_US + clock * 1_000_000 + int((iso["f"] or "").ljust(6, "0"))
        return -total if iso["sign"] == "-" else total
    if re.search(r"(?i)mon|year|\dY|P\d+M", cleaned):
        raise Unfit(f"{text!r} counts months or years, which have no fixed length")
    raise Unfit(f"{text!r} is not an interval (e.g. '1 day 02:00:00', '36:00:00', 'PT1H30M')")


def interval_from_text(array: pa.Array) -> pa.Array:
    return _python_column(array.cast(pa.string()), interval_micros, pa.int64()).cast(
        pa.duration("us")
    )


def interval_text(micros: int) -> str:
    """PostgreSQL's text of a fixed-length interval: ``[-]H:MM:SS[.ffffff]``."""
    sign = "-" if micros < 0 else ""
    seconds, fraction = divmod(abs(micros), 1_000_000)
    minutes, seconds = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    text = f"{sign}{hours:02d}:{minutes:02d}:{seconds:02d}"
    return f"{text}.{fraction:06d}".rstrip("0") if fraction else text


def _interval_value_text(value: timedelta) -> str:
    return interval_text(_micros(value))


def _micros(value: timedelta) -> int:
    return (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds


# -- JSON -----------------------------------------------------------------------------


# \u0000 as an escape (not an escaped backslash followed by "u0000"): jsonb refuses it
_NUL_ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number PostgreSQL accepts")


def _check_json(text: str) -> str:
    try:
        json.loads(text, parse_constant=_no_constant, parse_float=str, parse_int=str)
    except ValueError as exc:
        raise Unfit(f"{_short(text)!r} is not JSON ({exc})") from None
    if "\\u0000" in text and _NUL_ESCAPE.search(text):
        raise Unfit(f"{_short(text)!r}: JSON with \\u0000 cannot be stored as jsonb")
    return text


def _short(text: str) -> str:
    return text if len(text) <= 80 else text[:77] + "..."


def json_from_text(array: pa.Array) -> pa.Array:
    text = array.cast(pa.string())
    for index, value in enumerate(text.to_pylist()):
        if value is not None:
            try:
                _check_json(value)
            except Unfit as exc:
                raise Unfit(exc.reason, index) from None
    return pa.ExtensionArray.from_storage(pa.json_(), text)


def json_texts(array: pa.Array) -> pa.Array:
    """Every value of ``array`` as JSON text (null stays null): see the module docstring."""
    try:
        parts = _fragments(array)
    except (ValueError, OverflowError) as exc:  # Unfit, or a value Python cannot hold
        if isinstance(exc, Unfit) and exc.index is not None:
            raise
        for index in range(len(array)):  # which row: render each alone
            try:
                _fragments(single(array, index))
            except (ValueError, OverflowError) as alone:
                raise Unfit(str(alone), index) from None
        raise Unfit(str(exc)) from None
    valid = buffers.validity(array) if array.null_count else None
    return pa.array(
        [p if valid is None or valid[i] else None for i, p in enumerate(parts)], pa.string()
    )


def _fragments(array: pa.Array) -> list[str]:
    """Each value of ``array`` as a JSON fragment (``null`` where null)."""
    array = decode(array)
    kind = array.type
    extension = _extension(kind)
    n = len(array)
    if extension == JSON_EXTENSION:
        return [v if v is not None else "null" for v in array.storage.to_pylist()]
    if extension == UUID_EXTENSION:
        return [_quoted(v) for v in uuid_text(array).to_pylist()]
    if extension is not None:
        return _fragments(array.storage)
    if pa.types.is_null(kind):
        return ["null"] * n
    if getattr(kind, "unit", None) == "ns":  # timestamp, time or duration: to microseconds
        array = _without_nanoseconds(array)
        kind = array.type
    if pa.types.is_struct(kind):
        names = [json.dumps(field.name, ensure_ascii=False) for field in kind]
        children = [_fragments(child) for child in array.flatten()]
        valid = buffers.validity(array)
        return [
            "{"
            + ",".join(f"{name}:{child[i]}" for name, child in zip(names, children, strict=True))
            + "}"
            if valid[i]
            else "null"
            for i in range(n)
        ]
    if pa.types.is_map(kind):
        return _map_fragments(array)
    if is_nested(kind):
        lengths = pc.fill_null(pc.list_value_length(array), 0).to_numpy(zero_copy_only=False)
        items = _fragments(pc.list_flatten(array))
        valid = buffers.validity(array)
        out, at = [], 0
        for i in range(n):
            count = int(lengths[i])
            out.append("[" + ",".join(items[at : at + count]) + "]" if valid[i] else "null")
            at += count
        return out
    if pa.types.is_union(kind):
        return [_python_fragment(v) for v in array.to_pylist()]
    if pa.types.is_decimal(kind):
        return [v if v is not None else "null" for v in array.cast(pa.string()).to_pylist()]
    if is_bytes(kind):
        return [_quoted(v) for v in bytes_text(array).to_pylist()]
    if pa.types.is_time(kind):
        return [_quoted(v) for v in array.cast(pa.time64("us")).cast(pa.string()).to_pylist()]
    if pa.types.is_timestamp(kind) and kind.tz is not None:
        utc = array.cast(pa.timestamp("us", "UTC"))
        return [
            _quoted(
                None
                if v is None
                else v.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="microseconds")
                + "+00:00"
            )
            for v in utc.to_pylist()
        ]
    return [_python_fragment(v) for v in array.to_pylist()]


def _without_nanoseconds(array: pa.Array) -> pa.Array:
    kind = array.type
    if pa.types.is_timestamp(kind):
        wanted = pa.timestamp("us", kind.tz)
    elif pa.types.is_time(kind):
        wanted = pa.time64("us")
    else:
        wanted = pa.duration("us")
    try:
        return array.cast(wanted)
    except pa.ArrowInvalid:
        raise Unfit("a value in it has nanoseconds; PostgreSQL keeps microseconds") from None


def _map_fragments(array: pa.Array) -> list[str]:
    offsets = np.asarray(array.offsets.to_numpy(zero_copy_only=False), dtype=np.int64)
    first, last = int(offsets[0]), int(offsets[-1])
    keys = array.keys.slice(first, last - first)
    values = _fragments(array.items.slice(first, last - first))
    textual = is_text(decode(keys).type)
    shown = _fragments(keys)
    valid = buffers.validity(array)
    out = []
    for i in range(len(array)):
        if not valid[i]:
            out.append("null")
            continue
        entries = range(int(offsets[i]) - first, int(offsets[i + 1]) - first)
        if textual:
            out.append("{" + ",".join(f"{shown[j]}:{values[j]}" for j in entries) + "}")
        else:
            out.append("[" + ",".join(f"[{shown[j]},{values[j]}]" for j in entries) + "]")
    return out


def _quoted(text: str | None) -> str:
    if text is None:
        return "null"
    if "\x00" in text:
        raise Unfit(f"{_short(text)!r} holds a NUL character, which jsonb cannot")
    return json.dumps(text, ensure_ascii=False)


def _python_fragment(value: Any) -> str:
    """A Python value (from ``to_pylist``) as a JSON fragment."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise Unfit(f"{value} is not a number JSON can hold")
        return repr(value)
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise Unfit(f"{value} is not a number JSON can hold")
        return str(value)
    if isinstance(value, str):
        return _quoted(value)
    if isinstance(value, bytes):
        return _quoted("\\x" + value.hex())
    if isinstance(value, UUID):
        return _quoted(str(value))
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            utc = value.astimezone(UTC).replace(tzinfo=None)
            return _quoted(utc.isoformat(timespec="microseconds") + "+00:00")
        return _quoted(value.isoformat(timespec="microseconds"))
    if isinstance(value, date):
        return _quoted(value.isoformat())
    if isinstance(value, time):
        return _quoted(value.isoformat(timespec="microseconds"))
    if isinstance(value, timedelta):
        return _quoted(interval_text(_micros(value)))
    if isinstance(value, dict):
        return (
            "{"
            + ",".join(f"{_quoted(str(k))}:{_python_fragment(v)}" for k, v in value.items())
            + "}"
        )
    if isinstance(value, list | tuple):
        return "[" + ",".join(_python_fragment(v) for v in value) + "]"
    raise Unfit(f"{value!r} has no JSON form")


def json_text(value: Any) -> str:
    """A Python value (parsed JSON, decimals as :class:`~decimal.Decimal`) as JSON text."""
    return _python_fragment(value)
