"""``pipeledger ui`` and ``pipeledger serve --ui``: the dashboard as a user starts it, a
process of its own that says where it listens and stops on Ctrl-C or SIGTERM."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

from pipeledger.cli.ledger_cli import RUN_STATUSES, TRIGGER_TYPES
from pipeledger.ledger.vocabulary import RunStatus, TriggerType
from tests.helpers import Project, order, orders_pipeline

URL = re.compile(r"(http://127\.0\.0\.1:\d+)")


def started(process: subprocess.Popen[str]) -> str:
    """The URL the process says it serves on (read from its stderr, line by line)."""
    assert process.stderr is not None
    seen = []
    for line in process.stderr:
        seen.append(line)
        found = URL.search(line)
        if found:
            return found.group(1)
    raise AssertionError(f"it never said where it listens: {''.join(seen)}")


def spawn(project: Project, *args: str) -> subprocess.Popen[str]:
    """The command, which dumps every thread's stack on SIGABRT (see :func:`stopped`)."""
    return project.spawn(*args, env={**os.environ, "PYTHONFAULTHANDLER": "1"})


def stopped(process: subprocess.Popen[str], how: signal.Signals) -> int:
    """Send ``how`` and return the exit code. The wait's bound is only there to say where
    a process that never ends was stuck: every thread's stack, in the failure."""
    process.send_signal(how)
    try:
        return process.wait(timeout=120)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGABRT)
        _, stderr = process.communicate()
        raise AssertionError(f"it did not stop on {how.name}:\n{stderr[-12000:]}") from None


def fetch(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as response:
        return str(response.read().decode())


def test_ui_serves_the_dashboard_on_127_0_0_1_until_ctrl_c(tmp_path: Path) -> None:
    project = Project(tmp_path, None)
    project.configure(orders=orders_pipeline())
    project.write_csv("orders_1.csv", [order(1, "2024-01-01T10:00:00Z")])
    run_id = project.run()["run_id"]
    process = spawn(project, "ui", "--port", "0")
    try:
        url = started(process)
        assert fetch(url + "/healthz") == "ok\n"
        assert 'data-node="orders"' in fetch(url + "/")
        assert run_id in fetch(url + f"/run/{run_id}")
    finally:
        assert stopped(process, signal.SIGINT) == 0


def test_serve_ui_runs_the_dashboard_beside_the_loop(tmp_path: Path) -> None:
    project = Project(tmp_path, None)
    project.configure(orders=orders_pipeline(schedule="0 2 * * *"))
    project.write_csv("orders_1.csv", [order(1, "2024-01-01T10:00:00Z")])
    process = spawn(project, "serve", "--ui", "--port", "0", "--poll", "1h")
    try:
        url = started(process)
        page = fetch(url + "/")
        assert 'data-node="orders"' in page
        assert '"schedule": "0 2 * * *"' in fetch(url + "/api/schedule")
    finally:
        assert stopped(process, signal.SIGTERM) in (0, 143)


def test_a_port_that_is_taken_is_an_error(tmp_path: object) -> None:
    import socket

    project = Project(tmp_path, None)  # type: ignore[arg-type]
    project.configure(orders=orders_pipeline())
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "pipeledger", "ui", "--port", str(port)],
            cwd=project.root,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 2
    assert f"could not listen on 127.0.0.1:{port}" in done.stderr


def test_the_clis_closed_sets_are_the_ledgers() -> None:
    assert set(RUN_STATUSES) == {s.value for s in RunStatus}
    assert set(TRIGGER_TYPES) == {t.value for t in TriggerType}
