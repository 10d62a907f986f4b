"""Every JSON document under ``/api/`` is the one the CLI prints with ``--json`` for the
same question, on both backends (one query function behind both)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.web import known as k
from tests.web.conftest import get_json

# computed from the moment of asking: the server's and the CLI's differ by that much
MOMENTARY = frozenset({"freshness_s", "data_age_s", "late_s"})


def twins(known: k.Known) -> list[tuple[str, list[str]]]:
    runs = known.runs
    partial = json.loads(known.project.cli("show", runs["orders partial"], "--json")[1])
    pairs = [
        ("/api/status", ["status"]),
        ("/api/status?limit=2&page=2", ["status", "--limit", "2", "--page", "2"]),
        ("/api/anomalies", ["anomalies"]),
        ("/api/anomalies?name=events", ["anomalies", "events"]),
        ("/api/blocked", ["blocked"]),
        ("/api/runs", ["runs"]),
        ("/api/runs?name=payments&status=failed", ["runs", "payments", "--status", "failed"]),
        ("/api/runs?name=payments&trigger=retry", ["runs", "payments", "--trigger", "retry"]),
        ("/api/runs?name=events&since=2d", ["runs", "events", "--since", "2d"]),
        ("/api/runs?name=events&until=1d", ["runs", "events", "--until", "1d"]),
        (
            f"/api/runs?name=events&limit=3&before={runs['events cancelled']}",
            ["runs", "events", "--limit", "3", "--before", runs["events cancelled"]],
        ),
        (
            f"/api/runs?logical_run={runs['payments failed']}",
            ["runs", "--logical-run", runs["payments failed"]],
        ),
        (
            f"/api/runs?correlation_id={partial['correlation_id']}",
            ["runs", "--correlation-id", partial["correlation_id"]],
        ),
        ("/api/checks/payments", ["checks", "payments"]),
        ("/api/checks/orders?since=7d", ["checks", "orders", "--since", "7d"]),
        ("/api/dag", ["dag"]),
        ("/api/schedule", ["schedule"]),
        ("/api/state", ["state"]),
        ("/api/state?name=orders", ["state", "orders"]),
        ("/api/quarantine/orders", ["quarantine", "orders"]),
        (
            f"/api/quarantine/orders?all=1&run={runs['orders partial']}",
            ["quarantine", "orders", "--all", "--run", runs["orders partial"]],
        ),
        ("/api/sla", ["sla"]),
        ("/api/alerts", ["alerts"]),
        (
            f"/api/alerts?run={runs['payments failed']}",
            ["alerts", "--run", runs["payments failed"]],
        ),
        ("/api/tasks", ["tasks"]),
        ("/api/tasks?name=payments", ["tasks", "payments"]),
        ("/api/tasks?days=3&limit=2", ["tasks", "--days", "3", "--limit", "2"]),
    ]
    pairs += [(f"/api/show/{run_id}", ["show", run_id]) for run_id in runs.values()]
    return pairs


def settled(document: Any, other: Any) -> Any:
    """``document`` with each momentary value checked against ``other``'s and set aside."""
    if isinstance(document, dict):
        out = {}
        for key, value in document.items():
            theirs = other.get(key) if isinstance(other, dict) else None
            if key in MOMENTARY and isinstance(value, int | float):
                assert isinstance(theirs, int | float) and abs(value - theirs) < 120, key
                out[key] = "momentary"
            else:
                out[key] = settled(value, theirs)
        return out
    if isinstance(document, list):
        others = other if isinstance(other, list) else []
        return [settled(v, others[i] if i < len(others) else None) for i, v in enumerate(document)]
    return document


def test_every_document_is_the_clis_json(known_project: k.Known, dashboard: str) -> None:
    for path, args in twins(known_project):
        served = get_json(dashboard + path)
        code, out, err = known_project.project.cli(*args, "--json")
        assert code == 0, f"{args}: {err}"
        printed = json.loads(out)
        assert settled(served, printed) == settled(printed, served), path
        assert served, f"{path}: an empty answer proves nothing"


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/api/show/no-such-run", 404),
        ("/api/runs?status=bogus", 400),
        ("/api/runs?since=yesterday-ish", 400),
        ("/api/state?name=nosuch", 400),
        ("/api/tasks?limit=0", 400),
        ("/api/tasks?days=many", 400),
    ],
)
def test_a_question_it_cannot_answer_is_the_clis_error_document(
    known_sqlite: k.Known, sqlite_dashboard: str, path: str, status: int
) -> None:
    from tests.web.conftest import get

    code, body = get(sqlite_dashboard + path)
    assert code == status, body
    document = json.loads(body)
    assert document["status"] == "failed" and document["error"] and document["exit_code"] in (1, 2)


def test_the_status_of_one_node_is_its_line_of_everyones(known_project: k.Known) -> None:
    """The node page asks for its node's status alone: the same answer as among all."""
    from pipeledger import api

    where = api.locate(known_project.project.root / "pipeledger.toml")
    everyone = {s.pipeline: s.to_json() for s in api.status(where)}
    for name in k.HEALTH:
        alone = [s.to_json() for s in api.status(where, pipeline=name)]
        mine = [everyone[name]] if name in everyone else []
        assert settled(alone, mine) == settled(mine, alone), name
    assert "refunds" not in everyone and api.status(where, pipeline="refunds") == []
