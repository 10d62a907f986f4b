"""The truth over time: ``reconcile`` (does the target hold what the source holds?) and
``lateness`` (how late rows arrive, and what the buffer catches), a few lines each over
:mod:`pipeledger.api`. The library is imported when a command runs, not when the
command line starts.

Exit codes: ``reconcile`` 0 when everything matches, 3 when a window differs (after
``--repair``: when one still does); ``lateness`` 0.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from pipeledger import api
from pipeledger.cli.common import fail, json_option, out, print_json, read_config, reporting
from pipeledger.cli.render import escape

if TYPE_CHECKING:
    from pipeledger.api import LatenessReport, Reconciliation, WindowDiff


def register(app: click.Group) -> None:
    """Add ``reconcile`` and ``lateness`` to the main app."""

    @app.command()
    @click.argument("name")
    @click.option("--start", help="First cursor value (inclusive).")
    @click.option("--end", help="Last cursor value (inclusive).")
    @click.option("--by", help="Windows: hour, day (default), month; N: integer cursors.")
    @click.option("--repair", is_flag=True, help="Backfill the windows that differ, then compare.")
    @json_option
    def reconcile(
        name: str, start: str | None, end: str | None, by: str | None, repair: bool, as_json: bool
    ) -> None:
        """Compare source and target window by window (row counts and fingerprints), up to
        the watermark; list the windows that differ. Exit 3 when one does."""
        with reporting(as_json):
            config = read_config()
            result = api.reconcile(config, name, start=start, end=end, by=by, repair=repair)
            if as_json:
                print_json(result.to_json())
            else:
                out.lines(reconcile_lines(result))
            if result.exit_code:
                raise fail(result.exit_code)

    @app.command()
    @click.argument("name")
    @json_option
    def lateness(name: str, as_json: bool) -> None:
        """How late rows arrived over the pipeline's history: caught by the lateness
        buffer (percentiles), missed by it, what it costs, and a buffer that would have
        caught 99.9% of them."""
        with reporting(as_json):
            result = api.lateness(read_config(), name)
            if as_json:
                print_json(result.to_json())
                return
            out.lines(lateness_lines(result))


def window_line(w: WindowDiff) -> str:
    keys = ", ".join(escape(str(k)) for k in w.sample_keys)
    where = "whole snapshot" if w.start is None else f"{w.start} .. {w.end}"
    return (
        f"  {where}  source {w.source_rows:,} · target {w.target_rows:,} · "
        f"missing {w.missing_rows:,} · extra {w.extra_rows:,} · changed {w.changed_rows:,}"
        + (f"  keys {keys}" if keys else "")
    )


def reconcile_lines(r: Reconciliation) -> list[str]:
    lines = []
    if r.found is not None:
        lines.append(f"[bold]{r.pipeline}[/] found {len(r.found)} window(s) that differ:")
        lines += [window_line(w) for w in r.found]
        lines += [
            ("  ran it" if fix.start is None else f"  backfilled {fix.start} .. {fix.end}")
            + f" (run {fix.run_id}): inserted {fix.rows_inserted:,}, updated "
            f"{fix.rows_updated:,}, deleted {fix.rows_deleted:,}"
            for fix in r.repairs
        ]
    colour = "green" if r.status == "match" else "red"
    compared = (
        "the whole snapshot compared"
        if r.grain.is_whole
        else f"{len(r.windows)} of {r.windows_compared:,} window(s) by {r.grain.name} differ"
    )
    lines.append(
        f"[bold]{r.pipeline}[/] [{colour}]{r.status}[/] -> {r.target}: {compared} (run {r.run_id})"
    )
    lines += [window_line(w) for w in r.windows]
    lines.append(f"  source rows {r.source_rows:,} · target rows {r.target_rows:,}")
    if r.windows and any(w.extra_rows for w in r.windows) and not r.grain.is_whole:
        lines.append(
            "  note: a backfill does not delete; extra rows stay until deleted in the target"
        )
    if r.lateness and r.lateness.rows_missed:
        lines.append(
            f"  [yellow]note:[/] {r.lateness.rows_missed:,} of the rows missing "
            "had arrived later than the lateness buffer"
        )
    return lines


def lateness_lines(r: LatenessReport) -> list[str]:
    span = api.span

    def s(value: float | None) -> str:
        return "-" if value is None else span(value) if value else "0s"

    per_run = "-" if r.rows_reread_per_run is None else f"{r.rows_reread_per_run:,.1f}"
    cost = r.suggested_rows_reread_per_run
    return [
        f"[bold]{r.pipeline}[/] late rows over {r.runs:,} incremental run(s): caught "
        f"{r.late_rows_caught:,} (p50 {s(r.lateness_p50_s)}, p90 {s(r.lateness_p90_s)}, "
        f"p99 {s(r.lateness_p99_s)}, max {s(r.lateness_max_s)}) · missed {r.late_rows_missed:,}",
        f"  buffer {s(r.buffer_s)}: {per_run} row(s) re-read per run",
        f"  suggested buffer {s(r.suggested_buffer_s)} (catches 99.9% of the late rows seen"
        + ("" if cost is None else f"; about {cost:,.1f} row(s) re-read per run")
        + ")",
    ]
