"""Row fingerprints: a stable 64-bit hash of a row's values, stored with each target row.

A backfill fetches the fingerprints of the target rows in its range and stages only the
source rows whose fingerprint is not among them, so reprocessing identical data costs a
read of the source, not a copy of it into the warehouse (see ``load.loader``).

The definition is fixed (it must agree across processes, machines and releases):

* every non-null value becomes one 64-bit word: integers, dates and timestamps as their
  signed integer (so an ``integer`` 5 and a ``bigint`` 5 agree), floats as the bits of the
  float64, booleans as 0/1, decimals from their two 64-bit halves, text from its UTF-8 bytes
  (its length, then 8-byte words, each mixed in; values over 256 bytes through BLAKE2b);
* the word is mixed with a seed derived from the column's name, so swapped values differ;
* the row's fingerprint mixes the sum of its columns' words. A null adds nothing, so a
  column added later (null in the old rows) leaves the old rows' fingerprints as they were.

A fingerprint that does not match costs only speed (the row is staged and compared in
full); only two different rows of one key with the same 64 bits could hide a change, at
odds of about 2^-64 per changed row.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeledger.schema import ROW_HASH_COLUMN

_U64 = np.uint64
_M1 = _U64(0xFF51AFD7ED558CCD)
_M2 = _U64(0xC4CEB9FE1A85EC53)
_ROUND = _U64(0x9E3779B97F4A7C15)
_SHIFT = _U64(33)
_TEXT_SEED = _U64(0x243F6A8885A308D3)
_DECIMAL_SEED = _U64(0x13198A2E03707344)
_INLINE_BYTES = 256
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


def _seed(name: str) -> np.uint64:
    return _U64(int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "little"))


def _fixed(array: pa.Array, dtype: str) -> np.ndarray:
    """The values buffer of a fixed-width array (what sits under a null is arbitrary)."""
    buffer = array.buffers()[1]
    if buffer is None:
        return np.zeros(len(array), dtype=dtype)
    values = np.frombuffer(buffer, dtype=dtype)
    return values[array.offset : array.offset + len(array)]


def _text_words(array: pa.Array) -> Words:
    large = pa.types.is_large_string(array.type) or pa.types.is_large_binary(array.type)
    n = len(array)
    buffers = array.buffers()
    offsets = np.frombuffer(buffers[1], dtype="<i8" if large else "<i4")
    offsets = offsets[array.offset : array.offset + n + 1].astype(np.int64)
    data = np.zeros(0, np.uint8) if buffers[2] is None else np.frombuffer(buffers[2], np.uint8)
    padded = np.concatenate([data[: int(offsets[-1])], np.zeros(8, np.uint8)])
    # the 8 bytes starting at every byte offset, as one unaligned little-endian word each
    words = np.ndarray((len(padded) - 7,), dtype="<u8", buffer=padded, strides=(1,))
    starts, lengths = offsets[:-1], offsets[1:] - offsets[:-1]
    h = _mix(lengths.astype(_U64) ^ _TEXT_SEED)
    inline = lengths <= _INLINE_BYTES
    longest = int(lengths[inline].max()) if inline.any() else 0
    for r in range((longest + 7) // 8):
        rows = np.nonzero(inline & (lengths > 8 * r))[0]
        left = np.minimum(lengths[rows] - 8 * r, 8)
        word = words[starts[rows] + 8 * r] & _BYTES[left]  # bytes past the value are zeroed
        h[rows] = _mix(h[rows] ^ word) + _ROUND
    for row in np.nonzero(~inline)[0]:
        start, end = int(starts[row]), int(offsets[row + 1])
        digest = hashlib.blake2b(padded[start:end].tobytes(), digest_size=8).digest()
        h[row] = h[row] ^ _U64(int.from_bytes(digest, "little"))
    return h


def _decimal_words(array: pa.Array) -> Words:
    if array.type.byte_width != 16:
        return _text_words(pc.cast(array, pa.string()))
    buffer = array.buffers()[1]
    halves = np.frombuffer(buffer, dtype=_U64).reshape(-1, 2)  # little-endian low, high
    halves = halves[array.offset : array.offset + len(array)]
    low: Words = np.ascontiguousarray(halves[:, 0])
    high: Words = np.ascontiguousarray(halves[:, 1])
    return _mix(low ^ _DECIMAL_SEED) + high


def _words(array: pa.Array) -> Words:
    """One 64-bit word per value (arbitrary where the value is null)."""
    kind = array.type
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
        values = _fixed(array, f"<f{kind.bit_width // 8}").astype(np.float64)
        return values.view(_U64)
    if pa.types.is_integer(kind) or pa.types.is_temporal(kind):
        signed = "u" if pa.types.is_unsigned_integer(kind) else "i"
        return _fixed(array, f"<{signed}{kind.bit_width // 8}").astype(np.int64).view(_U64)
    return _text_words(pc.cast(array, pa.string()))


def row_hashes(batch: pa.RecordBatch, columns: Sequence[str]) -> pa.Array:
    """The fingerprint of each row of ``batch`` over ``columns``, as int64."""
    total = np.zeros(batch.num_rows, dtype=_U64)
    if batch.num_rows == 0:
        return pa.array(total.view(np.int64))
    for name in columns:
        array = batch.column(name)
        word = _mix(_words(array) ^ _seed(name))
        if array.null_count:
            valid = array.is_valid().to_numpy(zero_copy_only=False)
            word = np.where(valid, word, _U64(0))
        total = total + word
    return pa.array(_mix(total).view(np.int64))


def with_row_hash(batch: pa.RecordBatch, columns: Sequence[str]) -> pa.RecordBatch:
    """``batch`` with its fingerprints as one more column, :data:`ROW_HASH_COLUMN`."""
    return batch.append_column(ROW_HASH_COLUMN, row_hashes(batch, columns))
