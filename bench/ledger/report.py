"""The ledger benchmark's block of ``bench/RESULTS.md`` (``LEDGER``): its two parts, their
targets and the machine; a part this run did not measure (``--only``) is kept from the
previous report, marked as such, and so are the hand-written notes (``LEDGER NOTES``)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from bench.common.clock import median
from bench.common.process import read_text
from bench.common.results import (
    Target,
    block,
    markers,
    replace_block,
    run_line,
    table,
    target_table,
)
from bench.ledger.phases import CLASSES, SNAPSHOT
from bench.ledger.runs import LoadRun
from bench.ledger.synthetic import DAYS

MODULE = "bench.ledger"
BLOCK = "LEDGER"
NOTES = "LEDGER NOTES"
MAX_OVERHEAD_RATIO = 1.05
MAX_QUERY_MS = 100.0
TARGETED = ("pipeline_status", "volume_anomalies")  # on both backends
# the dashboard's slow questions: median < 50 ms at 100k runs, on both backends
MAX_SLOW_MS = 50.0
SLOW = ("task_trends (14 days)", "sla (breaches, reliability over 7 and 30 days)")
OVERHEAD_TITLE = "### Ledger overhead"
QUERIES_TITLE = "### Query latency"
KEPT = "Kept from the previous report"
_TARGET_PREFIX = {OVERHEAD_TITLE: "1,000,000-row first load", QUERIES_TITLE: "`"}
STEPS = ("first-load", "rerun")


def _pick(runs: list[LoadRun], variant: str, step: str) -> list[LoadRun]:
    return [r for r in runs if r.variant == variant and r.step == step]


def _on_off(runs: list[LoadRun], step: str, value: str) -> str:
    """``on / off``: the medians of a figure of ``step`` with the ledger and without."""
    on, off = (
        median([float(getattr(r, value)) for r in _pick(runs, v, step)])
        for v in ("ledger", "no-ledger")
    )
    return f"{on:.0f} / {off:.0f}"


def _overhead_row(runs: list[LoadRun], step: str) -> tuple[list[str], float, list[float]]:
    """The row of ``step``, its ratio of medians and its per-round ratios."""
    on, off = _pick(runs, "ledger", step), _pick(runs, "no-ledger", step)
    m_on, m_off = median([r.seconds for r in on]), median([r.seconds for r in off])
    pairs = [a.seconds / b.seconds for a, b in zip(on, off, strict=True)]
    row = [
        step,
        f"{m_on:.3f}",
        " / ".join(f"{r.seconds:.2f}" for r in on),
        f"{m_off:.3f}",
        " / ".join(f"{r.seconds:.2f}" for r in off),
        f"{(m_on - m_off) * 1000:+.0f}",
        f"{m_on / m_off:.3f}",
        f"{median(pairs):.3f}",
        _on_off(runs, step, "connections"),
        _on_off(runs, step, "statements"),
        f"{max(r.rss_mb for r in on):.0f} / {max(r.rss_mb for r in off):.0f}",
    ]
    return row, m_on / m_off, pairs


def _phase_ms(runs: list[LoadRun], variant: str, step: str, label: str) -> float:
    return median([r.phases.get(label, 0.0) * 1000 for r in _pick(runs, variant, step)])


def _phases_table(runs: list[LoadRun]) -> list[str]:
    """Per ledger class, the medians of its statements' ms, ledger on / off."""
    rows = []
    for c in CLASSES:
        cells = [
            f"{_phase_ms(runs, 'ledger', s, c.label):.1f} / "
            f"{_phase_ms(runs, 'no-ledger', s, c.label):.1f}"
            for s in STEPS
        ]
        rows.append([c.label, *cells])
    totals = [
        median([sum(r.phases.values()) * 1000 for r in _pick(runs, "ledger", s)]) for s in STEPS
    ]
    rows.append(["**sum** (ledger on)", f"{totals[0]:.1f}", f"{totals[1]:.1f}"])
    return table(["statements", "first load ms (on / off)", "re-run ms (on / off)"], rows)


def _logged_lines(logged: list[LoadRun]) -> list[str]:
    lines = [
        "",
        "Server side, one extra run per variant with every statement's duration logged "
        "(`log_min_duration_statement = 0` for the step's sessions; not in the medians), "
        "seconds per statement class:",
        "",
    ]
    for r in logged:
        parts = ", ".join(f"{k} {v:.3f}" for k, v in r.server.items() if v >= 0.0005)
        lines.append(f"- **{r.variant} {r.step}** ({r.seconds:.2f} s): {parts}")
    return lines


def _scale_lines(ov: dict[str, Any], runs: list[LoadRun]) -> list[str]:
    scale: list[LoadRun] = ov["scale"]
    big, rows = ov["big_rows"], ov["rows"]
    srows = []
    for r in scale:
        base = _phase_ms(runs, "ledger", r.step, SNAPSHOT)
        srows.append(
            [
                r.step,
                f"{r.seconds:.2f}",
                f"{r.phases.get(SNAPSHOT, 0.0) * 1000:.0f}",
                f"{base:.0f}",
                f"{sum(r.phases.values()) * 1000:.0f}",
            ]
        )
    headers = [
        "step",
        f"seconds ({big:,} rows)",
        f"snapshot ms ({big:,} rows)",
        f"snapshot ms ({rows:,} rows, median)",
        "ledger statements ms",
    ]
    intro = f"Scale check (ledger on, one round): the same runs against a {big:,}-row target."
    return ["", intro, "", *table(headers, srows)]


OVERHEAD_HEADERS = [
    "step",
    "ledger on: s (median)",
    "each round",
    "ledger off: s (median)",
    "each round",
    "added ms",
    "ratio on/off",
    "paired",
    "connections on / off",
    "statements on / off",
    "peak RSS MB on / off",
]


def overhead_figures(ov: dict[str, Any]) -> tuple[list[str], list[Target]]:
    runs: list[LoadRun] = ov["runs"]
    lines = [
        OVERHEAD_TITLE,
        "",
        f"The {ov['rows']:,}-row orders CSV of the load benchmark ({ov['file_mb']:.0f} MB) loaded "
        "into an empty target, then the identical re-run (reads 1 row, writes none, but "
        "scans the file), with the ledger on (default: ledger tables in the warehouse, the "
        "final record committed in the load's transaction) and off (`[ledger] enabled = "
        "false`). Each round uses a fresh database per variant and alternates which variant "
        "goes first; every step is its own subprocess, timed around `api.run_one` "
        "(imports and interpreter start excluded). pipeledger's tables are created before "
        "the timed step, as every run but a database's first finds them (the timed run "
        "still checks its migrations); the one-time DDL is in the logged pair's server "
        "times. The ratio is of the medians; `paired` is the median of the per-round ratios. "
        "Connections are the sessions the server counted in the step's database.",
        "",
    ]
    rows, targets = [], []
    for step in STEPS:
        row, ratio, pairs = _overhead_row(runs, step)
        rows.append(row)
        if step == "first-load":
            targets.append(
                Target(
                    f"{ov['rows']:,}-row first load with ledger / without <= {MAX_OVERHEAD_RATIO}",
                    ratio <= MAX_OVERHEAD_RATIO,
                    f"{row[1]} s / {row[3]} s = {ratio:.3f} (medians of {len(pairs)} "
                    f"rounds; paired per round {' / '.join(f'{p:.3f}' for p in pairs)})",
                )
            )
    lines += table(OVERHEAD_HEADERS, rows)
    lines += [
        "",
        "What the ledger's statements cost, client side (round trips as the sessions report "
        "them, by what they do for the ledger: bench/ledger/phases.py; medians, ms, ledger "
        "on / off: the migrations check runs for the state's tables either way):",
        "",
        *_phases_table(runs),
    ]
    if ov["logged"]:
        lines += _logged_lines(ov["logged"])
    if ov["scale"]:
        lines += _scale_lines(ov, runs)
    return lines, targets


def _built_line(qr: dict[str, Any]) -> str:
    built = qr["built"]
    counts = built["counts"]
    statuses = ", ".join(f"{k} {v:,}" for k, v in built["statuses"].items())
    triggers = ", ".join(f"{k} {v:,}" for k, v in built["triggers"].items())
    return (
        f"A synthetic ledger: {counts['pipeline_runs']:,} runs of {counts['pipelines']} "
        f"pipelines over {DAYS} days ({built['runs_per_pipeline']:,} per pipeline, one every "
        f"{built['step_s'] // 60} min), {counts['task_runs']:,} task runs (extract, transform, "
        f"load per finished run), {counts['pipeline_dependencies']} dependency edges; "
        f"{built['size']} on PostgreSQL after `VACUUM ANALYZE`, {qr['sqlite_mb']:.0f} MB as "
        f"SQLite. Statuses: {statuses}. Triggers: {triggers}. The latest run of some "
        "pipelines is a volume anomaly (x5, zero rows, x1.5), two pipelines fail often in the "
        f"last 7 days. Written by set-based SQL in {built['seconds']:.1f} s. Every function "
        "is called through `pipeledger.ledger.reads.queries` on one open session (warm "
        "connection, one read transaction) in a fresh subprocess, with `now` fixed at the end "
        "of the history; the median and p95 (nearest rank) are over the timed calls after the "
        "warm-up calls. `new session` is the median with a new connection and the "
        "`is_migrated` probe per call, as the CLI does it. `status` and `anomalies` read "
        "the daily rollup (`pipeline_days`) that triggers keep as the runs are written."
    )


def _query_row(qr: dict[str, Any], name: str, t: dict[str, Any]) -> list[str]:
    s = qr["sqlite"]["timings"].get(name, {})
    exec_ms = qr["postgres"]["plans"].get(name, {}).get("execution_ms")
    return [
        name,
        str(t["rows"]),
        f"{t['median_ms']:.2f}",
        f"{t['p95_ms']:.2f}",
        f"{t['cold_median_ms']:.1f}" if "cold_median_ms" in t else "-",
        f"{exec_ms:.2f}" if exec_ms is not None else "-",
        f"{s.get('median_ms', float('nan')):.2f}",
        f"{s.get('p95_ms', float('nan')):.2f}",
        f"{s['cold_median_ms']:.1f}" if "cold_median_ms" in s else "-",
        "target" if name in TARGETED or name in SLOW else "info",
    ]


def _query_targets(qr: dict[str, Any]) -> list[Target]:
    # (function, its name in the target, the bound, judged on its p95 too)
    asked = [(n, n, MAX_QUERY_MS, True) for n in TARGETED]
    asked += [(n, n.split(" ")[0], MAX_SLOW_MS, False) for n in SLOW]
    found = []
    for name, shown, limit, with_p95 in asked:
        for label, part in (("PostgreSQL", "postgres"), ("SQLite", "sqlite")):
            t = qr[part]["timings"][name]
            judged = max(t["median_ms"], t["p95_ms"]) if with_p95 else t["median_ms"]
            detail = (
                f"median {t['median_ms']:.2f} ms, p95 {t['p95_ms']:.2f} ms over "
                f"{qr['calls']} calls ({t['rows']} rows)"
            )
            if with_p95:
                detail += f"; new session {t.get('cold_median_ms', float('nan')):.1f} ms"
            what = "median and p95" if with_p95 else "median"
            found.append(
                Target(f"`{shown}` on {label} < {limit:.0f} ms ({what})", judged < limit, detail)
            )
    return found


QUERY_HEADERS = [
    "function",
    "rows returned",
    "PostgreSQL median ms",
    "p95 ms",
    "new session ms",
    "EXPLAIN ANALYZE ms",
    "SQLite median ms",
    "SQLite p95 ms",
    "SQLite new session ms",
    "",
]


def query_figures(qr: dict[str, Any]) -> tuple[list[str], list[Target]]:
    lines = [QUERIES_TITLE, "", _built_line(qr), ""]
    timings = qr["postgres"]["timings"]
    lines += table(QUERY_HEADERS, [_query_row(qr, n, t) for n, t in timings.items()])
    cli = {name: qr[name].get("cli", {}) for name in ("postgres", "sqlite")}
    lines += [
        "",
        "The command as a whole, `pipeledger status --json` in a new process (median of 5, "
        "information): PostgreSQL "
        f"{cli['postgres'].get('status_ms', float('nan')):.0f} ms, SQLite "
        f"{cli['sqlite'].get('status_ms', float('nan')):.0f} ms, of which starting Python and "
        "the command line (`pipeledger --help`) take "
        f"{cli['sqlite'].get('imports_ms', float('nan')):.0f} ms whatever the ledger holds; "
        "the rest is the command's own imports (the PostgreSQL driver's ~0.29 s on "
        "PostgreSQL), connecting and the query.",
        "Plans of the two target queries: `bench/work/ledger_plans_postgres.txt` and "
        "`bench/work/ledger_plans_sqlite.txt` (written by the run).",
    ]
    return lines, _query_targets(qr)


def _kept(previous: str, title: str) -> tuple[list[str], list[Target]]:
    """A section (and its targets) of the previous report, for a part this run did not
    measure (``--only``), marked as such once, with the run that measured it."""
    found = block(previous, BLOCK)
    if found is None or title not in found:
        return [], []
    start = found.index(title)
    ends = [found.find(t, start + len(title)) for t in (QUERIES_TITLE, "### Targets")]
    body = found[start : min(e for e in ends if e > 0)].strip("\n").splitlines()[1:]
    if not any(line.startswith(KEPT) for line in body):
        run = re.search(r"^Run .*? by `[^`]*`", found, re.MULTILINE)
        when = f" ({run.group(0)[4:]})" if run else ""
        body = ["", f"{KEPT}{when}: not measured by this run.", *body]
    targets = []
    for row in re.findall(r"^\| (.+?) \| (PASS|FAIL|SKIP) \| (.*) \|$", found, re.MULTILINE):
        if row[0].startswith(_TARGET_PREFIX[title]):
            targets.append(Target(row[0], None if row[1] == "SKIP" else row[1] == "PASS", row[2]))
    return [title, *body], targets


def write_report(
    path: Path, ov: dict[str, Any] | None, qr: dict[str, Any] | None, info: dict[str, str]
) -> list[Target]:
    """Rewrite the ``LEDGER`` block of ``path``; its targets."""
    previous = read_text(path)
    begin, end = markers(BLOCK)
    lines = [
        begin,
        "# Run ledger",
        "",
        f"{run_line(MODULE)} (this block is written by `python -m bench.ledger`; the load "
        "benchmark keeps it).",
        "",
    ]
    targets: list[Target] = []
    for title, part in ((OVERHEAD_TITLE, ov), (QUERIES_TITLE, qr)):
        if part is None:  # not measured this time: the previous run's section stays
            body, found = _kept(previous, title)
        else:
            body, found = overhead_figures(part) if part is ov else query_figures(part)
        lines += [*body, ""] if body else []
        targets += found
    lines += ["### Targets", "", *target_table(targets)]
    lines += ["", "### Machine", "", *[f"- {k}: {v}" for k, v in info.items()]]
    notes_begin, notes_end = markers(NOTES)
    notes = block(previous, NOTES) or f"{notes_begin}\n### Notes\n\n(none yet)\n{notes_end}"
    replace_block(path, begin, end, "\n".join([*lines, "", notes, end]))
    return targets
