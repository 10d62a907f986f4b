"""Subprocesses: every measured step runs in a fresh one, so that its imports, its memory
and its peak RSS are its own. Also the ``pipeledger`` command as a user runs it, and
``--snapshot``: benchmarking a commit while others edit the working tree."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
WORK = ROOT / "bench" / "work"  # git-ignored
TIME_BIN = Path("/usr/bin/time")
WAIT_BUSY_S = 1800.0


def _python_path(first: tuple[str, ...] = (), last: tuple[str, ...] = ()) -> str:
    given = filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))
    return os.pathsep.join(dict.fromkeys([*first, *given, *last]))


def bench_command(module: str, args: list[str]) -> list[str]:
    """``python -P -m module ARGS``: ``-P`` keeps the current folder off the import path,
    so a ``--snapshot`` on ``PYTHONPATH`` is the pipeledger a step imports."""
    return [sys.executable, "-P", "-m", module, *args]


def bench_env(**extra: str) -> dict[str, str]:
    """The environment of a benchmark's own subprocess: ``bench`` importable (after a
    snapshot, if any: the snapshot's pipeledger comes first), and ``extra``."""
    return {**os.environ, "PYTHONPATH": _python_path(last=(str(ROOT),)), **extra}


def json_child(module: str, args: list[str], **env: str) -> dict[str, Any]:
    """Run ``python -m module ARGS`` and return the JSON object its last line prints."""
    command = bench_command(module, args)
    out = subprocess.run(
        command, stdout=subprocess.PIPE, text=True, env=bench_env(**env), check=True
    ).stdout
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


@dataclass(frozen=True)
class Finished:
    """A subprocess that ended: what it printed, its wall and CPU seconds, its
    ``ru_maxrss`` as ``wait4`` saw it (which counts the launcher's resident size at fork
    time: a ceiling)."""

    output: str
    wall: float
    cpu: float
    maxrss_mb: float


def run_waited(command: list[str], env: dict[str, str], exit_code: int = 0) -> Finished:
    """Run ``command``; exit with a message unless it exits with ``exit_code`` (0: it
    succeeds)."""
    started = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    output = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    code = os.waitstatus_to_exitcode(status)
    if code != exit_code:
        raise SystemExit(f"{' '.join(command)} exited with code {code}, not {exit_code}")
    cpu = usage.ru_utime + usage.ru_stime
    return Finished(output, wall, cpu, usage.ru_maxrss / 1024.0)


def own_peak_rss_mb() -> float:
    """VmHWM of this process's own address space (unlike ``ru_maxrss`` as seen by ``wait4``,
    it does not inherit the parent's resident size at fork/exec time)."""
    for line in read_text(Path("/proc/self/status")).splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024.0
    return float("nan")


def read_text(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def pipeledger_command(args: list[str]) -> list[str]:
    """``pipeledger ARGS`` as a user runs it: the command installed beside this venv's
    interpreter (its own directory, not the current folder, goes first on the import path,
    so under ``--snapshot`` the snapshot on ``PYTHONPATH`` is what it imports). Without an
    installed command: ``python -P -m pipeledger``."""
    installed = Path(sys.executable).parent / "pipeledger"
    if installed.exists():
        return [str(installed), *args]
    return [sys.executable, "-P", "-m", "pipeledger", *args]


def pipeledger_env(**extra: str) -> dict[str, str]:
    """A ``pipeledger`` command's environment: a user's (the repository's root, which a
    benchmark's own subprocess has on ``PYTHONPATH``, is not), and ``extra``."""
    paths = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    kept = os.pathsep.join(p for p in paths if p and Path(p).resolve() != ROOT)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return {**env, **({"PYTHONPATH": kept} if kept else {}), **extra}


@dataclass(frozen=True)
class Process:
    """A whole command: wall and CPU seconds, peak RSS, what it printed."""

    wall: float
    cpu: float  # user + system: less moved by a busy machine than the wall time
    rss_mb: float
    output: str


def run_process(command: list[str], **env: str) -> Process:
    """``command`` as a whole process: interpreter start, imports and exit included; it
    must succeed. The peak RSS is the command's own (GNU time's, which forks from a small
    process), or ``ru_maxrss`` from wait4."""
    return run_exiting(command, 0, env)


def run_exiting(command: list[str], exit_code: int, env: dict[str, str]) -> Process:
    """:func:`run_process` of a command that must exit with ``exit_code``."""
    WORK.mkdir(parents=True, exist_ok=True)
    rss_file = WORK / "cli-rss.txt"
    timed = TIME_BIN.exists()
    if timed:
        command = [str(TIME_BIN), "-f", "%M", "-o", str(rss_file), *command]
    done = run_waited(command, pipeledger_env(**env), exit_code)
    rss = int(rss_file.read_text().split()[-1]) / 1024.0 if timed else done.maxrss_mb
    return Process(done.wall, done.cpu, rss, done.output)


def compile_bytecode() -> None:
    """Write pipeledger's bytecode, as an installed package has it, before whole-process
    steps time the command (``PYTHONDONTWRITEBYTECODE`` would otherwise make every start
    compile the sources again)."""
    import pipeledger

    folder = str(Path(pipeledger.__file__).parent)
    subprocess.run([sys.executable, "-m", "compileall", "-q", folder], check=True)


def drop_cached_libraries() -> list[Path]:
    """Write back the interpreter's installed shared libraries (``site-packages``: libarrow,
    libpq, ...) and drop them from the page cache, so every step maps them as it would on a
    machine that did not just install them; returns the files. A library that pip has
    just written sits in the cache as large folios, which a process maps whole when it
    touches them: ``import pyarrow`` then counts 62-67 MB of file-backed pages in its RSS
    instead of 34 MB, and every step's peak RSS moves by ~30 MB with the age of the venv,
    not with what pipeledger does. Pages that a running process maps stay cached."""
    import sysconfig

    paths = sysconfig.get_paths()
    roots = {paths["purelib"], paths["platlib"]}  # the venv's site-packages
    files = [f for root in roots for f in Path(root).rglob("*.so*") if f.is_file()]
    os.sync()
    for file in files:
        fd = os.open(file, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    return files


def git(*args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def use_snapshot(work: Path, rev: str) -> str:
    """Extract ``pipeledger/`` at git revision ``rev`` under ``work/snapshot-<commit>/`` and
    put it first on the import path of this process and of every step, so that edits made
    to the working tree while the benchmark runs do not leak into it. Returns the commit."""
    if "pipeledger" in sys.modules:
        raise SystemExit("--snapshot: pipeledger was imported before the snapshot (a bug)")
    commit = git("rev-parse", "--short", rev)
    folder = work / f"snapshot-{commit}"
    if not (folder / "pipeledger" / "__init__.py").exists():
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", commit, "pipeledger"],
            capture_output=True,
            check=True,
        ).stdout
        folder.mkdir(parents=True, exist_ok=True)
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(folder, filter="data")
    os.environ["PYTHONPATH"] = _python_path(first=(str(folder),))
    sys.path.insert(0, str(folder))
    return commit


def busy() -> list[str]:
    """Other heavy processes (a test suite, another benchmark) that would skew the figures."""
    out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    mine, pid = set(), os.getpid()
    while pid > 1:  # this process and its ancestors (the shell that started it)
        mine.add(str(pid))
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    found = []
    for line in out.splitlines()[1:]:
        other, _, cmd = line.strip().partition(" ")
        if other not in mine and re.search(r"pytest|-m bench\.(load|ledger|gate|history)", cmd):
            found.append(line.strip())
    return found


def wait_quiet() -> None:
    """Wait (up to ``WAIT_BUSY_S``) while a test suite or another benchmark runs, so that
    a measured step does not share the CPU with them."""
    deadline = time.monotonic() + WAIT_BUSY_S
    announced = False
    while others := busy():
        if time.monotonic() > deadline:
            raise SystemExit("still busy after 30 min:\n  " + "\n  ".join(others))
        if not announced:
            print("  waiting for: " + "; ".join(o[:80] for o in others), file=sys.stderr)
            announced = True
        time.sleep(5)
