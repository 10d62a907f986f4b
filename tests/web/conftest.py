"""Fixtures of the dashboard's tests: a project with a known ledger (built once per
module: six real runs), the dashboard serving it on a free port of 127.0.0.1, and
headless Chromium from the operating system's packages driven by Playwright."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from pipeledger.web import server
from tests.helpers import Project
from tests.web import known as k

CHROMIUM = Path("/usr/bin/chromium")
# no network, nothing from the outside: the browser fetches only what the dashboard serves
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def get(url: str) -> tuple[int, str]:
    """Status and body of a GET (an error status is an answer too)."""
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def get_json(url: str) -> Any:
    status, body = get(url)
    assert status == 200, f"{url}: {status}\n{body}"
    return json.loads(body)


@pytest.fixture(scope="module")
def known_sqlite(tmp_path_factory: pytest.TempPathFactory) -> k.Known:
    return k.build(Project(tmp_path_factory.mktemp("known"), None))


@pytest.fixture(scope="module")
def module_postgres_url(postgres_server: str) -> Iterator[str]:
    """A fresh database for the module, reached with a password in its URL (the server
    trusts every local login: the password is there to be kept secret, not checked)."""
    name = f"t_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base = postgres_server.rpartition("/")[0].replace("postgres@", f"postgres:{k.PASSWORD}@")
    yield f"{base}/{name}"
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="module")
def known_postgres(tmp_path_factory: pytest.TempPathFactory, module_postgres_url: str) -> k.Known:
    return k.build(Project(tmp_path_factory.mktemp("known_pg"), module_postgres_url))


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def known_project(request: pytest.FixtureRequest) -> k.Known:
    """The known ledger on each backend."""
    known: k.Known = request.getfixturevalue(f"known_{request.param}")
    return known


def serving(known: k.Known) -> Iterator[str]:
    running = server.start(known.project.root / "pipeledger.toml", port=0)
    try:
        yield running.url
    finally:
        running.stop()


@pytest.fixture(scope="module")
def dashboard(known_project: k.Known) -> Iterator[str]:
    """The URL of the dashboard of the known project (each backend)."""
    yield from serving(known_project)


@pytest.fixture(scope="module")
def sqlite_dashboard(known_sqlite: k.Known) -> Iterator[str]:
    yield from serving(known_sqlite)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless Chromium of the OS (``./dev test`` installs it when missing)."""
    if not CHROMIUM.exists():
        pytest.fail(
            f"{CHROMIUM} is missing: `./dev test` installs it (as root), or run "
            "`apt-get install -y chromium`"
        )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()
