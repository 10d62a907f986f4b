"""How results look on a terminal. Pure functions from values to rich renderables."""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table

from pipeledger.load.result import LoadResult
from pipeledger.runner import WatermarkRow


def _mark(value: str | dict[str, str] | None) -> str:
    if value is None:
        return "(none)"
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items()) or "(none)"
    return value


def results_table(results: Sequence[LoadResult]) -> Table:
    table = Table(title="pipeledger", title_justify="left")
    for header in ("pipeline", "mode", "status", "read", "inserted", "updated", "unchanged"):
        table.add_column(
            header, justify="right" if header not in ("pipeline", "mode", "status") else "left"
        )
    table.add_column("watermark before -> after")
    table.add_column("duration", justify="right")
    for r in results:
        status = "[green]success[/]" if r.status == "success" else "[red]failed[/]"
        table.add_row(
            r.pipeline,
            r.mode,
            status,
            f"{r.rows_read:,}",
            f"{r.counts.inserted:,}",
            f"{r.counts.updated:,}",
            f"{r.counts.unchanged + r.counts.superseded:,}",
            f"{_mark(r.watermark(r.watermark_before))} -> {_mark(r.watermark(r.watermark_after))}",
            f"{r.duration_s:.2f}s",
        )
    return table


def result_notes(results: Sequence[LoadResult]) -> list[str]:
    notes = []
    for r in results:
        if r.status == "success" and r.rows_read == 0:
            notes.append(
                f"{r.pipeline}: the source had no rows in the window; nothing to load "
                "(a successful 0-row run)"
            )
        if r.counts.superseded:
            notes.append(
                f"{r.pipeline}: {r.counts.superseded:,} row(s) lost to a newer row of the "
                "same key in this run"
            )
    return notes


def state_table(rows: Sequence[WatermarkRow]) -> Table:
    table = Table(title="watermarks", title_justify="left")
    for header in ("pipeline", "partition", "cursor", "watermark", "updated at", "by run"):
        table.add_column(header)
    for row in rows:
        table.add_row(
            row.pipeline,
            row.partition or "-",
            f"{row.cursor_column} ({row.cursor_type})",
            row.watermark,
            row.updated_at,
            row.run_id,
        )
    return table
