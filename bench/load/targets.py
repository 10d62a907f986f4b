"""The load benchmark's targets (bench/README.md explains each) and the figures it gives
for information only."""

from __future__ import annotations

from bench.common.clock import spread
from bench.common.results import Target
from bench.load.measure import Measurement, Rounds, cpu_seconds, paired

MIN_COPY_RATIO = 0.75  # first load in process, rows/s against raw COPY's
MIN_CLI_COPY_RATIO = 0.6  # the same for a whole `pipeledger run` process (start-up included)
MAX_BASELINE_RATIO = 1.1  # incremental against the hand-written COPY + guarded upsert
MAX_INCREMENTAL_GROWTH = 1.5  # the same batch against the bigger table
MAX_BACKFILL_RATIO = 0.5  # whole-range backfill of unchanged rows against the first load
MAX_RSS_MB = 150.0
MAX_RSS_GROWTH = 0.10  # a step's peak RSS at the bigger scale against at 1x

Steps = dict[str, Measurement]


def _copy_target(ms: Steps, rounds: Rounds) -> Target:
    raw, first = ms["raw-copy"], ms["first-load"]
    ratio = raw.seconds / first.seconds
    per_round = [1 / x for x in paired(rounds, "first-load", "raw-copy")]
    return Target(
        f"first load >= {MIN_COPY_RATIO}x raw COPY throughput (in process)",
        ratio >= MIN_COPY_RATIO,
        f"{first.rows_per_s:,.0f} vs {raw.rows_per_s:,.0f} rows/s = {ratio:.2f}x; "
        f"per round {spread(per_round)}",
    )


def _cli_target(ms: Steps, rounds: Rounds, cli: Measurement) -> Target:
    raw = ms["raw-copy"]
    per_round = [1 / x for x in paired(rounds, "first-load-cli", "raw-copy")]
    return Target(
        f"first load as a whole `pipeledger run` process >= {MIN_CLI_COPY_RATIO}x "
        "raw COPY throughput",
        raw.seconds / cli.seconds >= MIN_CLI_COPY_RATIO,
        f"{cli.seconds:.2f} s (start-up included) vs raw COPY {raw.seconds:.2f} s = "
        f"{raw.seconds / cli.seconds:.2f}x; per round {spread(per_round)}",
    )


def _baseline_target(ms: Steps, rounds: Rounds, hand: Measurement) -> Target:
    incr = ms["incremental"]
    per_round = paired(rounds, "incremental", "hand-merge")
    by_cpu = [
        a / b
        for r in rounds
        if "hand-merge" in r
        and (a := cpu_seconds(r["incremental"])) is not None
        and (b := cpu_seconds(r["hand-merge"]))
    ]
    return Target(
        f"incremental <= {MAX_BASELINE_RATIO}x the hand-written COPY + guarded upsert",
        incr.seconds / hand.seconds <= MAX_BASELINE_RATIO,
        f"{incr.seconds:.2f} s vs {hand.seconds:.2f} s = "
        f"{incr.seconds / hand.seconds:.2f}x; per round {spread(per_round)}; by CPU "
        f"(client + server: less moved by a busy machine) per round {spread(by_cpu)}",
    )


def _backfill_targets(ms: Steps, factor: int) -> list[Target]:
    """At 1x and at the scale factor (when run): the whole-range backfill of unchanged rows
    writes nothing and costs at most half the first load of the same rows, same run."""
    out = []
    for suffix in ("", f"-{factor}x"):
        first, back = ms.get("first-load" + suffix), ms.get("backfill" + suffix)
        if first is None or back is None:
            continue
        out += [
            Target(
                f"backfill writes 0 rows ({back.rows_read:,} unchanged)",
                back.rows_inserted + back.rows_updated == 0,
                f"inserted {back.rows_inserted:,}, updated {back.rows_updated:,} "
                f"of {back.rows_read:,} read",
            ),
            Target(
                f"backfill time <= {MAX_BACKFILL_RATIO}x first load time ({back.rows_read:,} rows)",
                back.seconds <= MAX_BACKFILL_RATIO * first.seconds,
                f"{back.seconds:.2f} s vs {first.seconds:.2f} s = "
                f"{back.seconds / first.seconds:.2f}x",
            ),
        ]
    return out


def _rss_target(ms: Steps) -> Target:
    steps = [m for m in ms.values() if m.family in ("load", "scale", "cli")]
    worst = max(steps, key=lambda m: m.peak_rss_mb)
    return Target(
        f"peak RSS < {MAX_RSS_MB:.0f} MB (every pipeledger step)",
        worst.peak_rss_mb < MAX_RSS_MB,
        f"max {worst.peak_rss_mb:.1f} MB ({worst.name})",
    )


def evaluate(ms: Steps, rounds: Rounds, factor: int) -> list[Target]:
    """Every target of the load steps (the start-up's are in :mod:`bench.load.startup`)."""
    targets = [_copy_target(ms, rounds)]
    cli, hand = ms.get("first-load-cli"), ms.get("hand-merge")
    if cli is not None:
        targets.append(_cli_target(ms, rounds, cli))
    if hand is not None:
        targets.append(_baseline_target(ms, rounds, hand))
    return [
        *targets,
        *_backfill_targets(ms, factor),
        *scale_targets(ms, factor),
        _rss_target(ms),
    ]


def scale_targets(ms: Steps, factor: int) -> list[Target]:
    """The same batch costs about the same against the bigger table, and no step's memory
    grows with the input."""
    suffix = f"-{factor}x"
    name = f"incremental against the {factor}x table within {MAX_INCREMENTAL_GROWTH}x of 1x"
    rss = f"peak RSS of every step at {factor}x within {MAX_RSS_GROWTH:.0%} of at 1x"
    incr1, incr_n = ms["incremental"], ms.get("incremental" + suffix)
    if incr_n is None:
        return [Target(name, None, "scale check not run"), Target(rss, None, "not run")]
    growth = incr_n.seconds / incr1.seconds
    steps = [n for n in ms if n + suffix in ms]
    grown = {n: ms[n + suffix].peak_rss_mb / ms[n].peak_rss_mb - 1 for n in steps}
    worst = max(grown, key=lambda n: abs(grown[n]))
    return [
        Target(
            name,
            growth <= MAX_INCREMENTAL_GROWTH,
            f"{incr_n.rows_read:,} rows into {incr_n.table_rows:,}: {incr_n.seconds:.2f} s; "
            f"into {incr1.table_rows:,}: {incr1.seconds:.2f} s; {growth:.2f}x",
        ),
        Target(
            rss,
            abs(grown[worst]) <= MAX_RSS_GROWTH,
            f"largest change {worst}: {ms[worst + suffix].peak_rss_mb:.1f} MB at "
            f"{ms[worst + suffix].rows_in_file:,} rows vs {ms[worst].peak_rss_mb:.1f} MB "
            f"at {ms[worst].rows_in_file:,} ({grown[worst]:+.1%})",
        ),
    ]


def _incremental_lines(ms: Steps, factor: int) -> list[str]:
    first, out = ms["first-load"], []
    for suffix, label in (("", "1x"), (f"-{factor}x", f"{factor}x")):
        incr, rerun = ms.get("incremental" + suffix), ms.get("rerun" + suffix)
        if incr is not None and rerun is not None:
            out.append(
                f"incremental ({label} table): {incr.us_per_row:.2f} us/row (first load "
                f"{first.us_per_row:.2f}); a source folder that still held the old file would "
                f"add its re-scan, the re-run's {rerun.seconds:.2f} s"
            )
    return out


def _backfill_lines(ms: Steps, factor: int) -> list[str]:
    out = []
    for suffix in ("", f"-{factor}x"):
        back, full = ms.get("backfill" + suffix), ms.get("backfill-full" + suffix)
        load = ms.get("first-load" + suffix)
        if back is not None and full is not None and load is not None:
            out.append(
                f"backfill of {full.rows_read:,} unchanged rows: {back.seconds:.2f} s with "
                f"the fingerprint shortcut, {full.seconds:.2f} s with --full-compare "
                f"(every row staged), first load {load.seconds:.2f} s"
            )
    return out


def information(ms: Steps, factor: int) -> list[str]:
    """Figures printed for information only (not targets)."""
    out = [*_incremental_lines(ms, factor), *_backfill_lines(ms, factor)]
    first, scale = ms["first-load"], ms.get(f"first-load-{factor}x")
    if scale is not None:
        out.append(
            f"first load at {scale.rows_in_file:,} rows: {scale.rows_per_s:,.0f} rows/s "
            f"({scale.rows_per_s / first.rows_per_s:.2f}x the 1x first load's throughput)"
        )
    return out
