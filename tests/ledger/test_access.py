"""The access audit: every read through the CLI, the API and the dashboard leaves a row
naming the tenant, the database role and the user, the command or page and the pipeline;
reads are rolled up per minute (a poll of 50 is one row of 50 reads); ``ledger prune``
deletes old minutes; and a ledger that cannot be written never makes a read fail."""

from __future__ import annotations

import json
import logging
import os
import re
import sqlite3
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest
from starlette.requests import Request
from starlette.routing import Match, Route

from pipeledger import api
from pipeledger.common.who import who
from pipeledger.ledger import access as audit
from pipeledger.ledger import tables
from pipeledger.ledger.reads import reading
from pipeledger.ledger.reads.access import access_rows
from pipeledger.warehouse.dialect import POSTGRES, SQLITE
from pipeledger.warehouse.session import observe_statements
from pipeledger.web import server
from pipeledger.web.app import Dashboard
from pipeledger.web.project import Project as WebProject
from tests.helpers import Project, order, orders_pipeline

TENANT = "team_a"
MINUTE = datetime(2026, 3, 4, 5, 6, tzinfo=UTC)


@pytest.fixture
def ran(project: Project) -> Project:
    """A project of tenant team_a whose ledger holds one run of ``orders``."""
    project.configure(f'[ledger]\ntenant = "{TENANT}"\n', orders=orders_pipeline())
    project.write_csv("orders_1.csv", [order(1, "2024-01-01T10:00:00Z")])
    assert project.run("orders")["status"] == "success"
    audit._REFUSED.clear()  # a refusal another test's database gave this process
    return project


def config(project: Project) -> Path:
    return project.root / "pipeledger.toml"


def role_of(project: Project) -> str | None:
    """The database role the project's sessions connect as (SQLite has none)."""
    if project.backend == "sqlite":
        return None
    return str(project.query("SELECT current_user")[0][0])


def rows(project: Project, tenant: str = TENANT) -> list[api.AccessRow]:
    """Every access row of ``tenant``, read without recording a read of its own."""
    url = api.locate(config(project)).ledger_url
    with reading(url, tenant=tenant) as session:  # SQLite: a session sees its tenant's rows
        assert session is not None
        return access_rows(session, tenant, MINUTE - timedelta(days=3650), None, 1000)


def only(project: Project, what: str) -> api.AccessRow:
    (row,) = [row for row in rows(project) if row.what == what]
    return row


def test_a_cli_read_names_the_tenant_role_user_command_and_pipeline(ran: Project) -> None:
    code, out, err = ran.cli("runs", "orders", "--json")
    assert code == 0, err
    assert [run["pipeline"] for run in json.loads(out)] == ["orders"]  # the answer, unchanged

    row = only(ran, "runs")
    assert (row.tenant, row.via, row.pipeline, row.reads) == (TENANT, "cli", "orders", 1)
    assert (row.db_role, row.os_user, row.client) == (role_of(ran), who(), None)
    assert row.minute == row.first_at.replace(second=0, microsecond=0)


def test_a_command_asking_several_questions_is_one_read(ran: Project) -> None:
    code, _, err = ran.cli("ledger", "access")  # asks the log, then whether a ledger exists
    assert code == 0, err
    assert only(ran, "ledger access").reads == 1


def test_an_api_read_is_named_after_its_function(ran: Project) -> None:
    statements: list[str] = []
    with observe_statements(lambda kind, sql, seconds: statements.append(sql)):
        (status,) = api.status(config(ran), pipeline="orders")
    assert status.pipeline == "orders"
    # the record is one upsert, the read session's last statement, after what keeps it
    # from waiting (a lock, or the disk at COMMIT)
    dialect = SQLITE if ran.backend == "sqlite" else POSTGRES
    light = list(dialect.light_write)
    assert statements[-len(light) - 1 :] == [*light, audit.record_sql(dialect)]
    assert sum(sql.startswith("INSERT") for sql in statements) == 1
    row = only(ran, "api.status")
    assert (row.tenant, row.via, row.pipeline, row.db_role) == (
        TENANT,
        "api",
        "orders",
        role_of(ran),
    )


def test_show_names_the_pipeline_of_the_run_it_read(ran: Project) -> None:
    (run,) = api.recent_runs(config(ran))
    api.show(config(ran), run.run_id[:8])
    assert only(ran, "api.show").pipeline == "orders"


class FixedProject(WebProject):
    """The dashboard's project, its clock stopped at MINUTE plus ``seconds``."""

    seconds = 0

    def now(self) -> datetime:
        return MINUTE + timedelta(seconds=self.seconds)


def get(board: Dashboard, path: str, client: str = "10.0.0.7") -> int:
    """A GET of ``path`` from ``client``, handled by the dashboard in this process."""
    scope = _scope(path, client)
    pages = [("/", board.overview), ("/node/{name:path}", board.node), ("/dag", board.dag)]
    pages += [("/alerts", board.alerts), ("/run/{run_id}", board.run)]
    routes = [*(Route(p, page) for p, page in pages), *board.api_routes()]
    for route in routes:
        match, child = route.matches(scope)
        if match is Match.FULL:
            scope.update(child)
            return int(route.endpoint(Request(scope)).status_code)
    raise AssertionError(f"no route for {path}")


def _scope(path: str, client: str) -> dict[str, object]:
    path, _, query = path.partition("?")
    return {
        "type": "http",
        "method": "GET",
        "scheme": "http",
        "server": ("127.0.0.1", 8420),
        "root_path": "",
        "path": path,
        "query_string": query.encode(),
        "headers": [],
        "client": (client, 50000),
    }


def test_a_dashboard_page_names_its_path_pipeline_and_client(ran: Project) -> None:
    board = Dashboard(FixedProject(config(ran)))
    assert get(board, "/node/orders") == 200
    row = only(ran, "/node/orders")
    assert (row.tenant, row.via, row.pipeline, row.client) == (TENANT, "web", "orders", "10.0.0.7")
    assert (row.db_role, row.os_user, row.reads, row.minute) == (role_of(ran), who(), 1, MINUTE)


def test_the_served_dashboard_records_what_it_served_and_to_whom(ran: Project) -> None:
    running = server.start(config(ran), port=0)
    try:
        with urllib.request.urlopen(running.url + "/node/orders?limit=5", timeout=30) as page:
            assert page.status == 200
    finally:
        running.stop()
    row = only(ran, "/node/orders")
    assert (row.via, row.pipeline, row.client, row.reads) == ("web", "orders", "127.0.0.1", 1)


def table_counts(project: Project) -> dict[str, int]:
    """Rows per ledger table (and in the target), read directly."""
    dialect = SQLITE if project.backend == "sqlite" else POSTGRES
    names = [t for t in vars(tables).values() if isinstance(t, tables.LedgerTable)]
    counts = {
        t.name.table: int(project.query(f"SELECT count(*) FROM {dialect.table(t.name)}")[0][0])
        for t in names
    }
    return {**counts, "analytics.orders": project.count()}


def test_no_page_changes_anything_but_the_access_audit(ran: Project) -> None:
    board = Dashboard(FixedProject(config(ran)))
    (run,) = api.recent_runs(config(ran))
    before = table_counts(ran)
    paths = ["/", "/dag", "/alerts", "/node/orders", f"/run/{run.run_id}", "/api/status"]
    paths += ["/api/runs?name=orders", f"/api/show/{run.run_id}", "/api/checks/orders"]
    paths += ["/api/state", "/api/schedule", "/api/dag", "/api/quarantine/orders", "/api/sla"]
    paths += ["/api/alerts", "/api/tasks", "/api/work", "/api/volumes", "/api/anomalies"]
    paths += ["/api/blocked"]
    for path in paths:
        assert get(board, path) == 200, path
    after = table_counts(ran)
    assert {name: n - before[name] for name, n in after.items() if n != before[name]} == {
        "access_reads": len(paths)  # one row each: every path is a key of its own
    }
    pages = {row.what for row in rows(ran) if row.via == "web"}
    assert pages == {path.partition("?")[0] for path in paths}


def test_a_dashboard_polling_50_times_in_a_minute_adds_one_row_of_50_reads(ran: Project) -> None:
    project = FixedProject(config(ran))
    board = Dashboard(project)
    for second in range(50):
        project.seconds = second
        assert get(board, "/api/status") == 200
    project.seconds = 60  # the next minute: a row of its own
    assert get(board, "/api/status") == 200

    polls = [row for row in rows(ran) if row.what == "/api/status"]
    assert [(row.minute, row.reads) for row in polls] == [
        (MINUTE + timedelta(minutes=1), 1),
        (MINUTE, 50),
    ]
    assert polls[1].first_at == MINUTE and polls[1].last_at == MINUTE + timedelta(seconds=49)


def stopped(moment: datetime) -> Callable[[], datetime]:
    """A clock that always says ``moment``."""
    return lambda: moment


def test_a_script_polling_through_the_api_adds_one_row_per_minute(ran: Project) -> None:
    for second in range(50):
        moment = MINUTE + timedelta(seconds=second)
        with api.accessing("poller", clock=stopped(moment)):
            api.recent_runs(config(ran), "orders")
    with api.accessing("poller", clock=stopped(MINUTE), client="10.0.0.8"):  # another key
        api.recent_runs(config(ran), "orders")
    polls = {(row.client, row.reads) for row in rows(ran) if row.what == "poller"}
    assert polls == {(None, 50), ("10.0.0.8", 1)}


def test_prune_deletes_the_minutes_before_its_cutoff(ran: Project) -> None:
    now = datetime.now(UTC)
    for moment in (now - timedelta(days=100), now - timedelta(days=95), now - timedelta(days=1)):
        with api.accessing("old and new", clock=stopped(moment)):
            api.has_ledger(config(ran))
    result = api.prune(config(ran), timedelta(days=90))
    assert result is not None and result.access_reads == 2
    kept = [row for row in rows(ran) if row.what == "old and new"]
    assert [row.minute for row in kept] == [audit.minute_of(now - timedelta(days=1))]

    code, out, err = ran.cli("ledger", "prune", "--older-than", "1h", "--json")
    assert code == 0, err
    assert json.loads(out)["access_reads"] >= 1


def test_ledger_access_answers_who_read_what_and_when(ran: Project) -> None:
    assert ran.cli("status")[0] == 0
    code, out, err = ran.cli("ledger", "access", "--json")
    assert code == 0, err
    (row,) = [row for row in json.loads(out) if row["what"] == "status"]
    assert row["tenant"] == TENANT and row["via"] == "cli" and row["reads"] == 1
    assert set(row) == {
        "minute", "tenant", "via", "what", "pipeline", "db_role", "os_user", "client",
        "reads", "first_at", "last_at",
    }  # fmt: skip
    code, out, err = ran.cli("ledger", "access", "--pipeline", "orders")
    assert code == 0, err
    assert "no reads recorded since then" in out  # `status` named no pipeline

    code, out, err = ran.cli("ledger", "access")
    assert code == 0 and "cli status" in out and who() in out


# -- a ledger that cannot be written ------------------------------------------------------


def test_a_role_that_may_only_select_reads_and_is_not_recorded(
    tmp_path: Path, postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    ran = tenant_a(Project(tmp_path, postgres_url))
    reader = f"reader_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f'CREATE ROLE "{reader}" LOGIN')
    api.grant_reader(config(ran), reader, TENANT)  # it may read its tenant's rows, only
    folder = tmp_path / "reader"
    folder.mkdir()
    reader_url = re.sub(r"//[^@/]*@", f"//{reader}@", postgres_url)
    (folder / "pipeledger.toml").write_text(
        config(ran).read_text().replace(postgres_url, reader_url)
    )

    with caplog.at_level(logging.DEBUG, logger="pipeledger.ledger.access"):
        assert [r.pipeline for r in api.recent_runs(folder / "pipeledger.toml")] == ["orders"]
        assert len(api.recent_runs(folder / "pipeledger.toml")) == 1  # not asked again
    (refused,) = [r for r in caplog.records if "did not record this read" in r.getMessage()]
    assert "permission denied" in refused.getMessage()
    assert rows(ran) == []

    with psycopg.connect(postgres_url, autocommit=True) as conn:  # the README's one grant
        conn.execute(f'GRANT INSERT, UPDATE ON pipeledger.access_reads TO "{reader}"')
    audit._REFUSED.clear()  # as a minute later
    api.recent_runs(folder / "pipeledger.toml")
    assert [(row.what, row.db_role) for row in rows(ran)] == [("api.recent_runs", reader)]


def tenant_a(project: Project) -> Project:
    project.configure(f'[ledger]\ntenant = "{TENANT}"\n', orders=orders_pipeline())
    project.write_csv("orders_1.csv", [order(1, "2024-01-01T10:00:00Z")])
    assert project.run("orders")["status"] == "success"
    return project


# as root, file modes bind only without the DAC-override capabilities
WITHOUT_OVERRIDES = (
    ["setpriv", "--bounding-set", "-dac_override,-dac_read_search", "--inh-caps", "-all"]
    if os.geteuid() == 0
    else []
)
READ_WITH_DEBUG_LOG = (
    "import logging; logging.basicConfig(level=logging.DEBUG); "
    "from pipeledger import api; print(len(api.recent_runs()))"
)


@pytest.mark.slow  # processes of their own, without root's overrides
def test_a_read_only_sqlite_ledger_answers_and_is_not_recorded(tmp_path: Path) -> None:
    ran = tenant_a(Project(tmp_path, None))
    database = tmp_path / ".pipeledger" / "warehouse.db"
    kept = database.stat().st_mode
    database.chmod(0o444)
    try:
        read = subprocess.run(
            [*WITHOUT_OVERRIDES, sys.executable, "-c", READ_WITH_DEBUG_LOG],
            cwd=tmp_path,
            capture_output=True,
            text=True,
        )
        cli = subprocess.run(
            [*WITHOUT_OVERRIDES, sys.executable, "-m", "pipeledger", "runs", "--json"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
        )
    finally:
        database.chmod(kept)
    assert (read.returncode, read.stdout) == (0, "1\n"), read.stderr
    assert "did not record this read" in read.stderr and "readonly database" in read.stderr
    assert cli.returncode == 0 and len(json.loads(cli.stdout)) == 1, cli.stderr
    assert cli.stderr == ""  # nothing said above debug level
    assert rows(ran) == []


def test_a_read_while_a_load_holds_sqlites_lock_answers_without_waiting(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ran = tenant_a(Project(tmp_path, None))
    statements: list[str] = []
    load = sqlite3.connect(tmp_path / ".pipeledger" / "warehouse.db", isolation_level=None)
    load.execute("BEGIN IMMEDIATE")  # what a load holds for its whole run
    try:
        with (
            caplog.at_level(logging.DEBUG, logger="pipeledger.ledger.access"),
            observe_statements(lambda kind, sql, seconds: statements.append(sql)),
        ):
            assert len(api.recent_runs(config(ran))) == 1
    finally:
        load.execute("ROLLBACK")
        load.close()
    upsert = next(i for i, sql in enumerate(statements) if sql.startswith("INSERT INTO"))
    assert statements[upsert - 1] == "PRAGMA busy_timeout = 0"  # fails at once, never waits
    assert any("locked" in r.getMessage() for r in caplog.records)
    assert rows(ran) == []  # not recorded, and not refused for later:
    api.has_ledger(config(ran))
    assert [row.what for row in rows(ran)] == ["api.has_ledger"]


def test_a_ledger_from_before_the_access_audit_still_answers(ran: Project) -> None:
    if ran.backend == "sqlite":
        with sqlite3.connect(ran.root / ".pipeledger" / "warehouse.db") as conn:
            conn.execute(f"DROP TABLE {SQLITE.table(tables.ACCESS)}")
    else:
        assert ran.warehouse_url is not None
        with psycopg.connect(ran.warehouse_url, autocommit=True) as conn:
            conn.execute(f"DROP TABLE {POSTGRES.table(tables.ACCESS)}")
    assert [r.pipeline for r in api.recent_runs(config(ran))] == ["orders"]
    code, out, err = ran.cli("runs", "--json")
    assert code == 0 and len(json.loads(out)) == 1, err
