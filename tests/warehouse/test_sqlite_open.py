"""Opening the embedded warehouse from several runs at once: a new file is switched to WAL
by whichever run opens it first, and the others wait for that instead of failing with
"database is locked" (``run --threads 2`` on a fresh folder did, now and then)."""

from __future__ import annotations

import threading
from pathlib import Path

from pipeledger.warehouse.adapters import open_warehouse

OPENERS = 6


def open_together(url: str) -> list[BaseException]:
    """``OPENERS`` threads open a session on ``url`` at the same instant; what they raised."""
    start = threading.Barrier(OPENERS)
    failures: list[BaseException] = []

    def open_it() -> None:
        start.wait()
        try:
            with open_warehouse(url).session() as session:
                session.query("SELECT 1")
        except BaseException as exc:  # every failure is reported, not only the first
            failures.append(exc)

    threads = [threading.Thread(target=open_it) for _ in range(OPENERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return failures


def test_runs_opening_a_new_file_together_all_get_in(tmp_path: Path) -> None:
    for attempt in range(20):
        url = f"sqlite:///{tmp_path / f'new_{attempt}.db'}"
        assert open_together(url) == []
        with open_warehouse(url).session() as session:
            assert session.query("PRAGMA journal_mode") == [("wal",)]


def test_a_writer_syncs_its_log_at_each_commit_in_16k_pages(tmp_path: Path) -> None:
    """``synchronous = FULL`` in WAL mode: a COMMIT that returned is on the disk, so a
    committed run survives a power loss too. New files get 16 KB pages."""
    url = f"sqlite:///{tmp_path / 'w.db'}"
    with open_warehouse(url).session() as session:
        assert session.query("PRAGMA synchronous") == [(2,)]  # FULL
        assert session.query("PRAGMA journal_mode") == [("wal",)]
        assert session.query("PRAGMA page_size") == [(16_384,)]
