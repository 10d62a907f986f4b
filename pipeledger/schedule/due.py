"""Which intervals of a schedule are due: pure rules over the clock and the ledger.

- Without ``catchup``: the interval that ended last, unless a run holds its key.
- With ``catchup``: every interval among the ``max_catchup`` latest that no run holds
  (each missed interval once, oldest first), back to the first interval the schedule
  ran: a schedule does not reach back before it was first used, so a node's first
  scheduled run only runs the latest interval. Missed intervals older than the
  ``max_catchup`` latest are left to ``pipeledger backfill`` (the plan says so).

A run *holds* an interval's key while it runs and after it succeeded (``partial``
included); a failed, cancelled, timed-out or abandoned run does not, so its interval is
due again. Two schedulers that plan the same interval both try it; the ledger lets one
run it (the other is skipped as a duplicate).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from pipeledger.schedule.cron import Cron, Interval


@dataclass(frozen=True, kw_only=True)
class Plan:
    """A node's schedule at one instant."""

    node: str
    candidates: tuple[Interval, ...]  # the latest intervals that have ended, oldest first
    due: tuple[Interval, ...] = ()
    left_behind: bool = False  # missed intervals older than max_catchup stay missed
    error: str | None = None  # its schedule could not be read: nothing is due


def candidates(cron: Cron, catchup: bool, max_catchup: int, now: datetime) -> list[Interval]:
    """The intervals a plan chooses from: the latest one, or the ``max_catchup`` latest."""
    return cron.latest(now, max_catchup if catchup else 1)


def plan(
    node: str,
    among: list[Interval],
    catchup: bool,
    held_since: datetime | None,
    held_until: datetime | None,
    held: frozenset[str],
) -> Plan:
    """Which of ``among`` (from :func:`candidates`) are due, given the ends of the first
    and the latest interval a run holds, and which of their keys runs hold."""
    chosen = among[-1:]
    if catchup and held_since is not None:
        chosen = [i for i in among if i.end >= held_since]
    due = tuple(i for i in chosen if i.key not in held)
    left_behind = bool(catchup and held_until and among and held_until < among[0].start)
    return Plan(node=node, candidates=tuple(among), due=due, left_behind=left_behind)
