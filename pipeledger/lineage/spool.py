"""The spool of OpenLineage events not yet delivered: a JSON-lines file, oldest first.

Every event is appended here before it is sent, and removed once the receiver took it, so
an event survives a receiver that is down, one that hangs, and a process that ends first.
Appends and removals hold a short lock on ``<spool>.lock`` (never while sending); sending
holds ``<spool>.send.lock``, taken without waiting: one process at a time sends, from the
oldest event on, so each event is delivered once and in order. A line that is not a whole
event (a crash mid-write) is set aside in ``<spool>.rejected`` with a warning.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

log = logging.getLogger("pipeledger.lineage")


class EventSpool:
    def __init__(self, path: Path) -> None:
        self.path = path

    @contextmanager
    def _locked(self, suffix: str, wait: bool = True) -> Iterator[bool]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.with_name(self.path.name + suffix).open("a") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                yield False
                return
            try:
                yield True
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def sending(self) -> AbstractContextManager[bool]:
        """Hold the right to send (True), or False when another process sends now."""
        return self._locked(".send.lock", wait=False)

    def append(self, event: dict[str, Any]) -> None:
        line = (json.dumps(event, sort_keys=True) + "\n").encode()
        with self._locked(".lock"):
            handle = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o666)
            try:
                size = os.fstat(handle).st_size
                if size and os.pread(handle, 1, size - 1) != b"\n":
                    line = b"\n" + line  # after a torn line: ours starts on a line of its own
                os.write(handle, line)
                os.fsync(handle)
            finally:
                os.close(handle)

    def oldest(self) -> tuple[str, dict[str, Any]] | None:
        """The oldest pending event (its line and its content), or None."""
        with self._locked(".lock"):
            for line in self._lines():
                try:
                    return line, json.loads(line)
                except ValueError as exc:
                    self._set_aside(line, exc)
        return None

    def remove(self, line: str) -> None:
        """Drop the oldest event, if it is still ``line`` (delivered)."""
        with self._locked(".lock"):
            lines = self._lines()
            if lines and lines[0] == line:
                self._rewrite(lines[1:])

    def count(self) -> int:
        with self._locked(".lock"):
            return len(self._lines())

    def _lines(self) -> list[str]:
        if not self.path.exists():
            return []
        text = self.path.read_text(encoding="utf-8", errors="replace")
        return [line for line in text.splitlines() if line.strip()]

    def _rewrite(self, lines: list[str]) -> None:
        if not lines:
            self.path.unlink(missing_ok=True)
            return
        scratch = self.path.with_name(self.path.name + ".tmp")
        scratch.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        scratch.replace(self.path)

    def _set_aside(self, line: str, exc: Exception) -> None:
        aside = self.path.with_name(self.path.name + ".rejected")
        log.warning(
            "lineage spool %s: a line is not a whole event (%s); set aside in %s",
            self.path,
            exc,
            aside,
        )
        with aside.open("a", encoding="utf-8") as handle:
            handle.write(line + "\n")
        self._rewrite([kept for kept in self._lines() if kept != line])
