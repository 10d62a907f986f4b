"""CSV files (a path or a glob), streamed block by block with pyarrow's CSV reader."""

from __future__ import annotations

import csv as pycsv
from collections.abc import Iterator
from datetime import date, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from pipeledger.errors import SourceError
from pipeledger.extract.base import BATCH_ROWS, FileSource, ReadSpec, SourceBatch
from pipeledger.watermark import arrow_filter, coerce, is_whole_day

# pyarrow reads ~40 blocks ahead: small blocks keep memory low and flat whatever the file
# size (measured on 1M rows, a whole load: 8 MiB blocks 207 MB peak, 1 MiB 126 MB; reading
# alone: 256 KiB 84 MB, 128 KiB 74 MB at the same CPU time, 64 KiB 69 MB but more CPU)
BLOCK_BYTES = 128 << 10


class CsvSource(FileSource):
    kind = "CSV"

    def __init__(self, pattern: Path, delimiter: str = ",") -> None:
        super().__init__(pattern)
        self.delimiter = delimiter

    def schemas(self, spec: ReadSpec) -> list[pa.Schema]:
        out = []
        for path in self.files():
            reader = self._open(path, spec) if path.stat().st_size else None
            if reader is not None:
                out.append(reader.schema)
        return out

    def read_file(self, path: Path, spec: ReadSpec) -> Iterator[SourceBatch]:
        if path.stat().st_size == 0:
            return
        reader = self._open(path, spec)
        if reader is None:
            return
        first_row = 1
        for batch in self._coalesced(reader, path, spec):
            item = _in_window(batch, path, first_row, spec)
            first_row += batch.num_rows
            del batch  # while the rows in the window are used, the others are freed
            yield item

    def _coalesced(
        self, reader: pacsv.CSVStreamingReader, path: Path, spec: ReadSpec
    ) -> Iterator[pa.RecordBatch]:
        """Small parsed blocks (small blocks keep pyarrow's read-ahead memory low) joined
        into batches of about ``BATCH_ROWS`` rows (fewer, larger batches downstream). The
        blocks are freed before their batch is used: memory holds one copy of the rows."""
        pending: list[pa.RecordBatch] = []
        rows = 0
        while True:
            try:
                pending.append(reader.read_next_batch())
            except StopIteration:
                break
            except pa.ArrowInvalid as exc:
                raise self._explain(path, spec, exc) from None
            rows += pending[-1].num_rows
            if rows >= BATCH_ROWS:
                combined, pending, rows = _combine(pending), [], 0
                yield combined
        if pending:
            combined, pending = _combine(pending), []
            yield combined

    def _open(self, path: Path, spec: ReadSpec) -> pacsv.CSVStreamingReader | None:
        header = _header(path, self.delimiter)
        if not header:
            return None
        types = {name: spec.column_types[name] for name in header if name in spec.column_types}
        try:
            return pacsv.open_csv(
                path,
                read_options=pacsv.ReadOptions(block_size=BLOCK_BYTES, use_threads=True),
                parse_options=pacsv.ParseOptions(delimiter=self.delimiter),
                convert_options=pacsv.ConvertOptions(
                    column_types=types, strings_can_be_null=False, quoted_strings_can_be_null=False
                ),
            )
        except pa.ArrowInvalid as exc:
            raise self._explain(path, spec, exc) from None

    def _explain(self, path: Path, spec: ReadSpec, exc: pa.ArrowInvalid) -> SourceError:
        text = str(exc)
        if "Expected" in text and "columns" in text:
            return SourceError(_field_count_problem(path, self.delimiter) or f"{path}: {text}")
        return SourceError(_conversion_problem(path, self.delimiter, spec, text))


def _combine(batches: list[pa.RecordBatch]) -> pa.RecordBatch:
    if len(batches) == 1:
        return batches[0]
    return pa.Table.from_batches(batches).combine_chunks().to_batches()[0]


def _in_window(batch: pa.RecordBatch, path: Path, first_row: int, spec: ReadSpec) -> SourceBatch:
    numbers = pa.array(np.arange(first_row, first_row + batch.num_rows, dtype=np.int64))
    if spec.cursor in batch.schema.names:
        _refuse_null_cursor(batch, spec.cursor, str(path), first_row)
    expression = None
    if spec.cursor in batch.schema.names:
        expression = arrow_filter(
            spec.window, spec.cursor, batch.schema.field(spec.cursor).type, spec.partition_by
        )
    if expression is None or _wholly_inside(batch, spec):
        return SourceBatch(batch, str(path), numbers)
    table = pa.Table.from_batches([batch.append_column("__row", numbers)]).filter(expression)
    rows = table.column("__row").combine_chunks()
    kept = table.drop_columns(["__row"]).combine_chunks()
    out = kept.to_batches()[0] if kept.num_rows else pa.RecordBatch.from_pylist([], kept.schema)
    return SourceBatch(out, str(path), rows)


def _wholly_inside(batch: pa.RecordBatch, spec: ReadSpec) -> bool:
    """Every row of the batch is inside an unpartitioned window (typical of a backfill over
    a whole range): its cursor's min and max tell, and filtering would only copy it."""
    window = spec.window
    if window.partition_lower or batch.num_rows == 0:
        return False
    cursor = batch.column(spec.cursor)
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


def _header(path: Path, delimiter: str) -> list[str]:
    with path.open(newline="", encoding="utf-8") as handle:
        return next(pycsv.reader(handle, delimiter=delimiter), [])


def _field_count_problem(path: Path, delimiter: str) -> str | None:
    with path.open(newline="", encoding="utf-8") as handle:
        rows = pycsv.reader(handle, delimiter=delimiter)
        header = next(rows, [])
        for number, row in enumerate(rows, start=1):
            if len(row) != len(header):
                return (
                    f"{path} row {number} (line {rows.line_num}): expected {len(header)} fields, "
                    f"found {len(row)}"
                )
    return None


def _conversion_problem(path: Path, delimiter: str, spec: ReadSpec, text: str) -> str:
    header = _header(path, delimiter)
    marker = "In CSV column #"
    if marker not in text:
        return f"{path}: {text}"
    index = int(text.split(marker, 1)[1].split(":", 1)[0])
    column = header[index] if index < len(header) else f"#{index}"
    wanted = text.rsplit("conversion error to ", 1)[-1].split(":", 1)[0]
    with path.open(newline="", encoding="utf-8") as handle:
        rows = pycsv.reader(handle, delimiter=delimiter)
        next(rows, None)
        target = spec.column_types.get(column) or _alias(wanted)
        for number, row in enumerate(rows, start=1):
            value = row[index] if index < len(row) else ""
            if value and target is not None and not _casts(value, target):
                return (
                    f"{path} row {number} (line {rows.line_num}), column {column!r}: "
                    f"cannot read {value!r} as {wanted}"
                )
    return f"{path}, column {column!r}: {text}"


def _casts(value: str, target: pa.DataType) -> bool:
    try:
        pc.cast(pa.array([value]), target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return False
    return True


def _alias(name: str) -> pa.DataType | None:
    try:
        return pa.type_for_alias(name)
    except ValueError:
        return None
