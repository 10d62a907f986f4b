"""The PostgreSQL server a benchmark measures, its fresh databases, its log and its CPU.

Without ``--postgres-url`` (or ``$PIPELEDGER_BENCH_POSTGRES_URL``) a benchmark starts the
test suite's throwaway server (:class:`pipeledger.testing.postgres.ThrowawayPostgres`),
tuned by ``SERVER_SETTINGS``, and stops it at the end.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql

URL_ENV = "PIPELEDGER_BENCH_POSTGRES_URL"
# Tuned like a small production server on the 24 GiB benchmark machine, so the 5M-row
# table fits in shared buffers as it would in production (the test suite's 256MB made
# the bigger steps measure cache misses, not pipeledger).
SERVER_SETTINGS = {"shared_buffers": "'2GB'"}
# PostgreSQL's own defaults where the throwaway server departs from them (it turns
# durability off): the profile production runs, fsync and full-page writes on
PROFILES = {
    "tuned": SERVER_SETTINGS,
    "default": {
        "fsync": "on",
        "synchronous_commit": "on",
        "full_page_writes": "on",
        "wal_level": "replica",
        "max_wal_senders": "10",
        "max_wal_size": "'1GB'",
        "checkpoint_timeout": "'5min'",
        "shared_buffers": "'128MB'",
        "jit": "on",  # the throwaway server turns it off
    },
}
# each log line names its session (application_name), so a step's statements are its own
LOG_PREFIX = {"log_line_prefix": "'%m [%p] %a '"}
LOG_EVERY_STATEMENT = {"log_min_duration_statement": "0"}
_LOG_DURATION = re.compile(
    r"\[\d+\] (.*?) LOG:  duration: ([0-9.]+) ms  (?:statement|execute [^:]*): (.*)"
)
# pipeledger names its sessions itself (pipeledger.warehouse.clients), whatever PGAPPNAME says
PIPELEDGER_SESSIONS = "pipeledger "


class ServerCpu:
    """CPU seconds used so far by a local PostgreSQL: the postmaster, its live processes,
    and the processes it has reaped (a step's backends end before it is read again)."""

    def __init__(self, postmaster: int) -> None:
        self.postmaster = postmaster
        self.tick = os.sysconf("SC_CLK_TCK")

    @staticmethod
    def _stat(pid: int) -> list[str]:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()

    def seconds(self) -> float:
        fields = self._stat(self.postmaster)  # utime, stime, cutime, cstime: 11..14
        total = sum(int(f) for f in fields[11:15])
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError, IndexError):
                child = self._stat(int(entry.name))
                if int(child[1]) == self.postmaster:
                    total += int(child[11]) + int(child[12])
        return total / self.tick


@dataclass(frozen=True)
class Server:
    """The server measured; ``log`` and ``cpu`` are known for the throwaway one only."""

    url: str
    log: Path | None = None
    cpu: ServerCpu | None = None


@contextlib.contextmanager
def server(url: str | None, settings: dict[str, str] | None = None) -> Iterator[Server]:
    """``url`` (else ``$PIPELEDGER_BENCH_POSTGRES_URL``), or a throwaway server with
    ``settings`` (default ``SERVER_SETTINGS``) for the block."""
    given = url or os.environ.get(URL_ENV)
    if given:
        yield Server(given)
        return
    from pipeledger.testing.postgres import ThrowawayPostgres

    throwaway = ThrowawayPostgres(settings=SERVER_SETTINGS if settings is None else settings)
    started = throwaway.start()
    try:
        pid = (throwaway.data_dir / "postmaster.pid").read_text().split()[0]
        print(f"throwaway PostgreSQL at {started}", file=sys.stderr)
        yield Server(started, throwaway.log_path, ServerCpu(int(pid)))
    finally:
        throwaway.stop()


def with_database(url: str, name: str) -> str:
    return urlunsplit(urlsplit(url)._replace(path="/" + name))


@contextlib.contextmanager
def fresh_database(server_url: str, name: str) -> Iterator[str]:
    """A new, empty database ``name`` on the server for the block (dropped first if a
    killed run left it, and after)."""
    drop = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(drop)
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield with_database(server_url, name)
    finally:
        with psycopg.connect(server_url, autocommit=True) as conn:
            conn.execute(drop)


def settle(url: str, timeout_s: float = 120.0) -> None:
    """CHECKPOINT and wait for autovacuum workers to finish, so steps do not overlap them."""
    with psycopg.connect(url, autocommit=True) as conn:
        with contextlib.suppress(psycopg.Error):
            conn.execute("CHECKPOINT")
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'autovacuum worker'"
            ).fetchone()
            if not row or int(row[0]) == 0:
                return
            time.sleep(0.5)


def log_offset(log: Path) -> int:
    return log.stat().st_size


def logged_statements(
    log: Path, offset: int, sessions: tuple[str, ...]
) -> Iterator[tuple[float, str]]:
    """(seconds, statement) of every duration the server logged since ``offset`` (with
    ``LOG_PREFIX``) for the sessions whose name starts with one of ``sessions``."""
    with log.open("rb") as f:
        f.seek(offset)
        text = f.read().decode("utf-8", "replace")
    for line in text.splitlines():
        match = _LOG_DURATION.search(line)
        if match and match.group(1).startswith(sessions):
            yield float(match.group(2)) / 1000.0, match.group(3)
