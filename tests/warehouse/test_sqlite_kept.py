"""The embedded warehouse keeps the connection of a session that ended cleanly for its next
session of the same kind. A kept connection must behave as a new one would: none of the
earlier session's temporary tables, its wait for locks, its tenant's scope over tables made
since, a fresh snapshot; and a session that failed leaves nothing to the next."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from pipeledger.errors import TerminalWarehouseError, TransientWarehouseError
from pipeledger.warehouse.adapters.sqlite import BUSY_TIMEOUT_S, SqliteWarehouse


def _warehouse(tmp_path: Path, tenant: str = "default") -> SqliteWarehouse:
    return SqliteWarehouse(f"sqlite:///{tmp_path / 'w.db'}", tenant=tenant)


def _connection_ids(warehouse: SqliteWarehouse, write: bool, sessions: int) -> set[int]:
    seen = set()
    for _ in range(sessions):
        with warehouse.session(write=write) as session:
            seen.add(id(session._conn))
    return seen


def test_sessions_of_one_kind_take_the_same_connection_in_turn(tmp_path: Path) -> None:
    warehouse = _warehouse(tmp_path)
    assert len(_connection_ids(warehouse, True, 5)) == 1
    assert len(_connection_ids(warehouse, False, 5)) == 1
    warehouse.close()


def test_the_next_session_has_none_of_the_temporary_tables_of_the_last(tmp_path: Path) -> None:
    warehouse = _warehouse(tmp_path)
    for _ in range(2):  # the second would fail: "table _pipeledger_stage already exists"
        with warehouse.session() as session:
            session.execute('CREATE TEMP TABLE "_pipeledger_stage" (a integer)')
            session.execute('INSERT INTO "_pipeledger_stage" VALUES (1)')
    with warehouse.session() as session:
        assert session.query("SELECT name FROM temp.sqlite_master WHERE type = 'table'") == []


def test_a_session_that_waited_for_no_lock_leaves_the_next_one_its_wait(tmp_path: Path) -> None:
    warehouse = _warehouse(tmp_path)
    with warehouse.session() as session:
        for statement in session.dialect.light_write:  # an access record's: no waiting
            session.execute(statement)
        assert session.query("PRAGMA busy_timeout") == [(0,)]
    with warehouse.session() as session:
        assert session.query("PRAGMA busy_timeout") == [(int(BUSY_TIMEOUT_S * 1000),)]


def test_a_failed_session_leaves_its_connection_to_nobody(tmp_path: Path) -> None:
    warehouse = _warehouse(tmp_path)
    with warehouse.session() as session:
        session.execute("CREATE TABLE t (a integer)")
    failed = None
    with pytest.raises(TerminalWarehouseError), warehouse.session() as session:
        failed = session._conn
        session.execute("INSERT INTO t VALUES (1)")
        session.execute("INSERT INTO missing VALUES (1)")
    with warehouse.session() as session:
        assert session._conn is not failed
        assert session.query("SELECT count(*) FROM t") == [(0,)]  # rolled back
    with pytest.raises(sqlite3.ProgrammingError):  # closed
        assert failed is not None
        failed.execute("SELECT 1")


def test_a_kept_reader_sees_what_others_committed_since(tmp_path: Path) -> None:
    warehouse = _warehouse(tmp_path)
    with warehouse.session() as session:
        session.execute("CREATE TABLE t (a integer)")
    with warehouse.session(write=False) as session:
        assert session.query("SELECT count(*) FROM t") == [(0,)]
    other = _warehouse(tmp_path)  # another process's writer, as far as SQLite knows
    with other.session() as session:
        session.execute("INSERT INTO t VALUES (1)")
    with warehouse.session(write=False) as session:
        assert session.query("SELECT count(*) FROM t") == [(1,)]


def test_a_kept_reader_is_scoped_to_its_tenant_over_tables_made_since(tmp_path: Path) -> None:
    """The tenant's views are made when a session opens, for the ledger tables it finds:
    a ledger table made after the reader's connection was kept must be scoped too, or the
    reader would see every tenant's rows in it."""
    reader = _warehouse(tmp_path, tenant="acme")
    with reader.session(write=False) as session:
        session.query("SELECT 1")  # kept, scoped to the tables of the moment (none)
    writer = _warehouse(tmp_path)
    with writer.session() as session:
        session.execute(
            "CREATE TABLE \"pipeledger.notes\" (note text, tenant text NOT NULL DEFAULT 'default')"
        )
        session.execute(
            "INSERT INTO \"pipeledger.notes\" VALUES ('acme', 'acme'), ('other', 'globex')"
        )
    with reader.session(write=False) as session:
        assert session.query('SELECT note FROM "pipeledger.notes"') == [("acme",)]


def test_threads_take_kept_connections_in_turn(tmp_path: Path) -> None:
    """A DAG run's threads: a connection kept by one thread's session serves another's."""
    warehouse = _warehouse(tmp_path)
    with warehouse.session() as session:
        session.execute("CREATE TABLE t (a integer)")
    failures: list[BaseException] = []

    def write(value: int) -> None:
        try:
            for _ in range(20):
                with warehouse.session() as session:
                    session.execute("INSERT INTO t VALUES (?)", [value])
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    with warehouse.session(write=False) as session:
        assert session.query("SELECT a, count(*) FROM t GROUP BY a") == [(0, 20), (1, 20), (2, 20)]


def test_close_closes_the_kept_connections(tmp_path: Path) -> None:
    warehouse = _warehouse(tmp_path)
    with warehouse.session() as session:
        kept = session._conn
    warehouse.close()
    with pytest.raises(sqlite3.ProgrammingError):
        kept.execute("SELECT 1")
    with warehouse.session() as session:  # usable again: a new connection
        assert session._conn is not kept


def test_a_process_that_ends_closes_its_kept_connections_and_checkpoints(
    tmp_path: Path,
) -> None:
    """As the process ends (the CLI's exit runs the exit handlers, then ``os._exit``) every
    kept connection closes, so the last one checkpoints the WAL into the file: the file
    alone has every commit, and no ``-wal`` is left beside it."""
    script = f"""
import atexit, os
from pipeledger.warehouse.adapters.sqlite import SqliteWarehouse
warehouse = SqliteWarehouse("sqlite:///{tmp_path / "w.db"}")
with warehouse.session() as session:
    session.execute("CREATE TABLE t (a integer)")
    session.execute("INSERT INTO t VALUES (1)")
with warehouse.session(write=False) as session:
    session.query("SELECT count(*) FROM t")
assert os.path.exists("{tmp_path / "w.db-wal"}")
atexit._run_exitfuncs()
os._exit(0)
"""
    subprocess.run([sys.executable, "-c", script], check=True)
    assert not (tmp_path / "w.db-wal").exists()
    copy = tmp_path / "copy.db"
    copy.write_bytes((tmp_path / "w.db").read_bytes())
    db = sqlite3.connect(copy)
    try:
        assert db.execute("SELECT a FROM t").fetchall() == [(1,)]
    finally:
        db.close()


def test_an_interrupt_after_its_session_ended_reaches_no_later_session(tmp_path: Path) -> None:
    """A run's timeout or cancel interrupts its session from another thread; one that
    lands after the session ended must not stop the next session on the same connection."""
    warehouse = _warehouse(tmp_path)
    with warehouse.session() as ended:
        ended.execute("CREATE TABLE t (a integer)")
    ended.interrupt()  # late
    assert not ended.interrupted
    with warehouse.session() as session:
        assert session._conn is ended._conn  # the same connection, kept
        session.execute("INSERT INTO t VALUES (1)")
    with warehouse.session(write=False) as session:
        assert session.query("SELECT count(*) FROM t") == [(1,)]


def test_an_interrupted_session_leaves_its_connection_to_nobody(tmp_path: Path) -> None:
    warehouse = _warehouse(tmp_path)
    with pytest.raises(TransientWarehouseError), warehouse.session() as session:
        interrupted = session._conn
        session.interrupt()
        session.execute("SELECT 1")
    with warehouse.session() as session:
        assert session._conn is not interrupted
