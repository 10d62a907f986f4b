"""Fixtures: a real PostgreSQL (started here unless PIPELEDGER_TEST_POSTGRES_URL is set) and
the embedded SQLite default, with a fresh database for every test. Nothing is mocked."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg.rows import TupleRow

from pipeledger.testing.postgres import ThrowawayPostgres
from tests.helpers import Project

# DuckDB (an embedded warehouse that lacks some features: README, "The embedded default:
# why SQLite") joins every backend-parametrized test with PIPELEDGER_TEST_DUCKDB=1; its own
# tests (tests/warehouse/test_duckdb.py) always run
BACKENDS = ["sqlite", "postgres", *(["duckdb"] if os.environ.get("PIPELEDGER_TEST_DUCKDB") else [])]


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """URL of a PostgreSQL server for the whole session."""
    given = os.environ.get("PIPELEDGER_TEST_POSTGRES_URL")
    if given:
        yield given
        return
    with ThrowawayPostgres() as server:
        yield server.url


def _with_database(url: str, name: str) -> str:
    base, _, _ = url.rpartition("/")
    return f"{base}/{name}"


@pytest.fixture
def postgres_url(postgres_server: str) -> Iterator[str]:
    """A fresh, empty database on the session's server, dropped afterwards."""
    name = f"t_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"{_file_copy(conn)}')
    yield _with_database(postgres_server, name)
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _file_copy(conn: psycopg.Connection[TupleRow]) -> str:
    """From PostgreSQL 15 on, CREATE DATABASE copies the template's files in ~20 ms with
    FILE_COPY, where its default (WAL_LOG, page by page) takes 100-200 ms: with a fresh
    database for every test, that is a minute of the suite."""
    return " STRATEGY = FILE_COPY" if conn.info.server_version >= 150000 else ""


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def warehouse_url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if backend == "postgres":
        return str(request.getfixturevalue("postgres_url"))
    if backend == "duckdb":
        return f"duckdb:///{tmp_path / '.pipeledger' / 'warehouse.duckdb'}"
    return f"sqlite:///{tmp_path / '.pipeledger' / 'warehouse.db'}"


@pytest.fixture
def project(tmp_path: Path, warehouse_url: str, backend: str) -> Project:
    """A working directory with a config pointing at the test's warehouse."""
    return Project(tmp_path, None if backend == "sqlite" else warehouse_url)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        help="rewrite tests/golden/<dialect>/*.sql from the builders (then review the diff)",
    )
    parser.addoption(
        "--update-screenshots",
        action="store_true",
        help="write the dashboard's screenshots into docs/ (tests/web; then review them)",
    )
