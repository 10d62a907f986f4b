"""OpenLineage run events built from what a run recorded in the ledger (its ``Run``), with
the ``openlineage-python`` client's classes.

======================  =================================================================
part of the event       from
======================  =================================================================
run id                  the ledger's run id
job                     ``[lineage] namespace`` / the node's name; facets: jobType (BATCH,
                        LOAD or MODEL), documentation, ownership, tags, and a model's SQL
parent run facet        the run's lineage parent (an Airflow task), else its logical run
                        (a retry: the first attempt), else its DAG run (the correlation
                        id, as the job ``[lineage] dag_job``); root: the lineage root, else
                        the DAG run when it is not the parent already
other run facets        nominalTime (the data interval), processing_engine, tags (attempt,
                        logical run, trigger, ledger status), errorMessage (FAIL, ABORT)
inputs                  a load's source (files, a table, the tables of a query); a model's
                        upstream tables. At the end: schema and input statistics (rows and
                        bytes read)
output                  the target. At the end: schema (the target's columns as the run
                        left them), output statistics (rows written: inserted + updated),
                        dataQualityAssertions (the quality gate's checks), and a model's
                        column lineage
======================  =================================================================
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from openlineage.client import __version__ as client_version
from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.generated import (
    column_lineage_dataset,
    data_quality_assertions_dataset,
    documentation_job,
    error_message_run,
    input_statistics_input_dataset,
    job_type_job,
    nominal_time_run,
    output_statistics_output_dataset,
    ownership_job,
    parent_run,
    processing_engine_run,
    schema_dataset,
    sql_job,
    storage_dataset,
    tags_job,
    tags_run,
)

from pipeledger.common.columns import ROW_HASH_COLUMN, TableName
from pipeledger.common.version import __version__
from pipeledger.config.model import Config, CsvSource, ModelConfig, ParquetSource, SqlSource
from pipeledger.ledger.run import Run as LedgerRun
from pipeledger.ledger.vocabulary import RunRecord, RunStatus
from pipeledger.lineage.columns import SourceColumn, column_lineage, query_tables
from pipeledger.lineage.names import RunRef, as_uuid, file_dataset, parse_ref, table_dataset
from pipeledger.warehouse.session import Warehouse

log = logging.getLogger("pipeledger.lineage")

PRODUCER = f"urn:pipeledger:{__version__}"
_HISTORY_COLUMNS = {"valid_from", "valid_to", "is_current"}
_OWN_PREFIX = ROW_HASH_COLUMN.removesuffix("row_hash")  # "_pipeledger_": run id, load time


def _own(column: str) -> bool:
    """A column pipeledger keeps in a target (row hash, run id, load time, SCD2 versions)."""
    return column.startswith(_OWN_PREFIX) or column in _HISTORY_COLUMNS


_END_STATE = {
    RunStatus.SUCCESS: RunState.COMPLETE,
    RunStatus.PARTIAL: RunState.COMPLETE,
    RunStatus.FAILED: RunState.FAIL,
    RunStatus.ABANDONED: RunState.FAIL,
    RunStatus.CANCELLED: RunState.ABORT,
    RunStatus.TIMED_OUT: RunState.ABORT,
    RunStatus.SKIPPED: RunState.ABORT,
}


@dataclass(frozen=True, kw_only=True)
class Scene:
    """What every event of one invocation is built with."""

    namespace: str
    dag_job: str
    config: Config
    warehouse: Warehouse


def start_event(scene: Scene, record: RunRecord) -> RunEvent:
    """START: the run is recorded ``running``."""
    return RunEvent(
        eventType=RunState.START,
        eventTime=_time(record.started_at),
        run=Run(runId=record.run_id, facets=_run_facets(scene, record)),
        job=_job(scene, record.pipeline),
        inputs=_inputs(scene, record.pipeline),
        outputs=[_output(scene, record.pipeline)],
        producer=PRODUCER,
    )


def end_event(scene: Scene, run: LedgerRun) -> RunEvent | None:
    """COMPLETE, FAIL or ABORT from the run's final record; None while it is running
    (its COMMIT outcome is unknown)."""
    record = run.record
    state = _END_STATE.get(record.status)
    if state is None:
        return None
    facets = _run_facets(scene, record)
    if state is not RunState.COMPLETE:
        message = record.error_message or f"the run ended {record.status}"
        facets["errorMessage"] = error_message_run.ErrorMessageRunFacet(
            message=message, programmingLanguage="python", producer=PRODUCER
        )
    schemas = _table_schemas(scene, record.pipeline)
    return RunEvent(
        eventType=state,
        eventTime=_time(record.ended_at or datetime.now(UTC)),
        run=Run(runId=record.run_id, facets=facets),
        job=_job(scene, record.pipeline),
        inputs=_inputs(scene, record.pipeline, run, schemas),
        outputs=[_output(scene, record.pipeline, run, schemas)],
        producer=PRODUCER,
    )


def _time(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat()


# -- the job ----------------------------------------------------------------------------


def _job(scene: Scene, name: str) -> Job:
    node = scene.config.node(name)
    model = isinstance(node, ModelConfig)
    facets: dict[str, Any] = {
        "jobType": job_type_job.JobTypeJobFacet(
            processingType="BATCH",
            integration="PIPELEDGER",
            jobType="MODEL" if model else "LOAD",
            producer=PRODUCER,
        )
    }
    if node.description:
        facets["documentation"] = documentation_job.DocumentationJobFacet(
            description=node.description, producer=PRODUCER
        )
    if node.owner:
        owner = ownership_job.Owner(name=node.owner)
        facets["ownership"] = ownership_job.OwnershipJobFacet(owners=[owner], producer=PRODUCER)
    if node.tags:
        tags = [
            tags_job.TagsJobFacetFields(key=t, value="true", source="CONFIG") for t in node.tags
        ]
        facets["tags"] = tags_job.TagsJobFacet(tags=tags, producer=PRODUCER)
    if model:
        query = scene.config.model_sql(name).text
        facets["sql"] = sql_job.SQLJobFacet(query=query, dialect="postgres", producer=PRODUCER)
    return Job(namespace=scene.namespace, name=name, facets=facets)


# -- the run ----------------------------------------------------------------------------


def _run_facets(scene: Scene, record: RunRecord) -> dict[str, Any]:
    facets: dict[str, Any] = {
        "processing_engine": processing_engine_run.ProcessingEngineRunFacet(
            version=__version__,
            name="pipeledger",
            openlineageAdapterVersion=client_version,
            producer=PRODUCER,
        ),
        "tags": tags_run.TagsRunFacet(tags=_run_tags(record), producer=PRODUCER),
    }
    parent = _parent(scene, record)
    if parent is not None:
        facets["parent"] = parent
    if record.data_interval_start is not None:
        end = record.data_interval_end
        facets["nominalTime"] = nominal_time_run.NominalTimeRunFacet(
            nominalStartTime=_time(record.data_interval_start),
            nominalEndTime=_time(end) if end else None,
            producer=PRODUCER,
        )
    return facets


def _run_tags(record: RunRecord) -> list[tags_run.TagsRunFacetFields]:
    pairs = {
        "attempt": str(record.attempt),
        "logical_run_id": record.logical_run_id,
        "trigger_type": str(record.trigger_type),
        "status": str(record.status),
        "correlation_id": record.correlation_id,
    }
    return [
        tags_run.TagsRunFacetFields(key=k, value=v, source="PIPELEDGER")
        for k, v in pairs.items()
        if v
    ]


def _parent(scene: Scene, record: RunRecord) -> parent_run.ParentRunFacet | None:
    """The parent run (module docstring), with the root run above it where one is known."""
    dag_run = None
    if record.correlation_id:
        run_id = as_uuid(record.correlation_id, scene.namespace, scene.dag_job)
        dag_run = RunRef(namespace=scene.namespace, job=scene.dag_job, run_id=run_id)
    given = parse_ref(str(record.extra.get("lineage_parent") or ""))
    root = parse_ref(str(record.extra.get("lineage_root") or ""))
    if given is not None:
        parent, root = given, root or (None if given == dag_run else dag_run)
    elif record.logical_run_id != record.run_id:
        logical = RunRef(
            namespace=scene.namespace, job=record.pipeline, run_id=record.logical_run_id
        )
        parent, root = logical, root or dag_run
    elif dag_run is not None:
        parent = dag_run
    else:
        return None
    return parent_run.ParentRunFacet(
        run=parent_run.Run(runId=parent.run_id),
        job=parent_run.Job(namespace=parent.namespace, name=parent.job),
        root=_root(root) if root is not None and root != parent else None,
        producer=PRODUCER,
    )


def _root(ref: RunRef) -> parent_run.Root:
    return parent_run.Root(
        run=parent_run.RootRun(runId=ref.run_id),
        job=parent_run.RootJob(namespace=ref.namespace, name=ref.job),
    )


# -- the datasets -----------------------------------------------------------------------

Schemas = dict[str, list[tuple[str, str]]]  # str(TableName) -> [(column, type)]


def _inputs(
    scene: Scene, name: str, run: LedgerRun | None = None, schemas: Schemas | None = None
) -> list[InputDataset]:
    config = scene.config
    node = config.node(name)
    if isinstance(node, ModelConfig):
        tables = config.model_sql(name).tables
        found = [_warehouse_input(scene, t, (schemas or {}).get(str(t))) for t in tables]
        return found
    source = node.source
    facets: dict[str, Any] = {}
    input_facets: dict[str, Any] = {}
    if run is not None:
        columns = (schemas or {}).get(str(node.target_name)) or _columns(run)
        if columns:
            facets["schema"] = _schema([(c, t) for c, t in columns if not _own(c)])
        record = run.record
        input_facets["inputStatistics"] = (
            input_statistics_input_dataset.InputStatisticsInputDatasetFacet(
                rowCount=record.rows_read, size=record.bytes_read, producer=PRODUCER
            )
        )
    if isinstance(source, CsvSource | ParquetSource):
        namespace, dataset = file_dataset(config.resolve(source.path))
        facets["storage"] = storage_dataset.StorageDatasetFacet(
            storageLayer="file", fileFormat=source.kind, producer=PRODUCER
        )
        return [_input(namespace, dataset, facets, input_facets)]
    tables = _sql_tables(source)
    return [
        _input(*table_dataset(source.url, t, config.base_dir), facets, input_facets) for t in tables
    ]


def _sql_tables(source: SqlSource) -> tuple[TableName, ...]:
    if source.table is not None:
        return (TableName.parse(source.table),)
    return query_tables(source.query or "")


def _input(
    namespace: str, name: str, facets: dict[str, Any], input_facets: dict[str, Any]
) -> InputDataset:
    return InputDataset(
        namespace=namespace, name=name, facets=dict(facets), inputFacets=dict(input_facets)
    )


def _warehouse_input(
    scene: Scene, table: TableName, columns: list[tuple[str, str]] | None
) -> InputDataset:
    namespace, name = table_dataset(scene.config.warehouse_url, table, scene.config.base_dir)
    facets: dict[str, Any] = {}
    if columns:
        facets["schema"] = _schema([(c, t) for c, t in columns if not _own(c)])
    return InputDataset(namespace=namespace, name=name, facets=facets)


def _output(
    scene: Scene, name: str, run: LedgerRun | None = None, schemas: Schemas | None = None
) -> OutputDataset:
    config = scene.config
    node = config.node(name)
    namespace, dataset = table_dataset(config.warehouse_url, node.target_name, config.base_dir)
    facets: dict[str, Any] = {}
    output_facets: dict[str, Any] = {}
    if run is not None:
        columns = (schemas or {}).get(str(node.target_name)) or _columns(run)
        if columns:
            facets["schema"] = _schema(columns)
        if run.quality:
            facets["dataQualityAssertions"] = _assertions(run.quality)
        if isinstance(node, ModelConfig) and columns:
            query = config.model_sql(name)
            upstream = {t: c for t, c in (schemas or {}).items() if t != str(node.target_name)}
            produced = [c for c, _ in columns if not _own(c)]
            traced = column_lineage(query, produced, sqlglot_schema(upstream))
            if traced:
                facets["columnLineage"] = _column_lineage(scene, traced)
        if run.record.status in (RunStatus.SUCCESS, RunStatus.PARTIAL):
            record = run.record
            written = (record.rows_inserted or 0) + (record.rows_updated or 0)
            output_facets["outputStatistics"] = (
                output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(
                    rowCount=written, producer=PRODUCER
                )
            )
    return OutputDataset(
        namespace=namespace, name=dataset, facets=facets, outputFacets=output_facets
    )


def _columns(run: LedgerRun) -> list[tuple[str, str]]:
    """The target's columns as the run's snapshot has them, if it took one."""
    for snapshot in run.snapshots:
        return [(c["name"], c["type"]) for c in snapshot.columns]
    return []


def _schema(columns: Sequence[tuple[str, str]]) -> schema_dataset.SchemaDatasetFacet:
    fields = [
        schema_dataset.SchemaDatasetFacetFields(name=n, type=t, ordinal_position=i)
        for i, (n, t) in enumerate(columns, start=1)
    ]
    return schema_dataset.SchemaDatasetFacet(fields=fields, producer=PRODUCER)


def _assertions(
    results: Sequence[dict[str, Any]],
) -> data_quality_assertions_dataset.DataQualityAssertionsDatasetFacet:
    """The gate's checks: a check that warned passed (it did not stop anything)."""
    assertions = [
        data_quality_assertions_dataset.Assertion(
            assertion=str(r["kind"]),
            success=r["status"] != "fail",
            column=_check_column(r),
            severity=str(r["level"]),
            name=str(r["check_name"]),
            expected=None if r.get("expected") is None else str(r["expected"]),
            actual=None if r.get("observed") is None else str(r["observed"]),
        )
        for r in results
    ]
    return data_quality_assertions_dataset.DataQualityAssertionsDatasetFacet(
        assertions=assertions, producer=PRODUCER
    )


def _check_column(result: dict[str, Any]) -> str | None:
    """The column a check is about: its name is ``kind:column`` or ``kind(column)``."""
    name = str(result["check_name"])
    for mark in (":", "("):
        if mark in name:
            return name.split(mark, 1)[1].rstrip(")") or None
    return None


def _column_lineage(
    scene: Scene, traced: dict[str, tuple[SourceColumn, ...]]
) -> column_lineage_dataset.ColumnLineageDatasetFacet:
    config = scene.config
    fields = {}
    for column, sources in traced.items():
        inputs = []
        for source in sources:
            namespace, name = table_dataset(config.warehouse_url, source.table, config.base_dir)
            change = column_lineage_dataset.Transformation(type="DIRECT", subtype=source.subtype)
            inputs.append(
                column_lineage_dataset.InputField(
                    namespace=namespace, name=name, field=source.column, transformations=[change]
                )
            )
        fields[column] = column_lineage_dataset.Fields(inputFields=inputs)
    return column_lineage_dataset.ColumnLineageDatasetFacet(fields=fields, producer=PRODUCER)


def _table_schemas(scene: Scene, name: str) -> Schemas:
    """The columns of the node's target (pipeledger's own columns too: the table as it is)
    and of a model's upstream tables, read from the warehouse once the run has ended (best
    effort: without them, the snapshot's columns, and no lineage through ``SELECT *``)."""
    config = scene.config
    tables = [config.node(name).target_name]
    if name in config.models:
        tables += config.model_sql(name).tables
    try:
        with scene.warehouse.session(write=False) as session:
            return {str(t): list(session.table_columns(t) or []) for t in tables}
    except Exception as exc:  # lineage must not fail for want of a catalog read
        log.warning("lineage of %s: could not read its upstream tables' columns: %s", name, exc)
        return {}


def sqlglot_schema(schemas: Schemas) -> dict[str, Any]:
    """``schemas`` as sqlglot's mapping ({schema: {table: {column: type}}})."""
    tables = [(TableName.parse(text), dict(columns)) for text, columns in schemas.items()]
    if not any(table.schema for table, _ in tables):
        return {table.table: columns for table, columns in tables}
    nested: dict[str, Any] = {}
    for table, columns in tables:  # sqlglot wants one depth: unqualified is PostgreSQL's
        nested.setdefault(table.schema or "public", {})[table.table] = columns
    return nested
