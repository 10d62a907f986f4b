"""The access audit: every read of the ledger through the API, the CLI or the dashboard
leaves a record of who read what, when, in which tenant (ledger migration 14,
``access_reads``).

What one *access* is. A face opens one with :func:`accessing` around what it does: a CLI
command (however many questions it asks), a dashboard page or JSON document (its dozen
questions). A question of :mod:`pipeledger.api` asked outside any face is an access of its
own, named after the function (``api.recent_runs``). An access is recorded once, by the
first read session that records it.

Who: the tenant (``[ledger] tenant``), the database role the session connects as
(``current_user`` on PostgreSQL; SQLite has no roles: ``''``), the operating-system user
(user@host) of the reading process, and for the dashboard the client's address. What: the
face (``cli``, ``api``, ``web``), the command, function or page path, and the pipeline
it is about (``''`` when none).

Bounded. Reads are rolled up per UTC minute and per key (tenant, minute, face, what,
pipeline, role, user, client): one upsert adds one to the minute's ``reads``. A dashboard
polling every few seconds, or a script calling ``pipeledger runs`` in a loop, adds at most
one row per minute per key. ``ledger prune --older-than`` deletes the rows of minutes
before its cutoff (:func:`pipeledger.ledger.reads.queries.prune`).

Cheap, and never in the way. The upsert is the read session's last statement (a row lock,
or SQLite's write lock, held for no longer than that statement and the COMMIT); it never
waits for SQLite's write lock, which a load holds for its whole run, nor for the disk at
COMMIT (:attr:`~pipeledger.warehouse.dialect.Dialect.light_write`): a record may be lost
in a crash of the database server or a power loss, the price of a read that stays a read. When the
ledger cannot be written (a read-only file or folder, a role that may only SELECT, a ledger
from before migration 14, SQLite's lock taken) the read answers all the same: the record is
skipped, the session rolls back (it had nothing else to commit) and the reason is logged
at debug. A database that refused for a reason a retry will not change is not asked again
by this process for :data:`REFUSED_FOR` (the dashboard of a read-only role would otherwise
leave an error in PostgreSQL's log at every poll). A read that fails records nothing: its
session rolls back.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

from pipeledger.common.who import who
from pipeledger.errors import PipeledgerError, Transient
from pipeledger.ledger.tables import ACCESS, ACCESS_KEY
from pipeledger.warehouse.dialect import Dialect
from pipeledger.warehouse.session import Session

Via = Literal["cli", "api", "web"]
Clock = Callable[[], datetime]
REFUSED_FOR = 60.0  # seconds before a database that refused a record is asked again


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, kw_only=True)
class Reader:
    """Who reads and what, as the face that reads says it. ``clock``: the time the record
    is reckoned in (tests fix it)."""

    via: Via
    what: str
    pipeline: str | None = None
    client: str | None = None
    clock: Clock = utc_now


@dataclass
class Access:
    """One access being made: its reader, the pipeline it turned out to be about, and
    whether a session recorded it yet."""

    reader: Reader
    pipeline: str | None = None
    recorded: bool = False
    user: str = field(default_factory=who)

    def about(self, pipeline: str | None) -> None:
        """The pipeline a question read about, when the face did not name one."""
        if self.pipeline is None:
            self.pipeline = pipeline


_OPEN: ContextVar[Access | None] = ContextVar("pipeledger_access", default=None)
_REFUSED: dict[str, float] = {}  # ledger url -> when it refused (time.monotonic)


@contextmanager
def accessing(reader: Reader) -> Iterator[Access]:
    """The block is one access by ``reader``: the questions asked in it are recorded as
    one read. A face inside another is its own access (a dashboard served by ``pipeledger
    ui`` records pages, not the command)."""
    access = Access(reader, reader.pipeline)
    token = _OPEN.set(access)
    try:
        yield access
    finally:
        _OPEN.reset(token)


@contextmanager
def asking(question: str, pipeline: str | None = None) -> Iterator[Access]:
    """The access a question belongs to: the face's open one (told the question's
    pipeline), else, for the question's duration, one of its own (an API call)."""
    access = _OPEN.get()
    if access is not None:
        access.about(pipeline)
        yield access
        return
    reader = Reader(via="api", what=f"api.{question}", pipeline=pipeline)
    with accessing(reader) as access:
        yield access


def about(pipeline: str | None) -> None:
    """The open access turned out to be about ``pipeline`` (a run's, once read)."""
    access = _OPEN.get()
    if access is not None:
        access.about(pipeline)


def record_sql(d: Dialect) -> str:
    """The upsert of one read: the minute's row of its key gains one read (parameters:
    tenant, minute, via, what, pipeline, os_user, client, first_at, last_at). The role is
    the session's own, never a value the reader supplies."""
    p = d.param
    role = "current_user" if d.has_roles else "''"
    columns = ", ".join((*ACCESS_KEY, "reads", "first_at", "last_at"))
    values = f"{p}, {p}, {p}, {p}, {p}, {role}, {p}, {p}, 1, {p}, {p}"
    return (
        f"INSERT INTO {d.stored_table(ACCESS)} AS a ({columns}) VALUES ({values}) "
        f"ON CONFLICT ({', '.join(ACCESS_KEY)}) "
        "DO UPDATE SET reads = a.reads + 1, last_at = excluded.last_at"
    )


def minute_of(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(second=0, microsecond=0)


def record(session: Session, access: Access, *, url: str, tenant: str) -> bool:
    """Record ``access`` in ``session`` (the read's own, about to end), once; whether it
    was recorded. Never raises: see the module's docstring."""
    if access.recorded or _refused(url):
        return False
    d, reader = session.dialect, access.reader
    now = reader.clock()
    params = [tenant, minute_of(now), reader.via, reader.what, access.pipeline or "", access.user]
    try:
        for statement in d.light_write:
            session.execute(statement)
        session.execute(record_sql(d), [*params, reader.client or "", now, now])
    except PipeledgerError as exc:
        _skipped(session, url, exc)
        return False
    access.recorded = True
    return True


def _skipped(session: Session, url: str, exc: PipeledgerError) -> None:
    session.mark_rollback()  # a read session: nothing else of it to keep
    if not isinstance(exc, Transient):
        _REFUSED[url] = time.monotonic()
    import logging  # only when a record was skipped: a quick command imports no logging

    logging.getLogger(__name__).debug(
        "the ledger did not record this read (%s); the read answered all the same", exc
    )


def _refused(url: str) -> bool:
    refused = _REFUSED.get(url)
    if refused is None:
        return False
    if time.monotonic() - refused < REFUSED_FOR:
        return True
    _REFUSED.pop(url, None)  # the dashboard's threads may both find it stale
    return False
