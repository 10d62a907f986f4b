"""A separate ledger (a second throwaway PostgreSQL server) that goes away during a run.

Per round: a run starts; once its ``running`` row is in the ledger, the ledger server
stops. The run must still land its rows (the watermark commits with them in the
warehouse) and exit 0, its final records going to the spool. A second run with the ledger
still down must do the same. The server comes back; the next run replays the spool first:
then every spooled run is ``success`` in the ledger, the spool is empty, and the ledger
agrees with the target. With ``watchdog_first`` the leases expire and ``pipeledger
watchdog`` runs before that replay, as a cron job might.
"""

from __future__ import annotations

import time

from tests.drills.checks import FAILURE, SPOOL, Tally, check_json_counts
from tests.drills.harness import RUN, Harness
from tests.drills.kills import LATENESS_S
from tests.drills.proc import Launch, Outcome, run_inline
from tests.drills.project import LEASE_S, PgServer, Site, read_ledger
from tests.drills.source import US, OrderSource


class LedgerOutage:
    def __init__(self, site: Site, tally: Tally, seed: int, rows: int, ledger: PgServer) -> None:
        source = OrderSource(seed + 2, LATENESS_S * US)
        self.h = Harness(site, site.project("ledger-outage", LATENESS_S), source, tally)
        self.ledger = ledger
        self.h.project.configure(ledger.fresh_database("ledger"))
        self.rows = rows

    @property
    def tally(self) -> Tally:
        return self.h.tally

    def go(self, rounds: int, watchdog_first: bool = False) -> None:
        self.h.add(self.h.source.mixed(self.rows, LATENESS_S // 2))
        self.h.complete(RUN, "ledger up: first load")
        for index in range(rounds):
            spooled = self.round(f"ledger outage {index}")
            self.ledger.resume()
            if watchdog_first:
                time.sleep(LEASE_S + 0.5)
                run_inline(self.h.project.root, ["watchdog"])
            self.h.add(self.h.source.mixed(max(self.rows // 20, 10), LATENESS_S // 2))
            self.h.complete(RUN, f"ledger outage {index}: replay")
            self.check_replayed(f"ledger outage {index}", spooled)
        self.tally.figures["ledger_outages"] = rounds

    def round(self, what: str) -> list[str]:
        """A run that loses its ledger midway, then one without a ledger; returns their
        run ids (the replay must make them ``success``)."""
        self.h.add(self.h.source.mixed(self.rows, LATENESS_S // 2))
        first = self.lose_ledger_midway(what)
        self.h.add(self.h.source.mixed(max(self.rows // 20, 10), LATENESS_S // 2))
        second = self.h.complete(RUN, f"{what}: ledger down")
        ids = [str(o.first().get("run_id")) for o in (first, second) if o is not None]
        # a run quicker than the server's stop wrote its final record itself: not spooled
        spooled = self.h.project.spooled_runs()
        self.tally.count("outage_runs_spooled", sum(run_id in spooled for run_id in ids))
        self.tally.count("outage_runs", len(ids))
        return ids

    def lose_ledger_midway(self, what: str) -> Outcome | None:
        launch = self.h.launcher.start(self.h.command(RUN))
        seen_running = self.wait_running(launch)
        self.ledger.pause()
        self.tally.check(seen_running, FAILURE, f"{what}: the run's running row never appeared")
        outcome = launch.wait()
        self.h.launcher.warm()
        said = f"{what}: the run failed when its ledger went away: exit {outcome.rc}"
        if not self.tally.check(outcome.rc == 0, FAILURE, f"{said}: {outcome.err[-400:]}"):
            return None
        counts = RUN.apply(self.h.model, self.h.source.rows)
        check_json_counts(self.tally, what, outcome.first(), counts)
        self.h.verify(f"{what}: after the run")
        return outcome

    def wait_running(self, launch: Launch) -> bool:
        """Wait until the ledger shows ``launch``'s run running (True), or it has ended."""
        url = self.h.project.ledger_url
        assert url is not None
        while launch.running():
            if any(r.pid == launch.pid and r.status == "running" for r in read_ledger(url)):
                return True
            time.sleep(0.02)
        return False

    def check_replayed(self, what: str, run_ids: list[str]) -> None:
        left = self.h.project.spooled_runs()
        self.tally.check(not left, SPOOL, f"{what}: {len(left)} run(s) still in the spool")
        url = self.h.project.ledger_url
        assert url is not None
        status = {r.run_id: r.status for r in read_ledger(url)}
        for run_id in run_ids:
            self.tally.check(status.get(run_id) == "success", SPOOL,
                             f"{what}: spooled run {run_id} is {status.get(run_id)} "
                             "in the ledger after the replay")  # fmt: skip
