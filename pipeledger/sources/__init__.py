"""Extract: sources that stream Arrow batches of the rows inside a run's window."""

from __future__ import annotations

from pipeledger.config.model import Config, CsvSource, ParquetSource, PipelineConfig
from pipeledger.sources import csv, parquet, sql
from pipeledger.sources.base import ReadSpec, Source, SourceBatch

__all__ = ["ReadSpec", "Source", "SourceBatch", "open_source"]


def open_source(pipeline: PipelineConfig, config: Config) -> Source:
    """The source a pipeline's config describes (paths resolve against the config's folder)."""
    spec = pipeline.source
    if isinstance(spec, CsvSource):
        return csv.CsvSource(config.resolve(spec.path), spec.delimiter)
    if isinstance(spec, ParquetSource):
        return parquet.ParquetSource(config.resolve(spec.path), _name(pipeline, config))
    return sql.SqlSource(spec.url, spec.table, spec.query)


def _name(pipeline: PipelineConfig, config: Config) -> str | None:
    """The pipeline's name in the config (for messages that say what to declare where)."""
    return next((name for name, p in config.pipelines.items() if p is pipeline), None)
