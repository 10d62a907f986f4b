"""The ``pipeledger`` command: a thin face over :mod:`pipeledger.runner`.

Exit codes: 0 success, 1 a run failed, 2 usage or configuration error, 3 a failed
quality gate (reserved).
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from pipeledger import runner
from pipeledger.cli.common import (
    JsonOption,
    app,
    err,
    guard,
    load,
    out,
    print_error,
    print_json,
)
from pipeledger.cli.render import results_lines, state_lines
from pipeledger.errors import GateFailed, PipeledgerError
from pipeledger.ledger.api import RunCancelled
from pipeledger.load.result import LoadResult
from pipeledger.redact import redact


@contextmanager
def _progress(enabled: bool) -> Iterator[Callable[[str, int], None] | None]:
    if not enabled or not err.is_terminal:
        yield None
        return
    columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
    with Progress(*columns, console=err, transient=True) as progress:
        tasks: dict[str, Any] = {}

        def update(pipeline: str, rows: int) -> None:
            if pipeline not in tasks:
                tasks[pipeline] = progress.add_task(pipeline)
            progress.update(tasks[pipeline], description=f"{pipeline}: {rows:,} rows staged")

        yield update


def _report(results: list[LoadResult], as_json: bool) -> None:
    if as_json:
        print_json([r.to_json() for r in results])
        return
    for line in results_lines(results):
        out.print(line, soft_wrap=True, highlight=False)


def _failed_json(name: str, exc: BaseException) -> dict[str, Any]:
    notes = " ".join(getattr(exc, "__notes__", []))
    return {"pipeline": name, "status": "failed", "error": redact(f"{exc} {notes}".strip())}


class Trigger(StrEnum):
    MANUAL = "manual"
    SCHEDULED = "scheduled"
    EVENT = "event"


TriggerOption = Annotated[Trigger, typer.Option("--trigger", help="Why this run happens.")]


@app.command()
def run(
    names: Annotated[list[str] | None, typer.Argument(help="Pipelines (default: all).")] = None,
    as_json: JsonOption = False,
    retry: Annotated[
        bool, typer.Option("--retry", help="Run as the next attempt of the latest failed run.")
    ] = False,
    trigger: TriggerOption = Trigger.MANUAL,
    correlation_id: Annotated[
        str | None, typer.Option("--correlation-id", help="The triggering request or event.")
    ] = None,
    strict: Annotated[
        bool, typer.Option("--strict", help="Exit 3 when rows were quarantined.")
    ] = False,
) -> None:
    """Incremental run: read rows with cursor >= watermark - lateness, merge, advance.

    Pipelines run one after the other; a failed one does not stop the others."""
    with guard(), _cancellable():
        config = load()
        selected = names or list(config.pipelines)
        for name in selected:
            config.pipeline(name)
        results: list[LoadResult] = []
        failures: dict[str, Exception] = {}
        with _progress(not as_json) as on_progress:
            for name in selected:
                try:
                    results.append(
                        runner.run_one(
                            config,
                            name,
                            on_progress=on_progress,
                            trigger_type=trigger.value,
                            retry=retry,
                            correlation_id=correlation_id,
                        )
                    )
                except PipeledgerError as exc:
                    failures[name] = exc
                    if not as_json:
                        print_error(exc)
        if as_json:
            print_json(
                [r.to_json() for r in results] + [_failed_json(n, e) for n, e in failures.items()]
            )
        else:
            _report(results, as_json)
        if failures:
            raise typer.Exit(max(_exit_code(e) for e in failures.values()))
        if strict and any(r.status == "partial" for r in results):
            raise typer.Exit(3)


def _exit_code(exc: Exception) -> int:
    return exc.exit_code if isinstance(exc, PipeledgerError) else 1


@contextmanager
def _cancellable() -> Iterator[None]:
    """SIGTERM and Ctrl-C cancel the run: its transaction rolls back, the ledger says
    ``cancelled``, and the exit code is 130 (SIGINT) or 143 (SIGTERM)."""

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
    with guard(), _cancellable():
        config = load()
        try:
            with _progress(not as_json) as on_progress:
                result = runner.backfill(
                    config, name, start, end, on_progress=on_progress, full_compare=full_compare
                )
        except PipeledgerError as exc:
            if as_json:
                print_json([_failed_json(name, exc)])
            raise
        _report([result], as_json)


@app.command()
def state(
    name: Annotated[str | None, typer.Argument(help="Pipeline (default: all).")] = None,
    as_json: JsonOption = False,
) -> None:
    """Watermarks per pipeline and partition."""
    with guard():
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
    with guard():
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
    """Mark runs whose lease expired (no heartbeat) as abandoned. Every run does this too."""
    with guard():
        ledger = runner.ledger_for(load())
        abandoned = ledger.watchdog() if ledger is not None else []
        if as_json:
            print_json({"abandoned": abandoned})
        elif abandoned:
            for run_id in abandoned:
                out.print(f"abandoned run {run_id} (its lease expired without a heartbeat)")
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


def main() -> None:
    runner.prefer_system_allocator()
    app()


from pipeledger.cli import ledger_cli  # noqa: E402  (registers the ledger commands on app)

ledger_cli.register(app)
from pipeledger.cli import quality_cli  # noqa: E402, F401  (adds the quarantine commands)
