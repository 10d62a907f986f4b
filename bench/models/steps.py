"""The measured steps of a models round, each in a fresh process: the in-process ones through
:mod:`bench.models.child`, the whole processes (``pipeledger run``, ``psql -1 -f``, ``dbt
run``) as a user starts them. Every step's result is verified (:mod:`bench.models.verify`)."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg

from bench.common.postgres import settle
from bench.common.process import (
    bench_command,
    bench_env,
    pipeledger_command,
    run_process,
    run_waited,
)
from bench.models import dbt as dbt_tool
from bench.models.project import (
    BRONZE,
    COMMAND,
    DBT_SCHEMA,
    HAND_SCHEMAS,
    IN_PROCESS,
    dbt_files,
    hand_script,
    pipeledger_model_files,
    pipeledger_toml,
)
from bench.models.verify import Verdict, verify

PHASES = ("first", "noop", "incr")
PSQL = shutil.which("psql")


@dataclass
class Step:
    """One tool's run of one phase: its seconds (``own``: what the tool says its work took;
    for a whole process, its nodes' own seconds summed), and how its tables compare."""

    tool: str
    phase: str
    seconds: float
    own_s: float | None
    rss_mb: float
    verdict: Verdict
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def outside_s(self) -> float | None:
        """A whole process's seconds outside its nodes' own work."""
        return None if self.own_s is None else self.seconds - self.own_s


@dataclass(frozen=True)
class Project:
    """Where a round runs: the database, pipeledger's project and dbt's."""

    url: str
    folder: Path  # pipeledger.toml, models/, source/
    dbt_folder: Path

    @property
    def config(self) -> Path:
        return self.folder / "pipeledger.toml"

    @property
    def source(self) -> Path:
        return self.folder / "source"


def write_projects(url: str, work: Path) -> Project:
    """Fresh project folders for a round against database ``url``."""
    project = Project(url, work / "models-project", work / "models-dbt")
    for folder in (project.folder, project.dbt_folder):
        shutil.rmtree(folder, ignore_errors=True)
    (project.folder / "models").mkdir(parents=True)
    project.source.mkdir()
    project.config.write_text(pipeledger_toml(url, project.source))
    for name, text in pipeledger_model_files().items():
        (project.folder / "models" / name).write_text(text)
    parts = urlsplit(url)
    files = dbt_files(
        parts.hostname or "127.0.0.1",
        parts.port or 5432,
        parts.username or "postgres",
        parts.path.lstrip("/"),
    )
    for name, text in files.items():
        path = project.dbt_folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for schema in HAND_SCHEMAS:
        (project.folder / f"{schema}.sql").write_text(hand_script(schema))
    return project


def _child(args: list[str]) -> dict[str, Any]:
    env = bench_env(ARROW_DEFAULT_MEMORY_POOL="system")
    done = run_waited(bench_command("bench.models.child", args), env)
    result: dict[str, Any] = json.loads(done.output.strip().splitlines()[-1])
    return result


def load_bronze(project: Project) -> dict[str, Any]:
    """The bronze load of whatever is in the source folder (not timed), then ANALYZE."""
    out = _child(["--step", "bronze", "--config", str(project.config)])
    node: dict[str, Any] = out["nodes"][0]
    if node["status"] != "success":
        raise SystemExit(f"the bronze load failed: {node}")
    with psycopg.connect(project.url, autocommit=True) as conn:
        conn.execute(f"ANALYZE {BRONZE}")  # every tool then plans with the same statistics
    settle(project.url)
    return node


def _own(nodes: list[dict[str, Any]]) -> float:
    return float(sum(n.get("duration_s") or 0.0 for n in nodes))


def _failed(nodes: list[dict[str, Any]]) -> list[str]:
    return [f"{n.get('pipeline')}: {n.get('status')}" for n in nodes if n["status"] != "success"]


def hand_in_process(project: Project, phase: str) -> Step:
    schema = HAND_SCHEMAS[0]
    out = _child(["--step", "hand", "--url", project.url, "--schema", schema])
    return Step(
        "hand SQL", phase, out["seconds"], None, out["vmhwm_mb"], verify(project.url, schema)
    )


def pipeledger_in_process(project: Project, phase: str) -> Step:
    silver, gold, schema = IN_PROCESS
    out = _child(
        ["--step", "pipeledger", "--config", str(project.config), "--node", silver, "--node", gold]
    )
    if failed := _failed(out["nodes"]):
        raise SystemExit(f"pipeledger {phase} failed: {failed}")
    extra = {
        "statements": out["statements"],
        "statement_s": out["statement_s"],
        "slowest": out["slowest"],
        "nodes": out["nodes"],
    }
    return Step(
        "pipeledger",
        phase,
        out["seconds"],
        _own(out["nodes"]),
        out["vmhwm_mb"],
        verify(project.url, schema),
        extra,
    )


def pipeledger_process(project: Project, phase: str) -> Step:
    silver, gold, schema = COMMAND
    command = pipeledger_command(["-c", str(project.config), "run", silver, gold, "--json"])
    done = run_process(command, ARROW_DEFAULT_MEMORY_POOL="system")
    nodes: list[dict[str, Any]] = json.loads(done.output)
    if failed := _failed(nodes):
        raise SystemExit(f"pipeledger run {phase} failed: {failed}")
    return Step(
        "pipeledger run",
        phase,
        done.wall,
        _own(nodes),
        done.rss_mb,
        verify(project.url, schema),
        {"cpu_s": done.cpu, "nodes": nodes},
    )


def psql_process(project: Project, phase: str) -> Step | None:
    if PSQL is None:
        return None
    schema = HAND_SCHEMAS[1]
    script = project.folder / f"{schema}.sql"
    command = [
        PSQL,
        "-X",
        "-q",
        "-1",
        "-v",
        "ON_ERROR_STOP=1",
        "-d",
        project.url,
        "-f",
        str(script),
    ]
    done = run_process(command, PGOPTIONS="-c client_min_messages=warning")
    return Step("psql -1 -f", phase, done.wall, None, done.rss_mb, verify(project.url, schema))


def dbt_process(project: Project, phase: str, dbt: dbt_tool.Dbt) -> Step | None:
    if dbt.command is None:
        return None
    target = "target"
    done = run_process(dbt_tool.command(dbt, project.dbt_folder, target), **dbt_tool.ENV)
    own = dbt_tool.own_seconds(project.dbt_folder, target)
    return Step(
        "dbt run",
        phase,
        done.wall,
        own,
        done.rss_mb,
        verify(project.url, DBT_SCHEMA),
        {"cpu_s": done.cpu},
    )


def run_phase(project: Project, phase: str, dbt: dbt_tool.Dbt) -> list[Step]:
    """Every tool's run of ``phase``, one after another, each after a CHECKPOINT."""
    steps = []
    runs: tuple[Callable[[], Step | None], ...] = (
        lambda: hand_in_process(project, phase),
        lambda: pipeledger_in_process(project, phase),
        lambda: psql_process(project, phase),
        lambda: pipeledger_process(project, phase),
        lambda: dbt_process(project, phase, dbt),
    )
    for one in runs:
        settle(project.url)
        step = one()
        if step is None:
            continue
        print(
            f"  {phase:<5} {step.tool:<15} {step.seconds:7.2f} s  rss {step.rss_mb:5.0f} MB  "
            f"{step.verdict.describe()}",
            file=sys.stderr,
        )
        steps.append(step)
    return steps
