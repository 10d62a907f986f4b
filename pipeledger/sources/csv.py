"""CSV files (a path or a glob), streamed block by block with pyarrow's CSV reader.

Types: declared columns (and, after the first load, the target's columns) are read as
their type; pyarrow infers the others from the file's first block, with one exception:
a column pyarrow would read as floating point because its values have decimals
(``21168.23``) becomes an exact ``numeric(38, s)``, where ``s`` is the most decimals among
the file's first rows (up to :data:`BATCH_ROWS`, read as text to decide); a later value
with more decimals than that is refused, naming its row. Scientific notation (``1e10``), ``inf``,
``nan`` and numbers of more than 38 digits leave the column floating point, as does a
declared ``real`` or ``double precision``.

A field larger than a block (a JSON document, a long description) makes the reader start
the file again with four times the block, skipping the rows it already delivered.

Text is read as the source's ``encoding`` (UTF-8 by default; a byte-order mark is honoured):
a byte that does not decode stops the run naming the file, the line, the byte offset and
the encoding that reads it (:mod:`pipeledger.sources.encodings`), wherever in the file it
is. A column is never read as bytes: pyarrow infers a column of invalid UTF-8 as binary,
which here is that same error.
"""

from __future__ import annotations

import csv as pycsv
import re
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path
from typing import Any, TextIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from pipeledger.common import buffers
from pipeledger.common.columns import sql_type_for
from pipeledger.errors import SourceError
from pipeledger.sources import encodings
from pipeledger.sources.base import BATCH_ROWS, FileSource, ReadSpec, SourceBatch
from pipeledger.state.watermark import coerce, is_whole_day, window_mask

# pyarrow reads ~40 blocks ahead: small blocks keep memory low and flat whatever the file
# size (measured on 1M rows, a whole load: 8 MiB blocks 207 MB peak, 1 MiB 126 MB; reading
# alone: 256 KiB 84 MB, 128 KiB 74 MB at the same CPU time, 64 KiB 69 MB but more CPU)
BLOCK_BYTES = 128 << 10
MAX_BLOCK_BYTES = 1 << 30  # a field this large does not fit one Arrow string column anyway
_GROWTH = 4
DECIMAL_PRECISION = 38
_DECIMAL = r"^[+-]?(\d+\.?\d*|\.\d+)$"
# what pyarrow reads as null in typed columns ("nan" among them)
NULL_TOKENS = pa.array(pacsv.ConvertOptions().null_values, pa.string())
# ... of which these say "floating point" when a column is inferred
_NAN = re.compile(r"^[+-]?nan$", re.IGNORECASE)
_NOT_NULL_WHEN_INFERRING = pa.array(
    [t for t in pacsv.ConvertOptions().null_values if not _NAN.match(t)], pa.string()
)
_FIELD_LIMIT = (1 << 31) - 1  # Python's csv module refuses fields over 128 KiB by default


@dataclass
class _Plan:
    """How one file is read: the types given to pyarrow (declared ones, and the exact
    decimals inferred here), and the columns read as text for a type pyarrow cannot parse
    (their null words become null here; the transform converts them)."""

    types: dict[str, pa.DataType]
    exact: set[str] = field(default_factory=set)  # inferred as numeric(38, s)
    textual: set[str] = field(default_factory=set)
    block: int = BLOCK_BYTES


class CsvSource(FileSource):
    kind = "CSV"

    def __init__(
        self,
        pattern: Path,
        delimiter: str = ",",
        encoding: str = "utf-8",
        pipeline: str | None = None,
        only: Collection[str] | None = None,
    ) -> None:
        super().__init__(pattern, only)
        self.delimiter = delimiter
        self.encoding = encoding
        self.pipeline = pipeline  # named in messages that say what to set where
        self.text = _Text(delimiter, encodings.text_encoding(encoding))

    def schemas(self, spec: ReadSpec) -> list[pa.Schema]:
        out = []
        for path in self.files():
            opened = self._plan(path, spec) if path.stat().st_size else None
            if opened is not None:
                out.append(opened[1].schema)
        return out

    def read_file(self, path: Path, spec: ReadSpec) -> Iterator[SourceBatch]:
        if path.stat().st_size == 0:
            return
        opened = self._plan(path, spec)
        if opened is None:
            return
        plan, reader = opened
        first_row = 1
        for batch in self._decoded(self._coalesced(reader, plan, path, spec), path):
            batch = _convert(batch, plan)
            item = _in_window(batch, path, first_row, spec)
            first_row += batch.num_rows
            del batch  # while the rows in the window are used, the others are freed
            yield item

    def _decoded(self, batches: Iterator[pa.RecordBatch], path: Path) -> Iterator[pa.RecordBatch]:
        """``batches``, with a byte that does not decode reported as such (the reader
        transcoding from another encoding raises Python's error)."""
        try:
            yield from batches
        except UnicodeDecodeError:
            raise self._undecodable(path) from None

    def _undecodable(self, path: Path) -> SourceError:
        """The error for a file that does not decode (module docstring)."""
        message = encodings.explain(path, self.encoding, self.pipeline)
        return SourceError(message or f"{path}: not readable as {self.encoding} text")

    def _plan(self, path: Path, spec: ReadSpec) -> tuple[_Plan, pacsv.CSVStreamingReader] | None:
        """Open ``path`` for reading: decide the types of its columns (module docstring)."""
        try:
            return self._planned(path, spec)
        except UnicodeDecodeError:
            raise self._undecodable(path) from None

    def _planned(self, path: Path, spec: ReadSpec) -> tuple[_Plan, pacsv.CSVStreamingReader] | None:
        header = _header(path, self.text)
        if not header:
            return None
        plan = _Plan({})
        for name in header:
            if name in spec.column_types:
                kind = spec.column_types[name]
                plan.types[name] = _readable(kind)
                if plan.types[name] != kind and not pa.types.is_string(kind):
                    plan.textual.add(name)
        reader = self._open(path, spec, plan)
        if any(_is_bytes(f.type) for f in reader.schema):  # invalid UTF-8 (docstring)
            raise self._undecodable(path)
        floats = [
            f.name
            for f in reader.schema
            if pa.types.is_floating(f.type) and f.name not in plan.types
        ]
        if not floats:
            return plan, reader
        sample = self._sample(path, spec, plan, floats)
        for name in floats:
            exact = _exact_type(sample.column(name)) if sample is not None else None
            plan.types[name] = pa.float64() if exact is None else exact
            if exact is not None:
                plan.exact.add(name)
        return plan, self._open(path, spec, plan)

    def _sample(self, path: Path, spec: ReadSpec, plan: _Plan, names: list[str]) -> pa.Table | None:
        """The first rows of the file (up to :data:`BATCH_ROWS`), ``names`` read as text."""
        types = {**plan.types, **dict.fromkeys(names, pa.string())}
        reader = self._open(path, spec, _Plan(types, block=plan.block))
        batches: list[pa.RecordBatch] = []
        rows = 0
        while rows < BATCH_ROWS:
            try:
                batch = reader.read_next_batch()
            except StopIteration:
                break
            except (pa.ArrowInvalid, UnicodeDecodeError):
                break  # a large field or a bad row further on: the rows so far decide
            batches.append(batch)
            rows += batch.num_rows
        return pa.Table.from_batches(batches) if batches else None

    def _coalesced(
        self, reader: pacsv.CSVStreamingReader, plan: _Plan, path: Path, spec: ReadSpec
    ) -> Iterator[pa.RecordBatch]:
        """Small parsed blocks (small blocks keep pyarrow's read-ahead memory low) joined
        into batches of about ``BATCH_ROWS`` rows (fewer, larger batches downstream). A
        field larger than a block: the file is read again with larger blocks, and the rows
        already read are skipped. The blocks are freed before their batch is used: memory
        holds one copy of the rows."""
        pending: list[pa.RecordBatch] = []
        rows = read = skip = 0
        while True:
            try:
                batch = reader.read_next_batch()
            except StopIteration:
                break
            except pa.ArrowInvalid as exc:
                if not _straddles(exc):
                    raise self._explain(path, spec, exc, plan) from None
                pinned = {f.name: f.type for f in reader.schema}  # the types read so far
                plan = _Plan(pinned, plan.exact, plan.textual, _grown(path, plan.block))
                reader = self._open(path, spec, plan)
                skip = read
                continue
            if skip:
                dropped = min(skip, batch.num_rows)
                skip -= dropped
                batch = batch.slice(dropped)
                if not batch.num_rows:
                    continue
            read += batch.num_rows
            pending.append(batch)
            rows += batch.num_rows
            del batch  # held by pending only: freed once combined
            if rows >= BATCH_ROWS:
                combined, pending, rows = _combine(pending), [], 0
                yield combined
        if pending:
            combined, pending = _combine(pending), []
            yield combined

    def _open(self, path: Path, spec: ReadSpec, plan: _Plan) -> pacsv.CSVStreamingReader:
        """A streaming reader of ``path`` with ``plan``'s types and block size (grown, and
        kept in ``plan``, while the first block cannot hold a row)."""
        while True:
            try:
                return pacsv.open_csv(
                    path,
                    read_options=pacsv.ReadOptions(
                        block_size=plan.block, use_threads=True, encoding=self._arrow_encoding
                    ),
                    parse_options=pacsv.ParseOptions(
                        delimiter=self.delimiter, newlines_in_values=True
                    ),
                    convert_options=pacsv.ConvertOptions(
                        column_types=plan.types,
                        strings_can_be_null=False,
                        quoted_strings_can_be_null=False,
                    ),
                )
            except pa.ArrowInvalid as exc:
                if not _straddles(exc):
                    raise self._explain(path, spec, exc, plan) from None
                plan.block = _grown(path, plan.block)

    @property
    def _arrow_encoding(self) -> str:
        """What pyarrow's reader is told: UTF-8 it reads itself (a BOM skipped); any other
        encoding it transcodes with Python's codec."""
        return "utf8" if encodings.is_utf8(self.encoding) else self.encoding

    def _explain(
        self, path: Path, spec: ReadSpec, exc: pa.ArrowInvalid, plan: _Plan
    ) -> SourceError:
        text = str(exc)
        try:
            if "invalid UTF8" in text:
                return self._undecodable(path)
            if "Expected" in text and "columns" in text:
                problem = _field_count_problem(path, self.text)
                return SourceError(problem or f"{path}: {text}")
            return SourceError(_conversion_problem(path, self.text, plan, text))
        except UnicodeDecodeError:  # Python's reader met the byte first
            return self._undecodable(path)


@dataclass(frozen=True)
class _Text:
    """How Python's csv reader (for messages) reads the files: delimiter and codec."""

    delimiter: str
    encoding: str


def _is_bytes(kind: pa.DataType) -> bool:
    return bool(pa.types.is_binary(kind) or pa.types.is_large_binary(kind))


def _straddles(exc: pa.ArrowInvalid) -> bool:
    return "straddl" in str(exc)


def _grown(path: Path, block: int) -> int:
    if block >= MAX_BLOCK_BYTES:
        raise SourceError(
            f"{path}: a row is larger than {MAX_BLOCK_BYTES >> 20} MiB; split the field or the file"
        )
    return min(block * _GROWTH, MAX_BLOCK_BYTES)


def _readable(kind: pa.DataType) -> pa.DataType:
    """The type pyarrow's CSV reader reads a declared column as: text for the types it
    cannot parse (converted by the transform: ``pipeledger/common/values.py``)."""
    if isinstance(kind, pa.BaseExtensionType) or pa.types.is_decimal256(kind):
        return pa.string()
    if pa.types.is_binary(kind) or pa.types.is_time(kind) or pa.types.is_duration(kind):
        return pa.string()
    return kind


def _exact_type(text: pa.Array) -> pa.DataType | None:
    """``numeric(38, s)`` for a column of plain decimals, else None (floating point)."""
    present = text.filter(pc.invert(pc.is_in(text, _NOT_NULL_WHEN_INFERRING)))
    if not len(present) or not pc.all(pc.match_substring_regex(present, _DECIMAL)).as_py():
        return None
    digits = pc.replace_substring_regex(present, r"^[+-]?0*", "")
    dot = pc.find_substring(digits, ".")
    length = pc.utf8_length(digits)
    has_dot = pc.greater_equal(dot, 0)
    scale = pc.max(pc.if_else(has_dot, pc.subtract(pc.subtract(length, dot), 1), 0)).as_py()
    whole = pc.max(pc.if_else(has_dot, dot, length)).as_py()
    if whole + scale > DECIMAL_PRECISION:
        return None
    return pa.decimal128(DECIMAL_PRECISION, scale)


def _convert(batch: pa.RecordBatch, plan: _Plan) -> pa.RecordBatch:
    """Columns read as text for a declared type pyarrow cannot parse: its null words (as it
    reads them in typed columns) become null."""
    if not plan.textual:
        return batch
    columns = list(batch.columns)
    for index, name in enumerate(batch.schema.names):
        if name in plan.textual:
            text = columns[index]
            columns[index] = pc.if_else(
                pc.is_in(text, NULL_TOKENS), pa.scalar(None, text.type), text
            )
    return pa.RecordBatch.from_arrays(columns, names=batch.schema.names)


def _scale(value: str) -> str:
    """The scale a decimal's text needs (``s`` for a value that is no plain decimal)."""
    return str(len(value.partition(".")[2])) if re.match(_DECIMAL, value) else "s"


def _combine(batches: list[pa.RecordBatch]) -> pa.RecordBatch:
    if len(batches) == 1:
        return batches[0]
    return pa.Table.from_batches(batches).combine_chunks().to_batches()[0]


def _in_window(batch: pa.RecordBatch, path: Path, first_row: int, spec: ReadSpec) -> SourceBatch:
    numbers = buffers.int64s(np.arange(first_row, first_row + batch.num_rows, dtype=np.int64))
    cursor = spec.cursor if spec.cursor in batch.schema.names else None
    if cursor is not None:
        _refuse_null_cursor(batch, cursor, str(path), first_row)
    mask = None
    if cursor is not None and not _wholly_inside(batch, spec, cursor):
        mask = window_mask(spec.window, batch, cursor, spec.partition_by)
    if mask is None:
        return SourceBatch(batch=batch, origin=str(path), row_numbers=numbers)
    return SourceBatch(batch=batch.filter(mask), origin=str(path), row_numbers=numbers.filter(mask))


def _wholly_inside(batch: pa.RecordBatch, spec: ReadSpec, name: str) -> bool:
    """Every row of the batch is inside an unpartitioned window (typical of a backfill over
    a whole range): its cursor's min and max tell, and filtering would only copy it."""
    window = spec.window
    if window.partition_lower or batch.num_rows == 0:
        return False
    cursor = batch.column(name)
    bounds = pc.min_max(cursor)
    low, high = bounds["min"], bounds["max"]
    if (
        window.lower is not None
        and not pc.greater_equal(low, coerce(window.lower, cursor.type)).as_py()
    ):
        return False
    if window.upper is None:
        return True
    upper = window.upper
    if isinstance(upper, date) and is_whole_day(upper):
        return bool(pc.less(high, coerce(upper + timedelta(days=1), cursor.type)).as_py())
    return bool(pc.less_equal(high, coerce(upper, cursor.type)).as_py())


def _refuse_null_cursor(batch: pa.RecordBatch, cursor: str, origin: str, first_row: int) -> None:
    column = batch.column(cursor)
    if column.null_count:
        index = pc.index(pc.is_null(column), True).as_py()
        row = first_row + index
        raise SourceError(
            f"{origin} row {row} (line {row + 1}), column {cursor!r}: the cursor is empty; "
            "every row needs a change cursor to be loaded exactly once"
        )


def _header(path: Path, text: _Text) -> list[str]:
    with path.open(newline="", encoding=text.encoding) as handle:
        return next(_rows(handle, text.delimiter), [])


def _rows(handle: TextIO, delimiter: str) -> Any:
    """Python's csv reader (for messages), taking fields of any size."""
    pycsv.field_size_limit(max(pycsv.field_size_limit(), _FIELD_LIMIT))
    return pycsv.reader(handle, delimiter=delimiter)


def _field_count_problem(path: Path, text: _Text) -> str | None:
    with path.open(newline="", encoding=text.encoding) as handle:
        rows = _rows(handle, text.delimiter)
        header: list[str] = next(rows, [])
        for number, row in enumerate(rows, start=1):
            if len(row) != len(header):
                return (
                    f"{path} row {number} (line {rows.line_num}): expected {len(header)} fields, "
                    f"found {len(row)}"
                )
    return None


def _conversion_problem(path: Path, reading: _Text, plan: _Plan, text: str) -> str:
    header = _header(path, reading)
    marker = "In CSV column #"
    if marker not in text:
        return f"{path}: {text}"
    index = int(text.split(marker, 1)[1].split(":", 1)[0])
    column = header[index] if index < len(header) else f"#{index}"
    wanted = text.rsplit("conversion error to ", 1)[-1].split(":", 1)[0]
    target = plan.types.get(column) or _alias(wanted)
    if target is not None and "conversion error to " not in text:
        wanted = sql_type_for(target)  # e.g. "Rescaling Decimal value would cause data loss"
    hint = ""
    if column in plan.exact:
        hint = (
            f", the type the file's first rows gave the column; declare its type under "
            f'columns (e.g. {column} = "numeric({DECIMAL_PRECISION},{{scale}})" or '
            '"double precision")'
        )
    if target is None:
        return f"{path}, column {column!r}: {text}"
    found = _first_unreadable(path, reading, index, target)
    if found is None:
        return f"{path}, column {column!r}: {text}"
    number, line, value = found
    return (
        f"{path} row {number} (line {line}), column {column!r}: cannot read {value!r} as "
        f"{wanted}" + hint.replace("{scale}", _scale(value))
    )


_NULL_WORDS = frozenset(pacsv.ConvertOptions().null_values)


def _first_unreadable(
    path: Path, text: _Text, index: int, target: pa.DataType
) -> tuple[int, int, str] | None:
    """The first value of column ``index`` that ``target`` cannot read: (row, line, value).
    Values are tried a few thousand at a time, then one by one in the chunk that fails."""
    chunk: list[tuple[int, int, str]] = []
    with path.open(newline="", encoding=text.encoding) as handle:
        rows = _rows(handle, text.delimiter)
        next(rows, None)
        for number, row in enumerate(rows, start=1):
            value = row[index] if index < len(row) else ""
            if value not in _NULL_WORDS:  # read as null, as pyarrow does
                chunk.append((number, rows.line_num, value))
            if len(chunk) >= 4096:
                found = _unreadable(chunk, target)
                if found is not None:
                    return found
                chunk = []
    return _unreadable(chunk, target)


def _unreadable(
    chunk: list[tuple[int, int, str]], target: pa.DataType
) -> tuple[int, int, str] | None:
    if not chunk or _casts([value for _, _, value in chunk], target):
        return None
    return next((item for item in chunk if not _casts([item[2]], target)), None)


def _casts(values: list[str], target: pa.DataType) -> bool:
    try:
        pc.cast(pa.array(values, pa.string()), target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return False
    return True


def _alias(name: str) -> pa.DataType | None:
    try:
        return pa.type_for_alias(name)
    except ValueError:
        return None
