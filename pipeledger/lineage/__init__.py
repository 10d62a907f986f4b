"""OpenLineage events of every run: where its data came from, where it went, what it checked.

::

    run_job (runs.scaffold)                the emitter's thread (lineage.emitter)
      ledger run opened   ── started ──>     START built from the run's record
      the work, the commit                   appended to the spool, then sent in order
      final record made   ── ended   ──>     COMPLETE | FAIL | ABORT built from what the
                                             run recorded (counts, snapshot, checks, SQL)

The scaffold only tells an observer (:class:`pipeledger.ledger.run.RunObserver`) that a run
started and ended; the events are built here, off the run's thread, from what the run
recorded in the ledger's ``Run`` (:mod:`pipeledger.lineage.events`). The OpenLineage client
(``openlineage-python``, ~0.5 s to import) is imported only when lineage is configured:
a ``[lineage]`` section (``enabled = true``), or the client's own environment
(``OPENLINEAGE_URL``, ``OPENLINEAGE_CONFIG``, ``OPENLINEAGE__TRANSPORT__*``) with no
``[lineage]`` section; ``OPENLINEAGE_DISABLED=true`` turns it off either way.

Emission never blocks nor fails a run. Every event goes first to a spool file (beside the
ledger's spool), then to the receiver, one at a time and in order, with no retries in the
client and ``[lineage] timeout`` (2 s) per event; an event is removed from the spool once
delivered. A receiver that is down or hangs leaves the events in the spool: the next run
(or ``pipeledger watchdog``) of any process with lineage sends them first, in order; one
process at a time sends (a lock beside the spool), so each is delivered once. A process
waits at most ``timeout`` at exit for its events (``wait``), then leaves them to the next.

Event types: START when the ledger has recorded the run ``running``; at its end COMPLETE
(``success``, ``partial``), FAIL (``failed``, ``abandoned``) or ABORT (``cancelled``,
``timed_out``, ``skipped``). A run whose COMMIT outcome is unknown (the connection was
lost) gets no end event: the watchdog settles it later, in the ledger only.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pipeledger.config.model import Config
    from pipeledger.ledger.run import RunObserver
    from pipeledger.warehouse.session import Warehouse

# the client's own configuration, which turns lineage on without a [lineage] section
CLIENT_SETTINGS = ("OPENLINEAGE_URL", "OPENLINEAGE_CONFIG")


def configured(config: Config) -> bool:
    """Whether the runs of ``config`` emit OpenLineage events (module docstring)."""
    if os.environ.get("OPENLINEAGE_DISABLED", "").strip().lower() == "true":
        return False
    if config.lineage is not None:
        return config.lineage.enabled
    return any(os.environ.get(name) for name in CLIENT_SETTINGS) or any(
        name.startswith("OPENLINEAGE__TRANSPORT") for name in os.environ
    )


def observer(config: Config, warehouse: Warehouse) -> RunObserver | None:
    """The observer that emits the events of the runs of ``config`` into ``warehouse``,
    or None without lineage."""
    if not configured(config):
        return None
    from pipeledger.lineage.emitter import LineageObserver

    return LineageObserver(config, warehouse)


def wait(timeout: float | None = None) -> None:
    """Wait (at most ``timeout`` seconds; default each emitter's ``[lineage] timeout``)
    until this process's events are delivered or spooled (an Airflow task's process may
    end without running exit handlers)."""
    import sys

    emitter = sys.modules.get("pipeledger.lineage.emitter")
    if emitter is not None:
        emitter.wait_for_emitters(timeout)


def drain(config: Config) -> int:
    """Send the spooled events now, in order (``pipeledger watchdog``); how many went."""
    if not configured(config):
        return 0
    from pipeledger.lineage.emitter import drain_spool

    return drain_spool(config)
