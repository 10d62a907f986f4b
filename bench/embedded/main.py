"""``python -m bench.embedded``: its command line, the rounds and the report (see
:mod:`bench.embedded`)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.common.clock import median
from bench.common.machine import machine
from bench.common.peers import CSV_COLUMNS, SIZES, PeerData, generate
from bench.common.process import (
    ROOT,
    WORK,
    Process,
    bench_command,
    compile_bytecode,
    pipeledger_command,
    run_process,
    use_snapshot,
)
from bench.common.results import RESULTS, Target, run_line, table, target_table, write_block
from bench.embedded import verify

MODULE = "bench.embedded"
BLOCK = "EMBEDDED"
PHASES = ("first load", "re-run", "incremental")
ON_SQLITE, ON_DUCKDB, PEER = "pipeledger (SQLite)", "pipeledger (DuckDB warehouse)", "DuckDB"
ON_FILES = 'pipeledger (SQLite, incremental = "files")'  # the folder's new files only
OURS = (ON_SQLITE, ON_FILES, ON_DUCKDB)
TOOLS = (*OURS, PEER)
FORMATS = ("csv", "parquet")
MAX_RATIO = 3.0  # each phase, pipeledger's process against DuckDB's, wall time


@dataclass(frozen=True, kw_only=True)
class Step:
    """One tool's process for one phase of one round."""

    fmt: str
    phase: str
    tool: str
    round: int
    wall: float
    cpu: float  # user + system, every thread
    rss_mb: float
    written: int  # rows it inserted or updated
    verdict: verify.Verdict
    load: float  # the 1-minute load average as it began


def _toml(fmt: str, warehouse: str | None, files: bool) -> str:
    """The pipeline over the folder ``src`` (into ``warehouse``; None: the embedded
    default): the CSV's columns declared (its text has no types), the Parquet file's own
    types; with ``files``, ``incremental = "files"`` (a run reads the folder's new files,
    not every file for rows past the watermark)."""
    columns = ", ".join(f'{k} = "{v}"' for k, v in CSV_COLUMNS.items())
    typed = f"columns = {{ {columns} }}\n" if fmt == "csv" else ""
    where = f'[warehouse]\nurl = "{warehouse}"\n\n' if warehouse else ""
    return (
        f"{where}[pipelines.orders]\n"
        f'source = {{ kind = "{fmt}", path = "src" }}\n'
        'target = "orders"\nkey = ["order_id"]\ncursor = "updated_at"\n'
        f'on_conflict = "newer_wins"\n{typed}' + ('incremental = "files"\n' if files else "")
    )


class Project:
    """A pipeledger project of one round: its config, its source folder, its warehouse."""

    def __init__(self, folder: Path, fmt: str, *, duckdb: bool, files: bool = False) -> None:
        (folder / "src").mkdir(parents=True)
        self.folder, self.duckdb = folder, duckdb
        self.warehouse = folder / ("warehouse.duckdb" if duckdb else ".pipeledger/warehouse.db")
        self.config = folder / "pipeledger.toml"
        url = f"duckdb:///{self.warehouse}" if duckdb else None
        self.config.write_text(_toml(fmt, url, files))

    def add(self, path: Path) -> None:
        (self.folder / "src" / path.name).hardlink_to(path)

    def verify(self, data: PeerData, batches: int) -> verify.Verdict:
        if self.duckdb:
            return verify.duckdb_table(self.warehouse, data, batches)
        return verify.sqlite_table(self.warehouse, data, batches)


class Round:
    """One round's folder: pipeledger's projects (the embedded default's SQLite file and a
    DuckDB warehouse) and the DuckDB peer's file."""

    def __init__(self, work: Path, data: PeerData, fmt: str, index: int) -> None:
        self.folder = work / "embedded" / f"{fmt}-{index}"
        shutil.rmtree(self.folder, ignore_errors=True)
        self.projects = {
            ON_SQLITE: Project(self.folder / "sqlite", fmt, duckdb=False),
            ON_FILES: Project(self.folder / "sqlite-files", fmt, duckdb=False, files=True),
            ON_DUCKDB: Project(self.folder / "duckdb", fmt, duckdb=True),
        }
        self.peer_file = self.folder / "peer.duckdb"
        self.data, self.fmt, self.index = data, fmt, index
        self.add(1)

    def add(self, batch: int) -> None:
        """Batch ``batch`` into pipeledger's source folders, beside what is there."""
        for project in self.projects.values():
            project.add(self.data.file(batch, self.fmt))

    def run(self, tool: str, phase: str) -> Step:
        load = os.getloadavg()[0]
        batch = 2 if phase == "incremental" else 1
        if tool == PEER:
            ran, written = self._peer(phase, batch)
            verdict = verify.duckdb_table(self.peer_file, self.data, batch)
        else:
            ran, written = self._pipeledger(self.projects[tool], tool, phase)
            verdict = self.projects[tool].verify(self.data, batch)
        return Step(
            fmt=self.fmt,
            phase=phase,
            tool=tool,
            round=self.index,
            wall=ran.wall,
            cpu=ran.cpu,
            rss_mb=ran.rss_mb,
            written=written,
            verdict=verdict,
            load=load,
        )

    def _pipeledger(self, project: Project, tool: str, phase: str) -> tuple[Process, int]:
        """``pipeledger run orders`` as a user runs it."""
        ran = run_process(
            pipeledger_command(["-c", str(project.config), "run", "--json", "orders"])
        )
        outcome = json.loads(ran.output)[0]
        if outcome["status"] != "success":
            raise SystemExit(f"{tool}: {phase} ({self.fmt}) failed: {outcome['error']}")
        return ran, int(outcome["rows_inserted"]) + int(outcome["rows_updated"])

    def _peer(self, phase: str, batch: int) -> tuple[Process, int]:
        """The DuckDB peer's process for ``phase``."""
        path = self.data.file(batch, self.fmt)
        step = "first" if phase == PHASES[0] else "upsert"
        args = [step, "--db", str(self.peer_file), "--file", str(path)]
        ran = run_process(bench_command("bench.embedded.peer", args), PYTHONPATH=str(ROOT))
        return ran, int(json.loads(ran.output.strip().splitlines()[-1])["rows_written"])


def one_round(work: Path, data: PeerData, fmt: str, index: int) -> list[Step]:
    """The phases, each tool's process in turn (the order turns each round)."""
    here = Round(work, data, fmt, index)
    shift = index % len(TOOLS)
    tools = TOOLS[shift:] + TOOLS[:shift]
    steps = []
    for phase in PHASES:
        if phase == "incremental":
            here.add(2)
        for tool in tools:
            step = here.run(tool, phase)
            print(
                f"  {fmt} round {index + 1} {phase:<11} {tool:<30} {step.wall:6.2f} s, "
                f"CPU {step.cpu:5.2f} s, {step.rss_mb:5.0f} MB, load {step.load:.1f}"
                + ("" if step.verdict.correct else f"  WRONG: {step.verdict.differences}"),
                file=sys.stderr,
            )
            steps.append(step)
    shutil.rmtree(here.folder)  # ~250 MB each
    return steps


# -- the report ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Pair:
    """One phase of one format: a pipeledger warehouse's steps and DuckDB's, round by
    round."""

    fmt: str
    phase: str
    tool: str
    ours: list[Step]
    peers: list[Step]

    @property
    def ratios(self) -> list[float]:
        return [o.wall / p.wall for o, p in zip(self.ours, self.peers, strict=True)]

    @property
    def cpu_ratios(self) -> list[float]:
        return [o.cpu / p.cpu for o, p in zip(self.ours, self.peers, strict=True)]


def pairs(steps: Sequence[Step], formats: Sequence[str]) -> list[Pair]:
    def of(fmt: str, phase: str, tool: str) -> list[Step]:
        found = [s for s in steps if (s.fmt, s.phase, s.tool) == (fmt, phase, tool)]
        return sorted(found, key=lambda s: s.round)

    return [
        Pair(fmt, phase, tool, of(fmt, phase, tool), of(fmt, phase, PEER))
        for tool in OURS
        for fmt in formats
        for phase in PHASES
    ]


def _range(values: Sequence[float], digits: int = 2) -> str:
    return f"{median(values):.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def _row(pair: Pair) -> list[str]:
    ours, peers = pair.ours, pair.peers
    return [
        pair.tool,
        pair.fmt,
        pair.phase,
        f"{median([s.wall for s in ours]):.2f}",
        f"{median([s.wall for s in peers]):.2f}",
        _range(pair.ratios),
        f"{median([s.cpu for s in ours]):.2f}",
        f"{median([s.cpu for s in peers]):.2f}",
        _range(pair.cpu_ratios),
        f"{max(s.rss_mb for s in ours):.0f} / {max(s.rss_mb for s in peers):.0f}",
        f"{ours[0].written:,} / {peers[0].written:,}",
        " / ".join(f"{o.wall:.2f}:{p.wall:.2f}" for o, p in zip(ours, peers, strict=True)),
    ]


HEADERS = [
    "pipeledger on",
    "file",
    "phase",
    "pipeledger s",
    "DuckDB s",
    "x DuckDB, wall (median of rounds, range)",
    "pipeledger CPU s",
    "DuckDB CPU s",
    "x DuckDB, CPU",
    "peak RSS MB (pl / DuckDB)",
    "rows written (pl / DuckDB)",
    "each round, pl:DuckDB s",
]


def targets(found: Sequence[Pair]) -> list[Target]:
    out = [
        Target(
            f"{p.tool}: {p.phase} ({p.fmt}) <= {MAX_RATIO:g}x DuckDB (wall, median of "
            "the rounds' ratios)",
            median(p.ratios) <= MAX_RATIO,
            f"{_range(p.ratios)}x; CPU {_range(p.cpu_ratios)}x",
        )
        for p in found
    ]
    checked = {(s.tool, s.fmt, s.phase, s.round): s for p in found for s in [*p.ours, *p.peers]}
    wrong = [
        f"{s.tool} {s.fmt} {s.phase} round {s.round + 1}: {'; '.join(s.verdict.differences)}"
        for s in checked.values()
        if not s.verdict.correct
    ]
    out.append(
        Target(
            "every tool's table equals the expected one after every phase",
            not wrong,
            "; ".join(wrong) or f"{len(checked)} tables checked",
        )
    )
    reruns = [s for p in found if p.phase == "re-run" for s in p.ours]
    out.append(
        Target(
            "pipeledger's re-runs write 0 rows",
            all(s.written == 0 for s in reruns),
            ", ".join(f"{s.written:,}" for s in reruns),
        )
    )
    return out


def _loads(steps: Sequence[Step]) -> str:
    loads = [s.load for s in steps]
    return f"median {median(loads):.1f}, min {min(loads):.1f}, max {max(loads):.1f}"


def _machine(snapshot: str | None) -> list[str]:
    import duckdb

    info = machine(None, snapshot) | {
        "sqlite (Python's sqlite3)": sqlite3.sqlite_version,
        "duckdb": duckdb.__version__,
    }
    return [f"- {k}: {v}" for k, v in info.items()]


def block(
    steps: Sequence[Step], data: PeerData, formats: Sequence[str], snapshot: str | None
) -> list[str]:
    found = pairs(steps, formats)
    rounds = len(found[0].ours)
    size = data.file(1, "csv").stat().st_size / 1e6
    lines = [
        "# The embedded default against DuckDB",
        "",
        f"{run_line(MODULE)}. The peers' {data.rows:,}-row orders file ({size:.0f} MB of "
        f"CSV; the same rows as Parquet) and its batch 2 ({data.batch2_rows:,} rows), "
        "whole processes, each timed from its start to its exit (bench/embedded/): "
        "`pipeledger run orders` on the embedded default (SQLite; and the same with "
        '`incremental = "files"`, which reads only the folder\'s new files) and on a '
        'DuckDB warehouse (`url = "duckdb:///..."`, its ledger a SQLite file beside it), '
        "against the DuckDB peer (`CREATE TABLE AS SELECT * FROM read_csv(...)` + primary "
        "key; `INSERT .. ON CONFLICT DO UPDATE .. WHERE excluded.updated_at > "
        "orders.updated_at`). First load: batch 1 into nothing; re-run: the same input "
        "again; incremental: batch 2 added (pipeledger: beside batch 1 in its source "
        f"folder; the peer: batch 2 upserted). {rounds} rounds back to back, the "
        "processes of a phase one after the other (their order turns each round); a "
        "phase's ratio is the median of its rounds' ratios (range in brackets). CPU is the "
        "process's user + system time, every thread. Every table was checked against the "
        "expected one after every phase.",
        "",
        f"Load average (1 min) as each process began: {_loads(steps)}, on {os.cpu_count()} cores.",
        "",
        *table(HEADERS, [_row(p) for p in found]),
        "",
        *target_table(targets(found)),
        "",
        "Machine:",
        "",
        *_machine(snapshot),
    ]
    return lines


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__)
    p.add_argument("--size", choices=sorted(SIZES), default="1m", help="the peers' file size")
    p.add_argument(
        "--formats", default=",".join(FORMATS), help="csv, parquet or both (comma-separated)"
    )
    p.add_argument("--repeat", type=int, default=5, help="rounds of every phase (default 5)")
    p.add_argument("--work", type=Path, default=WORK, help="work folder (git-ignored)")
    p.add_argument(
        "--snapshot",
        metavar="REV",
        help="benchmark pipeledger/ as committed at git revision REV instead of the tree",
    )
    p.add_argument("--results", type=Path, default=RESULTS)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    work = args.work.resolve()
    formats = [f.strip() for f in args.formats.split(",") if f.strip()]
    if not formats or any(f not in FORMATS for f in formats):
        raise SystemExit(f"--formats: {args.formats!r}; choose from {', '.join(FORMATS)}")
    snapshot = use_snapshot(work, args.snapshot) if args.snapshot else None
    data = generate(work / "peers", args.size)
    compile_bytecode()
    steps: list[Step] = []
    for index in range(args.repeat):
        for fmt in formats:
            steps += one_round(work, data, fmt, index)
    lines = block(steps, data, formats, snapshot)
    write_block(args.results, BLOCK, lines)
    print("\n".join(lines[lines.index(table(HEADERS, [])[0]) : lines.index("Machine:")]))
    print(f"\nwrote the {BLOCK} block of {args.results}")
