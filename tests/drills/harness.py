"""Runs pipeledger steps in one project, keeps the model in step with what committed and
checks the invariants after each step. The scenarios (kills, concurrent triggers, ledger
outage) are built from these pieces."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

from tests.drills import checks
from tests.drills.checks import FAILURE, Tally
from tests.drills.proc import LOCK_HELD, SQLITE_BUSY, Launcher, Outcome, run_inline
from tests.drills.project import LEASE_S, PIPELINE, LedgerRun, Observation, Project, Site
from tests.drills.reference import Counts, Model
from tests.drills.source import OrderSource, Row, SourceRows, iso_z

STAGED = re.compile(r"staged \d+ of (\d+) rows read")
BUSY_RETRY_S = 0.5
BUSY_TRIES = 120  # a minute of retries before a busy pipeline counts as a failure
IDLE_TIMEOUT_S = 120.0  # the longest a killed run's database session may go on
PHASES = ("before_ledger_row", "before_staging", "staging", "after_staging", "after_commit")


@dataclass(frozen=True)
class Step:
    """An incremental run, or a backfill over ``[low, high]`` (microseconds; written as
    ``...Z`` unless ``start``/``end`` give the text of the bounds that mean them)."""

    kind: str  # "run" or "backfill"
    low: int = 0
    high: int = 0
    start: str = ""
    end: str = ""

    @property
    def args(self) -> list[str]:
        if self.kind == "run":
            return ["run", PIPELINE, "--json"]
        start, end = self.start or iso_z(self.low), self.end or iso_z(self.high)
        return ["backfill", PIPELINE, "--start", start, "--end", end, "--json"]

    def apply(self, model: Model, rows: SourceRows) -> Counts:
        if self.kind == "run":
            return model.incremental(rows)
        return model.backfill(rows, self.low, self.high)


RUN = Step("run")


@dataclass
class Estimate:
    """Expected seconds of a step. A CSV source is parsed whole by every step (the window
    filter streams), and the rows read are then staged and merged, so a step costs about
    ``fixed + cost * (source rows + 2 x rows read)``; ``cost`` is learnt per kind of step
    from the unkilled ones."""

    fixed: float = 0.25
    cost: dict[str, float] = field(default_factory=lambda: {"run": 2e-6, "backfill": 2e-6})

    def of(self, step: Step, source_rows: int, rows: int) -> float:
        return self.fixed + self.cost[step.kind] * (source_rows + 2 * rows)

    def learn(self, step: Step, seconds: float, source_rows: int, rows: int) -> None:
        cost = max(seconds - self.fixed, 0.0) / max(source_rows + 2 * rows, 1)
        self.cost[step.kind] = 0.5 * self.cost[step.kind] + 0.5 * cost


@dataclass
class Resolution:
    """What a step that ended (killed or not) did."""

    run: LedgerRun | None
    committed: bool
    counts: Counts
    seen: Observation


class Harness:
    """``launcher`` may serve several projects (commands name their config); ``inline``
    runs the steps that are not killed in this process (faster, for many small steps)."""

    def __init__(
        self,
        site: Site,
        project: Project,
        source: OrderSource,
        tally: Tally,
        launcher: Launcher | None = None,
        inline: bool = False,
    ) -> None:
        self.site = site
        self.project = project
        self.source = source
        self.tally = tally
        self.model = Model(source.lateness_us)
        self.estimate = Estimate()
        self.launcher = launcher or Launcher(project.root)
        self.inline = inline

    def close(self) -> None:
        self.launcher.close()

    def command(self, step: Step, *options: str) -> list[str]:
        return ["--config", str(self.project.root / "pipeledger.toml"), *options, *step.args]

    # -- source files -------------------------------------------------------------------------
    def add(self, rows: list[Row]) -> None:
        self.source.write(self.project.data, rows)

    def expected_s(self, step: Step) -> float:
        return self.estimate.of(step, len(self.source.rows), self.rows_read(step))

    def rows_read(self, step: Step) -> int:
        if step.kind == "run":
            return self.model.incremental_rows(self.source.rows)
        return self.source.rows.count_between(step.low, step.high)

    # -- checks -------------------------------------------------------------------------------
    def verify(self, what: str, seen: Observation | None = None) -> Observation:
        seen = seen or self.project.observe()
        checks.check_target(self.tally, what, seen, self.model)
        if not seen.ledger_down:
            checks.check_ledger(self.tally, what, seen)
        return seen

    # -- steps run to their end --------------------------------------------------------------
    def complete(self, step: Step, what: str) -> Outcome | None:
        """Run a step to its end (retrying while the pipeline is busy), advance the model and
        check everything; None if it failed."""
        outcome = self.until_not_busy(step)
        if outcome.rc != 0:
            self.tally.violation(FAILURE, f"{what}: exit {outcome.rc}: {outcome.err[-500:]}")
            return None
        rows = self.rows_read(step)
        counts = step.apply(self.model, self.source.rows)
        item = outcome.first()
        checks.check_json_counts(self.tally, what, item, counts)
        seen = self.project.observe()
        if not seen.ledger_down:
            checks.check_committed(
                self.tally, what, seen, seen.run(str(item.get("run_id"))), counts
            )
        self.verify(what, seen)
        self.estimate.learn(step, outcome.seconds, len(self.source.rows), rows)
        return outcome

    def until_not_busy(self, step: Step) -> Outcome:
        """A killed run's session can hold the pipeline's lock for a while after the kill:
        such a run is retried after a short wait, and counted."""
        for _ in range(BUSY_TRIES):
            if self.inline:
                outcome = run_inline(self.project.root, step.args)
            else:
                outcome = self.launcher.run(self.command(step))
            if outcome.rc == 0 or not (outcome.says(LOCK_HELD) or outcome.says(SQLITE_BUSY)):
                return outcome
            self.tally.count("busy_retries")
            time.sleep(BUSY_RETRY_S)
        return outcome

    def settle(self, what: str, wait: bool = True) -> None:
        """Let every lease expire, run the watchdog: no run may be left running."""
        if wait:
            time.sleep(LEASE_S + 0.5)
        outcome = run_inline(self.project.root, ["watchdog", "--json"])
        if not self.tally.check(outcome.rc == 0, FAILURE, f"{what}: watchdog exit {outcome.rc}: "
                                f"{outcome.err[-300:]}"):  # fmt: skip
            return
        self.tally.count("abandoned_by_watchdog", len(outcome.first().get("abandoned", [])))
        checks.check_nothing_running(self.tally, what, self.project.observe())

    # -- killed steps --------------------------------------------------------------------------
    def killed(self, step: Step, delay: float, what: str, label: str) -> Resolution:
        """Start a step, SIGKILL it after ``delay`` seconds, then decide from the warehouse
        whether it committed (wholly) or not (at all), advance the model and check. Kills
        are counted by phase and by ``label`` (first_loads, runs, backfills)."""
        outcome, was_running, copying = self._kill_after(step, delay)
        resolution = self.resolve(step, outcome, what)
        if not was_running:
            self.finished_anyway(step, outcome, resolution, what)
            return resolution
        phase = self.phase(resolution, outcome.err, resolution.counts.read, copying)
        self.tally.count(f"kills_{phase}")
        self.tally.count(f"killed_{label}")
        self.tally.count("kills")
        if resolution.run is not None and not resolution.committed:
            self.tally.count(f"killed_run_left_{resolution.run.status}")
        return resolution

    def _kill_after(self, step: Step, delay: float) -> tuple[Outcome, bool, bool | None]:
        """(how it ended, whether it was still running, whether it was copying)."""
        launch = self.launcher.start(self.command(step, "-v"))
        time.sleep(delay)
        copying = self.site.copying(self.project)  # PostgreSQL: is it staging right now?
        was_running = launch.kill()
        outcome = launch.wait()
        self.launcher.warm()
        # the killed client's session may go on with its statement: wait until it is gone,
        # else a commit already sent could land after the check
        linger = self.site.wait_idle(self.project, IDLE_TIMEOUT_S)
        self.tally.figures["max_linger_s"] = max(self.tally.figures.get("max_linger_s", 0), linger)
        self.tally.check(
            linger < IDLE_TIMEOUT_S, FAILURE, f"a killed run's session stayed {linger:.0f} s"
        )
        return outcome, was_running, copying

    def resolve(self, step: Step, outcome: Outcome, what: str) -> Resolution:
        seen = self.project.observe()
        mine = seen.runs_of_pid(outcome.pid, outcome.released_at)
        run = mine[-1] if mine else None
        prospective = self.model.copy()
        counts = step.apply(prospective, self.source.rows)
        visible = counts.written > 0 or prospective.watermark != self.model.watermark
        if visible:
            committed = checks.committed_by_evidence(seen, run)
        else:  # a commit would change nothing the warehouse shows: the ledger decides
            committed = run is not None and run.status in checks.COMMITTED
        if committed:
            self.model = prospective
            checks.check_committed(self.tally, what, seen, run, counts)
        elif run is not None and run.status in checks.COMMITTED:
            said = f"{what}: the ledger says run {run.run_id} succeeded; its rows are not there"
            self.tally.violation(checks.CONTRADICTION, said)
        self.verify(what, seen)
        return Resolution(run, committed, counts, seen)

    @staticmethod
    def phase(resolution: Resolution, stderr: str, expected: int, copying: bool | None) -> str:
        """Where the kill struck, from the ledger and the run's progress log: it logs each
        batch as it is read, before staging it, so once every row was read only PostgreSQL's
        view of the running statement tells whether the last batch was still being copied.
        ``before_staging`` is the lock, the plan and parsing up to the first batch in the
        window; ``after_staging`` the gate, the merge, the watermark and the commit."""
        if resolution.run is None:
            return "before_ledger_row"
        if resolution.committed:
            return "after_commit"
        progress = STAGED.findall(stderr)
        if not progress:
            return "before_staging"
        if int(progress[-1]) < expected or copying:
            return "staging"
        return "after_staging"

    def finished_anyway(
        self, step: Step, outcome: Outcome, resolution: Resolution, what: str
    ) -> None:
        """The step ended before the kill: it must have succeeded, or found the pipeline busy."""
        self.tally.count("finished_before_kill")
        if outcome.rc == 0:
            checks.check_json_counts(self.tally, what, outcome.first(), resolution.counts)
            self.tally.check(resolution.committed, checks.CONTRADICTION,
                             f"{what}: exit 0 but nothing committed")  # fmt: skip
            # a real duration: the estimates learn from it too
            self.estimate.learn(
                step, outcome.seconds, len(self.source.rows), resolution.counts.read
            )
        elif outcome.says(LOCK_HELD) or outcome.says(SQLITE_BUSY):
            self.tally.count("busy_before_kill")
        else:
            self.tally.violation(FAILURE, f"{what}: exit {outcome.rc}: {outcome.err[-500:]}")
