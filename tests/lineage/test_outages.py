"""A receiver that is down or hangs never fails a run nor holds it up for more than the
lineage timeout (2 s); the events it missed wait in the spool and arrive once, in order,
from the next run once it is back. Each run is a process of its own, as in production."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any

from tests.helpers import Project, order, orders_pipeline
from tests.lineage.receiver import Receiver
from tests.lineage.spec_check import check_event
from tests.lineage.test_events import lineage_toml

TIMEOUT = 2.0  # [lineage] timeout's default
SLACK = 1.0  # a process's own start-up varies by this much on a busy machine


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def timed_run(project: Project, number: int) -> tuple[str, float]:
    """Load one new file in a process of its own: (its run id, the process's wall time)."""
    project.write_csv(f"orders_{number}.csv", [order(number, f"2024-01-0{number}T10:00:00Z")])
    began = time.monotonic()
    process = project.spawn("run", "--json")
    out, err = process.communicate(timeout=120)
    took = time.monotonic() - began
    assert process.returncode == 0, err
    (result,) = json.loads(out)
    assert result["status"] == "success" and result["rows_inserted"] == 1
    return str(result["run_id"]), took


def spooled(project: Project) -> list[dict[str, Any]]:
    path = Path(project.root, ".pipeledger", "lineage-spool.jsonl")
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_down_or_hanging_receivers_cost_at_most_the_timeout_and_miss_nothing(
    project: Project,
) -> None:
    port = free_port()
    project.configure(lineage_toml(f"http://127.0.0.1:{port}"), orders=orders_pipeline())

    with Receiver(port) as up:
        healthy, healthy_took = timed_run(project, 1)
        assert [e["run"]["runId"] for e in up.wait_for(2)] == [healthy, healthy]
    assert spooled(project) == []

    down, down_took = timed_run(project, 2)  # nothing listens on the port
    assert [(e["eventType"], e["run"]["runId"]) for e in spooled(project)] == [
        ("START", down),
        ("COMPLETE", down),
    ]

    with Receiver(port) as hanging:
        hanging.hanging.set()  # takes each request and never answers
        hung, hung_took = timed_run(project, 3)
        assert hanging.events == []
    assert len(spooled(project)) == 4

    print(
        f"process wall time: healthy {healthy_took:.2f} s, down {down_took:.2f} s, "
        f"hanging {hung_took:.2f} s"
    )
    assert down_took <= healthy_took + TIMEOUT + SLACK
    assert hung_took <= healthy_took + TIMEOUT + SLACK

    with Receiver(port) as back:
        after, _ = timed_run(project, 4)  # it sends the spool first, then its own
        events = back.wait_for(6)
        assert [(e["eventType"], e["run"]["runId"]) for e in events] == [
            ("START", down), ("COMPLETE", down),
            ("START", hung), ("COMPLETE", hung),
            ("START", after), ("COMPLETE", after),
        ]  # fmt: skip
        for event in events:
            check_event(event)
        assert len(back.events) == 6  # its process has ended: nothing more comes, no copy
    assert spooled(project) == []
