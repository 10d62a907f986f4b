"""The extract seam: a ``Source`` streams Arrow record batches of the rows inside a window."""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

import pyarrow as pa
import pyarrow.compute as pc

from pipeledger.common.files import list_files
from pipeledger.errors import SourceError
from pipeledger.state.watermark import Window, window_mask

log = logging.getLogger("pipeledger.load")

# rows per batch through conform, fingerprint and staging: a load holds a few copies of
# one batch at a time (32k rows of the benchmark's orders: ~12 MB less peak memory than
# 64k, for ~2% more client CPU)
BATCH_ROWS = 32_768


@dataclass(frozen=True, kw_only=True)
class ReadSpec:
    """What a source needs to know to read one run's rows."""

    window: Window
    cursor: str | None  # None: the pipeline has none (every row is read)
    partition_by: str | None = None
    column_types: Mapping[str, pa.DataType] = field(default_factory=dict)
    # files (by path) whose rows outside the window are handed on too, marked ``outside``:
    # an incremental run measures the late rows of files new to it in the same read
    outside: frozenset[str] = frozenset()


@dataclass(frozen=True, kw_only=True)
class SourceBatch:
    """Rows inside the window, with where they came from (for error messages).

    ``row_numbers`` holds each row's 1-based data row number in ``origin`` when the
    source knows it (CSV).
    """

    batch: pa.RecordBatch
    origin: str
    row_numbers: pa.Array | None = None
    # True when the source could not apply the window itself (values it cannot compare
    # reliably, e.g. SQLite's text timestamps): the loader filters after conforming
    unfiltered: bool = False
    # rows outside the window, of a file in ``ReadSpec.outside``: not loaded
    outside: bool = False

    def where(self, index: int) -> str:
        """Human words for row ``index`` of this batch."""
        if self.row_numbers is not None:
            row = self.row_numbers[index].as_py()
            return f"{self.origin} row {row} (line {row + 1})"
        return self.origin


class Source(Protocol):
    """Anything that streams the rows of a window as Arrow batches."""

    description: str
    bytes_read: int

    def batches(self, spec: ReadSpec) -> Iterator[SourceBatch]:
        """Yield the rows with the cursor inside ``spec.window``; memory stays bounded."""
        ...

    def schemas(self, spec: ReadSpec) -> list[pa.Schema]:
        """The schema of each part (file) of the source, read cheaply before any row, so
        that schema drift is known before staging starts. Empty: learn from the rows."""
        ...


class FileSource(ABC):
    """A source made of files (a path, a folder or a glob), read one after the other;
    ``only``: of those, just these paths (the new and changed files of a run that reads
    files once: ``incremental = "files"``)."""

    kind = "file"

    def __init__(self, pattern: Path, only: Collection[str] | None = None) -> None:
        self.pattern = pattern
        self.only = None if only is None else frozenset(only)
        self.description = f"{self.kind} {pattern}"
        self.bytes_read = 0

    def files(self) -> list[Path]:
        """Files matching the pattern (a file, a directory of files, or a glob), sorted."""
        found = list_files(self.pattern)
        return found if self.only is None else [p for p in found if str(p) in self.only]

    def batches(self, spec: ReadSpec) -> Iterator[SourceBatch]:
        files = self.files()
        if not files and self.only is None:
            raise SourceError(f"no file matches {self.pattern}")
        for number, path in enumerate(files, start=1):
            log.info("reading %s (file %d of %d)", path, number, len(files))
            self.bytes_read += path.stat().st_size
            if str(path) in spec.outside:
                yield from _split(self.read_file(path, replace(spec, window=Window())), spec)
            else:
                yield from self.read_file(path, spec)

    @abstractmethod
    def read_file(self, path: Path, spec: ReadSpec) -> Iterator[SourceBatch]:
        """The batches of one file."""


def _split(items: Iterator[SourceBatch], spec: ReadSpec) -> Iterator[SourceBatch]:
    """The batches of a file read whole, each split into its rows inside ``spec.window``
    and those outside it (marked ``outside``)."""
    for item in items:
        batch = item.batch
        mask = None
        if spec.cursor is not None and spec.cursor in batch.schema.names:
            mask = window_mask(spec.window, batch, spec.cursor, spec.partition_by)
        if mask is None:
            yield item
            continue
        for part, outside in ((mask, False), (pc.invert(mask), True)):
            kept = batch.filter(part)
            if kept.num_rows:
                numbers = None if item.row_numbers is None else item.row_numbers.filter(part)
                yield SourceBatch(
                    batch=kept,
                    origin=item.origin,
                    row_numbers=numbers,
                    unfiltered=item.unfiltered,
                    outside=outside,
                )
