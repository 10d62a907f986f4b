"""The drill's block of ``bench/RESULTS.md`` (between ``<!-- BEGIN DRILL -->`` markers)."""

from __future__ import annotations

import os
import platform
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.common.results import replace_block

RESULTS = Path(__file__).resolve().parents[2] / "bench" / "RESULTS.md"
BEGIN, END = "<!-- BEGIN DRILL -->", "<!-- END DRILL -->"
NAMES = {"pg": "PostgreSQL", "sqlite": "SQLite"}
ROWS = (
    ("SIGKILLs: first loads / incremental runs / backfills", "steps"),
    ("- before the ledger row", "phase:before_ledger_row"),
    ("- after the ledger row, before staging", "phase:before_staging"),
    ("- while staging", "phase:staging"),
    ("- after staging (gate, merge, watermark, commit)", "phase:after_staging"),
    ("- after the commit", "phase:after_commit"),
    ("steps that ended before their kill (not counted)", "finished_before_kill"),
    ("**duplicate keys**", "duplicate_keys"),
    ("**lost rows** (missing or stale keys)", "lost_rows"),
    ("rows the model does not hold", "extra_rows"),
    ("**watermarks ahead of the data**", "watermarks_ahead"),
    ("watermarks other than the model's", "watermark_mismatches"),
    ("ledger/warehouse contradictions", "ledger_contradictions"),
    ("runs left running after the watchdog", "stuck_running"),
    ("counts other than the model's (JSON, ledger)", "count_mismatches"),
    ("unexpected failures", "unexpected_failures"),
    ("runs retried: pipeline still busy after a kill", "busy_retries"),
    ("longest wait for a killed run's sessions (s)", "max_linger_s"),
    (
        "runs `pipeledger watchdog` abandoned (later runs abandon the others)",
        "abandoned_by_watchdog",
    ),
    ("runs in the ledgers at the end, by status", "runs_by_status"),
    ("concurrent triggers: endings", "concurrent_endings"),
    ("concurrent triggers: ledger status", "concurrent_ledger_status"),
    ("concurrency violations", "concurrency_violations"),
    ("ledger outages: runs without a ledger / spooled / spool violations", "outage"),
    ("wall time (s): kills / concurrent / outage / total", "durations"),
)


def _cell(summary: dict[str, Any], key: str) -> str:
    figures = summary["figures"]
    if key.startswith("phase:"):
        return str(summary["kills_by_phase"][key[6:]])
    if key == "steps":
        by_step = summary["kills_by_step"]
        parts = " / ".join(str(by_step[k]) for k in ("first_loads", "runs", "backfills"))
        return f"**{summary['kills']}**: {parts}"
    if key in ("concurrent_endings", "concurrent_ledger_status"):
        rounds = (
            f"{figures.get('concurrent_rounds', 0)} x {figures.get('concurrent_triggers', 0)}: "
        )
        return rounds + ", ".join(f"{k} {v}" for k, v in figures.get(key, {}).items())
    if key == "runs_by_status":
        return ", ".join(f"{k} {v}" for k, v in figures.get(key, {}).items())
    if key == "outage":
        if not figures.get("ledger_outages"):
            return "-"
        names = ("outage_runs", "outage_runs_spooled", "spool_violations")
        return " / ".join(str(summary[n]) for n in names)
    if key == "durations":
        d = summary["durations"]
        spans = [d.get(k) for k in ("kills_s", "concurrent_s", "ledger_outage_s", "total_s")]
        return " / ".join("-" if s is None else f"{s:.0f}" for s in spans)
    return str(summary.get(key, figures.get(key, "-")))


@dataclass(frozen=True)
class Start:
    """What the block says of the run's start: its command, commit and the machine's load."""

    command: str
    commit: str = field(default_factory=lambda: commit())
    load: str = field(default_factory=lambda: load_average())
    at: float = field(default_factory=time.monotonic)


def block(summaries: list[dict[str, Any]], start: Start) -> str:
    kills = sum(s["kills"] for s in summaries)
    bad = {
        k: sum(s[k] for s in summaries) for k in ("duplicate_keys", "lost_rows", "watermarks_ahead")
    }
    passed = kills >= 200 and not any(bad.values()) and not sum(s["violations"] for s in summaries)
    header = "| | " + " | ".join(NAMES[s["backend"]] for s in summaries) + " |"
    lines = [
        BEGIN, "## Crash and concurrency drill", "",
        f"Run {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} by `{start.command}` at "
        f"commit {start.commit}; {_machine()}; load average {start.load} at the start, "
        f"{load_average()} at the end (1/5/15 min). Wall time "
        f"{(time.monotonic() - start.at) / 60:.1f} min. How it works and how to "
        "run it: [README.md](README.md#drills-crash-and-concurrency).", "",
        header, "|---" * (len(summaries) + 1) + "|",
    ]  # fmt: skip
    for label, key in ROWS:
        lines.append(f"| {label} | " + " | ".join(_cell(s, key) for s in summaries) + " |")
    verdict = "PASS" if passed else "FAIL"
    lines += [
        "", f"**{verdict}** {kills} SIGKILLs (target >= 200): {bad['duplicate_keys']} duplicate "
        f"keys, {bad['lost_rows']} lost rows, {bad['watermarks_ahead']} watermarks ahead of the "
        f"data; {sum(s['violations'] for s in summaries)} violation(s) in all.", "",
    ]  # fmt: skip
    for s in summaries:
        lines += [f"- {NAMES[s['backend']]}: {m}" for m in s["violation_messages"][:10]]
    return "\n".join([*lines, END])


def write(text: str, path: Path = RESULTS) -> None:
    """Put the block in place of the previous one (or at the end)."""
    replace_block(path, BEGIN, END, text)


def commit() -> str:
    here = Path(__file__).resolve().parent
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=here,
                          capture_output=True, text=True, check=False)  # fmt: skip
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "../../pipeledger"], cwd=here,
                           capture_output=True, text=True, check=False).stdout.strip()  # fmt: skip
    return f"`{done.stdout.strip() or '?'}`" + (" (pipeledger/ modified)" if dirty else "")


def _machine() -> str:
    cpu = "?"
    with open("/proc/cpuinfo") as handle:
        for line in handle:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return f"{os.cpu_count()} cores ({cpu}), Python {platform.python_version()}"


def load_average() -> str:
    """The machine's 1/5/15-minute load: other work slows every step down."""
    return " / ".join(f"{x:.1f}" for x in os.getloadavg())
