"""Running the ``pipeledger`` command in processes of its own: released on demand (see
``launch.py``), waited for, or killed with SIGKILL by the pid the drill started."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LAUNCHER = Path(__file__).resolve().with_name("launch.py")
LOCK_HELD = "another run holds its lock"  # PostgreSQL: a run of the pipeline is active
SQLITE_BUSY = "another load is writing"  # SQLite: the file's write lock stayed taken 5 s
_serial = itertools.count()


@dataclass
class Outcome:
    """How a command ended: ``rc`` is negative (-9) when it was killed."""

    rc: int
    out: str
    err: str
    seconds: float  # from its release to its exit
    pid: int
    released_at: float  # time.time() at the release

    def json(self) -> list[dict[str, Any]]:
        try:
            payload = json.loads(self.out)
        except json.JSONDecodeError:
            return []
        return payload if isinstance(payload, list) else [payload]

    def first(self) -> dict[str, Any]:
        items = self.json()
        return items[0] if items else {}

    def says(self, text: str) -> bool:
        return text in self.out or text in self.err


class Launch:
    """One ``pipeledger`` process, started and imported, waiting for :meth:`release`."""

    def __init__(self, folder: Path, go: Path | None = None) -> None:
        scratch = folder / ".drill"
        scratch.mkdir(exist_ok=True)
        n = next(_serial)
        self.ready = scratch / f"ready-{os.getpid()}-{n}"
        self.go = go or scratch / f"go-{os.getpid()}-{n}"
        self.out_path, self.err_path = scratch / f"{n}.out", scratch / f"{n}.err"
        with self.out_path.open("wb") as out, self.err_path.open("wb") as err:
            self.process = subprocess.Popen(
                [sys.executable, str(LAUNCHER), str(self.ready), str(self.go)],
                cwd=folder, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                start_new_session=True,  # a terminal's Ctrl-C reaches the drill, not the runs
            )  # fmt: skip
        self.released_at = 0.0
        self._t0 = 0.0

    @property
    def pid(self) -> int:
        return self.process.pid

    def wait_ready(self) -> None:
        """Wait until the launcher has imported pipeledger (its ready file), or has ended."""
        while not self.ready.exists():
            if self.process.poll() is not None:
                raise RuntimeError(f"the launcher did not start: {self.err_path.read_text()}")
            time.sleep(0.01)

    def release(self, args: Sequence[str]) -> None:
        go_with(self.go, args)
        self.mark_released()

    def mark_released(self) -> None:
        self.released_at, self._t0 = time.time(), time.monotonic()

    def running(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> bool:
        """SIGKILL the process (by the pid started here); True if it was still running."""
        alive = self.running()
        if alive:
            try:
                os.kill(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                alive = False
        self.process.wait()
        return alive

    def stderr_so_far(self) -> str:
        return self.err_path.read_text(errors="replace")

    def wait(self) -> Outcome:
        rc = self.process.wait()
        seconds = time.monotonic() - self._t0
        outcome = Outcome(
            rc, self.out_path.read_text(errors="replace"), self.stderr_so_far(), seconds,
            self.process.pid, self.released_at,
        )  # fmt: skip
        for path in (self.ready, self.out_path, self.err_path):
            path.unlink(missing_ok=True)
        return outcome


def go_with(go: Path, args: Sequence[str]) -> None:
    """Release the processes waiting for ``go``: it appears at once, holding the arguments."""
    partial = go.with_name(go.name + ".partial")
    partial.write_text(json.dumps(list(args)))
    partial.replace(go)


class Launcher:
    """Starts commands in one folder, each from a process imported ahead of time: the next
    ones are started (:meth:`warm`) while the drill checks the last one."""

    def __init__(self, folder: Path, depth: int = 1) -> None:
        self.folder = folder
        self.depth = depth
        self._waiting: list[Launch] = []

    def warm(self) -> None:
        while len(self._waiting) < self.depth:
            self._waiting.append(Launch(self.folder))

    def start(self, args: Sequence[str]) -> Launch:
        launch = self._waiting.pop(0) if self._waiting else Launch(self.folder)
        launch.wait_ready()
        launch.release(args)
        return launch

    def run(self, args: Sequence[str]) -> Outcome:
        """Run a command to its end; ``seconds`` excludes the interpreter's imports."""
        outcome = self.start(args).wait()
        self.warm()
        return outcome

    def close(self) -> None:
        """Stop the processes kept waiting (they never ran a command)."""
        for launch in self._waiting:
            launch.kill()
            launch.wait()
        self._waiting = []


def launch_many(folder: Path, args: Sequence[str], n: int) -> list[Launch]:
    """``n`` identical commands, imported, released together by one file."""
    go = folder / ".drill" / f"go-all-{os.getpid()}-{next(_serial)}"
    launches = [Launch(folder, go) for _ in range(n)]
    for launch in launches:
        launch.wait_ready()
    go_with(go, args)
    for launch in launches:
        launch.mark_released()
    return launches


def run_inline(folder: Path, args: Sequence[str]) -> Outcome:
    """Run a ``pipeledger`` command in this process, for upkeep commands (``watchdog``) that
    are never killed: it saves a new interpreter's imports."""
    from click.testing import CliRunner

    import pipeledger.cli.app  # noqa: F401  (defines the commands of the app)
    from pipeledger.cli.common import app

    started, t0 = time.time(), time.monotonic()
    config = ["--config", str(folder / "pipeledger.toml")]
    done = CliRunner().invoke(app, [*config, *args], catch_exceptions=False)
    seconds = time.monotonic() - t0
    return Outcome(done.exit_code, done.stdout, done.stderr, seconds, os.getpid(), started)
