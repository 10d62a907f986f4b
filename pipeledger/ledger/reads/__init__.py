"""The ledger's answers, each a pure query builder beside the function that runs it on a
read session (``runs``, ``detail``, ``health``, ``queries``, ``sla``, ``recent``).
:func:`reading` opens that session; the CLI, the Python API and any other face ask through
:mod:`pipeledger.api`, never with SQL of their own."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from pipeledger.errors import ConfigError
from pipeledger.ledger.tables import DAYS, LEDGER
from pipeledger.warehouse.adapters import open_warehouse
from pipeledger.warehouse.migrations import is_migrated
from pipeledger.warehouse.session import Session


@contextmanager
def reading(
    url: str, *, write: bool = False, current: bool = False, tenant: str = "default"
) -> Iterator[Session | None]:
    """A session on the ledger database at ``url``, or None while it has no ledger tables.
    ``current``: the question reads tables of ledger migration 6 (rollups, alerts, SLA
    breaches), which a ledger made by an earlier release lacks until it is migrated.
    ``write``: a session that may change the ledger (pruning). ``tenant``: whose rows the
    session sees."""
    with open_warehouse(url, tenant=tenant).session(write=write) as session:
        if not is_migrated(session, LEDGER):
            yield None
            return
        if current and session.table_columns(DAYS) is None:
            raise ConfigError(
                "the ledger was made by an earlier release of pipeledger: run `pipeledger "
                "ledger migrate` (or any run) to bring it up to date, then ask again"
            )
        yield session
