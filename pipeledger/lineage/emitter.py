"""Sending events off the run's path: one emitter thread per spool and process.

The observer's calls only queue a builder (microseconds). The emitter's daemon thread builds
each event (importing the OpenLineage client on first use), appends it to the spool
(:mod:`pipeledger.lineage.spool`), then sends the spool's events oldest first through the
client's transport (``http`` with no retries and ``[lineage] timeout``, ``file`` or
``console``). After a failed send it tries again :data:`RETRY_EVERY` later, or when an event
is queued at least ``timeout`` after the failure. At exit a process waits at most
``timeout`` for its queue to be spooled and sent (less when a send failed: then only until
its events are in the spool), and spools what is still queued itself.
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeledger.common.secrets import redact
from pipeledger.config.model import Config
from pipeledger.ledger.run import Run
from pipeledger.lineage.spool import EventSpool

if TYPE_CHECKING:
    from pipeledger.warehouse.session import Warehouse

log = logging.getLogger("pipeledger.lineage")

RETRY_EVERY = 5.0  # seconds between sends of the spool after a failure
DEFAULT_NAMESPACE = "pipeledger"
# the client's http transport, with retries off: a receiver that is down costs one attempt
NO_RETRY: dict[str, Any] = {"total": 0, "read": 0, "connect": 0, "status": 0, "other": 0}

Build = Callable[[], "dict[str, Any] | None"]


@dataclass(frozen=True, kw_only=True)
class Settings:
    """``[lineage]`` with its defaults resolved."""

    namespace: str
    dag_job: str
    timeout: float
    spool: Path
    transport: dict[str, Any] | None  # None: the client's own configuration


def settings_of(config: Config) -> Settings:
    lineage = config.lineage
    timeout = lineage.timeout.total_seconds() if lineage else 2.0
    spool = config.resolve(config.ledger.spool).parent / "lineage-spool.jsonl"
    if lineage and lineage.spool:
        spool = config.resolve(lineage.spool)
    namespace = (lineage and lineage.namespace) or os.environ.get("OPENLINEAGE_NAMESPACE")
    return Settings(
        namespace=namespace or DEFAULT_NAMESPACE,
        dag_job=(lineage and lineage.dag_job) or config.base_dir.resolve().name or "pipeledger",
        timeout=timeout,
        spool=spool.resolve(),
        transport=_transport_config(config, timeout),
    )


def _transport_config(config: Config, timeout: float) -> dict[str, Any] | None:
    lineage = config.lineage
    if lineage is None or lineage.transport is None:
        return None
    if lineage.transport == "file":
        return {"type": "file", "log_file_path": str(config.resolve(lineage.path)), "append": True}
    if lineage.transport == "console":
        return {"type": "console"}
    http: dict[str, Any] = {
        "type": "http",
        "url": lineage.url,
        "endpoint": lineage.endpoint,
        "timeout": timeout,
        "retry": NO_RETRY,
    }
    if lineage.api_key:
        http["auth"] = {"type": "api_key", "apiKey": lineage.api_key}
    return http


class Emitter(threading.Thread):
    """Builds, spools and sends events in order (module docstring)."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(name="pipeledger-lineage", daemon=True)
        self.settings = settings
        self.spool = EventSpool(settings.spool)
        self.sent = 0
        self._queue: deque[Build] = deque()
        self._cond = threading.Condition()
        self._spooling = threading.Lock()  # one builder at a time: this thread, or exit's
        self._working = False
        self._failed_at: float | None = None  # the last send failed (monotonic time)
        self._retry_at = 0.0
        self._transport: Any = None

    def put(self, build: Build) -> None:
        with self._cond:
            self._queue.append(build)
            failed_at = self._failed_at
            if failed_at is not None and time.monotonic() - failed_at >= self.settings.timeout:
                self._retry_at = time.monotonic()
            self._cond.notify_all()

    def run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._due():
                    self._cond.wait(self._wait_for())
                self._working = True
            try:
                self._spool_queued()
                if self._failed_at is None or self._due():
                    self._send()
            except Exception as exc:  # never let the thread die: the next event tries again
                log.warning("lineage: %s", redact(str(exc)))
            finally:
                with self._cond:
                    self._working = False
                    self._cond.notify_all()

    def _due(self) -> bool:
        return 0 < self._retry_at <= time.monotonic()

    def _wait_for(self) -> float | None:
        return max(0.01, self._retry_at - time.monotonic()) if self._retry_at else None

    def _spool_queued(self) -> None:
        while True:
            with self._spooling:
                with self._cond:
                    if not self._queue:
                        return
                    build = self._queue.popleft()
                self._spool_one(build)

    def _spool_one(self, build: Build) -> None:
        try:
            event = build()
        except Exception as exc:  # an event that cannot be built is lost, said once
            log.warning("lineage: could not build an event: %s", redact(str(exc)))
            return
        if event is None:
            return
        try:
            self.spool.append(event)
        except OSError as exc:
            log.warning("lineage: could not spool an event to %s: %s", self.spool.path, exc)

    def _send(self) -> None:
        """Send the spooled events oldest first, until the spool is empty or a send fails."""
        with self._cond:
            self._retry_at = 0.0
        with self.spool.sending() as mine:
            if not mine:  # another process sends them: look again shortly
                self._later(1.0)
                return
            while (found := self.spool.oldest()) is not None:
                line, event = found
                try:
                    self._transport_once().emit(event)
                except Exception as exc:
                    self._failed_send(exc)
                    return
                self.spool.remove(line)
                self.sent += 1
                self._spool_queued()  # events queued meanwhile go behind the spool's
            with self._cond:
                self._failed_at = None

    def _failed_send(self, exc: Exception) -> None:
        pending = self.spool.count()
        log.warning(
            "lineage: the receiver did not take an event (%s); %d event(s) wait in %s",
            redact(str(exc)),
            pending,
            self.spool.path,
        )
        with self._cond:
            self._failed_at = time.monotonic()
        self._later(RETRY_EVERY)

    def _later(self, seconds: float) -> None:
        with self._cond:
            self._retry_at = time.monotonic() + seconds

    def _transport_once(self) -> Any:
        if self._transport is None:
            self._transport = make_transport(self.settings)
        return self._transport

    def wait_idle(self, timeout: float) -> None:
        """Wait until every queued event is spooled and sent (or a send failed), at most
        ``timeout`` seconds; then spool what is still queued here."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._queue or (self._working and self._failed_at is None):
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
        if self._spooling.acquire(timeout=max(0.0, deadline - time.monotonic()) + 0.5):
            try:
                while True:
                    with self._cond:
                        if not self._queue:
                            break
                        build = self._queue.popleft()
                    self._spool_one(build)
            finally:
                self._spooling.release()


def make_transport(settings: Settings) -> Any:
    """The OpenLineage client's transport for ``settings`` (its own configuration when
    ``[lineage] transport`` is not set, with the http timeout and retries capped)."""
    from openlineage.client.transport import get_default_factory

    if settings.transport is not None:
        if settings.transport["type"] == "console":
            _console_to_stderr()
        return get_default_factory().create(dict(settings.transport))
    import attr
    from openlineage.client import OpenLineageClient
    from openlineage.client.transport.http import HttpTransport

    transport = OpenLineageClient().transport
    if isinstance(transport, HttpTransport):
        capped = attr.evolve(
            transport.config,
            timeout=min(transport.config.timeout, settings.timeout),
            retry=NO_RETRY,
            session=None,
        )
        transport = HttpTransport(capped)
    return transport


def _console_to_stderr() -> None:
    """The client's console transport logs each event at INFO: show them on stderr (never
    stdout, which holds a command's ``--json``)."""
    logger = logging.getLogger("openlineage.client.transport.console")
    if not logger.handlers:
        logger.addHandler(logging.StreamHandler(sys.stderr))
    logger.setLevel(logging.INFO)
    logger.propagate = False


_EMITTERS: dict[Path, Emitter] = {}
_LOCK = threading.Lock()


def emitter_for(settings: Settings) -> Emitter:
    """This process's emitter for the spool ``settings`` name (started on first use)."""
    with _LOCK:
        emitter = _EMITTERS.get(settings.spool)
        if emitter is None or not emitter.is_alive():
            if not _EMITTERS:
                atexit.register(wait_for_emitters)
            emitter = _EMITTERS[settings.spool] = Emitter(settings)
            emitter.start()
        return emitter


def wait_for_emitters(timeout: float | None = None) -> None:
    """Every emitter of this process: wait for its events (:meth:`Emitter.wait_idle`)."""
    with _LOCK:
        emitters = list(_EMITTERS.values())
    for emitter in emitters:
        emitter.wait_idle(emitter.settings.timeout if timeout is None else timeout)


def drain_spool(config: Config) -> int:
    """Send the config's spooled events now, in this thread; how many went."""
    emitter = emitter_for(settings_of(config))
    before = emitter.sent
    with emitter._cond:
        emitter._retry_at, emitter._failed_at = time.monotonic(), None  # due now
        emitter._cond.notify_all()
    emitter.put(lambda: None)
    emitter.wait_idle(emitter.settings.timeout * 4)
    return emitter.sent - before


class LineageObserver:
    """The run scaffold's observer: queues each run's START and end events."""

    def __init__(self, config: Config, warehouse: Warehouse) -> None:
        self.config, self.warehouse = config, warehouse
        self.settings = settings_of(config)
        self.emitter = emitter_for(self.settings)

    def started(self, run: Run) -> None:
        record = replace(run.record, extra=dict(run.record.extra))  # as it is now
        self.emitter.put(lambda: self._build("start", record))

    def ended(self, run: Run) -> None:
        self.emitter.put(lambda: self._build("end", run))

    def _build(self, moment: str, subject: Any) -> dict[str, Any] | None:
        from openlineage.client.serde import Serde

        from pipeledger.lineage.events import Scene, end_event, start_event

        scene = Scene(
            namespace=self.settings.namespace,
            dag_job=self.settings.dag_job,
            config=self.config,
            warehouse=self.warehouse,
        )
        event = start_event(scene, subject) if moment == "start" else end_event(scene, subject)
        return None if event is None else Serde.to_dict(event)
