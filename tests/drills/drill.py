"""One backend's drill: the kills, the concurrent triggers and (PostgreSQL) the ledger
outage, each in a project of its own; returns the figures and violations as a summary."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tests.drills.checks import CONCURRENCY, KINDS, Tally
from tests.drills.harness import PHASES, Harness
from tests.drills.kills import KillDrill, KillPlan
from tests.drills.outage import LedgerOutage
from tests.drills.project import LEASE_S, PgServer, Site
from tests.drills.triggers import ConcurrentDrill


@dataclass(frozen=True)
class DrillPlan:
    kills: int = 20  # incremental runs and backfills killed
    first_kills: int = 2  # first loads killed
    rows: int = 50_000  # rows of the initial files
    seed: int = 1
    triggers: int = 8  # concurrent triggers per round
    rounds: int = 3  # concurrent rounds (round 0: the first load)
    outages: int = 2  # ledger outages (PostgreSQL)
    watchdog_first: bool = False  # the watchdog runs before the spool is replayed
    settle_every: int = 10  # kill attempts between two watchdog checks


def drill_backend(
    backend: str, plan: DrillPlan, work: Path, postgres_url: str | None = None
) -> dict[str, Any]:
    """Run every scenario on ``backend`` ("pg" or "sqlite"); the summary's ``violations``
    is 0 when nothing went wrong."""
    tally, timings = Tally(), {}
    started = time.monotonic()
    with ExitStack() as stack:
        server = stack.enter_context(PgServer(postgres_url)) if backend == "pg" else None
        site = Site(work, server)
        harnesses: list[Harness] = []

        def kept(harness: Harness) -> Harness:
            harnesses.append(harness)
            return harness

        kills = KillDrill(site, tally, _kill_plan(plan))
        timings["kills_s"] = _timed(kept(kills.main), kills.go)
        half = max(plan.rows // 2, 100)
        concurrent = ConcurrentDrill(site, tally, plan.seed, half, plan.triggers)
        timings["concurrent_s"] = _timed(kept(concurrent.h), lambda: concurrent.go(plan.rounds))
        if server is not None and plan.outages:
            ledger = stack.enter_context(PgServer())  # a second server, stopped at will
            outage = LedgerOutage(site, tally, plan.seed, half, ledger)
            timings["ledger_outage_s"] = _timed(
                kept(outage.h), lambda: outage.go(plan.outages, plan.watchdog_first)
            )
        settle_all(harnesses)
        tally.figures["runs_by_status"] = _statuses(harnesses)
        if server is not None:
            deadlocks = server.log_text().count("deadlock detected")
            tally.check(deadlocks == 0, CONCURRENCY, f"{deadlocks} deadlock(s) in the server log")
    timings["total_s"] = round(time.monotonic() - started, 1)
    return summarize(backend, plan, tally, timings)


def settle_all(harnesses: list[Harness]) -> None:
    """One wait for every lease to expire, then the watchdog in every project."""
    time.sleep(LEASE_S + 0.5)
    for harness in harnesses:
        harness.settle(f"final watchdog ({harness.project.root.name})", wait=False)


def _statuses(harnesses: list[Harness]) -> dict[str, int]:
    counts: Counter[str] = Counter()
    for harness in harnesses:
        counts.update(r.status for r in harness.project.observe().runs)
    return dict(sorted(counts.items()))


def _kill_plan(plan: DrillPlan) -> KillPlan:
    return KillPlan(plan.kills, plan.first_kills, plan.rows, plan.seed,
                    settle_every=plan.settle_every)  # fmt: skip


def _timed(harness: Harness, scenario: Callable[[], object]) -> float:
    """Seconds a scenario takes; its harness's waiting process is stopped at its end."""
    started = time.monotonic()
    try:
        scenario()
    finally:
        harness.close()
    return round(time.monotonic() - started, 1)


def summarize(
    backend: str, plan: DrillPlan, tally: Tally, timings: dict[str, float]
) -> dict[str, Any]:
    c = tally.counters
    return {
        "backend": backend,
        "plan": asdict(plan),
        "kills": c["kills"],
        "kills_by_phase": {phase: c[f"kills_{phase}"] for phase in PHASES},
        "kills_by_step": {k: c[f"killed_{k}"] for k in ("first_loads", "runs", "backfills")},
        "finished_before_kill": c["finished_before_kill"],
        **{kind: tally.violations[kind] for kind in KINDS},
        "busy_retries": c["busy_retries"],
        "abandoned_by_watchdog": c["abandoned_by_watchdog"],
        "files_added": c["files_added"],
        "outage_runs": c["outage_runs"],
        "outage_runs_spooled": c["outage_runs_spooled"],
        "figures": {k: v for k, v in tally.figures.items() if k != "max_linger_s"},
        "max_linger_s": round(float(tally.figures.get("max_linger_s", 0.0)), 2),
        "durations": timings,
        "violations": tally.total,
        "violation_messages": tally.messages[:50],
    }
