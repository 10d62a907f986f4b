"""N triggers of one pipeline released at the same instant, for several rounds (round 0 is
the first load into an empty warehouse, so the migrations race too; every later round
adds a source file first). Per round exactly one run may write rows; every other one must
end as a busy pipeline is allowed to (see BUSY_ACCEPTED) or succeed writing nothing."""

from __future__ import annotations

from collections import Counter

from tests.drills import checks
from tests.drills.checks import CONCURRENCY, Tally
from tests.drills.harness import RUN, Harness
from tests.drills.kills import LATENESS_S
from tests.drills.proc import LOCK_HELD, SQLITE_BUSY, Outcome, launch_many
from tests.drills.project import Observation, Site
from tests.drills.source import US, OrderSource

# How a trigger that finds its pipeline busy may end, per backend: PostgreSQL says
# "skipped" (exit 4, JSON status "skipped") and the ledger records it so.
# SQLite documents its own: a second load waits up to 5 s, then fails with a clear message.
BUSY_ACCEPTED: dict[str, frozenset[str]] = {
    "pg": frozenset({"skipped"}),
    "sqlite": frozenset({"skipped", "sqlite_busy"}),
}


def classify(outcome: Outcome) -> str:
    """One trigger's ending: wrote_rows, no_rows, skipped, lock_message, sqlite_busy, other."""
    item = outcome.first()
    if outcome.rc == 0 and item.get("status") == "success":
        written = int(item.get("rows_inserted", 0)) + int(item.get("rows_updated", 0))
        return "wrote_rows" if written else "no_rows"
    if item.get("status") == "skipped":
        return "skipped"
    if outcome.says(LOCK_HELD):
        return "lock_message"
    if outcome.says(SQLITE_BUSY):
        return "sqlite_busy"
    return "other"


class ConcurrentDrill:
    def __init__(self, site: Site, tally: Tally, seed: int, rows: int, triggers: int) -> None:
        source = OrderSource(seed + 1, LATENESS_S * US)
        self.h = Harness(site, site.project("concurrent", LATENESS_S), source, tally)
        self.rows = rows
        self.triggers = triggers
        self.endings: Counter[str] = Counter()
        self.ledger: Counter[str] = Counter()

    def go(self, rounds: int) -> None:
        for index in range(rounds):
            n = self.rows if index == 0 else max(self.rows // 5, 10)
            self.h.add(self.h.source.mixed(n, LATENESS_S // 2))
            self.round(index)
        figures = self.h.tally.figures
        figures["concurrent_triggers"] = self.triggers
        figures["concurrent_rounds"] = rounds
        figures["concurrent_endings"] = dict(sorted(self.endings.items()))
        figures["concurrent_ledger_status"] = dict(sorted(self.ledger.items()))

    def round(self, index: int) -> None:
        what = f"concurrent round {index}"
        launches = launch_many(self.h.project.root, RUN.args, self.triggers)
        outcomes = [launch.wait() for launch in launches]
        self.h.site.wait_idle(self.h.project)
        seen = self.h.project.observe()
        endings = [classify(o) for o in outcomes]
        self.endings.update(endings)
        self._check_endings(what, outcomes, endings)
        self._advance_model(what, outcomes, endings)
        self._ledger_status(seen, outcomes)
        self.h.verify(what, seen)

    def _check_endings(self, what: str, outcomes: list[Outcome], endings: list[str]) -> None:
        tally, accepted = self.h.tally, BUSY_ACCEPTED[self.h.site.backend]
        writers = endings.count("wrote_rows")
        expected = 1 if self.h.model.copy().incremental(self.h.source.rows).written else 0
        tally.check(writers == expected, CONCURRENCY,
                    f"{what}: {writers} run(s) wrote rows, expected {expected}")  # fmt: skip
        for outcome, ending in zip(outcomes, endings, strict=True):
            if ending not in accepted | {"wrote_rows", "no_rows"}:
                tally.violation(CONCURRENCY, f"{what}: a trigger ended {ending}, exit "
                                f"{outcome.rc}: {(outcome.err or outcome.out)[-300:]}")  # fmt: skip

    def _advance_model(self, what: str, outcomes: list[Outcome], endings: list[str]) -> None:
        """Every successful trigger is one incremental run: the writer first (the others
        found its commit, or nothing to write)."""
        done = [(e, o) for e, o in zip(endings, outcomes, strict=True) if e.endswith("rows")]
        for _, outcome in sorted(done, key=lambda pair: pair[0] != "wrote_rows"):
            counts = self.h.model.incremental(self.h.source.rows)
            checks.check_json_counts(self.h.tally, what, outcome.first(), counts)

    def _ledger_status(self, seen: Observation, outcomes: list[Outcome]) -> None:
        for outcome in outcomes:
            mine = seen.runs_of_pid(outcome.pid, outcome.released_at)
            self.ledger[mine[-1].status if mine else "no ledger row"] += 1
