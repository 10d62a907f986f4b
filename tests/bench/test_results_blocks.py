"""``bench/RESULTS.md`` is shared: the load benchmark rewrites the whole file, and keeps every
other benchmark's block as that benchmark last wrote it (a block it forgot was lost at its
next run, as the models' once was)."""

from __future__ import annotations

from bench import gate, history
from bench.common.results import markers
from bench.embedded import main as embedded
from bench.ledger import report as ledger
from bench.load import report as load
from bench.models import report as models


def test_the_load_report_keeps_every_other_benchmarks_block() -> None:
    names = [ledger.BLOCK, gate.BLOCK, history.BLOCK, embedded.BLOCK, models.BLOCK]
    previous = "\n".join(
        f"{begin}\nfigures of {name}\n{end}" for name in names for begin, end in [markers(name)]
    )
    kept = "\n".join(load._kept(previous))
    for name in names:
        assert f"figures of {name}" in kept, name
