"""max_concurrent_runs per tenant, decided by the ledger's database: with one slot and five
triggers from processes of their own, one runs, two wait ``queued`` and then run in the
order they came, and the queue being full (queue_capacity = 2), the last two are
``rejected`` with their reason in the ledger and in their JSON (exit 7)."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from typing import Any

import pytest

from pipeledger.api import load_config
from pipeledger.errors import QueueFull
from pipeledger.ledger.vocabulary import TRANSITIONS, RunStatus
from pipeledger.runs.site import Site
from tests.helpers import Project, order, orders_pipeline

RUNS = "pipeledger.pipeline_runs"
LIMITS = '\n[limits]\nmax_concurrent_runs = 1\nqueue_capacity = 2\nqueue_poll = "1s"\n'
NAMES = ("p1", "p2", "p3", "p4", "p5")


def _configure(project: Project, limits: str = LIMITS) -> None:
    pipelines = {
        name: orders_pipeline(
            source={"kind": "csv", "path": f"data/{name}.csv"}, target=f"analytics.{name}"
        )
        for name in NAMES
    }
    project.configure(limits, pipelines=pipelines)
    for name in NAMES:
        project.write_csv(f"{name}.csv", [order(1, "2024-01-01T10:00:00Z")])


def _states(project: Project) -> dict[str, tuple[str, Any]]:
    rows = project.query(f"SELECT pipeline, status, extra FROM {project.table(RUNS)}")
    return {str(p): (str(s), json.loads(e) if isinstance(e, str) else e) for p, s, e in rows}


def _wait_for(what: Callable[[], bool], processes: list[subprocess.Popen[str]], about: str) -> None:
    """Until the ledger shows ``what`` (the event), failing at once if a process that
    should still wait has ended without it."""
    while not what():
        for process in processes:
            if process.poll() is not None and not what():
                out, err = process.communicate()
                pytest.fail(f"waiting for {about}: a trigger ended: {out}\n{err}")
        time.sleep(0.05)


def test_one_slot_five_triggers_one_runs_two_queue_in_order_two_rejected(
    project: Project,
) -> None:
    _configure(project)
    project.run("p1")  # the tables exist: the triggers below only load one row each
    site = Site(load_config(project.root / "pipeledger.toml"))
    waiting: list[subprocess.Popen[str]] = []
    rejected: list[subprocess.Popen[str]] = []
    with site.ledger.run("p1", setup=site.registration("p1")):  # holds the one slot
        for name in ("p2", "p3"):
            waiting.append(project.spawn("run", name, "--json"))
            _wait_for(
                lambda n=name: _states(project).get(n, ("",))[0] == "queued",  # type: ignore[misc]
                waiting,
                f"{name} queued",
            )
        for name in ("p4", "p5"):
            process = project.spawn("run", name, "--json")
            out, err = process.communicate()
            assert process.returncode == 7, err
            [payload] = json.loads(out)
            assert (payload["status"], payload["reason"]) == ("rejected", "queue_full")
            assert payload["rejected"] == {
                "reason": "queue_full",
                "tenant": "default",
                "running": 1,
                "queued": 2,
            }
            rejected.append(process)
        assert _states(project)["p2"][0] == _states(project)["p3"][0] == "queued"
    for process in waiting:
        out, err = process.communicate()
        assert process.returncode == 0, err
        assert json.loads(out)[0]["status"] == "success"

    rows = project.query(
        f"SELECT pipeline, status, started_at, ended_at, extra FROM {project.table(RUNS)} "
        "WHERE pipeline IN ('p2', 'p3', 'p4', 'p5') ORDER BY started_at"
    )
    assert [(r[0], r[1]) for r in rows if r[1] == "success"] == [
        ("p2", "success"),
        ("p3", "success"),
    ]
    runs = {str(r[0]): r for r in rows}
    assert str(runs["p2"][3]) <= str(runs["p3"][2])  # p3 started once p2 had ended
    for name in ("p4", "p5"):
        status, extra = _states(project)[name]
        assert status == "rejected" and extra["rejected"]["reason"] == "queue_full"
    for name in ("p2", "p3"):
        assert "queued_at" in _states(project)[name][1]["queue"]
    assert project.count("analytics.p3") == 1


def test_no_queue_rejects_the_second_at_once_and_the_slot_frees_after(project: Project) -> None:
    _configure(project, "\n[limits]\nmax_concurrent_runs = 1\nqueue_capacity = 0\n")
    project.run("p1")
    site = Site(load_config(project.root / "pipeledger.toml"))
    with site.ledger.run("p1", setup=site.registration("p1")):
        code, out, err = project.cli("run", "p2", "--json")
        assert code == 7, err
        assert json.loads(out)[0]["rejected"]["running"] == 1
        with pytest.raises(QueueFull, match="queue_capacity = 0"), site.ledger.run("p3"):
            pass
    assert project.run("p2")["status"] == "success"  # the holder ended: its slot is free


def test_a_queued_run_may_only_leave_the_queue_as_the_state_machine_says() -> None:
    assert TRANSITIONS[RunStatus.QUEUED] >= {
        RunStatus.RUNNING,
        RunStatus.REJECTED,
        RunStatus.CANCELLED,
        RunStatus.TIMED_OUT,
    }
    assert RunStatus.SUCCESS not in TRANSITIONS[RunStatus.QUEUED]
    assert RunStatus.QUEUED not in TRANSITIONS[RunStatus.RUNNING]
    assert not TRANSITIONS[RunStatus.REJECTED]


def test_a_run_queued_past_queue_timeout_ends_timed_out_without_running(
    project: Project,
) -> None:
    _configure(project, '\n[limits]\nmax_concurrent_runs = 1\nqueue_timeout = "1s"\n')
    project.run("p1")
    site = Site(load_config(project.root / "pipeledger.toml"))
    with site.ledger.run("p1", setup=site.registration("p1")):
        code, out, err = project.cli("run", "p2", "--json")
    assert code == 8, err
    [payload] = json.loads(out)
    assert (payload["status"], payload["reason"]) == ("timed_out", "queue_timeout")
    assert "queue_timeout" in payload["error"]
    assert _states(project)["p2"][0] == "timed_out"
    assert not project.exists("analytics.p2")
