"""An embedded warehouse that this user may not write: a clear error naming the file and
the fix, nothing changed, and no file left behind that keeps failing runs once the mode is
restored. As root, file modes bind only without the DAC-override capabilities, so the CLI
runs with them dropped (``setpriv``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import Project, order, orders_pipeline

pytestmark = pytest.mark.slow  # the CLI in processes of their own, without root's overrides

WITHOUT_OVERRIDES = (
    ["setpriv", "--bounding-set", "-dac_override,-dac_read_search", "--inh-caps", "-all"]
    if os.geteuid() == 0
    else []
)


def _cli(project: Project, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*WITHOUT_OVERRIDES, sys.executable, "-m", "pipeledger", *args],
        cwd=project.root, capture_output=True, text=True,
    )  # fmt: skip


def _sidecars(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(("-wal", "-shm")))


@pytest.mark.parametrize(("what", "mode"), [("file", 0o444), ("folder", 0o555)])
def test_a_read_only_sqlite_warehouse_is_named_and_the_next_run_works(
    tmp_path: Path, what: str, mode: int
) -> None:
    project = Project(tmp_path, None)
    project.configure(orders=orders_pipeline())
    project.write_csv("orders_1.csv", [order(1, "2024-01-01T10:00:00Z")])
    before = project.run()["watermark_after"]
    project.write_csv("orders_2.csv", [order(2, "2024-01-02T10:00:00Z")])
    database = tmp_path / ".pipeledger" / "warehouse.db"
    assert _sidecars(database.parent) == []  # closed cleanly
    changed = database if what == "file" else database.parent
    kept = changed.stat().st_mode
    changed.chmod(mode)
    try:
        failed = _cli(project, "run")
        state = _cli(project, "state", "--json")
    finally:
        changed.chmod(kept)

    assert failed.returncode == 1
    assert failed.stderr.startswith(f"error: SQLite warehouse {database} cannot be written")
    assert f"chmod u+w {changed}" in failed.stderr and "unexpected" not in failed.stderr
    assert state.returncode == 0, state.stderr  # a reader still reads it
    assert [row["watermark"] for row in json.loads(state.stdout)] == [before]
    assert _sidecars(database.parent) == []  # nothing made with the read-only mode
    assert project.count() == 1

    again = _cli(project, "run")
    assert again.returncode == 0, again.stderr
    assert project.count() == 2


def test_a_read_only_wal_file_left_behind_is_named(tmp_path: Path) -> None:
    project = Project(tmp_path, None)
    project.configure(orders=orders_pipeline())
    project.write_csv("orders_1.csv", [order(1, "2024-01-01T10:00:00Z")])
    project.run()
    shm = tmp_path / ".pipeledger" / "warehouse.db-shm"
    shm.write_bytes(b"")  # as a reader of a read-only database leaves it
    shm.chmod(0o444)
    failed = _cli(project, "run")
    assert failed.returncode == 1
    assert "warehouse.db-shm beside it is read-only" in failed.stderr
    assert f"delete {shm}" in failed.stderr
