"""Tenants on one ledger: PostgreSQL keeps them apart with row-level security (the writer
by the tenant its transactions declare, a reader by its membership of the tenant's group
role); SQLite filters; an existing ledger moves to tenants with nothing lost.

The PostgreSQL tests connect pipeledger and the reader as ordinary login roles of their
own: the suite's superuser would bypass every policy."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from pipeledger.api import load_config
from pipeledger.ledger.tables import (
    ACCESS_TABLE,
    LEDGER,
    RUNS,
    TENANT_TABLES,
    ledger_migrations,
)
from pipeledger.ledger.tables import table as ledger_table
from pipeledger.ledger.tenants import grant_reader
from pipeledger.runs.site import Site
from pipeledger.warehouse.adapters import open_warehouse
from pipeledger.warehouse.dialect import POSTGRES, SQLITE
from pipeledger.warehouse.migrations import MIGRATIONS, Component, migrate
from pipeledger.warehouse.session import Session
from pipeledger.web import server
from tests.helpers import Project, order, orders_pipeline
from tests.ledger.test_rollup import mixed_runs
from tests.ledger_fixtures import LedgerBuilder, as_earlier
from tests.web.conftest import get

TABLES = [POSTGRES.table(t.name) for t in TENANT_TABLES]
# the ledger as the release before tenants left it: the migrations before 13 (the later
# ones index the tenant column)
BEFORE_TENANTS = Component("ledger", lambda d: [m for m in ledger_migrations(d) if m[0] < 13], RUNS)


def as_role(url: str, role: str) -> str:
    """``url`` with ``role`` (password = its name) in place of the superuser."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{role}:{role}@{host}"))


@pytest.fixture
def roles(postgres_url: str, postgres_server: str) -> Iterator[dict[str, str]]:
    """A writer (may create objects in the database and roles) and a reader, both
    ordinary roles, and two tenant names no other test uses (roles are cluster-wide)."""
    tag = uuid.uuid4().hex[:8]
    made = {
        "writer": f"pl_writer_{tag}",
        "reader": f"pl_reader_{tag}",
        "runner": f"pl_runner_{tag}",
    }
    tenants = {"a": f"a_{tag}", "b": f"b_{tag}"}
    database = urlsplit(postgres_url).path.lstrip("/")
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {made['writer']} LOGIN CREATEROLE PASSWORD '{made['writer']}'")
        for role in (made["reader"], made["runner"]):
            conn.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{role}'")
        conn.execute(f'GRANT CREATE ON DATABASE "{database}" TO {made["writer"]}')
    yield {**made, **tenants}
    with psycopg.connect(postgres_server, autocommit=True) as conn:  # roles outlive databases
        conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        for role in [*made.values(), *(f"pipeledger_tenant_{t}" for t in tenants.values())]:
            conn.execute(f"DROP ROLE IF EXISTS {role}")


def tenant_project(root: Path, url: str | None, tenant: str, pipeline: str) -> Project:
    """A project of its own (folder, config, CSV) writing ``pipeline`` as ``tenant``."""
    root.mkdir()
    project = Project(root, url)
    project.write_csv(f"{pipeline}.csv", [order(i, f"2024-01-0{i}T00:00:00") for i in (1, 2, 3)])
    body = orders_pipeline(source={"kind": "csv", "path": f"data/{pipeline}.csv"})
    body["target"] = f"analytics.{pipeline}"
    shared = "" if url else f'[warehouse]\nurl = "sqlite:///{root.parent / "shared.db"}"\n'
    # one slot of its own per tenant: the queue's tables hold both tenants' rows
    limits = "[limits]\nmax_concurrent_runs = 2\n"
    project.configure(f'{shared}[ledger]\ntenant = "{tenant}"\n{limits}', **{pipeline: body})
    return project


def two_tenants(tmp_path: Path, url: str | None, a: str, b: str) -> tuple[Project, Project]:
    first = tenant_project(tmp_path / "a", url, a, "orders_a")
    second = tenant_project(tmp_path / "b", url, b, "orders_b")
    for project, pipeline in ((first, "orders_a"), (second, "orders_b")):
        for _ in range(2):  # a run that loads, and one that finds nothing new
            assert project.run(pipeline)["status"] == "success"
    return first, second


def runs_seen(project: Project) -> set[str]:
    return {row["pipeline"] for row in project.run_json("runs")}


def seen_tenants(conn: psycopg.Connection[tuple[object, ...]], table: str) -> set[object]:
    return {row[0] for row in conn.execute(f"SELECT DISTINCT tenant FROM {table}")}


def test_a_reader_sees_only_its_tenants_rows_with_raw_sql(
    tmp_path: Path, postgres_url: str, roles: dict[str, str]
) -> None:
    writer_url = as_role(postgres_url, roles["writer"])
    a, b = roles["a"], roles["b"]
    first, second = two_tenants(tmp_path, writer_url, a, b)
    assert runs_seen(first) == {"orders_a"} and runs_seen(second) == {"orders_b"}

    code, out, err = first.cli("ledger", "grant-reader", roles["reader"], "--tenant", a, "--json")
    assert code == 0, err
    assert json.loads(out)["tenant_role"] == f"pipeledger_tenant_{a}"
    with psycopg.connect(writer_url, autocommit=True) as owner:  # a plain view, made later
        owner.execute("CREATE VIEW pipeledger.all_runs AS SELECT * FROM pipeledger.pipeline_runs")
    assert first.cli("ledger", "grant-reader", roles["reader"], "--tenant", a)[0] == 0

    with psycopg.connect(postgres_url) as superuser:  # bypasses row-level security
        everything = {t: seen_tenants(superuser, t) for t in TABLES}
    written = [t for t, found in everything.items() if found == {a, b}]
    # runs, tasks, events, snapshots, pipelines, both rollups and the queue's two tables
    for table in (
        "pipeline_runs",
        "task_runs",
        "audit_events",
        "dataset_snapshots",
        "pipelines",
        "pipeline_days",
        "task_days",
        "run_slots",
        "run_queues",
    ):
        assert POSTGRES.table(ledger_table(table)) in written, everything
    with psycopg.connect(postgres_url) as superuser:  # each rollup row is its run's tenant's
        for rollup in ("pipeline_days", "task_days"):
            mismatched = superuser.execute(
                f"SELECT d.pipeline, d.tenant, r.tenant FROM pipeledger.{rollup} d "
                "JOIN pipeledger.pipeline_runs r ON r.pipeline = d.pipeline "
                "WHERE r.tenant <> d.tenant"
            ).fetchall()
            assert mismatched == [], rollup

    with psycopg.connect(as_role(postgres_url, roles["reader"]), autocommit=True) as reader:
        for setting in ("", f"SET pipeledger.tenant = '{b}'", "SET ROLE NONE"):
            if setting:
                reader.execute(setting)
            for table in [*TABLES, "pipeledger.all_runs"]:
                assert seen_tenants(reader, table) <= {a}, (setting, table)
            for table in written:
                assert seen_tenants(reader, table) == {a}, (setting, table)
            rows = reader.execute("SELECT DISTINCT pipeline FROM pipeledger.all_runs").fetchall()
            assert rows == [("orders_a",)]
        reader.execute("SET row_security = off")  # refused, not obeyed, by the next query
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            reader.execute("SELECT count(*) FROM pipeledger.pipeline_runs")
        reader.execute("RESET row_security")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            reader.execute(f"DELETE FROM pipeledger.pipeline_runs WHERE tenant = '{a}'")

    with psycopg.connect(postgres_url) as superuser:
        views = superuser.execute(
            "SELECT c.relname, coalesce(c.reloptions, '{}') FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = 'pipeledger' AND c.relkind = 'v'"
        ).fetchall()
        forced = superuser.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = 'pipeledger' AND c.relrowsecurity AND c.relforcerowsecurity"
        ).fetchall()
    assert views == [("all_runs", ["security_invoker=true"])]
    assert {f"pipeledger.{name}" for (name,) in forced} == {t.replace('"', "") for t in TABLES}


def test_the_writer_sees_only_the_tenant_it_declares(
    tmp_path: Path, postgres_url: str, roles: dict[str, str]
) -> None:
    writer_url = as_role(postgres_url, roles["writer"])
    a, b = roles["a"], roles["b"]
    two_tenants(tmp_path, writer_url, a, b)
    with psycopg.connect(writer_url) as writer:  # the owner: forced security holds it too
        assert writer.execute("SELECT count(*) FROM pipeledger.pipeline_runs").fetchone() == (0,)
        writer.execute("SELECT set_config('pipeledger.tenant', %s, true)", [b])
        assert seen_tenants(writer, "pipeledger.pipeline_runs") == {b}
        with pytest.raises(psycopg.errors.InsufficientPrivilege):  # WITH CHECK: not a's
            writer.execute(
                "UPDATE pipeledger.pipeline_runs SET tenant = %s WHERE pipeline = 'orders_b'", [a]
            )


def test_a_runner_role_the_owner_granted_the_ledger_writes_only_its_tenant(
    tmp_path: Path, postgres_url: str, roles: dict[str, str]
) -> None:
    """pipeledger run as a role other than the migrator (README, PostgreSQL notes): a
    writer of the tenant it declares, and of no other."""
    writer_url = as_role(postgres_url, roles["writer"])
    a, b = roles["a"], roles["b"]
    two_tenants(tmp_path, writer_url, a, b)
    runner = roles["runner"]
    with psycopg.connect(writer_url, autocommit=True) as owner:
        for statement in (
            f"GRANT USAGE, CREATE ON SCHEMA analytics TO {runner}",
            f"GRANT USAGE ON SCHEMA pipeledger TO {runner}",
            f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA pipeledger TO {runner}",
        ):
            owner.execute(statement)
    database = urlsplit(postgres_url).path.lstrip("/")
    with psycopg.connect(postgres_url, autocommit=True) as superuser:  # its staging schema
        superuser.execute(f'GRANT CREATE ON DATABASE "{database}" TO {runner}')
    third = tenant_project(tmp_path / "c", as_role(postgres_url, runner), a, "orders_c")
    assert third.run("orders_c")["status"] == "success"
    assert runs_seen(third) == {"orders_a", "orders_c"}
    with psycopg.connect(postgres_url) as superuser:
        tenants = superuser.execute(
            "SELECT DISTINCT tenant FROM pipeledger.pipeline_runs WHERE pipeline = 'orders_c'"
        ).fetchall()
    assert tenants == [(a,)]
    with psycopg.connect(as_role(postgres_url, runner)) as conn:  # declares b: sees b only
        conn.execute("SELECT set_config('pipeledger.tenant', %s, true)", [b])
        assert seen_tenants(conn, "pipeledger.pipeline_runs") == {b}


def test_runs_by_tenant_pipeline_and_time_use_an_index_at_100k_rows_per_tenant(
    postgres_url: str, roles: dict[str, str]
) -> None:
    writer_url = as_role(postgres_url, roles["writer"])
    a, b = roles["a"], roles["b"]
    with open_warehouse(writer_url, tenant=a).session() as session:
        migrate(session, LEDGER)
    with psycopg.connect(postgres_url) as superuser:  # seeds both tenants past the policies
        for tenant in (a, b):
            superuser.execute(
                "INSERT INTO pipeledger.pipelines (tenant, name, version, created_at, "
                "updated_at) SELECT %s, %s || '_p' || i, 'v1', now(), now() "
                "FROM generate_series(1, 100) AS i",
                [tenant, tenant],
            )
            superuser.execute(
                "INSERT INTO pipeledger.pipeline_runs (tenant, run_id, logical_run_id, attempt, "
                "pipeline, trigger_type, status, started_at) "
                "SELECT %s, %s || i, %s || i, 1, %s || '_p' || (i %% 100 + 1), 'schedule', "
                "'success', now() - i * interval '1 minute' FROM generate_series(1, 100000) AS i",
                [tenant, tenant, tenant, tenant],
            )
        superuser.execute("ANALYZE pipeledger.pipeline_runs")
    question = (
        "EXPLAIN SELECT run_id, status FROM pipeledger.pipeline_runs WHERE pipeline = %s "
        "AND started_at > now() - interval '1 day' ORDER BY started_at DESC LIMIT 50"
    )
    with open_warehouse(writer_url).session() as session:
        grant_reader(session, roles["reader"], a)
    for url, declare in ((writer_url, a), (as_role(postgres_url, roles["reader"]), None)):
        with psycopg.connect(url) as conn:
            if declare:
                conn.execute("SELECT set_config('pipeledger.tenant', %s, true)", [declare])
            plan = "\n".join(str(row[0]) for row in conn.execute(question, [f"{a}_p7"]))
            # an index of the runs led by the tenant (the history index of migration 12 or
            # the (pipeline, started_at) one, whichever the planner finds cheaper)
            index = r"(Index (Only )?Scan( Backward)? using|Bitmap Index Scan on) pipeline_runs_"
            assert re.search(index, plan), plan
            assert re.search(r"Index Cond: \(+tenant = ", plan), plan
            assert "Seq Scan on pipeline_runs" not in plan, plan


def test_on_sqlite_each_tenant_reads_its_own_runs(tmp_path: Path) -> None:
    """One SQLite file, two tenants: a filter (README: convenience, not isolation)."""
    first, second = two_tenants(tmp_path, None, "team_a", "team_b")
    assert runs_seen(first) == {"orders_a"}
    assert runs_seen(second) == {"orders_b"}
    assert {row["pipeline"] for row in first.run_json("status")} == {"orders_a"}


@pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)
def test_an_existing_ledger_with_history_moves_to_tenants_with_nothing_lost(
    project: Project, warehouse_url: str
) -> None:
    """History written on the schema before migration 13, then one command."""
    database = open_warehouse(warehouse_url)
    with database.session() as session:
        migrate(session, BEFORE_TENANTS)
        builder = LedgerBuilder(as_earlier(session))  # written as that release wrote
        mixed_runs(builder)
        builder.depends("orders", "customers")
    d = database.dialect
    tables = [d.table(t.name) for t in TENANT_TABLES if t is not ACCESS_TABLE]  # 14 on
    before = counts(warehouse_url, tables)
    assert before[d.table(RUNS)] > 5
    project.configure(pipelines={"orders": orders_pipeline()})
    code, out, err = project.cli("ledger", "migrate", "--json")
    assert code == 0, err
    assert json.loads(out)["ledger"] == [13, 14, 15, 16, 17]
    assert counts(warehouse_url, tables) == before
    with open_warehouse(warehouse_url).session(write=False) as session:
        for table in tables:
            found = session.query(f"SELECT DISTINCT tenant FROM {table}")
            assert found in ([], [("default",)]), table
    assert len(project.run_json("runs", "--limit", "1000")) == before[d.table(RUNS)]


def counts(url: str, tables: list[str]) -> dict[str, int]:
    with open_warehouse(url).session(write=False) as session:
        return {t: int(session.query(f"SELECT count(*) FROM {t}")[0][0]) for t in tables}


def untenanted(session: Session) -> list[str]:
    """What the ledger's database itself says is not per tenant: a table (found in the
    catalog, not in pipeledger's list) without a ``tenant`` column, row-level security
    enabled and forced and both policies (PostgreSQL), or an index of its own (not a key's)
    that does not lead with the tenant."""
    d = session.dialect
    if d.row_security:
        tables = session.query(
            "SELECT c.relname, c.relrowsecurity AND c.relforcerowsecurity, "
            "(SELECT count(*) FROM pg_catalog.pg_policies p WHERE p.schemaname = n.nspname "
            "AND p.tablename = c.relname AND p.policyname IN ('tenant_writer', 'tenant_reader')), "
            "EXISTS (SELECT 1 FROM information_schema.columns k WHERE k.table_schema = n.nspname "
            "AND k.table_name = c.relname AND k.column_name = 'tenant') "
            "FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = 'pipeledger' AND c.relkind IN ('r', 'p') AND c.relname <> %s",
            [MIGRATIONS.table],
        )
        problems = [
            f"{name}: tenant column {has}, row security {secured}, policies {policies}"
            for name, secured, policies, has in tables
            if not (has and secured and policies == 2)
        ]
        indexes = session.query(
            "SELECT t.relname, i.relname, a.attname FROM pg_catalog.pg_index x "
            "JOIN pg_catalog.pg_class i ON i.oid = x.indexrelid "
            "JOIN pg_catalog.pg_class t ON t.oid = x.indrelid "
            "JOIN pg_catalog.pg_namespace n ON n.oid = t.relnamespace "
            "LEFT JOIN pg_catalog.pg_attribute a ON a.attrelid = t.oid AND a.attnum = x.indkey[0] "
            "WHERE n.nspname = 'pipeledger' AND t.relname <> %s AND NOT EXISTS "
            "(SELECT 1 FROM pg_catalog.pg_constraint k WHERE k.conindid = x.indexrelid)",
            [MIGRATIONS.table],
        )
    else:
        tables = session.query(
            "SELECT m.name, EXISTS (SELECT 1 FROM pragma_table_info(m.name) c "
            "WHERE c.name = 'tenant') FROM sqlite_master m WHERE m.type = 'table' "
            "AND m.name LIKE 'pipeledger.%' AND m.name <> ?",
            [f"pipeledger.{MIGRATIONS.table}"],
        )
        problems = [f"{name}: no tenant column" for name, has in tables if not has]
        indexes = session.query(
            "SELECT m.name, l.name, i.name FROM sqlite_master m, pragma_index_list(m.name) l, "
            "pragma_index_info(l.name) i WHERE m.type = 'table' AND m.name LIKE 'pipeledger.%' "
            "AND l.origin = 'c' AND i.seqno = 0"
        )
    problems += [f"{t}: index {i} leads with {c}" for t, i, c in indexes if c != "tenant"]
    found = {str(row[0]).removeprefix("pipeledger.") for row in tables}
    listed = {t.name.table for t in TENANT_TABLES}
    if found != listed:
        problems.append(f"tables not in TENANT_TABLES: {found - listed}; gone: {listed - found}")
    return problems


@pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)
def test_every_table_the_ledger_has_carries_a_tenant_under_row_security(
    warehouse_url: str,
) -> None:
    """From the catalog: a ledger table added by a later migration without a tenant (or
    missing from TENANT_TABLES, which grant-reader grants) fails here."""
    database = open_warehouse(warehouse_url)
    with database.session() as session:
        migrate(session, LEDGER)
        assert untenanted(session) == []


@pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)
def test_a_ledger_of_the_release_before_tenants_migrates_to_the_same_catalog(
    warehouse_url: str,
) -> None:
    database = open_warehouse(warehouse_url)
    with database.session() as session:
        migrate(session, BEFORE_TENANTS)
        assert untenanted(session) != []  # the check sees what is missing
    with database.session() as session:
        assert migrate(session, LEDGER) == [13, 14, 15, 16, 17]
        assert untenanted(session) == []


def test_pooled_connections_keep_each_sites_tenant(
    tmp_path: Path, postgres_url: str, roles: dict[str, str]
) -> None:
    """Two Sites of two tenants in one process, their sessions interleaved: each session
    of a kept connection declares its Site's tenant again, even after the one before it
    declared another, and sees only that tenant's runs."""
    writer_url = as_role(postgres_url, roles["writer"])
    a, b = roles["a"], roles["b"]
    projects = two_tenants(tmp_path, writer_url, a, b)
    sites = [Site(load_config(p.root / "pipeledger.toml")) for p in projects]
    expected = [(a, "orders_a", b), (b, "orders_b", a)]
    backends: list[list[int]] = [[], []]
    try:
        for _ in range(3):
            for i, site in enumerate(sites):
                tenant, pipeline, other = expected[i]
                with site.ledger.store.database.session() as session:
                    ((backend, declared),) = session.query(
                        "SELECT pg_backend_pid(), current_setting('pipeledger.tenant')"
                    )
                    rows = session.query("SELECT DISTINCT pipeline FROM pipeledger.pipeline_runs")
                    # a session that declares another tenant for the rest of its connection
                    session.execute("SELECT set_config('pipeledger.tenant', %s, false)", [other])
                backends[i].append(int(backend))
                assert (declared, rows) == (tenant, [(pipeline,)])
    finally:
        for site in sites:
            site.close()
    for seen in backends:  # the connection was kept and served the next session
        assert len(set(seen)) < len(seen), backends
    assert not set(backends[0]) & set(backends[1])  # each Site's pool is its own


def faces_of(pipeline: str) -> list[tuple[str, ...]]:
    """The read commands of the CLI a tenant's project asks (each with --json)."""
    return [
        ("runs",),
        ("runs", pipeline),
        ("status",),
        ("sla",),
        ("alerts",),
        ("tasks",),
        ("tasks", pipeline),
        ("anomalies",),
        ("blocked",),
        ("checks", pipeline),
        ("audit", "--table", f"analytics.{pipeline}"),
    ]


DOCUMENTS = (
    "/api/status",
    "/api/runs",
    "/api/sla",
    "/api/alerts",
    "/api/tasks",
    "/api/work",
    "/api/volumes",
    "/api/anomalies",
    "/api/blocked",
)
PAGES = ("/", "/alerts", "/dag")


@pytest.mark.parametrize("shared", [False, True], ids=["postgres", "sqlite"])
def test_every_cli_question_and_dashboard_document_sees_only_its_tenant(
    tmp_path: Path, postgres_url: str, roles: dict[str, str], shared: bool
) -> None:
    """Two tenants on one ledger (PostgreSQL as an ordinary writer role; one SQLite file):
    nothing tenant A's project asks through the CLI or its dashboard names B's pipeline,
    target or runs, and B's run is no run of A's (``show``, ``cancel``)."""
    url = None if shared else as_role(postgres_url, roles["writer"])
    a, b = roles["a"], roles["b"]
    first, second = two_tenants(tmp_path, url, a, b)
    theirs = [str(row["run_id"]) for row in second.run_json("runs")]
    mine = [str(row["run_id"]) for row in first.run_json("runs")]
    assert len(theirs) == len(mine) == 2
    forbidden = ["orders_b", *theirs]

    def clean(what: str, text: str) -> None:
        leaked = [word for word in forbidden if word in text]
        assert leaked == [], f"{what} shows tenant {b}'s {leaked}"

    for command in faces_of("orders_a"):
        code, out, err = first.cli(*command, "--json")
        assert code == 0, (command, err)
        clean(" ".join(command), out)
    assert "orders_a" in first.cli("status", "--json")[1]
    for command in (("show", theirs[0]), ("cancel", theirs[0])):
        code, out, err = first.cli(*command, "--json")
        assert code != 0 and "no run" in out + err, (command, out, err)
        assert "orders_b" not in out + err  # the id asked for is echoed, nothing of the run
    assert first.cli("show", mine[0], "--json")[0] == 0

    running = [server.start(p.root / "pipeledger.toml", port=0) for p in (first, second)]
    try:
        base_a, base_b = (r.url.rstrip("/") for r in running)
        for path in [*DOCUMENTS, *PAGES, "/node/orders_a", f"/api/show/{mine[0]}"]:
            status, body = get(base_a + path)
            assert status == 200, (path, body)
            clean(path, body)
            assert (
                get(base_b + path.replace("orders_a", "orders_b").replace(mine[0], theirs[0]))[0]
                == 200
            )
        for path in (f"/api/show/{theirs[0]}", f"/run/{theirs[0]}"):
            status, body = get(base_a + path)
            assert status == 404, (path, status)
            assert "orders_b" not in body, path
        assert "orders_a" in get(base_a + "/api/status")[1]
    finally:
        for r in running:
            r.stop()


def test_a_tenant_from_the_python_api_is_a_quoted_literal_on_sqlite(tmp_path: Path) -> None:
    """``open_warehouse(tenant=...)`` is not checked like the config's key: the SQLite
    filter quotes it (its views and triggers take no bound parameter)."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    with open_warehouse(url).session() as session:
        migrate(session, LEDGER)
        LedgerBuilder(session).run("orders", datetime(2024, 1, 1, tzinfo=UTC), run_id="mine")
    odd = "o'brien OR 1 = 1"
    with open_warehouse(url, tenant=odd).session(write=False) as session:
        assert session.query(f"SELECT count(*) FROM {SQLITE.table(RUNS)}") == [(0,)]
    with open_warehouse(url, tenant=odd).session() as session:
        LedgerBuilder(session).run("orders", datetime(2024, 1, 2, tzinfo=UTC), run_id="odd")
    with open_warehouse(url, tenant=odd).session(write=False) as session:
        rows = session.query(f"SELECT run_id, tenant FROM {SQLITE.table(RUNS)}")
    assert rows == [("odd", odd)]


def test_the_first_run_of_a_new_ledger_is_its_tenants(project: Project) -> None:
    """The run that makes the ledger's tables records its rows as its tenant's (SQLite tags
    a session's rows by triggers on the tables it finds when it opens)."""
    project.configure('[ledger]\ntenant = "team_a"\n', orders=orders_pipeline())
    project.write_csv("orders_1.csv", [order(1, "2024-01-01T10:00:00Z")])
    assert project.run("orders")["status"] == "success"

    for table in ("pipeline_runs", "task_runs", "pipelines"):
        tenants = project.query(
            f"SELECT DISTINCT tenant FROM {project.table('pipeledger.' + table)}"
        )
        assert tenants == [("team_a",)], table


def _runs_scans(plan: dict[str, object]) -> list[dict[str, object]]:
    """The plan's nodes that read the runs table, and the index scans beneath bitmaps."""
    found, todo = [], [plan]
    while todo:
        node = todo.pop()
        name = str(node.get("Relation Name") or node.get("Index Name") or "")
        if name.startswith("pipeline_runs"):
            found.append(node)
        todo += node.get("Plans", [])  # type: ignore[arg-type]
    return found


def test_a_superusers_questions_read_its_declared_tenant_through_the_tenant_indexes(
    postgres_url: str,
) -> None:
    """A superuser passes row security by: the reads name the tenant its config declares,
    so it sees that tenant's rows alone, and every read of the runs probes an index led by
    the tenant (or the primary key, by run id), not a scan of every tenant's runs."""
    from datetime import timedelta

    from pipeledger.ledger.reads import activity, health, recent, runs, sla

    tag = uuid.uuid4().hex[:8]
    a, b = f"a_{tag}", f"b_{tag}"
    with open_warehouse(postgres_url, tenant=a).session() as session:
        migrate(session, LEDGER)
    now = datetime.now(UTC).replace(microsecond=0)
    with psycopg.connect(postgres_url) as superuser:
        for tenant in (a, b):
            superuser.execute(
                "INSERT INTO pipeledger.pipelines (tenant, name, version, created_at, "
                "updated_at, freshness_sla_s, max_duration_s) SELECT %s, %s || '_p' || i, "
                "'v1', %s, %s, 3600, 60 FROM generate_series(1, 20) AS i",
                [tenant, tenant, now - timedelta(days=60), now],
            )
            superuser.execute(
                "INSERT INTO pipeledger.pipeline_runs (tenant, run_id, logical_run_id, attempt, "
                "pipeline, trigger_type, status, started_at, ended_at, duration_ms, "
                "rows_inserted, rows_updated, watermark_before, watermark_after) "
                "SELECT %s, %s || i, %s || i, 1, %s || '_p' || (i %% 20 + 1), 'scheduled', "
                "CASE WHEN i %% 7 = 0 THEN 'failed' ELSE 'success' END, "
                "%s - i * interval '17 minutes', %s - i * interval '17 minutes' + "
                "interval '30 seconds', 30000 + i %% 50 * 1000, 100 + i %% 13, 0, "
                "'2024-01-01', '2024-01-02' FROM generate_series(1, 4000) AS i",
                [tenant, tenant, tenant, tenant, now, now],
            )
        superuser.execute("ANALYZE")
    with open_warehouse(postgres_url, tenant=a).session(write=False) as session:
        d = session.dialect
        statuses = health.pipeline_status(session, now)
        listed = runs.list_runs(session, limit=10_000)
        report = sla.sla_report(session, now)
        days = activity.volume_days(session, now)
        volumes = health.volume_anomalies(session, now)
        seen = {
            "status": {s.pipeline for s in statuses},
            "runs": {r.pipeline for r in listed},
            "sla": {r.pipeline for r in report.reliability},
            "volumes": {v.pipeline for v in days} | {v.pipeline for v in volumes},
        }
        assert seen == {what: {f"{a}_p{i}" for i in range(1, 21)} for what in seen}
        assert len(listed) == 4000
        since, short = now - timedelta(days=30), now - timedelta(days=7)
        statements = [
            ("status", *health.pipeline_status_sql(d, now)),
            ("runs", *runs.list_runs_sql(d, f"{a}_p3", limit=50)),
            ("runs of every pipeline", *runs.list_runs_sql(d, limit=50)),
            ("volumes", *health.volume_anomalies_sql(d, now, None)),
            ("sla recoveries", sla.transitions_sql(d), [since]),
            ("sla counts", sla.timed_successes_sql(d), [*health.status_window(now), since]),
            ("sla breaches", sla.breaches_sql(d), [since, since]),
            ("alerts page rank", sla.rank_sql(d), [*health.status_window(now), short]),
            ("latest runs", recent.latest_runs_sql(d, 20), [[f"{a}_p{i}" for i in range(20)]]),
        ]
        for what, sql, params in statements:
            (plan,) = session.query(f"EXPLAIN (FORMAT JSON) {sql}", params)[0]
            scans = _runs_scans(plan[0]["Plan"])
            assert scans or what == "sla breaches", what
            for node in (n for n in scans if n["Node Type"] != "Bitmap Heap Scan"):
                shown = json.dumps(node)
                assert node["Node Type"] != "Seq Scan", (what, shown)
                condition = str(node.get("Index Cond", ""))
                by_run_id = node.get("Index Name") == "pipeline_runs_pkey"
                assert "tenant = " in condition or by_run_id, (what, shown)
