"""The spill: batches set aside in a temporary file, read back in order, then removed."""

from __future__ import annotations

from contextlib import closing
from pathlib import Path

import pyarrow as pa
import pytest

from pipeledger.common.spill import Spill


def test_batches_come_back_in_order_as_often_as_asked_and_the_file_goes() -> None:
    batches = [
        pa.record_batch({"k": pa.array(range(n, n + 3), pa.int64()), "h": ["a", "b", None]})
        for n in (0, 3, 6)
    ]
    with closing(Spill()) as spill:
        for batch in batches:
            spill.write(batch)
        path = Path(spill.path)
        first, again = list(spill.batches()), list(spill.batches())
        with pytest.raises(RuntimeError):
            spill.write(batches[0])
    assert first == again == batches
    assert spill.rows == 9
    assert not path.exists()


def test_an_empty_spill_gives_no_batch() -> None:
    with closing(Spill()) as spill:
        assert list(spill.batches()) == []
    assert not Path(spill.path).exists()
