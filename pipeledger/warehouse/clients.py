"""Who is behind a database session: the name pipeledger gives each of its connections, and
whether the process that opened one is known to be gone.

A run's connections are named ``pipeledger <pid>@<host> <pipeline> run <run_id>`` (the
server keeps the first 63 bytes, so the process comes first: a run id cut short still
leaves the process named). A process is *known* gone only when it ran on this host and no
longer exists; anywhere else, or when unsure, it counts as alive.
"""

from __future__ import annotations

import contextvars
import os
import re
import socket
from collections.abc import Iterator
from contextlib import contextmanager

_NAME = re.compile(r"^pipeledger (\d+)@(\S+)")
NAME_LIMIT = 63  # PostgreSQL's NAMEDATALEN - 1


def this_host() -> str:
    return socket.gethostname()


def client_name(pipeline: str | None = None, run_id: str | None = None) -> str:
    """The name of this process's database sessions, for one run when given."""
    name = f"pipeledger {os.getpid()}@{this_host()}"
    if pipeline is not None:
        name += f" {pipeline}"
    if run_id is not None:
        name += f" run {run_id}"
    return name.encode()[:NAME_LIMIT].decode(errors="ignore")


_ACTING_FOR: contextvars.ContextVar[str | None] = contextvars.ContextVar("client", default=None)


@contextmanager
def acting_for(pipeline: str, run_id: str) -> Iterator[None]:
    """Sessions opened in this thread inside the block carry the run's name (a warehouse
    asks :func:`current_client` when it opens one)."""
    token = _ACTING_FOR.set(client_name(pipeline, run_id))
    try:
        yield
    finally:
        _ACTING_FOR.reset(token)


def current_client() -> str:
    """The name of a session opened now: the run this thread works for, else the process."""
    return _ACTING_FOR.get() or client_name()


def client_process(name: str | None) -> tuple[int, str] | None:
    """(pid, host) of the process a session name says opened it, if it is one of ours.
    A host name cut short by the length limit is not recognised."""
    text = name or ""
    match = _NAME.match(text)
    if match is None:
        return None
    if len(text.encode()) >= NAME_LIMIT and match.end() == len(text):
        return None  # the host may be cut short
    return int(match.group(1)), match.group(2)


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, under another user
        return True
    return True


def gone(host: object, pid: object) -> bool:
    """The process ran on this host and has exited."""
    return host == this_host() and pid is not None and not process_alive(int(str(pid)))


def client_gone(name: str | None) -> bool:
    """The session named ``name`` belongs to a pipeledger process of this host that has
    exited (its session outlives it until the server notices)."""
    process = client_process(name)
    return process is not None and gone(process[1], process[0])
