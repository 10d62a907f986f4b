"""A load killed with SIGKILL leaves nothing behind; other processes can read during a load."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import time

from tests.helpers import Project, order, orders_pipeline, write_big_orders_csv

BIG = 600_000


def _wait_until_staging(process: subprocess.Popen[str], timeout: float = 120.0) -> str:
    """Read the loader's log until it has staged at least one batch; return what it said."""
    assert process.stderr is not None
    deadline = time.monotonic() + timeout
    seen = ""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([process.stderr], [], [], 0.5)
        if ready:
            line = process.stderr.readline()
            seen += line
            if "staged" in line:
                return seen
        assert process.poll() is None, f"the load ended before it could be observed:\n{seen}"
    raise AssertionError(f"no staging progress within {timeout}s:\n{seen}")


def _base(project: Project) -> dict[str, str]:
    project.configure(orders=orders_pipeline())
    project.write_csv("orders_0.csv", [order(i, "2023-12-31T10:00:00Z") for i in range(1, 11)])
    project.run()
    write_big_orders_csv(
        project.root / "data" / "orders_1.csv", BIG, 1_000, "2024-01-01T00:00:00+00:00"
    )
    return project.watermarks()


def test_sigkill_mid_load_leaves_target_and_watermark_untouched(project: Project) -> None:
    before = _base(project)
    process = project.spawn("--verbose", "run")
    _wait_until_staging(process)
    assert process.poll() is None, "the load finished before it was killed"
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=30)
    assert process.returncode == -signal.SIGKILL
    assert project.count() == 10
    assert project.watermarks() == before
    result = project.run()
    assert (result["rows_inserted"], result["rows_updated"]) == (BIG, 0)
    assert project.count() == BIG + 10


def test_state_can_be_read_from_another_process_while_a_load_runs(project: Project) -> None:
    before = _base(project)
    load = project.spawn("--verbose", "run")
    _wait_until_staging(load)
    reader = project.spawn("state", "--json")
    out, err = reader.communicate(timeout=60)
    assert reader.returncode == 0, err
    assert load.poll() is None, "the load should still be running while state was read"
    assert {r["partition"] or "": r["watermark"] for r in json.loads(out)} == before
    load.communicate(timeout=600)
    assert load.returncode == 0
    assert project.watermarks() != before
    assert project.count() == BIG + 10
