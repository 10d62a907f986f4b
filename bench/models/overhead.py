"""The overhead check: no-op runs of a 20-node project (a ``files`` load of a small CSV
folder and 19 models over it) as whole ``pipeledger run`` processes, on the embedded
default and on PostgreSQL. Nothing changed, so nearly all of such a run is what pipeledger
costs outside the SQL: start-up, config, the ledger, each node's look at its upstreams."""

from __future__ import annotations

import json
import shutil
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common.postgres import fresh_database
from bench.common.process import pipeledger_command, run_process
from bench.load.startup import source
from bench.models.project import WIDE_NODES, wide_toml


@dataclass(frozen=True)
class Wide:
    """The no-op runs of the 20-node project on one warehouse."""

    where: str
    walls: list[float]
    own: list[float]  # the nodes' own seconds, summed, per run
    cpu: list[float]
    rss_mb: float
    nodes: int

    @property
    def wall(self) -> float:
        return statistics.median(self.walls)

    @property
    def outside(self) -> float:
        return statistics.median(w - o for w, o in zip(self.walls, self.own, strict=True))


def _project(work: Path, where: str, url: str | None) -> Path:
    folder = work / f"models-wide-{where}"
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "data").mkdir(parents=True)
    csv = source(work)
    (folder / "data" / csv.name).hardlink_to(csv)
    config = folder / "pipeledger.toml"
    config.write_text(wide_toml(url, folder / "data"))
    return config


def _run(config: Path) -> tuple[float, float, float, float, list[dict[str, Any]]]:
    done = run_process(pipeledger_command(["-c", str(config), "run", "--json"]))
    nodes: list[dict[str, Any]] = json.loads(done.output)
    bad = [n for n in nodes if n["status"] != "success"]
    if bad or len(nodes) != WIDE_NODES:
        raise SystemExit(f"the 20-node project's run failed: {bad or len(nodes)}")
    own = float(sum(n.get("duration_s") or 0.0 for n in nodes))
    return done.wall, own, done.cpu, done.rss_mb, nodes


def _measure(where: str, config: Path, calls: int) -> Wide:
    _run(config)  # the first build, not timed
    walls, owns, cpus, rss = [], [], [], 0.0
    for _ in range(calls):
        wall, own, cpu, peak, _nodes = _run(config)
        walls.append(wall)
        owns.append(own)
        cpus.append(cpu)
        rss = max(rss, peak)
    wide = Wide(where, walls, owns, cpus, rss, WIDE_NODES)
    print(
        f"  no-op, {WIDE_NODES} nodes, {where}: {wide.wall:.2f} s a process "
        f"({wide.outside:.2f} s outside the nodes), rss {rss:.0f} MB",
        file=sys.stderr,
    )
    return wide


def measure(server_url: str, work: Path, calls: int) -> list[Wide]:
    """The 20-node no-op runs on the embedded default, then on PostgreSQL."""
    out = [_measure("embedded", _project(work, "embedded", None), calls)]
    with fresh_database(server_url, "models_wide") as url:
        out.append(_measure("postgres", _project(work, "postgres", url), calls))
    return out
