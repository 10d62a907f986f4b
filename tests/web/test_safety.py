"""The dashboard is safe to open: what it shows is escaped, no secret of the config
leaves it, it listens on 127.0.0.1 unless told otherwise, and a PostgreSQL role that may
only SELECT is all it needs."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import quote

import psycopg
import pytest

from pipeledger.ledger.tenants import grant_reader
from pipeledger.warehouse.adapters import open_warehouse
from pipeledger.web import server
from tests.ledger_fixtures import ledger
from tests.web import known as k
from tests.web.conftest import get, serving
from tests.web.test_json_twins import twins


def every_path(known: k.Known) -> list[str]:
    """Every page and document the dashboard has for the known ledger, and some errors."""
    pages = ["/", "/dag", "/alerts", "/healthz", "/static/style.css"]
    pages += [f"/node/{quote(name, safe='')}" for name in k.HEALTH]
    pages += ["/node/payments?status=failed&trigger=retry", "/node/events?limit=2&since=3d"]
    pages += [f"/run/{run_id}" for run_id in known.runs.values()]
    pages += ["/run/no-such-run", "/node/orders?status=bogus", "/api/show/no-such-run"]
    pages += ["/api/work", "/api/volumes", "/api/volumes?name=events"]
    return pages + [path for path, _ in twins(known)]


@pytest.fixture(scope="module")
def leaky(known_postgres: k.Known) -> Iterator[str]:
    """The known ledger on PostgreSQL (reached with a password), with a run whose error
    holds that password as a careless writer of its own might have recorded it; served."""
    url = k.ledger_url(known_postgres.project)
    with ledger(url) as b:
        b.run(
            "customers",
            datetime.now(UTC) - timedelta(hours=1),
            status="failed",
            run_id=str(uuid.uuid4()),  # the builder's own ids start again at each builder
            error_message=f"could not connect to {url} (password {k.PASSWORD})",
        )
    yield from serving(known_postgres)


def test_no_page_or_document_holds_the_password(known_postgres: k.Known, leaky: str) -> None:
    assert k.PASSWORD in (known_postgres.project.root / "pipeledger.toml").read_text()
    for path in every_path(known_postgres):
        status, body = get(leaky + path)
        assert status in (200, 400, 404), f"{path}: {status}\n{body}"
        assert k.PASSWORD not in body and quote(k.PASSWORD) not in body, path
    status, body = get(leaky + "/node/customers")
    assert "could not connect to postgresql://postgres:***@" in body  # masked, not dropped


def test_html_in_names_and_errors_is_escaped(known_sqlite: k.Known, sqlite_dashboard: str) -> None:
    for path in (
        "/",
        f"/node/{quote(k.SCRIPT_NAME, safe='')}",
        f"/run/{known_sqlite.runs['script failed']}",
    ):
        status, body = get(sqlite_dashboard + path)
        assert status == 200, path
        assert "<script>" not in body and "<img" not in body and "<b>boom" not in body, path
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body, path
    status, body = get(sqlite_dashboard + "/api/status")
    assert k.SCRIPT_NAME in {s["pipeline"] for s in json.loads(body)}  # JSON is data, as it is


def test_the_dashboard_listens_on_127_0_0_1_unless_told_otherwise(known_sqlite: k.Known) -> None:
    running = server.start(known_sqlite.project.root / "pipeledger.toml", port=0)
    try:
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+", running.url)
        assert get(running.url + "/healthz") == (200, "ok\n")
    finally:
        running.stop()


READER = "dashboard_reader"


def grant_select_only(url: str, role: str) -> None:
    """A role that may log in and read every table of the database, and nothing else (the
    statements the README gives)."""
    with psycopg.connect(url, autocommit=True) as conn:
        database = conn.info.dbname
        conn.execute(f'CREATE ROLE "{role}" LOGIN')
        conn.execute(f'GRANT CONNECT ON DATABASE "{database}" TO "{role}"')
        schemas = conn.execute(
            "SELECT nspname FROM pg_namespace WHERE nspname NOT LIKE 'pg\\_%' "
            "AND nspname NOT IN ('information_schema', 'public')"
        ).fetchall()
        for (schema,) in schemas:
            conn.execute(f'GRANT USAGE ON SCHEMA "{schema}" TO "{role}"')
            conn.execute(f'GRANT SELECT ON ALL TABLES IN SCHEMA "{schema}" TO "{role}"')
        with open_warehouse(url).session() as session:  # the ledger's rows are per tenant
            grant_reader(session, role, "default")


def test_a_role_that_may_only_select_is_enough(known_postgres: k.Known, tmp_path: Path) -> None:
    url = k.ledger_url(known_postgres.project)
    grant_select_only(url, READER)
    reader_url = re.sub(r"//postgres:[^@]*@", f"//{READER}@", url)
    config = (known_postgres.project.root / "pipeledger.toml").read_text()
    folder = tmp_path / "readonly"
    folder.mkdir()
    (folder / "pipeledger.toml").write_text(config.replace(url, reader_url))
    with pytest.raises(psycopg.errors.InsufficientPrivilege), psycopg.connect(reader_url) as conn:
        conn.execute("DELETE FROM pipeledger.pipeline_runs")  # the role cannot write
    running = server.start(folder / "pipeledger.toml", port=0)
    try:
        for path in every_path(known_postgres):
            status, body = get(running.url + path)
            assert status in (200, 400, 404), f"{path}: {status}\n{body}"
            assert "permission denied" not in body, path
        status, body = get(running.url + "/")
        assert status == 200 and 'data-node="payments"' in body and "CRITICAL" in body
        status, body = get(running.url + f"/run/{known_postgres.runs['orders partial']}")
        assert "order_id=5" in body  # the quarantine, read from the warehouse
    finally:
        running.stop()
