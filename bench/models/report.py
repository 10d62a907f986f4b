"""The models benchmark's figures, its targets with PASS/FAIL, and its block of
``bench/RESULTS.md`` (``MODELS``; the 20-node part is ``MODELS-OVERHEAD`` inside it, which
``--only overhead`` rewrites alone)."""

from __future__ import annotations

import statistics
from collections import defaultdict
from pathlib import Path

from bench.common.results import Target, markers, replace_block, run_line, table, target_table
from bench.models.dbt import Dbt
from bench.models.overhead import Wide
from bench.models.steps import PHASES, Step

MODULE = "bench.models"
BLOCK, OVERHEAD_BLOCK = "MODELS", "MODELS-OVERHEAD"
IN_PROCESS_MAX = 1.2  # pipeledger in process over the hand SQL in process
DBT_MIN = 3.0  # dbt run process over the pipeledger run process
OUTSIDE_MAX_S = 0.3  # a pipeledger run process outside its nodes' own work
WIDE_MAX_S = 0.5  # a no-op run of the 20-node project, a whole process
HAND, PL, PL_CLI, PSQL, DBT = "hand SQL", "pipeledger", "pipeledger run", "psql -1 -f", "dbt run"
VERIFIED_TOOLS = (HAND, PL, PL_CLI, PSQL)


Medians = dict[tuple[str, str], Step]  # (tool, phase): the round with the median seconds


def medians(rounds: list[list[Step]]) -> Medians:
    by: dict[tuple[str, str], list[Step]] = defaultdict(list)
    for steps in rounds:
        for step in steps:
            by[(step.tool, step.phase)].append(step)
    out = {}
    for key, runs in by.items():
        ordered = sorted(runs, key=lambda s: s.seconds)
        chosen = ordered[(len(ordered) - 1) // 2]
        chosen.extra["rounds_s"] = [round(s.seconds, 2) for s in runs]
        chosen.extra["all_equal"] = all(s.verdict.equal for s in runs)
        chosen.rss_mb = max(s.rss_mb for s in runs)
        out[key] = chosen
    return out


def _ratio(ms: Medians, a: str, b: str, phase: str) -> float | None:
    if (a, phase) not in ms or (b, phase) not in ms:
        return None
    return ms[(a, phase)].seconds / ms[(b, phase)].seconds


def targets(ms: Medians, wide: list[Wide], dbt: Dbt) -> list[Target]:
    out = []
    for phase in PHASES:
        r = _ratio(ms, PL, HAND, phase)
        out.append(
            Target(
                f"{phase}: pipeledger in process <= {IN_PROCESS_MAX}x hand SQL in process",
                None if r is None else r <= IN_PROCESS_MAX,
                "-"
                if r is None
                else f"{r:.2f}x ({ms[(PL, phase)].seconds:.2f} s vs "
                f"{ms[(HAND, phase)].seconds:.2f} s)",
            )
        )
    for phase in PHASES:
        step = ms.get((PL_CLI, phase))
        outside = None if step is None else step.outside_s
        out.append(
            Target(
                f"{phase}: `pipeledger run` process <= {OUTSIDE_MAX_S} s outside its nodes' work",
                None if outside is None else outside <= OUTSIDE_MAX_S,
                "-"
                if step is None or outside is None
                else f"{outside:.2f} s ({step.seconds:.2f} s "
                f"process, {step.own_s:.2f} s in its nodes)",
            )
        )
    for phase in PHASES:
        r = _ratio(ms, DBT, PL_CLI, phase)
        out.append(
            Target(
                f"{phase}: `pipeledger run` process >= {DBT_MIN:.0f}x faster than `dbt run`",
                None if r is None else r >= DBT_MIN,
                dbt.note
                if r is None
                else f"{r:.2f}x ({ms[(DBT, phase)].seconds:.2f} s vs "
                f"{ms[(PL_CLI, phase)].seconds:.2f} s)",
            )
        )
    for w in wide:
        out.append(
            Target(
                f"no-op run of a {w.nodes}-node project <= {WIDE_MAX_S} s as a process ({w.where})",
                w.wall <= WIDE_MAX_S,
                f"{w.wall:.2f} s (median of {len(w.walls)}; {w.outside:.2f} s outside the nodes)",
            )
        )
    wrong = [
        f"{tool} {phase}"
        for (tool, phase), step in sorted(ms.items())
        if tool in VERIFIED_TOOLS and not step.extra["all_equal"]
    ]
    out.append(
        Target(
            "pipeledger's and the hand SQL's silver and gold equal a full recompute, every phase",
            not wrong,
            "every round of every phase" if not wrong else "differs: " + ", ".join(wrong),
        )
    )
    return out


def _steps_table(ms: Medians) -> list[str]:
    rows = []
    for phase in PHASES:
        for tool in (HAND, PL, PSQL, PL_CLI, DBT):
            step = ms.get((tool, phase))
            if step is None:
                continue
            own = "-" if step.own_s is None else f"{step.own_s:.2f}"
            outside = "-" if step.outside_s is None or tool == PL else f"{step.outside_s:.2f}"
            rows.append(
                [
                    phase,
                    tool,
                    f"{step.seconds:.2f}",
                    ", ".join(f"{s:.2f}" for s in step.extra["rounds_s"]),
                    own,
                    outside,
                    f"{step.rss_mb:.0f}",
                    step.verdict.describe(),
                ]
            )
    headers = ["phase", "tool", "seconds", "rounds", "nodes' own s", "outside s", "peak RSS MB"]
    return table([*headers, "against a full recompute"], rows)


def _statements(ms: Medians) -> list[str]:
    rows = []
    for phase in PHASES:
        step = ms.get((PL, phase))
        if step is not None:
            kinds = step.extra.get("statements", {})
            counted = ", ".join(f"{k} {v}" for k, v in sorted(kinds.items()))
            rows.append(
                [phase, str(sum(kinds.values())), counted, f"{step.extra['statement_s']:.2f}"]
            )
    return [
        *table(["phase", "statements", "by kind", "their seconds"], rows),
        "",
        "The slowest of them, per phase (seconds, the statement's start):",
        "",
        *(
            f"- {phase}: {seconds:.2f} s `{sql}`"
            for phase in PHASES
            if (step := ms.get((PL, phase))) is not None
            for seconds, sql in step.extra.get("slowest", [])
        ),
    ]


def overhead_lines(wide: list[Wide], info: dict[str, str]) -> list[str]:
    begin, end = markers(OVERHEAD_BLOCK)
    rows = [
        [
            w.where,
            f"{w.wall:.2f}",
            ", ".join(f"{x:.2f}" for x in w.walls),
            f"{statistics.median(w.own):.2f}",
            f"{w.outside:.2f}",
            f"{statistics.median(w.cpu):.2f}",
            f"{w.rss_mb:.0f}",
        ]
        for w in wide
    ]
    headers = [
        "warehouse",
        "median s",
        "every run",
        "nodes' own s",
        "outside s",
        "CPU s",
        "peak RSS MB",
    ]
    return [
        begin,
        "",
        "### No-op runs of a 20-node project (whole `pipeledger run` processes)",
        "",
        run_line(MODULE) + f"; load average {info['load average at the end (1/5/15 min)']}.",
        "",
        *table(headers, rows),
        "",
        *target_table(
            [
                Target(
                    f"no-op run of a {w.nodes}-node project <= {WIDE_MAX_S} s ({w.where})",
                    w.wall <= WIDE_MAX_S,
                    f"{w.wall:.2f} s",
                )
                for w in wide
            ]
        ),
        "",
        end,
    ]


def _machine(info: dict[str, str]) -> list[str]:
    return [f"- {k}: {v}" for k, v in info.items()]


def write(
    path: Path,
    rounds: list[list[Step]],
    dbt: Dbt,
    wide: list[Wide],
    info: dict[str, str],
    rows: int,
) -> None:
    ms = medians(rounds)
    verdicts = targets(ms, wide, dbt)
    for t in verdicts:
        print(f"{t.verdict:<4}  {t.name}: {t.detail}")
    begin, end = markers(BLOCK)
    lines = [
        begin,
        "",
        "## Models: bronze -> silver merge -> gold per-day aggregate (`bench.models`)",
        "",
        run_line(MODULE) + f": {rows:,} bronze rows, {len(rounds)} round(s), PostgreSQL with "
        "its default settings (fsync on); medians of the rounds.",
        "",
        *target_table(verdicts),
        "",
        *_steps_table(ms),
        "",
        "`seconds`: in process (hand SQL, pipeledger) the work alone, connecting included; the"
        " others whole processes. `outside s`: a whole process's seconds beyond its nodes' own"
        f" (`duration_s`, dbt's `execution_time`). dbt: {dbt.version or dbt.note}.",
        "",
        "pipeledger's statements in process (`observe_statements`):",
        "",
        *_statements(ms),
        "",
        *overhead_lines(wide, info),
        "",
        "Machine:",
        "",
        *_machine(info),
        "",
        end,
    ]
    replace_block(path, begin, end, "\n".join(lines))


def write_overhead(path: Path, wide: list[Wide], info: dict[str, str]) -> None:
    begin, end = markers(OVERHEAD_BLOCK)
    for w in wide:
        print(f"no-op {w.nodes} nodes {w.where}: {w.wall:.2f} s ({w.outside:.2f} s outside)")
    replace_block(path, begin, end, "\n".join(overhead_lines(wide, info)))
