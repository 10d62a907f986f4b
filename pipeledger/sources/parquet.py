"""Parquet files (a file, a directory or a glob). The window is pushed down to row-group
statistics by pyarrow's dataset scanner, so untouched row groups are never decoded.

Every Arrow type a Parquet file carries maps to a SQL type (``schema.sql_type_for``); a
column of a type that does not, and that the pipeline does not declare, is refused before
any row is read from any file, with the fix in the message."""

from __future__ import annotations

from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa

from pipeledger.common.columns import UnmappedType, declare_hint, sql_type_for
from pipeledger.errors import SourceError
from pipeledger.sources.base import BATCH_ROWS, FileSource, ReadSpec, SourceBatch
from pipeledger.state.watermark import arrow_filter


class ParquetSource(FileSource):
    kind = "Parquet"

    def __init__(
        self, pattern: Path, pipeline: str | None = None, only: Collection[str] | None = None
    ) -> None:
        super().__init__(pattern, only)
        self.pipeline = pipeline  # named in messages that say what to declare

    def schemas(self, spec: ReadSpec) -> list[pa.Schema]:
        import pyarrow.parquet as pq

        out = []
        for path in self.files():
            try:
                schema = pq.read_schema(path)
            except (pa.ArrowInvalid, OSError) as exc:
                raise SourceError(f"{path}: not readable Parquet: {exc}") from None
            self._check_types(path, schema, spec)
            out.append(schema)
        return out

    def batches(self, spec: ReadSpec) -> Iterator[SourceBatch]:
        self.schemas(spec)  # every file's footer, so that a bad type stops the run up front
        yield from super().batches(spec)

    def _check_types(self, path: Path, schema: pa.Schema, spec: ReadSpec) -> None:
        for field in schema:
            if field.name in spec.column_types:
                continue  # declared (or the target's): converted to that type
            try:
                sql_type_for(field.type)
            except UnmappedType as exc:
                raise SourceError(
                    f"{path}, column {field.name!r}: {exc}; "
                    f"{declare_hint(field.name, self.pipeline)}"
                ) from None

    def read_file(self, path: Path, spec: ReadSpec) -> Iterator[SourceBatch]:
        import pyarrow.dataset as ds  # heavy (25 MB resident): only when a Parquet source runs

        try:
            dataset = ds.dataset(path, format="parquet")
        except (pa.ArrowInvalid, OSError) as exc:
            raise SourceError(f"{path}: not a readable Parquet file: {exc}") from None
        expression = None
        if spec.cursor is not None and spec.cursor in dataset.schema.names:
            cursor_type = dataset.schema.field(spec.cursor).type
            expression = arrow_filter(spec.window, spec.cursor, cursor_type, spec.partition_by)
        plain = _without_views(dataset.schema)
        try:
            if plain == dataset.schema or expression is None:
                batches = dataset.to_batches(filter=expression, batch_size=BATCH_ROWS)
            else:
                batches = _filtered_after_cast(dataset, plain, expression)
            for batch in batches:
                if batch.num_rows:
                    yield SourceBatch(batch=batch, origin=str(path))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise SourceError(f"{path}: {exc}") from None


def _without_views(schema: pa.Schema) -> pa.Schema:
    """``schema`` with string and binary views as plain strings and binaries (Arrow cannot
    filter views: the scanner's filter fails on them)."""
    return pa.schema([field.with_type(_plain(field.type)) for field in schema])


def _plain(kind: pa.DataType) -> pa.DataType:
    if pa.types.is_string_view(kind):
        return pa.string()
    if pa.types.is_binary_view(kind):
        return pa.binary()
    if pa.types.is_struct(kind):
        return pa.struct([f.with_type(_plain(f.type)) for f in kind])
    if pa.types.is_list(kind):
        return pa.list_(kind.value_field.with_type(_plain(kind.value_type)))
    if pa.types.is_large_list(kind):
        return pa.large_list(kind.value_field.with_type(_plain(kind.value_type)))
    if pa.types.is_list_view(kind):
        return pa.list_view(kind.value_field.with_type(_plain(kind.value_type)))
    if pa.types.is_large_list_view(kind):
        return pa.large_list_view(kind.value_field.with_type(_plain(kind.value_type)))
    if pa.types.is_fixed_size_list(kind):
        return pa.list_(kind.value_field.with_type(_plain(kind.value_type)), kind.list_size)
    if pa.types.is_map(kind):
        return pa.map_(
            kind.key_field.with_type(_plain(kind.key_type)),
            kind.item_field.with_type(_plain(kind.item_type)),
        )
    return kind


def _filtered_after_cast(
    dataset: Any, plain: pa.Schema, expression: Any
) -> Iterator[pa.RecordBatch]:
    """A file with view columns: the row groups the statistics keep, read whole, their
    views cast to plain types, then filtered."""
    for fragment in dataset.get_fragments(filter=expression):
        for group in fragment.split_by_row_group(filter=expression, schema=dataset.schema):
            for batch in group.to_batches(schema=dataset.schema, batch_size=BATCH_ROWS):
                table = pa.Table.from_batches([batch.cast(plain)]).filter(expression)
                yield from table.combine_chunks().to_batches()
