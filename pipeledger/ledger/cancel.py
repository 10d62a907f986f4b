"""Cancel requests: ``pipeledger cancel RUN_ID`` from any process or host asks a running run
to stop; the run's heartbeat (:class:`pipeledger.ledger.run.Heartbeat`) hears it, the run
rolls back and is recorded ``cancelled``.

A request is a row of the ledger (``cancel_requests``), or, where the ledger's database lets
one writer in at a time (SQLite), a file beside it: the run's load holds the database's
write lock for its whole transaction, so the request could not be written until the run
had ended."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from pipeledger.errors import PipeledgerError
from pipeledger.ledger import sql as lsql
from pipeledger.ledger.store import LedgerStore


class CancelMailbox:
    """Where the requests to cancel the runs of one ledger wait."""

    def __init__(self, store: LedgerStore, url: str) -> None:
        self.store = store
        self.url = url

    def post(self, run_id: str, who: str, reason: str | None) -> None:
        """Ask run ``run_id`` (known to be running) to stop."""
        mailbox = self._file(run_id)
        if mailbox is not None:
            mailbox.parent.mkdir(parents=True, exist_ok=True)
            mailbox.write_text(f"{who}: {reason}" if reason else who, encoding="utf-8")
            return
        with self.store.session() as session:
            session.execute(
                lsql.request_cancel(session.dialect), [run_id, datetime.now(UTC), who, reason]
            )

    def request(self, run_id: str) -> str | None:
        """Who asked to cancel the run (and why), or None. Never raises: a ledger it
        cannot read has no request to give."""
        mailbox = self._file(run_id)
        try:
            if mailbox is not None:
                return mailbox.read_text(encoding="utf-8") if mailbox.exists() else None
            with self.store.session(write=False) as session:
                rows = session.query(lsql.cancel_request(session.dialect), [run_id])
        except (PipeledgerError, OSError):
            return None
        if not rows:
            return None
        who, reason = rows[0]
        return f"{who}: {reason}" if reason else str(who)

    def clear(self, run_id: str) -> None:
        """The run has ended: a request left for it is void."""
        mailbox = self._file(run_id)
        if mailbox is not None:
            mailbox.unlink(missing_ok=True)

    def _file(self, run_id: str) -> Path | None:
        """The request's file where the ledger's database has one writer at a time (module
        docstring); None where it is a row."""
        if self.store.database.dialect.heartbeat_while_loading:
            return None
        path = Path(self.url.removeprefix("sqlite:///"))
        return path.with_name(path.name + "-cancel") / run_id
