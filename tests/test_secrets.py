"""A password in any configured URL appears in no ledger column, no log line and no output."""

from __future__ import annotations

import psycopg

from tests.helpers import Project, orders_pipeline

SECRET = "Sup3rS3cretPw"
LEDGER_TABLES = (
    "pipelines",
    "pipeline_runs",
    "task_runs",
    "audit_events",
    "dataset_snapshots",
    "pipeline_state",
    "pipeline_dependencies",
    "schema_migrations",
)


def _with_password(url: str) -> str:
    scheme, rest = url.split("://", 1)
    user, host = rest.split("@", 1)
    return f"{scheme}://{user}:{SECRET}@{host}"  # the test server trusts; the password is ignored


def test_passwords_reach_no_ledger_column_log_or_output(
    project: Project, postgres_url: str
) -> None:
    with psycopg.connect(postgres_url) as conn:
        conn.execute("CREATE TABLE src (order_id bigint, status text, updated_at timestamptz)")
        conn.execute(
            "INSERT INTO src SELECT g, 'ok', timestamptz '2024-01-01' + g * interval '1h' "
            "FROM generate_series(1, 50) g"
        )
    source = {"kind": "sql", "url": _with_password(postgres_url), "table": "src"}
    broken = {
        "kind": "sql",
        "url": _with_password(postgres_url).replace(postgres_url.split(":")[-1].split("/")[0], "1"),
        "table": "src",
    }
    if project.warehouse_url:
        project.warehouse_url = _with_password(project.warehouse_url)
    project.configure(
        orders=orders_pipeline(columns={}, source=source),
        broken=orders_pipeline(columns={}, source=broken, target="broken"),
    )
    outputs = []
    for args in (
        ("--verbose", "run"),
        ("run", "--json"),
        ("--debug", "run", "broken"),
        ("backfill", "orders", "--start", "2024-01-01", "--end", "2024-01-02", "--json"),
        ("state",),
        ("state", "--json"),
        ("watchdog",),
        ("runs",),
        ("runs", "--json"),
        ("status",),
        ("status", "--json"),
        ("anomalies", "--json"),
        ("tasks", "--json"),
        ("audit", "--table", "analytics.orders", "--json"),
        ("blocked", "--json"),
    ):
        _, out, err = project.cli(*args)
        outputs.append(out + err)
    for run_id in [
        line.split('"run_id": "')[1][:36] for line in outputs[1].splitlines() if '"run_id"' in line
    ]:
        _, out, err = project.cli("show", run_id, "--json")
        outputs.append(out + err)
    everything = "\n".join(outputs)
    assert "error" in outputs[2]  # the broken pipeline did fail, and said so
    assert SECRET not in everything
    stored = []
    for table in LEDGER_TABLES:
        for row in project.query(f"SELECT * FROM {project.table('pipeledger.' + table)}"):
            stored.append(" ".join(str(value) for value in row))
    assert any("***" in row for row in stored)  # the URLs were recorded, masked
    assert not [row for row in stored if SECRET in row]
