"""The ``pipeledger`` command: a thin face over :mod:`pipeledger.api`.

Exit codes (README, "Exit codes"): 0 success, 1 failed (permanent), 2 usage or
configuration error, 3 a quality gate halted, 4 skipped (another run held the lock),
5 committed but not recorded in the ledger, 6 outcome unknown (connection lost at
COMMIT), 75 failed (transient: a retry may succeed), 124 timed out, 130 cancelled (by
SIGINT or ``pipeledger cancel``), 143 cancelled by SIGTERM.

Each command imports what it needs when it runs: ``--help`` and the commands that only
read state or the ledger start without the loader, pyarrow or numpy
(``tests/cli/test_startup.py``).
"""

from __future__ import annotations

import atexit
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

import click

from pipeledger import api
from pipeledger.api import ConfigError, GateFailed
from pipeledger.cli.common import (
    app,
    cancellable,
    err,
    fail,
    json_option,
    locate,
    out,
    positive,
    print_json,
    print_message,
    print_outcome,
    read_config,
    report_scheduled,
    reporting,
    usage_error_json,
)
from pipeledger.cli.render import dag_lines, escape, state_lines


@contextmanager
def _progress(enabled: bool) -> Iterator[Callable[[str, int], None] | None]:
    if not enabled or not err.is_terminal:
        yield None
        return
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
    with Progress(*columns, console=err.console, transient=True) as progress:
        tasks: dict[str, Any] = {}

        def update(pipeline: str, rows: int) -> None:
            if pipeline not in tasks:
                tasks[pipeline] = progress.add_task(pipeline)
            progress.update(tasks[pipeline], description=f"{pipeline}: {rows:,} rows staged")

        yield update


def _report(outcomes: Sequence[api.Outcome], as_json: bool) -> None:
    if as_json:
        print_json([o.to_json() for o in outcomes])
        return
    for outcome in outcomes:
        print_outcome(outcome)


TRIGGERS = ("manual", "scheduled", "event")


@app.command()
@click.argument("selectors", nargs=-1, metavar="[SELECTOR]...")
@json_option
@click.option("--retry", is_flag=True, help="Run as the next attempt of the latest failed run.")
@click.option(
    "--trigger", type=click.Choice(TRIGGERS), default="manual", help="Why this run happens."
)
@click.option("--correlation-id", help="The triggering request or event.")
@click.option("--strict", is_flag=True, help="Exit 3 when rows were quarantined.")
@positive("--threads", "Independent nodes at once (default 4 on PostgreSQL, 1 on SQLite).")
@click.option("--full-refresh", is_flag=True, help="Rebuild the selected models from scratch.")
@click.option(
    "--due",
    is_flag=True,
    help="Run what the schedules say is due now (with catchup: each missed interval once, "
    "oldest first).",
)
@click.option(
    "--idempotency-key",
    help="A second trigger with the same key does not run again while the first runs or "
    "after it succeeded; it reports the first run.",
)
@click.option(
    "--data-interval-start",
    metavar="TIME",
    help="An orchestrator's data interval (ISO 8601), recorded as the run's interval.",
)
@click.option("--data-interval-end", metavar="TIME", help="Its end (with --data-interval-start).")
@positive("--attempt", "The orchestrator's try number of this task (Airflow's try_number).")
@click.option(
    "--lineage-parent",
    metavar="NAMESPACE/JOB/RUN_ID",
    help="The OpenLineage run the run's events name as their parent (e.g. an Airflow task).",
)
def run(
    selectors: tuple[str, ...],
    as_json: bool,
    retry: bool,
    trigger: str,
    correlation_id: str | None,
    strict: bool,
    threads: int | None,
    full_refresh: bool,
    due: bool,
    idempotency_key: str | None,
    data_interval_start: str | None,
    data_interval_end: str | None,
    attempt: int | None,
    lineage_parent: str | None,
) -> None:
    """Incremental run of loads and models, in dependency order.

    SELECTOR (default: everything): NAME, NAME+ (and downstream), +NAME (and upstream),
    tag:TAG.

    A load reads rows with cursor >= watermark - lateness, merges them and advances its
    watermark (sync = "full": the whole source, compared with the target; incremental =
    "files": each new or changed file, once); a model processes what its upstreams
    changed since it last ran. A node
    whose upstream failed is skipped; the other branches go on. Transient failures are
    retried as each node's ``retries`` say."""
    with reporting(as_json), cancellable():
        given = data_interval_start or data_interval_end or attempt
        if due and (retry or idempotency_key or full_refresh or given):
            raise ConfigError(
                "--due gives each interval its own key and interval: use it without --retry, "
                "--idempotency-key, --full-refresh, --data-interval-* and --attempt"
            )
        if (data_interval_start is None) != (data_interval_end is None):
            raise ConfigError("give both --data-interval-start and --data-interval-end")
        interval = None
        if data_interval_start and data_interval_end:
            interval = (data_interval_start, data_interval_end)
        config = read_config()
        with _progress(not as_json) as on_progress:
            if due:
                scheduled = api.run_due(
                    config, selectors or (), on_progress=on_progress, threads=threads
                )
                outcomes = [s.outcome for s in scheduled]
            else:
                why = api.trigger(
                    trigger,
                    retry=retry,
                    correlation_id=correlation_id,
                    idempotency_key=idempotency_key,
                    data_interval=interval,
                    attempt=attempt,
                    lineage_parent=lineage_parent,
                )
                outcomes = api.run(
                    config,
                    selectors or (),
                    on_progress=on_progress,
                    trigger=why,
                    threads=threads,
                    full_refresh=full_refresh,
                )
        if due:
            report_scheduled(scheduled, as_json)
        else:
            _report(outcomes, as_json)
        code = api.exit_code(outcomes, strict)
        if code:
            raise fail(code)


@app.command()
@click.argument("name")
@click.option("--start", required=True, help="First cursor value (inclusive).")
@click.option("--end", required=True, help="Last cursor value (inclusive).")
@click.option(
    "--full-compare",
    is_flag=True,
    help="Stage and compare every row, also those whose stored fingerprint matches (repairs "
    "target rows edited outside pipeledger).",
)
@json_option
def backfill(name: str, start: str, end: str, full_compare: bool, as_json: bool) -> None:
    """Reprocess exactly start <= cursor <= end; the live watermark does not move."""
    with reporting(as_json), cancellable():
        config = read_config()
        outcome: api.Outcome
        try:
            with _progress(not as_json) as on_progress:
                outcome = api.backfill(
                    config, name, start, end, on_progress=on_progress, full_compare=full_compare
                )
        except Exception as exc:  # reported like a run's failure, with its exit code
            outcome = api.outcome_of(name, exc)
        _report([outcome], as_json)
        code = api.exit_code([outcome])
        if code:
            raise fail(code)


@app.command()
@json_option
def dag(as_json: bool) -> None:
    """The graph of loads and models: nodes, what each reads from, and its last run."""
    with reporting(as_json):
        payload = api.graph(read_config())
        if as_json:
            print_json(payload)
            return
        out.lines(dag_lines(payload))


@app.command()
@click.argument("name", required=False)
@json_option
def state(name: str | None, as_json: bool) -> None:
    """Watermarks per pipeline and partition; a full snapshot's fingerprint and the files
    taken, for loads that keep them."""
    with reporting(as_json):
        rows = api.watermarks(locate(), name)
        if as_json:
            print_json([r.to_json() for r in rows])
        elif rows:
            out.lines(state_lines(rows))
        else:
            out.print("no watermark yet: nothing has been loaded")


@app.command()
@click.argument("name", required=False)
@json_option
def check(name: str | None, as_json: bool) -> None:
    """Check without writing. A load: dry run of its quality gate (extract, stage, check,
    roll back; exit 3 when the gate would not publish everything). A model, or every model
    when no NAME is given: its SQL in the warehouse's own SQL, its column types and the
    database's plan of it (exit 2 when one is refused or fails)."""
    with reporting(as_json):
        config = read_config()
        if name is None or name in config.models:
            _check_models(config, [name] if name else [], as_json)
            return
        try:
            report = api.check(config, name).quality
        except GateFailed as exc:
            report = exc.report
        if as_json:
            print_json({"pipeline": name, **(report.to_json() if report else {})})
        elif report is not None:
            out.print(f"[bold]{name}[/] quality gate (dry run, nothing written): {report.decision}")
            for line in report.lines():
                out.print(f"  {escape(line)}", soft_wrap=True, highlight=False)
        if report is not None and report.decision != "publish":
            raise fail(3)


_CHECK_COLOURS = {"ok": "green", "unchecked": "yellow", "refused": "red", "failed": "red"}


def _check_models(config: api.Config, names: list[str], as_json: bool) -> None:
    checks = api.check_models(config, names)
    if as_json:
        print_json([c.to_json() for c in checks])
    elif not checks:
        out.print("no model to check")
    width = max((len(c.model) for c in checks), default=0)
    for c in [] if as_json else checks:
        colour = _CHECK_COLOURS[c.status]
        out.print(
            f"{escape(c.model):<{width}}  [{colour}]{c.status:<9}[/]  {escape(c.line_text())}",
            soft_wrap=True,
            highlight=False,
        )
    if not all(c.passed for c in checks):
        raise fail(2)


@app.command()
@json_option
def watchdog(as_json: bool) -> None:
    """Replay the ledger's spool, then settle runs whose lease expired or whose process is
    gone: success if the warehouse shows they committed, else abandoned. Runs do this too."""
    with reporting(as_json):
        settled = api.watchdog(read_config())
        if as_json:
            abandoned = [run_id for run_id, status in settled.items() if status == "abandoned"]
            print_json({"abandoned": abandoned, "settled": settled})
        elif settled:
            for run_id, status in settled.items():
                out.print(f"run {run_id}: {status} (its lease expired or its process is gone)")
        else:
            out.print("no run has an expired lease")


@app.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port",
    type=click.IntRange(min=0, max=65535),
    default=8420,
    show_default=True,
    help="Port to listen on (0: any free one).",
)
def ui(host: str, port: int) -> None:
    """The read-only web dashboard of the ledger: health, runs, checks, quarantine, the DAG,
    alerts and SLAs, with a JSON document under /api/ for each question. Until Ctrl-C."""
    with reporting():
        where = locate()  # a missing config fails here, before anything listens

        def ready(url: str) -> None:
            err.print(
                f"dashboard of {where.source_file} on {url} (read-only; Ctrl-C stops it)",
                soft_wrap=True,
                highlight=False,
            )

        from pipeledger.web import server  # a face over the api, imported only to serve

        server.serve(where.source_file, host, port, on_ready=ready)


@app.command()
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    help="Empty folder to run in (default: a new temp one).",
)
def demo(directory: Path | None) -> None:
    """A guided tour on the embedded default: load, re-run, increment, late row, backfill."""
    from pipeledger.cli.demo import run_demo

    with reporting():
        run_demo(directory, out.console)


def main() -> NoReturn:
    # Arrow's allocator for the whole process, set before pyarrow is imported (a command
    # that loads imports it later): streaming many short-lived batches, the default
    # mimalloc pool kept 30% more memory resident (1M rows: 236 MB peak for a backfill
    # against 166 MB) at the same speed
    os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
    args = sys.argv[1:]
    try:
        code = _main_json(args) if "--json" in args else app.main(prog_name="pipeledger")
    except SystemExit as exc:
        _exit(exc.code)
    _exit(code)


def _main_json(args: list[str]) -> int:
    """With ``--json``, stdout is one JSON document whatever happens, also when the command
    line itself is wrong (an unknown option, a missing argument, a bad value), which the
    parser reports before any command runs."""
    try:
        code = app.main(args=args, prog_name="pipeledger", standalone_mode=False)
    except click.ClickException as exc:
        print_message("usage error" if exc.exit_code == 2 else "error", exc.format_message())
        print_json(usage_error_json(exc))
        return exc.exit_code
    return code if isinstance(code, int) else 0


def _exit(code: str | int | None) -> NoReturn:
    """End the process without tearing down every module it imported (pyarrow, psycopg,
    pydantic: ~15% of a quick command's CPU). By now every connection, transaction and
    file of the command is closed; the exit handlers still run (the alert watcher's wait,
    :mod:`pipeledger.alerts.watch`), then the output streams are flushed."""
    if isinstance(code, str):  # as Python does for sys.exit("message")
        print(code, file=sys.stderr)
        code = 1
    atexit._run_exitfuncs()
    if "logging" in sys.modules:  # flush what the command logged
        sys.modules["logging"].shutdown()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:  # a reader that went away (a closed pipe): nothing more to say
        code = code or 1
    os._exit(code or 0)


from pipeledger.cli import reconcile_cli  # noqa: E402  (registers reconcile and lateness)

reconcile_cli.register(app)
from pipeledger.cli import ledger_cli  # noqa: E402  (registers the ledger commands on app)

ledger_cli.register(app)
from pipeledger.cli import (  # noqa: E402
    quality_cli,  # noqa: F401  (adds the quarantine commands)
    schedule_cli,  # noqa: F401  (adds schedule, serve, cancel)
)
from pipeledger.cli.common import audit_reads, with_global_options  # noqa: E402

with_global_options(app)  # `pipeledger run -v` as `pipeledger -v run`
audit_reads(app)  # each command is one read of the ledger's access audit
