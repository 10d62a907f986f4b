"""The load benchmark's report: its section of ``bench/RESULTS.md`` (the whole file but
the blocks that other benchmarks and people own, which it keeps) and its summary on
stdout."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from bench.common.orders import Dataset, incremental_sizes
from bench.common.process import read_text
from bench.common.results import Target, block, markers, run_line, table, target_table
from bench.load.measure import Measurement

MODULE = "bench.load"
NOTES = "NOTES"  # hand-written, kept across runs
# written by the other benchmarks, kept as they are: python -m bench.ledger, bench.gate,
# tests.drills, bench.history, bench.embedded (and its hand-written notes), bench.models
# (its 20-node block inside it; a run of bench.load before this name was here dropped it)
KEPT = ("LEDGER", "GATE", "DRILL", "HISTORY", "EMBEDDED", "EMBEDDED_NOTES", "MODELS")
FIGURES = [
    "step",
    "rows in source",
    "rows in target",
    "seconds (median)",
    "each round",
    "rows read",
    "inserted",
    "updated",
    "rows/s",
    "x raw COPY",
    "us/row",
    "CPU s client + server",
    "peak RSS MB",
    "wait4 maxrss MB",
]


def _cpu(m: Measurement) -> str:
    client, server = m.extra.get("cpu_s"), m.extra.get("server_cpu_s")
    if client is None or server is None:
        return "-"
    return f"{client:.2f} + {server:.2f}"


def _figures_row(m: Measurement, raw: Measurement) -> list[str]:
    throughput = m.rows_read > 10  # a re-run's one row says nothing of throughput
    return [
        m.name,
        f"{m.rows_in_file:,}",
        f"{m.table_rows:,}",
        f"{m.seconds:.2f}",
        " / ".join(f"{x:.2f}" for x in m.extra.get("rounds_s", [m.seconds])),
        f"{m.rows_read:,}",
        f"{m.rows_inserted:,}",
        f"{m.rows_updated:,}",
        f"{m.rows_per_s:,.0f}" if throughput else "-",
        f"{m.rows_per_s / raw.rows_per_s:.2f}" if throughput else "-",
        f"{m.us_per_row:.2f}" if throughput else "-",
        _cpu(m),
        f"{m.peak_rss_mb:.1f}",
        f"{m.extra.get('wait4_maxrss_mb', float('nan')):.1f}",
    ]


def _introduction(ms: dict[str, Measurement], data: Dataset, big: Dataset | None) -> list[str]:
    changed, new = incremental_sizes(data.rows)
    scale = (
        f" Scale check: a {big.rows:,}-row file ({big.base.stat().st_size / 1e6:.0f} MB) "
        f"and the same-size incremental batch ({big.incremental_rows:,} rows: {changed:,} "
        f"existing keys changed, picked over the whole table, and {new:,} new keys) "
        "against the bigger table; steps suffixed with the factor."
        if big
        else " Scale check not run (`--no-scale-check`)."
    )
    rounds = len(next(iter(ms.values())).extra.get("rounds_s", [0]))
    return [
        f"{run_line(MODULE)}. "
        f"Source: {data.rows:,}-row orders CSV ({data.base.stat().st_size / 1e6:.0f} MB, "
        f"7 columns). The incremental step reads a file of {data.incremental_rows:,} rows "
        f"({changed:,} changed keys = 10%, {new:,} new keys = 5%) alone; `hand-merge` loads "
        "the same file into a keyed copy of the same 1x table by hand: COPY into a temporary "
        "table, then one `INSERT .. ON CONFLICT DO UPDATE .. WHERE excluded.updated_at > "
        f"t.updated_at` (bench/load/baselines.py, `HAND_MERGE`).{scale}",
        "",
        f"Every step ran {rounds} time(s), "
        "each round in fresh databases (`hand-merge` just before the incremental in odd "
        "rounds, just after it in even ones); a step's figures and phases are those of its "
        "median round, its peak RSS the highest of all rounds. "
        "Seconds are the operation inside its own subprocess (imports and interpreter start "
        "excluded), except `first-load-cli`: a whole `pipeledger run` process, "
        "timed from its start to its exit. Peak RSS is the subprocess's own high-water mark "
        "(`VmHWM` from `/proc/self/status`, read at its end; for `first-load-cli` GNU "
        "time's maximum resident size; the client only, not the PostgreSQL server), "
        "cross-checked with `ru_maxrss` from `os.wait4` (which also counts the launcher's "
        "resident size at fork time, so it is a ceiling). Before the first step the "
        "venv's shared libraries are written back and dropped from the page cache "
        "(`bench.common.process.drop_cached_libraries`): libraries pip has just written are "
        "cached as large folios that a process maps whole, ~30 MB more RSS for the same "
        "code. "
        "rows/s and us/row use rows read by the step; `x raw COPY` compares with the "
        "1x raw COPY's rows/s; `rows in target` is the target's size before the step.",
    ]


def _phases(ms: dict[str, Measurement]) -> list[str]:
    lines = [
        "## Where the time goes (seconds per phase)",
        "",
        "From what pipeledger records: the extract, transform and quality steps of the "
        "run's result (`LoadResult.steps`), and its statements as the sessions report "
        "them (`observe_statements`), by class (bench/load/phases.py). The source is "
        "pulled lazily by the single COPY, so extraction and conforming run inside "
        "staging; the stage phase is the adapter's own part of it: encoding the batches, "
        "writing them and the server storing them. SQL phases are client-side round trips "
        "per statement class; `rest` is connecting, COMMIT and Python outside statements.",
        "",
        "Phases of each step's median round.",
        "",
    ]
    for m in ms.values():
        phases = m.extra.get("breakdown")
        if not phases:
            continue
        parts = ", ".join(f"{k} {v:.2f}" for k, v in phases.items() if v >= 0.005)
        lines.append(f"- **{m.name}** ({m.seconds:.2f} s): {parts}")
        logged = m.extra.get("server_log") or {}
        parts = ", ".join(f"{k} {v:.2f}" for k, v in logged.items() if v >= 0.005)
        if parts:
            lines.append(f"  - server log (`--server-log`): {parts}")
    return lines


def _kept(previous: str) -> list[str]:
    """The notes, and the other benchmarks' blocks, as the file has them."""
    begin, end = markers(NOTES)
    notes = block(previous, NOTES) or f"{begin}\n## Notes\n\n(none yet)\n{end}"
    others = [found for name in KEPT if (found := block(previous, name))]
    return [notes, "", *[line for found in others for line in (found, "")]]


def report(
    ms: dict[str, Measurement],
    targets: list[Target],
    infos: list[str],
    info: dict[str, str],
    data: tuple[Dataset, Dataset | None],
    path: Path,
    startup: str,
) -> str:
    """The whole of ``RESULTS.md``: the load section, ``startup`` (the start-up block, its
    markers included), the notes and the other benchmarks' blocks as they were."""
    raw = ms["raw-copy"]
    lines = ["# pipeledger load benchmark (PostgreSQL)", "", *_introduction(ms, *data)]
    steps = [m for m in ms.values() if m.family != "startup"]
    lines += ["", "## Figures", "", *table(FIGURES, [_figures_row(m, raw) for m in steps])]
    lines += ["", "## Targets", "", *target_table(targets)]
    lines += ["", "The quick commands' start-up targets are in the next section."]
    if infos:
        lines += ["", "For information (not targets):", "", *[f"- {line}" for line in infos]]
    lines += ["", startup, "", *_phases(ms)]
    lines += ["", "## Machine", "", *[f"- {k}: {v}" for k, v in info.items()]]
    return "\n".join([*lines, "", *_kept(read_text(path))])


def print_figures(ms: dict[str, Measurement], targets: list[Target], infos: list[str]) -> None:
    """The load steps on stdout: figures, counts, information and targets."""
    raw = ms["raw-copy"]
    steps = [m for m in ms.values() if m.family != "startup"]
    print("\nstep                 seconds     rows read    rows/s  x COPY   us/row   RSS MB")
    for m in steps:
        print(
            f"{m.name:<19} {m.seconds:8.2f} {m.rows_read:>13,} {m.rows_per_s:>9,.0f} "
            f"{m.rows_per_s / raw.rows_per_s:6.2f} {m.us_per_row:8.2f} {m.peak_rss_mb:8.1f}"
        )
    for m in steps:
        if m.family != "raw" and not m.name.startswith("first-load"):
            print(
                f"{m.name}: inserted {m.rows_inserted:,} updated {m.rows_updated:,} "
                f"unchanged {m.extra.get('rows_unchanged', 0):,}"
            )
    print()
    for line in infos:
        print(f"info  {line}")
    for t in targets:
        print(f"{t.verdict}  {t.name}: {t.detail}")


def save(path: Path, ms: dict[str, Measurement]) -> None:
    """Every figure of the run, for a closer look (``bench/work/last_run.json``)."""
    path.write_text(json.dumps({k: asdict(v) for k, v in ms.items()}, indent=2, default=str))
