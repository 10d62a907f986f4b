"""The invariants checked after every step, and the tally of what the drill saw.

A violation is counted and kept with a message, never raised: the drill goes on and its
summary says everything that went wrong.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from tests.drills.project import LedgerRun, Observation
from tests.drills.reference import Counts, Model

# kinds of violation, as the summary counts them
DUPLICATES = "duplicate_keys"
LOST = "lost_rows"  # a key the model holds is missing or holds another version
EXTRA = "extra_rows"  # a key the model does not hold
AHEAD = "watermarks_ahead"
WATERMARK = "watermark_mismatches"
CONTRADICTION = "ledger_contradictions"
STUCK = "stuck_running"
COUNTS = "count_mismatches"
FAILURE = "unexpected_failures"
CONCURRENCY = "concurrency_violations"
SPOOL = "spool_violations"
KINDS = (DUPLICATES, LOST, EXTRA, AHEAD, WATERMARK, CONTRADICTION, STUCK, COUNTS, FAILURE,
         CONCURRENCY, SPOOL)  # fmt: skip
COMMITTED = frozenset({"success", "partial"})


def note(message: str) -> None:
    """Progress on stderr (stdout is the JSON summary's)."""
    print(time.strftime("%H:%M:%S"), message, file=sys.stderr, flush=True)


@dataclass
class Tally:
    """Violations by kind (with messages) and figures, per backend."""

    violations: Counter[str] = field(default_factory=Counter)
    messages: list[str] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)
    counters: Counter[str] = field(default_factory=Counter)

    def violation(self, kind: str, message: str, n: int = 1) -> None:
        self.violations[kind] += n
        self.messages.append(f"{kind}: {message}")
        note(f"VIOLATION {kind} {message[:400]}")

    def check(self, ok: bool, kind: str, message: str) -> bool:
        if not ok:
            self.violation(kind, message)
        return ok

    def count(self, key: str, n: int = 1) -> None:
        self.counters[key] += n

    @property
    def total(self) -> int:
        return sum(self.violations.values())


def check_target(tally: Tally, what: str, seen: Observation, model: Model) -> None:
    """The target holds exactly the model's rows, once each; the watermark is the model's."""
    if seen.duplicates:
        tally.violation(DUPLICATES, f"{what}: {seen.duplicates} duplicate key row(s)",
                        seen.duplicates)  # fmt: skip
    expected = model.target
    lost = [k for k, row in expected.items() if seen.target.get(k) != row.value()]
    if lost:
        key = lost[0]
        got, want = seen.target.get(key), expected[key].value()
        message = f"{what}: {len(lost)} key(s) missing or stale, e.g. {key}: {got} != {want}"
        tally.violation(LOST, message, len(lost))
    extra = [k for k in seen.target if k not in expected]
    if extra:
        tally.violation(EXTRA, f"{what}: {len(extra)} key(s) not in the model, e.g. {extra[:3]}",
                        len(extra))  # fmt: skip
    check_watermark(tally, what, seen, model)


def check_watermark(tally: Tally, what: str, seen: Observation, model: Model) -> None:
    """Under ``update`` a backfill may put back an older version of a key (a documented
    correction), so max(updated_at) can fall below the watermark legitimately. "Ahead of the
    data" is judged against the model: the watermark may not pass what committed runs
    staged (the model's watermark), and where the model keeps it <= max(updated_at) the
    target must too."""
    mark, want = seen.watermark, model.watermark
    tally.check(mark == want, WATERMARK, f"{what}: watermark {mark} != model {want}")
    if mark is None:
        return
    top, model_top = seen.max_cursor, model.max_cursor()
    beyond_model = want is None or mark > want
    beyond_data = (top is None or mark > top) and (
        want is not None and model_top is not None and want <= model_top
    )
    if beyond_model or beyond_data:
        tally.violation(AHEAD, f"{what}: watermark {mark} ahead (model {want}, "
                        f"max(updated_at) {top})")  # fmt: skip


def check_ledger(tally: Tally, what: str, seen: Observation) -> None:
    """The ledger agrees with the target: only committed runs have rows there (and no more
    than they say they wrote), and the watermark was set by a committed run."""
    status = {r.run_id: r for r in seen.runs}
    for run_id, rows in seen.by_run.items():
        run = status.get(run_id)
        if run is None or run.status not in COMMITTED:
            said = run.status if run else "nothing (no such run)"
            tally.violation(CONTRADICTION, f"{what}: {rows} row(s) of run {run_id}, which the "
                            f"ledger calls {said}")  # fmt: skip
        elif rows > run.written:
            tally.violation(CONTRADICTION, f"{what}: {rows} row(s) of run {run_id}, which says "
                            f"it wrote {run.written}")  # fmt: skip
    if seen.state_run is not None:
        run = status.get(seen.state_run)
        tally.check(run is not None and run.status in COMMITTED, CONTRADICTION,
                    f"{what}: the watermark was set by run {seen.state_run}, which the ledger "
                    f"calls {run.status if run else 'nothing'}")  # fmt: skip


def check_committed(
    tally: Tally, what: str, seen: Observation, run: LedgerRun | None, counts: Counts
) -> None:
    """Just after a run committed: the ledger says success with the model's counts, and
    every row it wrote carries its run id."""
    if not tally.check(
        run is not None, CONTRADICTION, f"{what}: a committed run has no ledger row"
    ):
        return
    assert run is not None
    said = f"{what}: run {run.run_id} committed its rows but the ledger says {run.status}"
    tally.check(run.status in COMMITTED, CONTRADICTION, said)
    got = (run.rows_read, run.rows_inserted, run.rows_updated, run.rows_unchanged)
    want = (counts.read, counts.inserted, counts.updated, counts.unchanged)
    tally.check(got == want, COUNTS, f"{what}: ledger counts {got} != model {want}")
    held = seen.by_run.get(run.run_id, 0)
    tally.check(held == counts.written, CONTRADICTION,
                f"{what}: run {run.run_id} wrote {counts.written} row(s); "
                f"{held} carry its run id")  # fmt: skip


def check_json_counts(tally: Tally, what: str, item: dict[str, Any], counts: Counts) -> None:
    """``run --json`` reports the model's counts (unchanged includes superseded copies)."""
    got = (
        item.get("rows_read"), item.get("rows_inserted"), item.get("rows_updated"),
        (item.get("rows_unchanged") or 0) + (item.get("rows_superseded") or 0),
    )  # fmt: skip
    want = (counts.read, counts.inserted, counts.updated, counts.unchanged)
    tally.check(got == want, COUNTS, f"{what}: --json counts {got} != model {want}")


def check_nothing_running(tally: Tally, what: str, seen: Observation) -> None:
    running = [r.run_id for r in seen.runs if r.status == "running"]
    if running:
        tally.violation(STUCK, f"{what}: {len(running)} run(s) still running: {running[:3]}",
                        len(running))  # fmt: skip


def committed_by_evidence(seen: Observation, run: LedgerRun | None) -> bool:
    """Whether the warehouse shows a run's commit: the watermark names it, or rows carry
    its id (read right after it, before any other run could overwrite them)."""
    if run is None:
        return False
    return seen.state_run == run.run_id or seen.by_run.get(run.run_id, 0) > 0
