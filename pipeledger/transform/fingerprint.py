"""Row fingerprints: a stable 64-bit hash of a row's values, stored with each target row.

A backfill fetches the fingerprints of the target rows in its range and stages only the
source rows whose fingerprint is not among them, so reprocessing identical data costs a
read of the source, not a copy of it into the warehouse (see ``load.loader``).

The definition is fixed (it must agree across processes, machines and releases):

* every non-null value becomes one 64-bit word: integers, dates and timestamps as their
  signed integer, floats as the bits of the float64, booleans as 0/1, decimals from their
  two 64-bit halves (the unscaled value), text from its UTF-8 bytes: the mixed length plus
  the sum of its 8-byte little-endian words (zero-padded), each mixed with its position,
  mixed once more;
* the types added later follow the same rules: a time is its microseconds since midnight
  and an interval its microseconds (signed integers); bytea is its bytes and jsonb the
  UTF-8 bytes of its JSON text (as pipeledger writes it: ``pipeledger/common/values.py``), both as
  text is; a uuid is its 16 bytes as two little-endian 64-bit words, the first mixed with
  a seed of its own, plus the second (as a decimal is); a decimal wider than 38 digits
  (decimal256) is the text Arrow prints for it (its digits with the column's scale), as
  text is;
* the word is mixed with a seed derived from the column's name and SQL type, so swapped
  values differ, and a column whose type changed (a scale, say) is compared in full;
* the row's fingerprint mixes the sum of its columns' words. A null adds nothing, so a
  column added later (null in the old rows) leaves the old rows' fingerprints as they were.

Fingerprints are taken of conformed batches (``transform/conform.py``), so a value that
arrives dictionary-encoded, as a string view or a large string, a uuid as a
fixed_size_binary[16] or the uuid extension, has the fingerprint of the same value plain.

"Mixed" is MurmurHash3's 64-bit finaliser. A fingerprint that does not match costs only
speed (the row is staged and compared in full). Two different rows of one key with the same
64 bits would hide a change from a backfill: for data nobody crafted, about 2^-64 per changed
row. The function is not keyed, so it does not resist rows crafted to collide; that only
affects backfills (``backfill --full-compare`` compares every row).
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeledger.common import buffers as buffers
from pipeledger.common.columns import ROW_HASH_COLUMN, UUID_EXTENSION, Column

_U64 = np.uint64
_M1 = _U64(0xFF51AFD7ED558CCD)
_M2 = _U64(0xC4CEB9FE1A85EC53)
_ROUND = _U64(0x9E3779B97F4A7C15)
_SHIFT = _U64(33)
_TEXT_SEED = _U64(0x243F6A8885A308D3)
_DECIMAL_SEED = _U64(0x13198A2E03707344)
_UUID_SEED = _U64(0xA4093822299F31D0)
_WORDS_PER_PASS = 1 << 18
_SHORT_WORDS = 4  # values of up to 32 bytes take the simple path
# the low ``n`` bytes of a little-endian word, for n = 0..8
_BYTES = np.array([(1 << (8 * n)) - 1 for n in range(9)], dtype=_U64)

Words = np.ndarray[tuple[int], np.dtype[np.uint64]]


def _mix(h: Words) -> Words:
    """MurmurHash3's 64-bit finaliser: every input bit affects every output bit."""
    h = h ^ (h >> _SHIFT)
    h = h * _M1
    h = h ^ (h >> _SHIFT)
    h = h * _M2
    return h ^ (h >> _SHIFT)


def _seed(column: Column) -> np.uint64:
    text = f"{column.name}\0{column.sql_type}".encode()
    return _U64(int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "little"))


def _text_words(array: pa.Array) -> Words:
    n = len(array)
    offsets, data = buffers.text(array)
    padded = np.concatenate([data[: int(offsets[-1])], np.zeros(8, np.uint8)])
    # the 8 bytes starting at every byte offset, as one unaligned little-endian word each
    words = np.ndarray((len(padded) - 7,), dtype="<u8", buffer=padded, strides=(1,))
    starts, lengths = offsets[:-1], offsets[1:] - offsets[:-1]
    count = (lengths + 7) // 8
    total = np.zeros(n, dtype=_U64)
    for first, last in _passes(count):
        total[first:last] = _word_sums(words, starts[first:last], lengths[first:last])
    return _mix(_mix(lengths.astype(_U64) ^ _TEXT_SEED) + total)


def _passes(count: np.ndarray[Any, Any]) -> list[tuple[int, int]]:
    """Row ranges holding about :data:`_WORDS_PER_PASS` words each (bounded memory)."""
    ends = np.cumsum(count)
    cuts = np.searchsorted(ends, np.arange(_WORDS_PER_PASS, int(ends[-1]), _WORDS_PER_PASS))
    bounds = [0, *sorted({int(c) + 1 for c in cuts}), len(count)]
    return [(a, b) for a, b in itertools.pairwise(bounds) if b > a]


def _word_sums(words: Words, starts: np.ndarray[Any, Any], lengths: np.ndarray[Any, Any]) -> Words:
    """Per value: the sum of its 8-byte words, each mixed with its position in the value."""
    count = (lengths + 7) // 8
    longest = int(count.max()) if len(count) else 0
    places = _mix(np.arange(longest, dtype=_U64) * _ROUND + _TEXT_SEED)  # word k's tag
    if longest <= _SHORT_WORDS:  # codes, names: a few passes over every value
        sums = np.zeros(len(lengths), dtype=_U64)
        last = len(words) - 1
        for k in range(longest):
            left = np.clip(lengths - 8 * k, 0, 8)
            word = words[np.minimum(starts + 8 * k, last)] & _BYTES[left]
            sums += np.where(left > 0, _mix(word ^ places[k]), _U64(0))
        return sums
    row = np.repeat(np.arange(len(lengths)), count)
    first = np.cumsum(count) - count
    k = np.arange(int(count.sum())) - np.repeat(first, count)  # the word's place in its value
    left = np.minimum(lengths[row] - 8 * k, 8)
    word = words[starts[row] + 8 * k] & _BYTES[left]  # bytes past the value are zeroed
    sums = np.zeros(len(lengths), dtype=_U64)
    filled = count > 0
    sums[filled] = np.add.reduceat(_mix(word ^ places[k]), first[filled])
    return sums


def _decimal_words(array: pa.Array) -> Words:
    if array.type.byte_width != 16:
        return _text_words(pc.cast(array, pa.string()))
    halves = buffers.values(array, "<u8", lanes=2)  # low, high
    low: Words = np.ascontiguousarray(halves[:, 0])
    high: Words = np.ascontiguousarray(halves[:, 1])
    return _mix(low ^ _DECIMAL_SEED) + high


def _uuid_words(array: pa.Array) -> Words:
    halves = buffers.values(array.storage, "<u8", lanes=2)  # bytes 0-7, bytes 8-15
    first: Words = np.ascontiguousarray(halves[:, 0])
    second: Words = np.ascontiguousarray(halves[:, 1])
    return _mix(first ^ _UUID_SEED) + second


def _words(array: pa.Array) -> Words:
    """One 64-bit word per value (arbitrary where the value is null)."""
    kind = array.type
    if isinstance(kind, pa.BaseExtensionType):
        if kind.extension_name == UUID_EXTENSION:
            return _uuid_words(array)
        return _words(array.storage)  # jsonb: its JSON text
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return _text_words(array)
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
        return _text_words(array)
    if pa.types.is_decimal(kind):
        return _decimal_words(array)
    if pa.types.is_boolean(kind):
        filled = pc.fill_null(array, False).to_numpy(zero_copy_only=False)
        return np.asarray(filled, dtype=_U64)
    if pa.types.is_floating(kind):
        values = buffers.values(array, f"<f{kind.bit_width // 8}").astype(np.float64)
        return values.view(_U64)
    if pa.types.is_integer(kind) or pa.types.is_temporal(kind):
        signed = "u" if pa.types.is_unsigned_integer(kind) else "i"
        width = kind.bit_width // 8
        return buffers.values(array, f"<{signed}{width}").astype(np.int64).view(_U64)
    return _text_words(pc.cast(array, pa.string()))


def row_hashes(batch: pa.RecordBatch, columns: Sequence[Column]) -> pa.Array:
    """The fingerprint of each row of ``batch`` over ``columns``, as int64."""
    total = np.zeros(batch.num_rows, dtype=_U64)
    if batch.num_rows == 0:
        return buffers.int64s(total.view(np.int64))
    for column in columns:
        array = batch.column(column.name)
        word = _mix(_words(array) ^ _seed(column))
        if array.null_count:
            word = np.where(buffers.validity(array), word, _U64(0))
        total = total + word
    return buffers.int64s(_mix(total).view(np.int64))


def with_row_hash(batch: pa.RecordBatch, columns: Sequence[Column]) -> pa.RecordBatch:
    """``batch`` with its fingerprints as one more column, :data:`ROW_HASH_COLUMN`."""
    return batch.append_column(ROW_HASH_COLUMN, row_hashes(batch, columns))
