"""The overview counts rejected work apart from failures: a run past its max_rows and a
refused backfill show as rejected, not in the success rate; the JSON twin says the same."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from tests.helpers import Project, order, orders_pipeline
from tests.web.conftest import get, get_json, serving
from tests.web.known import Known


@pytest.fixture
def rejected_dashboard(project: Project) -> Iterator[str]:
    project.configure(orders=orders_pipeline(max_rows=2, max_backfill="2d"))
    project.write_csv("orders_1.csv", [order(1, "2024-01-01T10:00:00Z")])
    assert project.run()["status"] == "success"
    project.write_csv("orders_2.csv", [order(i, f"2024-01-02T0{i}:00:00Z") for i in (2, 3, 4)])
    assert project.cli("run")[0] == 3
    assert project.cli("backfill", "orders", "--start", "2024-01-01", "--end", "2024-02-01")[0] == 2
    yield from serving(Known(project=project))


def test_the_overview_counts_rejected_work_apart_from_failures(rejected_dashboard: str) -> None:
    status, html = get(rejected_dashboard + "/")
    assert status == 200
    tile = re.search(r'id="rejected-count".*?<div class="n">(\d+)</div>', html, re.S)
    assert tile is not None and tile.group(1) == "2", html
    assert '<div class="small muted rejected">2 rejected</div>' in html
    assert "1 of 1" in html  # the success rate: of the one run that ran
    [line] = get_json(rejected_dashboard + "/api/status")
    assert (line["rejected_7d"], line["runs_7d"], line["successes_7d"]) == (2, 1, 1)
    assert line["health"] == "HEALTHY"
