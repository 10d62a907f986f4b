"""The ledger's answers, each a pure query builder beside the function that runs it on a
read session (``runs``, ``detail``, ``health``, ``queries``, ``sla``, ``recent``).
:func:`reading` opens that session; the CLI, the Python API and any other face ask through
:mod:`pipeledger.api`, never with SQL of their own."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from contextvars import ContextVar

from pipeledger.errors import ConfigError
from pipeledger.ledger.access import Access, record
from pipeledger.ledger.tables import DAYS, LEDGER
from pipeledger.warehouse.adapters import open_warehouse
from pipeledger.warehouse.migrations import is_migrated
from pipeledger.warehouse.session import Session


class _Shared:
    """The read sessions of a :func:`shared_reads` block, one per ledger database, opened
    when first asked (None: that database has no ledger tables)."""

    def __init__(self) -> None:
        self.stack = ExitStack()
        # (url, tenant) -> its session: a session sees one tenant's rows, so two tenants
        # asking in one block never share one
        self.sessions: dict[tuple[str, str], Session | None] = {}
        self.current: dict[tuple[str, str], bool] = {}  # -> has the tables of migration 6
        # (url, tenant) -> the accesses its questions were asked for, recorded as it ends
        self.accesses: dict[tuple[str, str], list[Access]] = {}

    def record(self, key: tuple[str, str]) -> None:
        session = self.sessions[key]
        url, tenant = key
        for access in self.accesses.pop(key, []):
            if session is not None:
                record(session, access, url=url, tenant=tenant)


_SHARED: ContextVar[_Shared | None] = ContextVar("pipeledger_shared_reads", default=None)
_OUTDATED = (
    "the ledger was made by an earlier release of pipeledger: run `pipeledger "
    "ledger migrate` (or any run) to bring it up to date, then ask again"
)


@contextmanager
def shared_reads() -> Iterator[None]:
    """Every question asked in the block (on this thread) reads the same ledger through
    one read session: one connection and one check of its tables, not one of each per
    question (a dashboard page asks up to a dozen; connecting to PostgreSQL takes 10-20
    ms). Each question runs in a savepoint, so one that fails leaves the others theirs.
    Writing sessions are never shared."""
    if _SHARED.get() is not None:
        yield
        return
    shared = _Shared()
    token = _SHARED.set(shared)
    try:
        with shared.stack:
            yield
    finally:
        _SHARED.reset(token)


def _shared_session(shared: _Shared, url: str, tenant: str, current: bool) -> Session | None:
    key = (url, tenant)
    if key not in shared.sessions:
        warehouse = open_warehouse(url, tenant=tenant)
        opened = shared.stack.enter_context(warehouse.session(write=False))
        shared.sessions[key] = opened if is_migrated(opened, LEDGER) else None
        shared.stack.callback(shared.record, key)  # the session's last statements
    session = shared.sessions[key]
    if session is not None and current:
        if key not in shared.current:
            shared.current[key] = session.table_columns(DAYS) is not None
        if not shared.current[key]:
            raise ConfigError(_OUTDATED)
    return session


@contextmanager
def reading(
    url: str,
    *,
    write: bool = False,
    current: bool = False,
    access: Access | None = None,
    tenant: str = "default",
) -> Iterator[Session | None]:
    """A session on the ledger database at ``url``, or None while it has no ledger tables.
    ``current``: the question reads tables of ledger migration 6 (rollups, alerts, SLA
    breaches), which a ledger made by an earlier release lacks until it is migrated.
    ``write``: a session that may change the ledger (pruning). ``tenant``: whose rows the
    session sees. Inside :func:`shared_reads` a read session is the block's (one per
    database and tenant). ``access``: the read to record in ``tenant``'s access audit
    (:mod:`pipeledger.ledger.access`) as the session's last statement, when the question
    answered; inside :func:`shared_reads`, as the block ends."""
    shared = _SHARED.get()
    if shared is not None and not write:
        session = _shared_session(shared, url, tenant, current)
        if session is None:
            yield None
            return
        with session.savepoint():
            yield session
        if access is not None:
            shared.accesses.setdefault((url, tenant), []).append(access)
        return
    with open_warehouse(url, tenant=tenant).session(write=write) as session:
        if not is_migrated(session, LEDGER):
            yield None
            return
        if current and session.table_columns(DAYS) is None:
            raise ConfigError(_OUTDATED)
        yield session
        if access is not None:
            record(session, access, url=url, tenant=tenant)
