"""PostgreSQL's binary COPY format, written from Arrow batches with numpy (no Python per row).

A text (CSV) COPY makes the server parse every value: timestamps and numerics most of all.
In binary the server copies integers as they are and the client encodes whole columns at
once, so a load spends less CPU on both sides of the wire (two cores shared by both).

Covered: smallint, integer, bigint, real, double precision, boolean, text, date,
timestamp(tz) in microseconds, numeric(p, s) with p <= 38 (decimal128), bytea, uuid, jsonb,
time and interval. :func:`supports` says whether a batch's columns are all covered; the
caller uses CSV otherwise (numeric wider than 38 digits).

The format (PostgreSQL docs, "COPY: Binary Format"): a header, then per row a 16-bit field
count and per field a 32-bit length (-1 for NULL) and the value in the type's binary send
format, big-endian; a trailer of -1. Dates count days and timestamps microseconds from
2000-01-01. A numeric is its digit count, weight, sign and display scale, then base-10000
digits, most significant first (here a fixed number per column: the server strips zeros).
bytea is its bytes, a uuid its 16 bytes, jsonb a version byte (1) and the JSON text, a time
its microseconds since midnight (int64), an interval its microseconds (int64), days and
months (int32 each; here always 0: pipeledger's intervals are fixed lengths).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeledger.common import buffers as buffers
from pipeledger.errors import SourceError

HEADER = b"PGCOPY\n\xff\r\n\x00" + bytes(8)  # signature, flags, header extension length
TRAILER = b"\xff\xff"
_DAYS_2000 = 10_957  # 1970-01-01 .. 2000-01-01
_MICROS_2000 = _DAYS_2000 * 86_400_000_000
_NUMERIC_NEGATIVE = 0x4000
_MAX_PRECISION = 18  # unscaled values fit in an int64
_WIDE_PRECISION = 38  # decimal128: unscaled values in two int64 halves
_DAY_MICROS = 86_400_000_000
_JSONB_VERSION = pa.scalar(b"\x01", pa.large_binary())
_NOTHING = pa.scalar(b"", pa.large_binary())  # the separator when joining a row's fields

Array = np.ndarray[Any, Any]
_FIXED = {
    pa.int16(): ">i2",
    pa.int32(): ">i4",
    pa.int64(): ">i8",
    pa.float32(): ">f4",
    pa.float64(): ">f8",
}


def supports(schema: pa.Schema) -> bool:
    return all(_supported(field.type) for field in schema)


def _supported(kind: pa.DataType) -> bool:
    if kind in _FIXED or pa.types.is_boolean(kind) or pa.types.is_date32(kind):
        return True
    if _variable(kind) or kind in (pa.uuid(), pa.json_()):
        return True
    if pa.types.is_timestamp(kind) or pa.types.is_time64(kind) or pa.types.is_duration(kind):
        return bool(kind.unit == "us")
    if not pa.types.is_decimal128(kind):
        return False
    return bool(kind.precision <= _WIDE_PRECISION and 0 <= kind.scale <= kind.precision)


def _variable(kind: pa.DataType) -> bool:
    """Text and bytes: sent as they are, each value with its length."""
    return bool(
        pa.types.is_string(kind)
        or pa.types.is_large_string(kind)
        or pa.types.is_binary(kind)
        or pa.types.is_large_binary(kind)
    )


class _Unrepresentable(ValueError):
    """A value the column's PostgreSQL type cannot hold (text COPY would be refused too)."""


def _big_endian(values: Array, dtype: str) -> Array:
    """(rows, width) bytes of ``values`` in the big-endian ``dtype``."""
    width = np.dtype(dtype).itemsize
    return np.ascontiguousarray(values.astype(dtype)).view(np.uint8).reshape(len(values), width)


def _check(array: pa.Array, bad: Array, what: str) -> None:
    """Refuse a batch in which a (non-null) value is ``bad``."""
    if array.null_count:
        bad = bad & buffers.validity(array)
    if bad.any():
        raise _Unrepresentable(f"{int(bad.sum())} value(s) {what}")


def _numeric(array: pa.Array) -> Array:
    """numeric(p, s) with a fixed digit count per column; one row of bytes per value."""
    precision, scale = array.type.precision, array.type.scale
    if precision > _MAX_PRECISION:
        return _small_wide_numeric(array) if _fits_int64(array) else _wide_numeric(array)
    halves = buffers.values(array, "<i8", lanes=2)
    unscaled = halves[:, 0]  # p <= 18: the low half holds it, the high half its sign
    lowest = unscaled == np.iinfo(np.int64).min  # np.abs cannot negate it
    too_wide = (halves[:, 1] != unscaled >> 63) | lowest | (np.abs(unscaled) >= 10**precision)
    _check(array, too_wide, f"with more digits than numeric({precision},{scale}) holds")
    whole, fraction = np.divmod(np.abs(unscaled), np.int64(10) ** scale)
    whole_groups, fraction_groups = -(-(precision - scale) // 4), -(-scale // 4)
    pad = 4 * fraction_groups - scale  # the last group is padded with zeros on the right
    out = np.empty((len(array), 4 + whole_groups + fraction_groups), dtype=">u2")
    out[:, 0] = whole_groups + fraction_groups
    out[:, 1] = (whole_groups - 1) & 0xFFFF
    out[:, 2] = np.where(unscaled < 0, _NUMERIC_NEGATIVE, 0)
    out[:, 3] = scale
    _base_10000(whole, out[:, 4 : 4 + whole_groups])
    if scale + pad <= _MAX_PRECISION:
        _base_10000(fraction * 10**pad, out[:, 4 + whole_groups :])
    else:  # fraction * 10**pad could overflow: take each group directly
        for j in range(fraction_groups):
            shift = 4 * (fraction_groups - 1 - j) - pad
            column = 4 + whole_groups + j
            if shift >= 0:
                out[:, column] = fraction // 10**shift % 10_000
            else:
                out[:, column] = fraction % 10 ** (4 + shift) * 10 ** (-shift)
    return out.view(np.uint8).reshape(len(array), -1)


def _fits_int64(array: pa.Array) -> bool:
    """Every value's unscaled magnitude, aligned to base-10000 groups, fits an int64: the
    usual case of a numeric(38, s) holding amounts (what CSV inference declares)."""
    halves = buffers.values(array, "<i8", lanes=2)
    unscaled = halves[:, 0]
    fits = (halves[:, 1] == unscaled >> 63) & (unscaled != np.iinfo(np.int64).min)
    if array.null_count:
        fits |= ~buffers.validity(array)
    if not fits.all():
        return False
    largest = int(np.abs(np.where(fits, unscaled, 0)).max()) if len(array) else 0
    return bool(largest <= np.iinfo(np.int64).max // 10 ** _pad(array.type.scale))


def _pad(scale: int) -> int:
    """Zeros appended to the fraction to fill its last base-10000 group."""
    return -scale % 4


def _small_wide_numeric(array: pa.Array) -> Array:
    """numeric(p, s) with p > 18 whose values all fit an int64 (:func:`_fits_int64`): as
    many base-10000 groups as this batch's largest value needs (the server strips leading
    zero groups anyway), computed in int64. Such a value cannot exceed the precision."""
    scale = array.type.scale
    unscaled = buffers.values(array, "<i8", lanes=2)[:, 0]
    if array.null_count:
        unscaled = np.where(buffers.validity(array), unscaled, 0)
    aligned = np.abs(unscaled) * np.int64(10 ** _pad(scale))
    fraction_groups = -(-scale // 4)
    largest = int(aligned.max()) if len(array) else 0
    groups = max(fraction_groups + 1, -(-len(str(largest)) // 4))
    out = np.empty((len(array), 4 + groups), dtype=">u2")
    out[:, 0] = groups
    out[:, 1] = (groups - fraction_groups - 1) & 0xFFFF
    out[:, 2] = np.where(unscaled < 0, _NUMERIC_NEGATIVE, 0)
    out[:, 3] = scale
    _base_10000(aligned, out[:, 4:])
    return out.view(np.uint8).reshape(len(array), -1)


def _wide_numeric(array: pa.Array) -> Array:
    """numeric(p, s) with 18 < p <= 38: the unscaled value is 128 bits, which numpy has no
    integer for. Its magnitude is cut into five 32-bit limbs (in 64-bit lanes, so a limb
    times 10**4 plus a carry never overflows); it is multiplied by 10**pad to align the
    fraction with base-10000 groups, then divided by 10**4 once per group."""
    precision, scale = array.type.precision, array.type.scale
    halves = buffers.values(array, "<u8", lanes=2)
    low, high = halves[:, 0], halves[:, 1]
    negative = (high >> np.uint64(63)).astype(bool)
    # the magnitude: two's complement negation of (high, low) where negative
    neg_low = ~low + np.uint64(1)
    neg_high = ~high + (neg_low == 0).astype(np.uint64)
    low = np.where(negative, neg_low, low)
    high = np.where(negative, neg_high, high)
    mask = np.uint64(0xFFFFFFFF)
    shift = np.uint64(32)
    limbs = [np.zeros(len(array), np.uint64), high >> shift, high & mask, low >> shift, low & mask]
    whole_groups, fraction_groups = -(-(precision - scale) // 4), -(-scale // 4)
    _limbs_times(limbs, 10 ** _pad(scale))
    groups = whole_groups + fraction_groups
    digits = np.empty((len(array), groups), dtype=np.uint64)
    for column in reversed(range(groups)):
        digits[:, column] = _limbs_divide(limbs, 10_000)
    # it fits if nothing is left above the groups and the top group has no more digits
    # than the precision leaves it (the groups may have room for up to 3 digits more)
    excess = 4 * whole_groups - (precision - scale)
    too_wide = digits[:, 0] >= 10 ** (4 - excess)
    for limb in limbs:
        too_wide |= limb != 0
    _check(array, too_wide, f"with more digits than numeric({precision},{scale}) holds")
    out = np.empty((len(array), 4 + groups), dtype=">u2")
    out[:, 0] = groups
    out[:, 1] = (whole_groups - 1) & 0xFFFF
    out[:, 2] = np.where(negative, _NUMERIC_NEGATIVE, 0)
    out[:, 3] = scale
    out[:, 4:] = digits
    return out.view(np.uint8).reshape(len(array), -1)


def _limbs_times(limbs: list[Array], factor: int) -> None:
    """Multiply the number in ``limbs`` (32-bit limbs, most significant first) in place."""
    carry = np.zeros(len(limbs[0]), np.uint64)
    for i in reversed(range(len(limbs))):
        value = limbs[i] * np.uint64(factor) + carry
        limbs[i] = value & np.uint64(0xFFFFFFFF)
        carry = value >> np.uint64(32)


def _limbs_divide(limbs: list[Array], divisor: int) -> Array:
    """Divide the number in ``limbs`` in place; return the remainder."""
    rest = np.zeros(len(limbs[0]), np.uint64)
    d = np.uint64(divisor)
    for i in range(len(limbs)):
        limbs[i], rest = np.divmod((rest << np.uint64(32)) | limbs[i], d)
    return rest


def _base_10000(values: Array, digits: Array) -> None:
    """Write ``values`` into the columns of ``digits``, most significant first."""
    rest = values
    for column in reversed(range(digits.shape[1])):
        rest, digits[:, column] = np.divmod(rest, 10_000)


def _fixed_bytes(array: pa.Array) -> Array:
    """(rows, width) big-endian bytes of every value (arbitrary under nulls)."""
    kind = array.type
    if kind in _FIXED:
        little = "<" + _FIXED[kind][1:]
        return _big_endian(buffers.values(array, little), _FIXED[kind])
    if pa.types.is_boolean(kind):
        flags = array.fill_null(False).to_numpy(zero_copy_only=False)
        return np.asarray(flags, dtype=np.uint8).reshape(-1, 1)
    if pa.types.is_date32(kind):
        days = buffers.values(array, "<i4").astype(np.int64) - _DAYS_2000
        _check(array, days <= np.iinfo(np.int32).min, "before PostgreSQL's first date")
        return _big_endian(days, ">i4")
    if pa.types.is_timestamp(kind):
        micros = buffers.values(array, "<i8")
        early = micros <= np.iinfo(np.int64).min + _MICROS_2000  # would wrap, or be -infinity
        _check(array, early, "before PostgreSQL's first timestamp")
        return _big_endian(micros - np.int64(_MICROS_2000), ">i8")
    if kind == pa.uuid():
        return buffers.values(array.storage, "u1", lanes=16)
    if pa.types.is_time64(kind):
        micros = buffers.values(array, "<i8")
        _check(array, (micros < 0) | (micros > _DAY_MICROS), "outside 00:00 to 24:00")
        return _big_endian(micros, ">i8")
    if pa.types.is_duration(kind):
        out = np.zeros((len(array), 16), np.uint8)  # microseconds, then 0 days and 0 months
        out[:, :8] = _big_endian(buffers.values(array, "<i8"), ">i8")
        return out
    return _numeric(array)


def encode(batch: pa.RecordBatch) -> memoryview:
    """Every row of ``batch`` as binary COPY tuples (without header and trailer): each
    column becomes one binary value per row (length, then data), and Arrow joins them row
    by row in C++."""
    n = batch.num_rows
    if not n:
        return memoryview(b"")
    count = _binary(np.tile(np.frombuffer(batch.num_columns.to_bytes(2, "big"), np.uint8), n), 2)
    fields = [count]
    for name, array in zip(batch.schema.names, batch.columns, strict=True):
        try:
            fields.append(_field(array))
        except _Unrepresentable as exc:
            raise SourceError(f"column {name!r}: {exc}") from None
    rows = pc.binary_join_element_wise(*fields, _NOTHING)
    offsets = np.frombuffer(rows.buffers()[1], dtype="<i8")
    start, end = int(offsets[rows.offset]), int(offsets[rows.offset + n])
    return memoryview(rows.buffers()[2])[start:end]


def _binary(flat: Array, width: int) -> pa.Array:
    """``flat`` bytes cut into values of ``width`` bytes, as a binary array (no copy)."""
    n = len(flat) // width
    offsets = pa.py_buffer(np.arange(0, (n + 1) * width, width, dtype=np.int64))
    data = pa.py_buffer(np.ascontiguousarray(flat))
    return pa.LargeBinaryArray.from_buffers(pa.large_binary(), n, [None, offsets, data])


def _field(array: pa.Array) -> pa.Array:
    """Per row: the 32-bit length (-1 for NULL) and the value's bytes."""
    n = len(array)
    valid = np.ones(n, bool) if not array.null_count else buffers.validity(array)
    if _variable(array.type):
        text = pc.fill_null(array.cast(pa.large_binary()), b"")
        lengths = pc.binary_length(text).to_numpy().astype(np.int64)
        prefix = _binary(_big_endian(np.where(valid, lengths, -1), ">i4").reshape(-1), 4)
        return pc.binary_join_element_wise(prefix, text, _NOTHING)
    if array.type == pa.json_():
        text = pc.fill_null(array.storage.cast(pa.large_binary()), b"")
        lengths = pc.binary_length(text).to_numpy().astype(np.int64) + 1  # the version byte
        prefix = _binary(_big_endian(np.where(valid, lengths, -1), ">i4").reshape(-1), 4)
        version = pc.if_else(pa.array(valid), _JSONB_VERSION, _NOTHING)
        return pc.binary_join_element_wise(prefix, version, text, _NOTHING)
    values = _fixed_bytes(array)
    width = values.shape[1]
    out = np.empty((n, 4 + width), dtype=np.uint8)
    out[:, :4] = _big_endian(np.where(valid, width, -1), ">i4")
    out[:, 4:] = values
    if valid.all():
        return _binary(out.reshape(-1), 4 + width)
    # a NULL is its length alone: drop the value bytes of null rows
    keep = np.ones((n, 4 + width), dtype=bool)
    keep[~valid, 4:] = False
    sizes = np.where(valid, 4 + width, 4)
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    data = pa.py_buffer(np.ascontiguousarray(out[keep]))
    return pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), n, [None, pa.py_buffer(offsets), data]
    )
