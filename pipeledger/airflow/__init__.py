"""pipeledger inside Airflow (2.11 and 3.x): one Airflow task per load and model, with the
edges of pipeledger's own graph (``pip install pipeledger[airflow]``; Airflow is yours).

::

    # dags/warehouse.py
    from pipeledger.airflow import dag_from_config

    dag = dag_from_config("/opt/pipelines/pipeledger.toml", dag_id="warehouse",
                          selectors=["tag:nightly"], connections={"WAREHOUSE_URL": "dwh"})

Each task calls the library face (:mod:`pipeledger.api`, not a shell) for one node, once
(pipeledger's own ``retries`` become the task's Airflow retries), passing:

=====================  ====================================================================
Airflow                the run in the ledger
=====================  ====================================================================
data interval          its ``data_interval`` (recorded; an incremental run still reads from
                       its watermark)
``ti.try_number``      its attempt (``--attempt``): a later try continues the logical run
                       of an earlier one that did not publish
``run_id``             its ``correlation_id``, and its idempotency key
                       ``airflow:<dag_id>:<run_id>``: a task instance loads once
the task, the DAG run  its OpenLineage parent and root, when lineage is on (the
                       OpenLineage provider's ``lineage_parent_id`` when it is installed)
=====================  ====================================================================

What a run's outcome means to Airflow:

=====================================================  ======================================
outcome (exit code of ``pipeledger run``)              the task
=====================================================  ======================================
success, partial, committed but not recorded (0, 5)    success (partial and 5: a warning)
transient: connection lost, deadlock, the SQLite file  failed, retried by Airflow's retries
busy, outcome of COMMIT unknown (75, 6)                (``AirflowException``)
permanent, config (1, 2), stopped by its timeout or    failed, not retried
``pipeledger cancel`` (124, 130)                       (``AirflowFailException``)
the quality gate halted it (3)                         failed, not retried; the gate's report
                                                       is in the task's log
duplicate: the key's run succeeded, or runs now in     skipped (``AirflowSkipException``);
this try; the pipeline's lock held by a live run (4)   downstream tasks run (``none_failed``)
duplicate held by an earlier try still ``running``     failed, retried: Airflow has given that
(its worker was killed; the ledger settles it when     try up; the ledger will too, when its
its lease expires)                                     process is seen gone or its lease ends
=====================================================  ======================================

Downstream tasks use ``trigger_rule="none_failed"``: a skipped upstream (its rows were loaded
by another run) does not stop them; a failed one does. Schedules come from the selected
nodes' ``schedule`` (one cron and time zone for the DAG) as a cron *data-interval* timetable,
so each run covers the interval that has just ended, on Airflow 2 and 3 alike.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pipeledger import api, lineage
from pipeledger.dag.graph import Graph

log = logging.getLogger("pipeledger.airflow")

DEFAULT_START = datetime(2024, 1, 1, tzinfo=UTC)
# Airflow's run types, as the ledger's trigger types
_TRIGGERS = {"scheduled": "scheduled", "backfill": "scheduled", "asset_triggered": "event"}
_TRIGGERS["dataset_triggered"] = "event"


def dag_from_config(
    path: str | os.PathLike[str],
    dag_id: str,
    *,
    selectors: Sequence[str] = (),
    schedule: Any = "config",
    start_date: datetime = DEFAULT_START,
    catchup: bool = False,
    retries: int | None = None,
    connections: Mapping[str, str] | None = None,
    tags: Sequence[str] = (),
    **dag_arguments: Any,
) -> Any:
    """An Airflow DAG of the config's loads and models (the ``selectors`` of
    :mod:`pipeledger.dag.graph`: ``NAME``, ``NAME+``, ``+NAME``, ``tag:TAG``; none: every
    node), one task per node, named as the node, with pipeledger's edges.

    ``schedule``: ``"config"`` (default) takes the selected nodes' ``schedule`` (all must
    share one cron and time zone; none scheduled: triggered only), else any Airflow
    schedule. ``retries``: every task's Airflow retries (default: each node's ``retries``,
    with its ``retry_delay`` doubling up to ``max_retry_delay``). ``connections``: env
    var -> Airflow connection id, set in each task's environment before the config is read
    (``url = "${WAREHOUSE_URL}"``). Other keywords go to Airflow's ``DAG``."""
    dag_class, operator = _airflow()
    source = Path(path).resolve()
    config = api.load_config(source)
    graph = Graph.of(config)
    selected = graph.select(list(selectors))
    dag = dag_class(
        dag_id=dag_id,
        schedule=_schedule(config, selected) if schedule == "config" else schedule,
        start_date=start_date,
        catchup=catchup,
        tags=sorted({"pipeledger", *tags, *(t for n in selected for t in graph.tags[n])}),
        **dag_arguments,
    )
    tasks = {}
    for name in selected:
        node = config.node(name)
        upstreams = [u for u in graph.upstreams[name] if u in selected]
        tasks[name] = operator(
            task_id=name,
            dag=dag,
            python_callable=run_node_task,
            op_kwargs={
                "config_path": str(source),
                "node": name,
                "connections": dict(connections or {}),
            },
            retries=node.retries if retries is None else retries,
            retry_delay=node.retry_delay,
            retry_exponential_backoff=True,
            max_retry_delay=node.max_retry_delay,
            trigger_rule="none_failed" if upstreams else "all_success",
            doc_md=node.description,
        )
        for upstream in upstreams:
            tasks[upstream] >> tasks[name]
    return dag


def _airflow() -> tuple[Any, Any]:
    """Airflow's DAG class and PythonOperator, from where this version keeps them."""
    try:
        from airflow.providers.standard.operators.python import PythonOperator
        from airflow.sdk import DAG  # Airflow 3
    except ImportError:
        from airflow import DAG  # Airflow 2.11
        from airflow.operators.python import PythonOperator
    return DAG, PythonOperator


def _schedule(config: api.Config, selected: Sequence[str]) -> Any:
    """One cron data-interval timetable for the selected nodes' schedules (or None)."""
    from airflow.timetables.interval import CronDataIntervalTimetable

    crons = {(n.schedule, n.timezone) for n in map(config.node, selected) if n.schedule}
    if not crons:
        return None
    if len(crons) > 1:
        found = ", ".join(f"{c} ({z})" for c, z in sorted(crons))
        raise api.ConfigError(
            f"{config.source_file}: the selected nodes have different schedules ({found}): "
            "build one DAG per schedule (selectors such as tag:hourly), or pass schedule="
        )
    ((cron, zone),) = crons
    return CronDataIntervalTimetable(cron, timezone=zone)


# -- the task ---------------------------------------------------------------------------


def run_node_task(
    config_path: str, node: str, connections: Mapping[str, str] | None = None, **context: Any
) -> dict[str, Any]:
    """One Airflow task: one run of ``node`` (module docstring); returns its outcome's
    JSON (the task's XCom)."""
    skip, fail = _exceptions()
    _connect(connections or {})
    config = api.load_config(config_path)
    why = _trigger(config, node, context)
    try:
        if node in config.models:
            result: Any = api.run_model(config, node, trigger=why)
        else:
            result = api.run_one(config, node, trigger=why)
    except Exception as exc:
        outcome = api.outcome_of(node, exc)
        if not api.is_failure(outcome):  # it committed; the ledger is behind (exit 5)
            log.warning("%s", outcome.to_json().get("ledger_error"))
            return dict(outcome.to_json())
        _fail(config, outcome, why.attempt or 1, skip, fail)
    finally:
        api.wait_for_lineage()
    if result.status == "partial":
        log.warning("%s: some rows were quarantined: %s", node, result.to_json())
    payload: dict[str, Any] = result.to_json()
    log.info("%s: %s", node, payload)
    return payload


def _exceptions() -> tuple[type[Exception], type[Exception]]:
    try:
        from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException
    except ImportError:  # Airflow 2.11, 3.0, 3.1
        from airflow.exceptions import AirflowFailException, AirflowSkipException
    return AirflowSkipException, AirflowFailException


def _connect(connections: Mapping[str, str]) -> None:
    """Each env var from its Airflow connection's URI (what ``${VAR}`` in the config reads)."""
    if not connections:
        return
    try:
        from airflow.sdk import BaseHook
    except ImportError:
        from airflow.hooks.base import BaseHook
    for variable, conn_id in connections.items():
        uri = BaseHook.get_connection(conn_id).get_uri()
        os.environ[variable] = uri.split("?__extra__=", 1)[0]


def _trigger(config: api.Config, node: str, context: Mapping[str, Any]) -> api.Trigger:
    ti = context["ti"]
    run_id = str(context["run_id"])
    parent = root = None
    if lineage.configured(config):
        parent, root = _lineage_ids(ti, run_id)
    return api.trigger(
        _TRIGGERS.get(run_id.split("__", 1)[0], "manual"),
        correlation_id=run_id,
        idempotency_key=f"airflow:{ti.dag_id}:{run_id}",
        triggered_by=f"airflow {ti.dag_id}.{ti.task_id}",
        data_interval=_interval(context),
        attempt=int(ti.try_number),
        lineage_parent=parent,
        lineage_root=root,
    )


def _interval(context: Mapping[str, Any]) -> tuple[datetime, datetime] | None:
    """Airflow's data interval (Airflow 3 has none for a manual run without a logical
    date: then the run has none either)."""
    start, end = context.get("data_interval_start"), context.get("data_interval_end")
    if start is None or end is None:
        return None
    return start, end


def _lineage_ids(ti: Any, run_id: str) -> tuple[str, str]:
    """The task's and the DAG run's OpenLineage runs, ``namespace/job/run_id``: from the
    OpenLineage provider where it is installed (its own events name them), else made up
    the same way for every try (no Airflow events then: the ids only group ours)."""
    try:
        from airflow.providers.openlineage.plugins import macros

        return macros.lineage_parent_id(ti), macros.lineage_root_parent_id(ti)
    except (ImportError, AttributeError):
        pass
    namespace = os.environ.get("OPENLINEAGE_NAMESPACE", "default")
    task = uuid.uuid5(
        uuid.NAMESPACE_URL, f"airflow:{ti.dag_id}/{ti.task_id}/{run_id}/{ti.try_number}"
    )
    dag_run = uuid.uuid5(uuid.NAMESPACE_URL, f"airflow:{ti.dag_id}/{run_id}")
    return (
        f"{namespace}/{ti.dag_id}.{ti.task_id}/{task}",
        f"{namespace}/{ti.dag_id}/{dag_run}",
    )


def _fail(
    config: api.Config,
    outcome: Any,
    attempt: int,
    skip: type[Exception],
    fail: type[Exception],
) -> None:
    """Raise what the run's failure means to Airflow (module docstring)."""
    text = str(outcome.to_json()["error"])
    reason = outcome.reason
    if reason in ("duplicate", "locked"):
        if reason == "duplicate" and _earlier_try_running(config, outcome, attempt):
            raise RuntimeError(
                f"{text}: that run is an earlier try of this task that Airflow has given up, "
                "still recorded running (its worker was killed); the ledger settles it when "
                "its process is seen gone or its lease expires, and a later try runs"
            )
        raise skip(text)
    if reason == "gate_halt":
        log.error("%s: the quality gate halted the run:\n%s", outcome.pipeline, text)
        raise fail(text)
    if reason in ("transient", "busy", "commit_unknown"):
        raise RuntimeError(text)  # Airflow's retries apply
    raise fail(text)


def _earlier_try_running(config: api.Config, outcome: Any, attempt: int) -> bool:
    holder = api.show(config, outcome.duplicate_of)
    return holder.run.status == "running" and holder.run.attempt < attempt
