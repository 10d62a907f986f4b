"""The quick commands start without the loader: ``--help`` and the commands that read state
or the ledger import neither pyarrow nor numpy, which are most of a load's start-up, nor
pydantic (the config model: they only need to know where the warehouse and the ledger
are), nor sqlglot, nor the OpenLineage client or Airflow. ``--help`` does not import rich
either, nor do the quick commands when their output is not a terminal; on the embedded
default they import neither logging nor socket (the access audit's record). Their wall
times are measured by ``python -m bench.load``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.helpers import Project, order, orders_pipeline

HEAVY = (
    "pyarrow",
    "numpy",
    "pydantic",
    "sqlglot",
    "psycopg",
    "pipeledger.config.model",
    "pipeledger.runs.load.loader",
    "pipeledger.transform",
    # lineage: the OpenLineage client (0.4-0.6 s) and what builds and sends events
    "openlineage",
    "requests",
    "pipeledger.lineage.events",
    "pipeledger.lineage.emitter",
    "pipeledger.lineage.columns",
    "airflow",
    "pipeledger.airflow",
    "pipeledger.web",  # the dashboard: only `pipeledger ui` (and serve --ui) import it
    "starlette",
    "jinja2",
    "uvicorn",
)
MARK = "-- modules --"
# runs each argument list as a `pipeledger` command in one process, then lists its modules
PROBE = f"""
import json, sys
from pipeledger.cli.app import app
for argv in json.loads(sys.argv[1]):
    sys.argv = ["pipeledger", *argv]
    try:
        app()
    except SystemExit as exc:
        print("exit", exc.code)
print({MARK!r})
print("\\n".join(sorted(sys.modules)))
"""


def probe(cwd: Path, *commands: list[str]) -> tuple[str, set[str]]:
    """What the commands printed, and every module they imported."""
    command = [sys.executable, "-c", PROBE, json.dumps(commands)]
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=True)
    printed, _, modules = done.stdout.partition(MARK)
    return printed, set(modules.split())


def heavy(modules: set[str], driver: str = "") -> list[str]:
    """The modules of ``HEAVY`` among ``modules``, except ``driver`` (the database's own)."""
    found = (m for m in modules if m.split(".")[0] in HEAVY or m.startswith(HEAVY))
    return sorted(m for m in found if not driver or not m.startswith(driver))


def test_help_imports_neither_pyarrow_nor_the_loader(tmp_path: Path) -> None:
    printed, modules = probe(tmp_path, ["--help"])
    assert "Usage: pipeledger" in printed and "backfill" in printed
    assert heavy(modules) == []
    assert not [m for m in modules if m.split(".")[0] == "rich"]


def test_state_runs_and_status_read_without_the_loader(project: Project) -> None:
    project.configure(orders=orders_pipeline())
    project.write_csv("orders_1.csv", [order(1, "2024-01-01T10:00:00Z")])
    run_id = project.run()["run_id"]

    printed, modules = probe(project.root, ["state"], ["runs"], ["status"], ["show", run_id])

    assert "2024-01-01T10:00:00.000000+00:00" in printed  # state: the watermark
    assert printed.count(run_id[:8]) >= 2  # runs and show list the run
    assert "HEALTHY" in printed or "INSUFFICIENT_HISTORY" in printed  # status
    assert "exit 0" in printed and "exit 1" not in printed
    assert heavy(modules, driver="psycopg" if project.backend == "postgres" else "") == []
    # output to a pipe is plain text: rich is for a terminal
    assert not [m for m in modules if m.split(".")[0] == "rich"]
    if project.backend != "postgres":  # (the PostgreSQL driver logs and opens sockets)
        assert not {"logging", "socket", "getpass"} & modules  # the access record's needs
        assert "hashlib" not in modules  # OpenSSL: only what hashes a file or a key loads it


def test_runs_looks_a_run_up_only_for_before(tmp_path: Path) -> None:
    """The first page of ``runs`` needs no run lookup; ``--before`` looks its run up."""
    project = Project(tmp_path, None)
    project.configure(orders=orders_pipeline())
    project.write_csv("orders_1.csv", [order(1, "2024-01-01T10:00:00Z")])
    run_id = project.run()["run_id"]

    first, modules = probe(project.root, ["runs"])
    assert run_id[:8] in first and "pipeledger.ledger.reads.detail" not in modules

    after, modules = probe(project.root, ["runs", "--before", run_id[:8]])
    assert "exit 0" in after and run_id[:8] not in after
    assert "pipeledger.ledger.reads.detail" in modules


def test_the_command_ends_with_its_output_flushed_and_its_exit_code(tmp_path: Path) -> None:
    """The process ends without tearing its modules down (``cli.app._exit``): what it
    printed still arrives whole through a pipe, with the command's exit code."""
    Project(tmp_path, None).configure(orders=orders_pipeline())
    argv = [sys.executable, "-m", "pipeledger", "run", "--json", "nosuch"]
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 2
    assert json.loads(done.stdout)["exit_code"] == 2 and "nosuch" in done.stderr


def test_an_unchanged_folder_of_files_is_passed_by_without_the_loader(tmp_path: Path) -> None:
    """A run of loads alone that finds no new file imports neither the loader nor the SQL
    parser (only a model's SQL is checked before a DAG run starts)."""
    project = Project(tmp_path, None)
    project.configure(orders=orders_pipeline(incremental="files"))
    for n in range(3):
        project.write_csv(f"orders_{n}.csv", [order(n, "2024-01-01T10:00:00Z")])
    assert project.run()["status"] == "success"

    printed, modules = probe(project.root, ["run", "orders"])

    assert "exit 0" in printed and "3 unchanged" in printed
    assert not [m for m in modules if m.startswith(("sqlglot", "pipeledger.runs.load.loader"))]
