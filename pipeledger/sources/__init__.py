"""Extract: sources that stream Arrow batches of the rows inside a run's window."""

from __future__ import annotations

from collections.abc import Collection

from pipeledger.config.model import Config, CsvSource, ParquetSource, PipelineConfig
from pipeledger.sources import csv, parquet, sql
from pipeledger.sources.base import ReadSpec, Source, SourceBatch

__all__ = ["ReadSpec", "Source", "SourceBatch", "open_source"]


def open_source(
    pipeline: PipelineConfig, config: Config, only: Collection[str] | None = None
) -> Source:
    """The source a pipeline's config describes (paths resolve against the config's folder);
    ``only``: of a file source's files, just these paths."""
    spec = pipeline.source
    name = _name(pipeline, config)
    if isinstance(spec, CsvSource):
        path = config.resolve(spec.path)
        return csv.CsvSource(path, spec.delimiter, spec.encoding, name, only)
    if isinstance(spec, ParquetSource):
        return parquet.ParquetSource(config.resolve(spec.path), name, only)
    return sql.SqlSource(spec.url, spec.table, spec.query)


def _name(pipeline: PipelineConfig, config: Config) -> str | None:
    """The pipeline's name in the config (for messages that say what to declare where)."""
    return next((name for name, p in config.pipelines.items() if p is pipeline), None)
