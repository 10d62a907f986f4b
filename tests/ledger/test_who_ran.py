"""Who and what ran: each run records the version of the project it came from (its git
commit, else its config's hash) and the environment (``production`` unless configured)."""

from __future__ import annotations

import hashlib
import subprocess

from tests.helpers import Project, order, orders_pipeline


def _git(project: Project, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(project.root), *args], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def _recorded(project: Project) -> tuple[str, str]:
    rows = project.query(
        'SELECT code_version, environment FROM "pipeledger.pipeline_runs"'
        if project.backend == "sqlite"
        else "SELECT code_version, environment FROM pipeledger.pipeline_runs"
    )
    (row,) = rows
    return str(row[0]), str(row[1])


def test_a_project_in_git_records_its_commit(project: Project) -> None:
    project.configure(orders=orders_pipeline())
    project.write_csv("orders_1.csv", [order(1, "2024-01-01T10:00:00Z")])
    _git(project, "init", "-q")
    _git(project, "add", "pipeledger.toml")
    _git(project, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qm", "the project")
    project.run()
    assert _recorded(project) == (_git(project, "rev-parse", "HEAD"), "production")


def test_an_edited_checkout_says_so(project: Project) -> None:
    path = project.configure(orders=orders_pipeline())
    project.write_csv("orders_1.csv", [order(1, "2024-01-01T10:00:00Z")])
    _git(project, "init", "-q")
    _git(project, "add", "pipeledger.toml")
    _git(project, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qm", "the project")
    path.write_text(path.read_text() + "\n# edited\n")
    project.run()
    version, _ = _recorded(project)
    assert version == _git(project, "rev-parse", "HEAD") + "+dirty"


def test_outside_git_the_config_hash_and_a_configured_environment(project: Project) -> None:
    path = project.configure('\n[ledger]\nenvironment = "staging"\n', orders=orders_pipeline())
    project.write_csv("orders_1.csv", [order(1, "2024-01-01T10:00:00Z")])
    project.run()
    expected = "config:" + hashlib.sha256(path.read_bytes()).hexdigest()[:12]
    assert _recorded(project) == (expected, "staging")
