"""The machine a benchmark ran on, for its report: figures mean little without it."""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path

import psycopg
import pyarrow as pa

from bench.common.process import ROOT, read_text

POSTGRES_SETTINGS = [
    "shared_buffers",
    "fsync",
    "synchronous_commit",
    "wal_level",
    "work_mem",
    "temp_buffers",
    "maintenance_work_mem",
]
LOAD_AVERAGE = "load average at the end (1/5/15 min)"


def _cpu_model() -> str:
    for line in read_text(Path("/proc/cpuinfo")).splitlines():
        if "model name" in line:
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def _memory_gib() -> float:
    for line in read_text(Path("/proc/meminfo")).splitlines():
        if line.startswith("MemTotal"):
            return int(line.split()[1]) / 1024 / 1024
    return 0.0


def _postgres(url: str) -> tuple[str, str]:
    """The server's version and the settings that move the figures."""
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT version()").fetchone()
        rows = conn.execute(
            "SELECT name, current_setting(name) FROM pg_settings WHERE name = ANY(%s)",
            [POSTGRES_SETTINGS],
        ).fetchall()
    settings = ", ".join(f"{name}={value}" for name, value in sorted(rows))
    return (str(row[0]) if row else "?"), settings


def _commit() -> str:
    try:
        described = subprocess.run(
            ["git", "-C", str(ROOT), "describe", "--always", "--dirty"],
            capture_output=True,
            text=True,
            check=False,
        )
    except OSError:  # no git: the figures still stand
        return "?"
    return described.stdout.strip() or "?"


def machine(url: str | None, snapshot: str | None) -> dict[str, str]:
    """CPU, cores, memory, load average now, versions (PostgreSQL at ``url``, if any;
    Python, pyarrow, psycopg) and the pipeledger measured: its commit, or ``snapshot``'s."""
    import pipeledger

    commit = _commit()
    info = {
        "cpu": _cpu_model(),
        "cores": str(os.cpu_count()),
        LOAD_AVERAGE: " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "memory": f"{_memory_gib():.1f} GiB",
        "os": platform.platform(),
    }
    if url is not None:
        version, settings = _postgres(url)
        info |= {"postgres": version, "postgres settings": settings}
    return info | {
        "python": platform.python_version(),
        "pyarrow": pa.__version__,
        "psycopg": psycopg.__version__,
        "pipeledger commit": (
            f"{snapshot} (clean snapshot via --snapshot; bench/ itself at {commit})"
            if snapshot
            else commit
        ),
        "pipeledger imported from": str(Path(pipeledger.__file__).parent),
    }
