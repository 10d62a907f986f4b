"""The crash and concurrency drill (bench/drills), short: a few SIGKILLs of first loads,
runs and backfills, concurrent triggers of one pipeline and, on PostgreSQL, a separate
ledger whose server stops during a run. Every invariant holds after every step."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.drills.drill import DrillPlan, drill_backend

pytestmark = pytest.mark.slow  # a drill: SIGKILLs and concurrent triggers at random points

PLAN = DrillPlan(
    kills=5, first_kills=1, rows=5_000, seed=7, triggers=3, rounds=2, outages=1, settle_every=99
)


def test_drill_finds_no_violation(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    server = request.getfixturevalue("postgres_server") if backend == "postgres" else None
    summary = drill_backend("pg" if server else "sqlite", PLAN, tmp_path, server)
    assert summary["violations"] == 0, summary["violation_messages"]
    assert summary["kills"] == PLAN.kills + PLAN.first_kills
    assert summary["figures"]["concurrent_endings"].get("wrote_rows") == PLAN.rounds
    if server:
        assert summary["outage_runs"] == 2 * PLAN.outages
