"""The ``pipeledger`` command: a thin face over :mod:`pipeledger.runner`.

Exit codes (README, "Exit codes"): 0 success, 1 failed (permanent), 2 usage or
configuration error, 3 a quality gate halted, 4 skipped (another run held the lock),
5 committed but not recorded in the ledger, 6 outcome unknown (connection lost at
COMMIT), 75 failed (transient: a retry may succeed), 130/143 cancelled.

Each command imports what it needs when it runs: ``--help`` and the commands that only
read state or the ledger start without the loader, pyarrow or numpy
(``tests/test_cli_startup.py``).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from rich.markup import escape

from pipeledger.cli.common import (
    OPTIONS,
    JsonOption,
    app,
    err,
    guard,
    load,
    out,
    print_json,
    print_message,
    usage_error_json,
)
from pipeledger.cli.render import dag_lines, model_lines, result_lines, state_lines
from pipeledger.errors import GateFailed
from pipeledger.redact import redact

if TYPE_CHECKING:
    from pipeledger import runner


@contextmanager
def _progress(enabled: bool) -> Iterator[Callable[[str, int], None] | None]:
    if not enabled or not err.is_terminal:
        yield None
        return
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
    with Progress(*columns, console=err, transient=True) as progress:
        tasks: dict[str, Any] = {}

        def update(pipeline: str, rows: int) -> None:
            if pipeline not in tasks:
                tasks[pipeline] = progress.add_task(pipeline)
            progress.update(tasks[pipeline], description=f"{pipeline}: {rows:,} rows staged")

        yield update


def print_failure(failure: runner.RunFailure) -> None:
    if OPTIONS.debug and failure.cause is not None:
        err.print(redact("".join(traceback.format_exception(failure.cause))), markup=False)
    kind = f"unexpected {failure.unexpected}" if failure.unexpected else "error"
    if failure.status == "skipped":
        kind = "skipped"
    print_message(kind, failure.error, failure.notes)


def _report(outcomes: Sequence[runner.Outcome], as_json: bool) -> None:
    from pipeledger import runner
    from pipeledger.load.result import LoadResult  # not the models' module: it loads sqlglot

    if as_json:
        print_json([o.to_json() for o in outcomes])
        return
    for outcome in outcomes:
        if isinstance(outcome, runner.RunFailure):
            print_failure(outcome)
            continue
        lines = result_lines(outcome) if isinstance(outcome, LoadResult) else model_lines(outcome)
        for line in lines:
            out.print(line, soft_wrap=True, highlight=False)
        if outcome.ledger_error:  # committed, but not recorded (exit 5)
            print_message("error", outcome.ledger_error)


class TriggerKind(StrEnum):
    MANUAL = "manual"
    SCHEDULED = "scheduled"
    EVENT = "event"


TriggerOption = Annotated[TriggerKind, typer.Option("--trigger", help="Why this run happens.")]


@app.command()
def run(
    selectors: Annotated[
        list[str] | None,
        typer.Argument(
            help="What to run (default: everything): NAME, NAME+ (and downstream), +NAME "
            "(and upstream), tag:TAG.",
            metavar="[SELECTOR]...",
        ),
    ] = None,
    as_json: JsonOption = False,
    retry: Annotated[
        bool, typer.Option("--retry", help="Run as the next attempt of the latest failed run.")
    ] = False,
    trigger: TriggerOption = TriggerKind.MANUAL,
    correlation_id: Annotated[
        str | None, typer.Option("--correlation-id", help="The triggering request or event.")
    ] = None,
    strict: Annotated[
        bool, typer.Option("--strict", help="Exit 3 when rows were quarantined.")
    ] = False,
    threads: Annotated[
        int | None,
        typer.Option(
            "--threads",
            min=1,
            help="Independent nodes at once (default 4 on PostgreSQL, 1 on SQLite).",
        ),
    ] = None,
    full_refresh: Annotated[
        bool, typer.Option("--full-refresh", help="Rebuild the selected models from scratch.")
    ] = False,
) -> None:
    """Incremental run of loads and models, in dependency order.

    A load reads rows with cursor >= watermark - lateness, merges them and advances its
    watermark; a model processes what its upstreams changed since it last ran. A node
    whose upstream failed is skipped; the other branches go on."""
    from pipeledger import runner

    with guard(as_json), _cancellable():
        config = load()
        why = runner.Trigger(trigger.value, retry, correlation_id)
        with _progress(not as_json) as on_progress:
            outcomes = runner.run(
                config, selectors or (), on_progress=on_progress, trigger=why, threads=threads,
                full_refresh=full_refresh,
            )  # fmt: skip
        _report(outcomes, as_json)
        code = runner.exit_code(outcomes, strict)
        if code:
            raise typer.Exit(code)


@contextmanager
def _cancellable() -> Iterator[None]:
    """SIGTERM and Ctrl-C cancel the run: its transaction rolls back, the ledger says
    ``cancelled``, and the exit code is 130 (SIGINT) or 143 (SIGTERM)."""
    from pipeledger.ledger.api import RunCancelled

    def on_sigterm(signum: int, frame: object) -> None:
        raise RunCancelled("terminated by SIGTERM")

    previous = signal.signal(signal.SIGTERM, on_sigterm)
    try:
        yield
    except (KeyboardInterrupt, RunCancelled) as exc:
        code = 143 if isinstance(exc, RunCancelled) else 130
        err.print("[bold red]cancelled:[/] the run was rolled back; nothing was written")
        raise typer.Exit(code) from None
    finally:
        signal.signal(signal.SIGTERM, previous)


@app.command()
def backfill(
    name: Annotated[str, typer.Argument(help="Pipeline to backfill.")],
    start: Annotated[str, typer.Option("--start", help="First cursor value (inclusive).")],
    end: Annotated[str, typer.Option("--end", help="Last cursor value (inclusive).")],
    full_compare: Annotated[
        bool,
        typer.Option(
            "--full-compare",
            help="Stage and compare every row, also those whose stored fingerprint matches "
            "(repairs target rows edited outside pipeledger).",
        ),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Reprocess exactly start <= cursor <= end; the live watermark does not move."""
    from pipeledger import runner

    with guard(as_json), _cancellable():
        config = load()
        outcome: runner.Outcome
        try:
            with _progress(not as_json) as on_progress:
                outcome = runner.backfill(
                    config, name, start, end, on_progress=on_progress, full_compare=full_compare
                )
        except Exception as exc:  # reported like a run's failure, with its exit code
            outcome = runner.outcome_of(name, exc)
        _report([outcome], as_json)
        code = runner.exit_code([outcome])
        if code:
            raise typer.Exit(code)


@app.command()
def dag(as_json: JsonOption = False) -> None:
    """The graph of loads and models: nodes, what each reads from, and its last run."""
    from pipeledger import runner

    with guard(as_json):
        config = load()
        graph = runner.graph(config)
        payload = graph.to_json(runner.last_runs(config))
        if as_json:
            print_json(payload)
            return
        for line in dag_lines(payload):
            out.print(line, soft_wrap=True, highlight=False)


@app.command()
def state(
    name: Annotated[str | None, typer.Argument(help="Pipeline (default: all).")] = None,
    as_json: JsonOption = False,
) -> None:
    """Watermarks per pipeline and partition."""
    from pipeledger import runner

    with guard(as_json):
        rows = runner.state(load(), name)
        if as_json:
            print_json([r.to_json() for r in rows])
        elif rows:
            for line in state_lines(rows):
                out.print(line, soft_wrap=True, highlight=False)
        else:
            out.print("no watermark yet: nothing has been loaded")


@app.command()
def check(
    name: Annotated[str, typer.Argument(help="Pipeline to check.")],
    as_json: JsonOption = False,
) -> None:
    """Dry run of the quality gate: extract, stage and check, then roll back. Exit 3 when
    the gate would not publish everything."""
    from pipeledger import runner

    with guard(as_json):
        try:
            report = runner.check(load(), name).quality
        except GateFailed as exc:
            report = exc.report
        if as_json:
            print_json({"pipeline": name, **(report.to_json() if report else {})})
        elif report is not None:
            out.print(f"[bold]{name}[/] quality gate (dry run, nothing written): {report.decision}")
            for line in report.lines():
                out.print(f"  {escape(line)}", soft_wrap=True, highlight=False)
        if report is not None and report.decision != "publish":
            raise typer.Exit(3)


@app.command()
def watchdog(as_json: JsonOption = False) -> None:
    """Replay the ledger's spool, then settle runs whose lease expired or whose process is
    gone: success if the warehouse shows they committed, else abandoned. Runs do this too."""
    from pipeledger import runner

    with guard(as_json):
        settled = runner.watchdog(load())
        if as_json:
            abandoned = [run_id for run_id, status in settled.items() if status == "abandoned"]
            print_json({"abandoned": abandoned, "settled": settled})
        elif settled:
            for run_id, status in settled.items():
                out.print(f"run {run_id}: {status} (its lease expired or its process is gone)")
        else:
            out.print("no run has an expired lease")


@app.command()
def demo(
    directory: Annotated[
        Path | None, typer.Option("--dir", help="Empty folder to run in (default: a new temp one).")
    ] = None,
) -> None:
    """A guided tour on the embedded default: load, re-run, increment, late row, backfill."""
    from pipeledger.demo import run_demo

    with guard():
        run_demo(directory, out)


def main() -> NoReturn:
    # Arrow's allocator for the whole process, set before pyarrow is imported (a command
    # that loads imports it later); see pipeledger.runner.prefer_system_allocator
    os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
    args = sys.argv[1:]
    try:
        code = _main_json(args) if "--json" in args else app()
    except SystemExit as exc:
        _exit(exc.code)
    _exit(code)


def _main_json(args: list[str]) -> int:
    """With ``--json``, stdout is one JSON document whatever happens, also when the command
    line itself is wrong (an unknown option, a missing argument, a bad value), which the
    parser reports before any command runs."""
    try:
        code = app(args=args, standalone_mode=False)
    except typer.TyperException as exc:
        print_message("usage error" if exc.exit_code == 2 else "error", exc.format_message())
        print_json(usage_error_json(exc))
        return exc.exit_code
    return code if isinstance(code, int) else 0


def _exit(code: str | int | None) -> NoReturn:
    """End the process without tearing down every module it imported (pyarrow, psycopg,
    pydantic: ~15% of a quick command's CPU). By now every connection, transaction and
    file of the command is closed; only the output streams and log handlers hold data."""
    if isinstance(code, str):  # as Python does for sys.exit("message")
        print(code, file=sys.stderr)
        code = 1
    logging.shutdown()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:  # a reader that went away (a closed pipe): nothing more to say
        code = code or 1
    os._exit(code or 0)


from pipeledger.cli import history_cli  # noqa: E402  (registers reconcile and lateness)

history_cli.register(app)
from pipeledger.cli import ledger_cli  # noqa: E402  (registers the ledger commands on app)

ledger_cli.register(app)
from pipeledger.cli import quality_cli  # noqa: E402, F401  (adds the quarantine commands)
