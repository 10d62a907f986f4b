"""Stopping one run from another thread: its timeout, a cancel request, SIGTERM.

A run works in one thread, holding a :class:`Stop`. Whatever may block inside the run (the
warehouse session's statement, a SQL source's query) registers, while it may block, how
to cut it short: :func:`cancellable` for code that does not know the run (a source reader
in an adapter), :meth:`Stop.hook` where the run is at hand. :meth:`Stop.stop` records why
the run is stopped and calls every hook, so the statement running on the server is
cancelled and the run's own code fails at once, rolls back and releases its lock; the
scaffold then raises the reason instead of the statement's error.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

Hook = Callable[[], None]
# the longest the main thread waits in one piece: a signal that the kernel gave another
# thread (the dashboard's, a node's worker) runs its Python handler only when the main
# thread next runs, so its long waits are cut into slices of this many seconds
SIGNAL_WAKE_S = 1.0


class Stop:
    """One run's stop: why it was stopped (None while it runs on), and the hooks that cut
    short what it is waiting for."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._hooks: list[Hook] = []
        self.reason: BaseException | None = None

    def stop(self, reason: BaseException) -> None:
        """Stop the run, from any thread; the first reason given is the one kept."""
        with self._lock:
            if self.reason is not None:
                return
            self.reason = reason
            hooks = list(self._hooks)
        for hook in hooks:
            _call(hook)

    @contextmanager
    def hook(self, cut_short: Hook) -> Iterator[None]:
        """While the block runs, :meth:`stop` calls ``cut_short`` (at once when the run
        was stopped before the block began)."""
        with self._lock:
            stopped = self.reason is not None
            self._hooks.append(cut_short)
        if stopped:
            _call(cut_short)
        try:
            yield
        finally:
            with self._lock:
                self._hooks.remove(cut_short)


def _call(hook: Hook) -> None:
    try:
        hook()
    except Exception as exc:  # stopping is best effort: the run's own check still stops it
        import logging  # only here: quick commands start without it

        logging.getLogger("pipeledger.run").warning("could not cut a statement short: %s", exc)


_CURRENT: contextvars.ContextVar[Stop | None] = contextvars.ContextVar("stop", default=None)


@contextmanager
def running(stop: Stop) -> Iterator[None]:
    """Code in the block (in this thread) belongs to the run that ``stop`` stops."""
    token = _CURRENT.set(stop)
    try:
        yield
    finally:
        _CURRENT.reset(token)


@contextmanager
def cancellable(cut_short: Hook) -> Iterator[None]:
    """Register ``cut_short`` with the run this thread works for, if any."""
    stop = _CURRENT.get()
    if stop is None:
        yield
        return
    with stop.hook(cut_short):
        yield
