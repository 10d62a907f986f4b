"""dbt, the tool a team would otherwise pick: dbt-core 1.12 + dbt-postgres 1.11 in a venv of
their own under ``bench/work/dbt-venv`` (never a dependency of pipeledger), set up by the
benchmark on its first run. dbt-core >= 1.12.1 needs dbt-core-experimental-parser >=
2.0.0b1, which the package index has only as a source distribution whose build downloads a
wheel from GitHub; where that fails, dbt-core 1.12.0 with the parser 2.0.0a4 (a wheel)."""

from __future__ import annotations

import json
import subprocess
import sys
import venv
from dataclasses import dataclass
from pathlib import Path

ADAPTER = "dbt-postgres~=1.11.0"
ATTEMPTS = (
    ["dbt-core~=1.12.0", ADAPTER],
    ["dbt-core==1.12.0", "dbt-core-experimental-parser==2.0.0a4", ADAPTER],
)


@dataclass(frozen=True)
class Dbt:
    """The ``dbt`` command, or why there is none (``note``)."""

    command: Path | None
    version: str
    note: str


def _version(command: Path) -> str | None:
    done = subprocess.run([str(command), "--version"], capture_output=True, text=True)
    if done.returncode != 0:
        return None
    lines = [line.strip() for line in done.stdout.splitlines() if "installed" in line]
    return lines[0].split(":", 1)[1].strip() if lines else "?"


def ensure(work: Path) -> Dbt:
    """The venv's ``dbt`` (made on the first run: 1-3 min), or a note saying why not."""
    folder = work / "dbt-venv"
    command = folder / "bin" / "dbt"
    if command.exists() and (found := _version(command)):
        return Dbt(command, found, "")
    print("setting up dbt in bench/work/dbt-venv (once) ...", file=sys.stderr)
    venv.create(folder, with_pip=True, clear=True)
    pip = [str(folder / "bin" / "python"), "-m", "pip", "install", "-q"]
    log = work / "dbt-setup.log"
    with log.open("w") as out:
        for packages in ATTEMPTS:
            done = subprocess.run([*pip, *packages], stdout=out, stderr=subprocess.STDOUT)
            if done.returncode == 0 and (found := _version(command)):
                return Dbt(command, found, "")
    return Dbt(None, "", f"dbt skipped: its venv could not be built (pip's output: {log})")


ENV = {"DBT_SEND_ANONYMOUS_USAGE_STATS": "false", "DO_NOT_TRACK": "1"}


def command(dbt: Dbt, project: Path, target: str) -> list[str]:
    """``dbt run`` of both models as a user runs it, its artifacts under ``target``."""
    assert dbt.command is not None
    out = [str(dbt.command), "run", "--select", "silver_orders", "gold_daily"]
    out += ["--project-dir", str(project), "--profiles-dir", str(project)]
    return [*out, "--target-path", str(project / target), "--log-path", str(project / "logs")]


def own_seconds(project: Path, target: str) -> float:
    """dbt's own figure: ``run_results.json``'s execution time, summed over the models."""
    results = json.loads((project / target / "run_results.json").read_text())
    return float(sum(r["execution_time"] for r in results["results"]))
