"""The project a dashboard shows: its ``pipeledger.toml``, read again when it changes.

A page about the ledger needs only where the ledger is (:func:`pipeledger.api.locate`);
the graph, schedules, watermarks and quarantine need the validated config, which is kept
until the file changes (a config of 500 nodes takes tens of milliseconds to validate). A
config that does not validate (being edited) leaves the ledger's pages working: they say
what is wrong instead of what needs the config.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pipeledger import api


@dataclass(frozen=True)
class _Read:
    stamp: tuple[int, int]
    located: api.Located
    config: Any  # api.Config, or the error that kept it from validating


class Project:
    """The config file at ``path`` (default ``./pipeledger.toml``), as of its last change."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = (path or Path("pipeledger.toml")).resolve()
        self._lock = threading.Lock()
        self._read: _Read | None = None

    def _current(self) -> _Read:
        try:
            info = self.path.stat()
            stamp = (info.st_mtime_ns, info.st_size)
        except OSError:
            stamp = (0, 0)
        with self._lock:
            if self._read is None or self._read.stamp != stamp:
                located = api.locate(self.path)
                try:
                    config: Any = api.load_config(self.path)
                except api.PipeledgerError as exc:
                    config = exc
                self._read = _Read(stamp, located, config)
            return self._read

    @property
    def located(self) -> api.Located:
        return self._current().located

    @property
    def config(self) -> api.Config:
        """The validated config; the ConfigError that stops it otherwise."""
        config = self._current().config
        if isinstance(config, BaseException):
            raise config
        assert config is not None
        return config  # type: ignore[no-any-return]

    @property
    def config_error(self) -> str | None:
        config = self._current().config
        return api.redact(str(config)) if isinstance(config, BaseException) else None

    def now(self) -> datetime:
        return datetime.now(UTC)
