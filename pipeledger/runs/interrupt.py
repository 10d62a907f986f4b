"""Stopping the runs of this process from outside them: a run's ``timeout`` (a timer), and
every open run at once (SIGTERM, :func:`interrupt_all`). A cancel request reaches a run
through its ledger heartbeat instead (:mod:`pipeledger.ledger.cancel`). Each run holds a
:class:`~pipeledger.common.stop.Stop`; stopping it cancels its statement on the server."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

from pipeledger.common.stop import Stop, running
from pipeledger.errors import RunCancelled, RunTimedOut

_RUNS: dict[str, Stop] = {}  # run id -> its stop, while the run is open: interrupt_all
_RUNS_LOCK = threading.Lock()
_INTERRUPTED = threading.Event()


@contextmanager
def stoppable(run_id: str, stop: Stop, timeout: timedelta | None) -> Iterator[None]:
    """The run can be stopped from here on: by its timeout, by :func:`interrupt_all`."""
    timer = None
    if timeout is not None:
        error = RunTimedOut(
            f"run {run_id} was stopped after its timeout of {_words(timeout)} (timeout)"
        )
        timer = threading.Timer(timeout.total_seconds(), stop.stop, [error])
        timer.daemon = True
        timer.start()
    with _RUNS_LOCK:
        if _INTERRUPTED.is_set():  # interrupted while it waited to begin
            stop.stop(RunCancelled("cancelled while it ran"))
        _RUNS[run_id] = stop
    try:
        with running(stop):
            yield
    finally:
        if timer is not None:
            timer.cancel()
        with _RUNS_LOCK:
            _RUNS.pop(run_id, None)


def _words(duration: timedelta) -> str:
    seconds = duration.total_seconds()
    return f"{seconds:g} s" if seconds < 120 else f"{seconds / 60:g} min"


def interrupt_reset() -> None:
    """A new invocation: nothing is being interrupted."""
    _INTERRUPTED.clear()


def interrupt_all() -> None:
    """Stop every run of this process (from another thread): each rolls back and is
    recorded ``cancelled``, and no retry starts."""
    _INTERRUPTED.set()
    with _RUNS_LOCK:
        stops = list(_RUNS.values())
    for stop in stops:
        stop.stop(RunCancelled("cancelled while it ran"))


def pause(seconds: float) -> bool:
    """Wait ``seconds`` (before a retry); False when this process is being interrupted."""
    return not _INTERRUPTED.wait(seconds)
