"""Stopping the runs of this process from outside them: a run's ``timeout`` (a timer), and
every open run at once (SIGTERM, :func:`interrupt_all`). A cancel request reaches a run
through its ledger heartbeat instead (:mod:`pipeledger.ledger.cancel`). Each run holds a
:class:`~pipeledger.common.stop.Stop`; stopping it cancels its statement on the server."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

from pipeledger.common.stop import SIGNAL_WAKE_S, Stop, running
from pipeledger.errors import RunCancelled, RunTimedOut

_RUNS: dict[str, Stop] = {}  # run id -> its stop, while the run is open: interrupt_all
_RUNS_LOCK = threading.Lock()
_INTERRUPTED = threading.Event()
_TERMINATING = False  # set by a signal handler for the rest of the invocation: terminate


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
        if _INTERRUPTED.is_set() or _TERMINATING:  # interrupted while it waited to begin
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


def terminate() -> None:
    """This process is being stopped (SIGTERM, Ctrl-C): from now on no run starts, no
    retry waits and ``serve`` does not sleep again, whatever becomes of the exception the
    signal handler raises (a cleanup that fails on its way out may replace it with its own
    error, which the loop would otherwise report as one more failed run and go on).
    Called from a signal handler, so it only sets a flag: it takes no lock, which the
    interrupted code may be holding. :func:`terminate_reset` ends it."""
    global _TERMINATING
    _TERMINATING = True


def terminate_reset() -> None:
    """The invocation that was being terminated has ended (the process goes on)."""
    global _TERMINATING
    _TERMINATING = False


def pause(seconds: float) -> bool:
    """Wait ``seconds`` (before a retry, between ``serve``'s rounds); False when this
    process is being interrupted or terminated. It looks at least every second: a signal
    that the kernel gave another thread (the dashboard's) runs its Python handler only
    when the main thread next runs, and a wait of an hour would keep it waiting."""
    deadline = time.monotonic() + seconds
    while not _TERMINATING:
        left = deadline - time.monotonic()
        if _INTERRUPTED.wait(max(0.0, min(left, SIGNAL_WAKE_S))):
            return False
        if left <= SIGNAL_WAKE_S:
            return True
    return False
