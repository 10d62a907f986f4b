"""SIGKILL first loads, incremental runs and backfills at random points.

The main project's first load runs unkilled (its duration scales the kill delays), then
first loads of the same files are killed in a project of their own: a kill that comes
after the commit starts it over with an empty warehouse. Then, in the main project, runs
and backfills (over random ranges) are killed after a random delay in [0, 1.2 x the
expected duration] (learnt from unkilled steps), with a new source file before about half
of them. Every ``settle_every`` attempts the leases expire, ``pipeledger watchdog`` must
leave no run running, and one run completes. The drill ends with a complete run.
"""

from __future__ import annotations

import random
import shutil
import time
from dataclasses import dataclass

from tests.drills.checks import Tally, note
from tests.drills.harness import RUN, Harness, Resolution, Step
from tests.drills.project import Site
from tests.drills.reference import Model
from tests.drills.source import US, OrderSource

LATENESS_S = 7200
DELAY_FACTOR = 1.2  # kill delays span [0, 1.2 x the expected duration]


@dataclass(frozen=True)
class KillPlan:
    kills: int  # incremental runs and backfills killed
    first_kills: int  # first loads killed
    rows: int  # rows in the initial files
    seed: int
    backfill_share: float = 0.3
    settle_every: int = 10


class KillDrill:
    def __init__(self, site: Site, tally: Tally, plan: KillPlan) -> None:
        self.site = site
        self.tally = tally
        self.plan = plan
        self.rng = random.Random(plan.seed)
        source = OrderSource(plan.seed, LATENESS_S * US)
        self.main = Harness(site, site.project("kills", LATENESS_S), source, tally)
        self.delays: list[float] = []  # delay / expected duration of every attempt

    def go(self) -> None:
        self.initial_files()
        outcome = self.main.complete(RUN, "first load")  # unkilled: how long one takes
        seconds = outcome.seconds if outcome else 5.0
        self.tally.figures["first_load_s"] = round(seconds, 2)
        self.tally.figures["rows_initial"] = len(self.main.source.rows)
        started = time.monotonic()
        self.first_loads(seconds)
        self.tally.figures["first_load_kills_s"] = round(time.monotonic() - started, 1)
        self.later_runs()
        self.tally.figures["delay_share_deciles"] = _deciles(self.delays)

    def initial_files(self) -> None:
        n, source = self.plan.rows, self.main.source
        self.main.add(source.new_keys(n * 55 // 100, span_s=12 * 3600))
        for _ in range(3):
            self.main.add(source.mixed(n * 15 // 100, LATENESS_S // 2))

    # -- first loads ------------------------------------------------------------------------
    def first_loads(self, seconds: float) -> None:
        """Kill first loads of the same files in a project of their own."""
        harness = self._copy("first-loads")
        try:
            self._kill_first_loads(harness, seconds)
        finally:
            harness.close()
            self.site.drop(harness.project)

    def _kill_first_loads(self, harness: Harness, seconds: float) -> None:
        kills_before, attempts = self.tally.counters["kills"], 0
        while self.tally.counters["kills"] - kills_before < self.plan.first_kills:
            attempts += 1
            if attempts > 3 * self.plan.first_kills + 3:
                break
            if self._kill(harness, RUN, seconds, f"first load {attempts}").committed:
                self.site.restart(harness.project)  # start over: a first load again
                harness.model = Model(harness.source.lateness_us)
        self.tally.figures["first_load_kills"] = self.tally.counters["kills"] - kills_before

    def _copy(self, name: str) -> Harness:
        """A project of its own holding the main project's files."""
        project = self.site.project(name, LATENESS_S)
        shutil.copytree(self.main.project.data, project.data, dirs_exist_ok=True)
        return Harness(self.site, project, self.main.source, self.tally)

    def _kill(self, harness: Harness, step: Step, expected: float, what: str) -> Resolution:
        share = self.rng.uniform(0, DELAY_FACTOR)
        self.delays.append(share)
        label = "first_loads" if harness is not self.main else f"{step.kind}s"
        return harness.killed(step, share * expected, what, label)

    # -- later runs and backfills -----------------------------------------------------------
    def later_runs(self) -> None:
        h = self.main
        h.complete(RUN, "re-run (timing)")
        bounds = h.source.rows.bounds()
        assert bounds is not None
        h.complete(Step("backfill", *bounds), "full backfill (timing)")
        kills_before, attempts = self.tally.counters["kills"], 0
        while self.tally.counters["kills"] - kills_before < self.plan.kills:
            attempts += 1
            if attempts > 3 * self.plan.kills + 3:
                break
            self._one_kill(attempts)
            done = self.tally.counters["kills"] - kills_before
            if attempts % 10 == 0:
                self._progress(done, attempts)
            if attempts % self.plan.settle_every == 0:
                h.settle(f"settle after {done} kills")
                h.complete(RUN, f"completion after {done} kills")
        self.tally.figures["later_kills"] = self.tally.counters["kills"] - kills_before
        self.finish()

    def _progress(self, done: int, attempts: int) -> None:
        rows, violations = len(self.main.source.rows), self.tally.total
        note(f"{self.site.backend}: {done} of {self.plan.kills} kills in {attempts} attempts, "
             f"{violations} violation(s), {rows} source rows")  # fmt: skip

    def _one_kill(self, attempt: int) -> None:
        h = self.main
        if self.rng.random() < 0.5:
            n = self.rng.randint(max(self.plan.rows // 100, 10), max(self.plan.rows // 20, 50))
            h.add(h.source.mixed(n, LATENESS_S // 2))
            self.tally.count("files_added")
        step = self._backfill() if self.rng.random() < self.plan.backfill_share else RUN
        self._kill(h, step, h.expected_s(step), f"{step.kind} {attempt}")

    def _backfill(self) -> Step:
        bounds = self.main.source.rows.bounds()
        assert bounds is not None
        low, high = bounds[0] - 3600 * US, bounds[1] + 3600 * US
        start, end = sorted(self.rng.randint(low, high) for _ in range(2))
        return Step("backfill", start, end)

    def finish(self) -> None:
        h = self.main
        h.add(h.source.mixed(max(self.plan.rows // 50, 20), LATENESS_S // 2))
        h.complete(RUN, "final run")
        self.tally.figures["rows_in_source"] = len(h.source.rows)
        self.tally.figures["keys_in_target"] = len(h.model.target)


def _deciles(shares: list[float]) -> dict[str, int]:
    """How the kill delays spread over the expected duration (10% buckets)."""
    out: dict[str, int] = {}
    for share in shares:
        bucket = f"{min(int(share * 10), 11) * 10}%"
        out[bucket] = out.get(bucket, 0) + 1
    return dict(sorted(out.items(), key=lambda kv: int(kv[0][:-1])))
