"""Parquet files (a file, a directory or a glob). The window is pushed down to row-group
statistics by pyarrow's dataset scanner, so untouched row groups are never decoded."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa

from pipeledger.errors import SourceError
from pipeledger.extract.base import BATCH_ROWS, FileSource, ReadSpec, SourceBatch
from pipeledger.watermark import arrow_filter


class ParquetSource(FileSource):
    kind = "Parquet"

    def schemas(self, spec: ReadSpec) -> list[pa.Schema]:
        import pyarrow.parquet as pq

        try:
            return [pq.read_schema(path) for path in self.files()]
        except (pa.ArrowInvalid, OSError) as exc:
            raise SourceError(f"{self.pattern}: not readable Parquet: {exc}") from None

    def read_file(self, path: Path, spec: ReadSpec) -> Iterator[SourceBatch]:
        import pyarrow.dataset as ds  # heavy (25 MB resident): only when a Parquet source runs

        try:
            dataset = ds.dataset(path, format="parquet")
        except (pa.ArrowInvalid, OSError) as exc:
            raise SourceError(f"{path}: not a readable Parquet file: {exc}") from None
        expression = None
        if spec.cursor in dataset.schema.names:
            cursor_type = dataset.schema.field(spec.cursor).type
            expression = arrow_filter(spec.window, spec.cursor, cursor_type, spec.partition_by)
        try:
            for batch in dataset.to_batches(filter=expression, batch_size=BATCH_ROWS):
                if batch.num_rows:
                    yield SourceBatch(batch, str(path))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise SourceError(f"{path}: {exc}") from None
