"""Commands for running unattended: ``schedule``, ``serve`` and ``cancel``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from pipeledger import api
from pipeledger.cli.common import (
    app,
    cancellable,
    err,
    json_option,
    out,
    positive,
    print_json,
    read_config,
    report_scheduled,
    reporting,
)
from pipeledger.cli.render import escape

if TYPE_CHECKING:
    from pipeledger.web.server import Running


@app.command()
@json_option
def schedule(as_json: bool) -> None:
    """Each scheduled node: its schedule, its next firing, its latest scheduled run and
    what is overdue now (run it with `pipeledger run --due`)."""
    with reporting(as_json):
        rows = api.schedule_status(read_config())
        if as_json:
            print_json(rows)
            return
        if not rows:
            out.print("no pipeline or model has a schedule")
        for row in rows:
            out.lines(_schedule_lines(row))


def _schedule_lines(row: dict[str, Any]) -> list[str]:
    last = row["last"]
    done = "(never ran on its schedule)"
    if last:
        done = f"{last['start']} .. {last['end']}: {last['status']} (run {last['run_id']})"
    overdue = f"[yellow]{row['overdue']} overdue[/]" if row["overdue"] else "nothing overdue"
    lines = [
        f"[bold]{row['node']}[/] {row['kind']} '{escape(row['schedule'])}' {row['timezone']}"
        + (" catchup" if row["catchup"] else ""),
        f"  last  {done}",
        f"  next  {row['next'] or '(none)'}",
        f"  {overdue}" + "".join(f"\n    {d['start']} .. {d['end']}" for d in row["due"]),
    ]
    if row.get("error"):
        lines.append(f"  [bold red]error:[/] {escape(row['error'])}")
    if row["left_behind"]:
        lines.append("  note: older missed intervals are past max_catchup: backfill them")
    return lines


@app.command()
@click.option(
    "--poll", default="1m", show_default=True, help="Wake up at least this often (watchdog)."
)
@positive("--threads", "Independent nodes at once.")
@click.option("--ui", "with_ui", is_flag=True, help="Serve the web dashboard beside the loop.")
@click.option(
    "--host", default="127.0.0.1", show_default=True, help="The dashboard's address (--ui)."
)
@click.option(
    "--port",
    type=click.IntRange(min=0, max=65535),
    default=8420,
    show_default=True,
    help="The dashboard's port (--ui).",
)
def serve(poll: str, threads: int | None, with_ui: bool, host: str, port: int) -> None:
    """Run the schedules until stopped: wake up when a schedule fires (and at least every
    --poll), run the watchdog, run what is due; a failed run is reported and the loop goes
    on. SIGTERM or Ctrl-C stops it: at once when it waits (exit 0); a run in progress is
    rolled back and recorded cancelled (exit 143 or 130, as for `run`). With --ui, the
    dashboard of `pipeledger ui` serves on a thread of the same process."""
    with reporting(), cancellable():
        config = read_config()
        every = api.parse_duration(poll)
        dashboard = _dashboard(config.source_file, host, port) if with_ui else None
        if dashboard is not None:
            err.print(f"dashboard on {dashboard.url} (read-only)", highlight=False)
        err.print(f"serving {config.source_file}: waking up at least every {poll}")
        try:
            api.serve(
                config,
                lambda outcomes: report_scheduled(outcomes, False) if outcomes else None,
                poll=every,
                threads=threads,
            )
        finally:
            if dashboard is not None:
                dashboard.stop()
        err.print("stopped")


@app.command()
@click.argument("run_id")
@click.option("--reason", help="Why, for the ledger.")
@json_option
def cancel(run_id: str, reason: str | None, as_json: bool) -> None:
    """Ask a running run (RUN_ID, or its first 8+ characters) to stop, from any host: it
    sees the request at its next heartbeat ([ledger] heartbeat), cancels its statement,
    rolls back and ends cancelled, unless it commits first (`pipeledger show` then says
    the request did not take effect)."""
    with reporting(as_json):
        config = read_config()
        record = api.cancel(config, run_id, reason)
        every = config.ledger.heartbeat.total_seconds()
        ended = record.status != "running"
        if as_json:
            print_json(
                {
                    "run_id": record.run_id,
                    "pipeline": record.pipeline,
                    "status": "too_late" if ended else "cancel_requested",
                    "run_status": str(record.status),
                    "host": record.host,
                    "pid": record.pid,
                    "within_s": every,
                }
            )
            return
        who = f"run {record.run_id} of {record.pipeline} (process {record.pid} on {record.host})"
        if ended:
            out.print(
                f"too late: {who} ended {record.status} before the request reached it",
                soft_wrap=True,
                highlight=False,
            )
            return
        out.print(
            f"cancel requested: {who} is asked to stop at its next heartbeat, within "
            f"{every:g} s; it then rolls back and is recorded cancelled. If it commits "
            f"first it ends as it would have: `pipeledger show {record.run_id[:8]}` says "
            "which",
            soft_wrap=True,
            highlight=False,
        )


def _dashboard(config_path: Path | None, host: str, port: int) -> Running:
    """The web dashboard on a thread of ``serve`` (the web face, over the api)."""
    from pipeledger.web import server

    return server.start(config_path, host, port)
