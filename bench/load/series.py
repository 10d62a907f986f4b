"""The rounds of the load benchmark: which steps run, in which databases, in what order."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.common.orders import (
    PIPELINE,
    Dataset,
    generate_in_child,
    incremental_sizes,
    link_source,
    pipeline_toml,
)
from bench.common.postgres import fresh_database, settle
from bench.common.process import pipeledger_command, run_process
from bench.load import startup
from bench.load.baselines import prepare_hand_target
from bench.load.measure import APP_NAME, Database, Measurement, run_step


@dataclass(frozen=True)
class Baseline:
    """The hand-written incremental, run beside pipeledger's: ``first``, just before it."""

    run: Callable[[], Measurement]
    first: bool


def source_folder(work: Path, data: Dataset, *files: Path) -> Path:
    """The pipeline's source folder for ``data``, holding exactly ``files``."""
    return link_source(work / f"source-{data.rows}", *files)


def load_series(
    db: Database,
    work: Path,
    data: Dataset,
    family: tuple[str, str],
    baseline: Baseline | None = None,
) -> dict[str, Measurement]:
    """First load, identical re-run, backfill (shortcut and full compare), reconcile (as
    loaded, and with 1,000 target rows missing across every window), then the
    incremental file alone, in one fresh database of ``db``'s server; each step in its own
    subprocess. ``family``: the steps' family and the suffix of their names. The
    hand-written ``baseline`` (its own database) runs just before the incremental, or
    just after it."""
    kind, suffix = family
    ms: dict[str, Measurement] = {}
    source = source_folder(work, data, data.base)
    common = ["--work", str(work), "--source", source.name]
    rows = data.rows
    window = ["--start", data.cursor_min, "--end", data.cursor_max]
    with fresh_database(db.url, f"pipeledger_bench_{kind}") as url:
        here = db.at(url)
        for step, child, table_rows, extra in (
            ("first-load", "run", 0, []),
            ("rerun", "run", rows, []),
            ("backfill", "backfill", rows, window),
            ("backfill-full", "backfill-full", rows, window),
            ("reconcile", "reconcile", rows, []),
            ("reconcile-missing", "reconcile-missing", rows, []),
        ):
            name = step + suffix
            ms[name] = run_step(name, child, kind, (rows, table_rows), here, common + extra)
        assert data.incremental is not None
        source_folder(work, data, data.incremental)  # the new file alone (see README)
        if baseline is not None and baseline.first:
            ms["hand-merge"] = baseline.run()
        name = "incremental" + suffix
        sizes = (data.incremental_rows, rows)
        ms[name] = run_step(name, "run", kind, sizes, here, common)
        if baseline is not None and not baseline.first:
            ms["hand-merge"] = baseline.run()
    return ms


def cli_series(server_url: str, work: Path, data: Dataset) -> dict[str, Measurement]:
    """``pipeledger run`` of the base file as a whole process into a fresh database."""
    source = source_folder(work, data, data.base)
    with fresh_database(server_url, "pipeledger_bench_cli") as url:
        config = work / "bench-cli.toml"
        config.write_text(f'[warehouse]\nurl = "{url}"\n\n' + pipeline_toml(source.name))
        settle(url)
        print(f"  {'first-load-cli':<16} ...", end="", flush=True, file=sys.stderr)
        argv = pipeledger_command(["-c", str(config), "run", "--json", PIPELINE])
        load = run_process(argv, PGAPPNAME=APP_NAME)
        result = json.loads(load.output)[0]
        print(f" {load.wall:8.2f} s (whole process)  rss {load.rss_mb:6.1f} MB", file=sys.stderr)
    m = Measurement(
        name="first-load-cli",
        family="cli",
        rows_in_file=data.rows,
        table_rows=0,
        seconds=load.wall,
        rows_read=int(result["rows_read"]),
        rows_inserted=int(result["rows_inserted"]),
        rows_updated=int(result["rows_updated"]),
        peak_rss_mb=load.rss_mb,
        process_seconds=load.wall,
    )
    return {m.name: m}


def one_round(
    db: Database,
    work: Path,
    data: tuple[Dataset, Dataset | None],
    index: int,
    options: tuple[int, int],
) -> dict[str, Measurement]:
    """Every step once: raw COPY, the 1x series with the hand-written baseline beside its
    incremental (before it in odd rounds, after it in even ones), the whole-process load,
    the start-up part, then the scale series. ``options``: the start-up's calls per
    command and the scale factor."""
    base, big = data
    calls, factor = options
    ms: dict[str, Measurement] = {}
    with fresh_database(db.url, "pipeledger_bench_raw") as url:
        csv = ["--csv", str(base.base)]
        ms["raw-copy"] = run_step("raw-copy", "raw-copy", "raw", (base.rows, 0), db.at(url), csv)
    assert base.incremental is not None
    with fresh_database(db.url, "pipeledger_bench_hand") as hand_url:
        prepare_hand_target(hand_url, base.base)
        child = ["--csv", str(base.incremental), "--rows", str(base.rows)]
        sizes = (base.incremental_rows, base.rows)

        def baseline() -> Measurement:
            return run_step("hand-merge", "hand-merge", "baseline", sizes, db.at(hand_url), child)

        hand = Baseline(baseline, first=index % 2 == 0)
        ms.update(load_series(db, work, base, ("load", ""), hand))
    ms.update(cli_series(db.url, work, base))
    ms.update(startup.measure(db.url, work, startup.source(work), calls))
    if big is not None:
        ms.update(load_series(db, work, big, ("scale", f"-{factor}x")))
    return ms


def generate_data(
    work: Path, rows: int, seed: int, factor: int | None
) -> tuple[Dataset, Dataset | None]:
    """The 1x source CSVs and, with a scale ``factor``, the bigger ones (reused when
    there), with the same absolute incremental batch: it is the table that grows."""
    changed, new = incremental_sizes(rows)
    print(f"generating {rows:,} rows under {work} ...", file=sys.stderr)
    data = generate_in_child(work, rows, seed, changed, new)
    print(f"  done in {data.seconds:.1f} s (0 = reused)", file=sys.stderr)
    if factor is None:
        return data, None
    print(f"generating {rows * factor:,} rows for the scale check ...", file=sys.stderr)
    big = generate_in_child(work, rows * factor, seed, changed, new)
    print(f"  done in {big.seconds:.1f} s (0 = reused)", file=sys.stderr)
    return data, big
