"""OpenLineage events of real runs, received by a localhost receiver and validated against the
OpenLineage spec's schemas (``spec_check``): a load, a failed run, a model, a run stopped by
its timeout, a retried run and a DAG run, on both backends where the run can be made there."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from pipeledger import api
from pipeledger.common.columns import TableName
from pipeledger.warehouse.adapters import open_warehouse
from tests.helpers import Project, order, orders_pipeline
from tests.lineage.receiver import Receiver
from tests.lineage.spec_check import check_event
from tests.runs.test_retries_timeouts import _wait_for_reader, source_locked, sql_source

RUNS = "pipeledger.pipeline_runs"


def lineage_toml(url: str, **keys: str) -> str:
    lines = ["", "[lineage]", 'transport = "http"', f'url = "{url}"', 'namespace = "tests"']
    lines += [f'{k} = "{v}"' for k, v in keys.items()]
    return "\n".join(lines) + "\n"


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver() as running:
        yield running


def by_type(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["eventType"], e["job"]["name"]) for e in events]


def ledger_run(project: Project, run_id: str) -> dict[str, Any]:
    detail = api.show(project.root / "pipeledger.toml", run_id)
    return detail.to_json()


def target_columns(project: Project, table: str) -> list[str]:
    config = api.load_config(project.root / "pipeledger.toml")
    with open_warehouse(config.warehouse_url).session(write=False) as session:
        return [name for name, _ in session.table_columns(TableName.parse(table)) or []]


def test_a_load_sends_start_then_complete_with_its_rows_schema_and_checks(
    project: Project, receiver: Receiver
) -> None:
    checks = {"not_null": ["customer_id"]}
    project.configure(lineage_toml(receiver.url), orders=orders_pipeline(checks=checks))
    project.write_csv(
        "orders_1.csv", [order(1, "2024-01-01T10:00:00Z"), order(2, "2024-01-01T11:00:00Z")]
    )
    first = project.run()
    project.write_csv(
        "orders_2.csv",
        [order(1, "2024-01-02T10:00:00Z", amount="12.00"), order(3, "2024-01-02T11:00:00Z")],
    )
    second = project.run()

    events = receiver.wait_for(4)
    for event in events:
        check_event(event)
    assert by_type(events) == [("START", "orders"), ("COMPLETE", "orders")] * 2
    start, complete = events[2:]
    assert start["run"]["runId"] == complete["run"]["runId"] == second["run_id"]
    assert events[0]["run"]["runId"] == first["run_id"]
    assert start["job"]["namespace"] == "tests"
    (output,) = complete["outputs"]
    assert output["name"].endswith("analytics.orders")
    written = second["rows_inserted"] + second["rows_updated"]
    assert written == 2 and output["outputFacets"]["outputStatistics"]["rowCount"] == written
    fields = [f["name"] for f in output["facets"]["schema"]["fields"]]
    assert fields == target_columns(project, "analytics.orders")
    assertions = output["facets"]["dataQualityAssertions"]["assertions"]
    assert {"assertion": "not_null", "column": "customer_id", "success": True}.items() <= {
        k: v for a in assertions if a["assertion"] == "not_null" for k, v in a.items()
    }.items()
    (source,) = complete["inputs"]
    assert (source["namespace"], source["name"]) == ("file", str(project.root / "data/orders*.csv"))
    assert source["inputFacets"]["inputStatistics"]["rowCount"] == second["rows_read"]
    assert "_pipeledger_row_hash" not in {f["name"] for f in source["facets"]["schema"]["fields"]}


def test_a_failed_run_sends_start_then_fail_with_its_error(
    project: Project, receiver: Receiver
) -> None:
    project.configure(lineage_toml(receiver.url), orders=orders_pipeline())
    path = project.write_csv("orders_1.csv", [order(1, "2024-01-01T10:00:00Z")])
    path.write_text(path.read_text() + "2,only,three\n")
    code, out, _ = project.cli("run", "--json")
    assert code == 1
    (result,) = json.loads(out)

    start, fail = receiver.wait_for(2)
    for event in (start, fail):
        check_event(event)
    assert (start["eventType"], fail["eventType"]) == ("START", "FAIL")
    assert fail["run"]["runId"] == result["run_id"]
    message = fail["run"]["facets"]["errorMessage"]["message"]
    assert message == ledger_run(project, result["run_id"])["error_message"]
    assert "nothing was written" in message
    assert "outputStatistics" not in fail["outputs"][0].get("outputFacets", {})


def test_a_model_sends_its_sql_and_column_lineage(project: Project, receiver: Receiver) -> None:
    query = (
        "SELECT customer_id, sum(amount) AS total, count(*) AS orders, max(updated_at) AS "
        "updated_at FROM analytics.orders GROUP BY customer_id"
    )
    model = {"query": query, "target": "analytics.by_customer", "materialized": "replace"}
    project.configure(
        lineage_toml(receiver.url), models={"by_customer": model}, orders=orders_pipeline()
    )
    project.write_csv("orders_1.csv", [order(1, "2024-01-01T10:00:00Z")])
    outcomes = project.run_json("run")

    events = receiver.wait_for(4)
    for event in events:
        check_event(event)
    model_events = [e for e in events if e["job"]["name"] == "by_customer"]
    assert [e["eventType"] for e in model_events] == ["START", "COMPLETE"]
    complete = model_events[1]
    assert complete["run"]["runId"] == outcomes[1]["run_id"]
    assert complete["job"]["facets"]["sql"]["query"] == query
    assert complete["job"]["facets"]["jobType"]["jobType"] == "MODEL"
    (upstream,) = complete["inputs"]
    assert upstream["name"].endswith("analytics.orders")
    (output,) = complete["outputs"]
    lineage = output["facets"]["columnLineage"]["fields"]
    assert set(lineage) == {"customer_id", "total", "updated_at"}  # count(*) reads no column
    (total,) = lineage["total"]["inputFields"]
    assert (total["name"], total["field"]) == (upstream["name"], "amount")
    assert total["transformations"] == [{"type": "DIRECT", "subtype": "AGGREGATION"}]
    (key,) = lineage["customer_id"]["inputFields"]
    assert key["transformations"] == [{"type": "DIRECT", "subtype": "IDENTITY"}]


def test_a_run_stopped_by_its_timeout_sends_abort(
    project: Project, postgres_url: str, receiver: Receiver
) -> None:
    project.configure(lineage_toml(receiver.url), orders=sql_source(postgres_url, timeout="1s"))
    with source_locked(postgres_url):
        code, _, _ = project.cli("run", "--json")
    assert code == 124
    start, abort = receiver.wait_for(2)
    for event in (start, abort):
        check_event(event)
    assert (start["eventType"], abort["eventType"]) == ("START", "ABORT")
    assert "timeout" in abort["run"]["facets"]["errorMessage"]["message"]
    (source,) = abort["inputs"]
    database = postgres_url.rsplit("/", 1)[1]
    assert source["name"] == f"{database}.public.source_orders"


def test_a_retried_run_names_its_logical_run_as_parent(
    project: Project, postgres_url: str, receiver: Receiver
) -> None:
    pipeline = sql_source(postgres_url, retries=1, retry_delay="50ms")
    project.configure(lineage_toml(receiver.url), orders=pipeline)

    finished = threading.Event()

    def drop_once() -> None:
        with (
            source_locked(postgres_url) as holder,
            psycopg.connect(postgres_url, autocommit=True) as watcher,
        ):
            reader = _wait_for_reader(watcher, lambda: not finished.is_set())
            watcher.execute("SELECT pg_terminate_backend(%s)", [reader])
            holder.commit()

    dropper = threading.Thread(target=drop_once)
    dropper.start()
    try:
        (result,) = project.run_json("run")
    finally:
        finished.set()
        dropper.join()

    events = receiver.wait_for(4)
    for event in events:
        check_event(event)
    assert [e["eventType"] for e in events] == ["START", "FAIL", "START", "COMPLETE"]
    first_run = events[0]["run"]["runId"]
    assert events[1]["run"]["runId"] == first_run
    retry = events[3]
    assert retry["run"]["runId"] == result["run_id"] != first_run
    parent = retry["run"]["facets"]["parent"]
    assert parent["run"]["runId"] == first_run  # the logical run: its first attempt's id
    assert parent["job"] == {"namespace": "tests", "name": "orders", "facets": {}}
    assert parent["root"]["job"]["name"] == project.root.name  # the DAG run of `run`
    tags = {t["key"]: t["value"] for t in retry["run"]["facets"]["tags"]["tags"]}
    assert (tags["attempt"], tags["trigger_type"]) == ("2", "retry")


def test_a_dag_run_is_every_node_run_s_parent(project: Project, receiver: Receiver) -> None:
    model = {
        "query": "SELECT order_id, amount, updated_at FROM analytics.orders",
        "target": "analytics.silver", "key": ["order_id"], "cursor": "updated_at",
        "on_conflict": "update",
    }  # fmt: skip
    project.configure(
        lineage_toml(receiver.url, dag_job="nightly"),
        models={"silver": model},
        orders=orders_pipeline(),
    )
    project.write_csv("orders_1.csv", [order(1, "2024-01-01T10:00:00Z")])
    airflow_run = "scheduled__2024-06-01T03:00:00+00:00"
    code, _, err = project.cli("run", "--correlation-id", airflow_run, "--json")
    assert code == 0, err

    events = receiver.wait_for(4)
    for event in events:
        check_event(event)
    parents = {json.dumps(e["run"]["facets"]["parent"], sort_keys=True) for e in events}
    (parent,) = [json.loads(p) for p in parents]
    assert parent["job"] == {"namespace": "tests", "name": "nightly", "facets": {}}
    uuid.UUID(parent["run"]["runId"])  # a name-based UUID for Airflow's run id
    assert "root" not in parent


def test_an_orchestrator_s_lineage_parent_and_dag_run_are_parent_and_root(
    project: Project, receiver: Receiver
) -> None:
    project.configure(lineage_toml(receiver.url), orders=orders_pipeline())
    project.write_csv("orders_1.csv", [order(1, "2024-01-01T10:00:00Z")])
    task_run = str(uuid.uuid4())
    code, _, err = project.cli(
        "run", "--correlation-id", "manual__1", "--lineage-parent", f"airflow/etl.orders/{task_run}"
    )
    assert code == 0, err
    _, complete = receiver.wait_for(2)
    check_event(complete)
    parent = complete["run"]["facets"]["parent"]
    assert parent["run"]["runId"] == task_run
    assert parent["job"]["namespace"] == "airflow" and parent["job"]["name"] == "etl.orders"
    assert parent["root"]["job"]["name"] == project.root.name


def test_without_a_ledger_runs_still_send_their_events(
    project: Project, receiver: Receiver
) -> None:
    raw = "\n[ledger]\nenabled = false\n" + lineage_toml(receiver.url)
    project.configure(raw, orders=orders_pipeline())
    path = project.write_csv("orders_1.csv", [order(1, "2024-01-01T10:00:00Z")])
    (ok,) = project.run_json("run")
    path.write_text(path.read_text() + "2,only,three\n")
    code, _, _ = project.cli("run")
    assert code == 1

    events = receiver.wait_for(4)
    for event in events:
        check_event(event)
    assert [e["eventType"] for e in events] == ["START", "COMPLETE", "START", "FAIL"]
    assert events[1]["run"]["runId"] == ok["run_id"]
