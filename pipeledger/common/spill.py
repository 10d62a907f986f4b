"""Arrow batches set aside in a temporary file and read back in order: a second look at
a stream without holding it in memory or reading its source again.

Written as an Arrow IPC stream (no compression: the writer and the reader are this
process, and the file lives in the operating system's cache for as long as it fits);
read back through ordinary reads, not a memory map, so that the pages read are not
counted in the process's resident size. The file is removed when the spill closes.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator

import pyarrow as pa


class Spill:
    """A temporary file of record batches: :meth:`write` them, then read them back with
    :meth:`batches` (as often as needed); :meth:`close` removes the file
    (``contextlib.closing``)."""

    def __init__(self) -> None:
        handle, self.path = tempfile.mkstemp(prefix="pipeledger-spill-", suffix=".arrows")
        os.close(handle)
        self._sink: pa.NativeFile | None = pa.OSFile(self.path, "wb")
        self._writer: pa.ipc.RecordBatchStreamWriter | None = None
        self.rows = 0

    def write(self, batch: pa.RecordBatch) -> None:
        if self._sink is None:
            raise RuntimeError("the spill was read back: it takes no more batches")
        if self._writer is None:
            self._writer = pa.ipc.new_stream(self._sink, batch.schema)
        self._writer.write_batch(batch)
        self.rows += batch.num_rows

    def batches(self) -> Iterator[pa.RecordBatch]:
        """The batches written, in their order (none when none was)."""
        self._finish()
        if self.rows == 0:
            return
        with pa.OSFile(self.path, "rb") as source:
            yield from pa.ipc.open_stream(source)

    def _finish(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        if self._sink is not None:
            self._sink.close()
            self._sink = None

    def close(self) -> None:
        self._finish()
        with contextlib.suppress(FileNotFoundError):
            os.remove(self.path)
