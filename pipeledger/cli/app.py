"""The ``pipeledger`` command: a thin face over :mod:`pipeledger.runner`.

Exit codes: 0 success, 1 a run failed, 2 usage or configuration error, 3 a failed
quality gate (reserved).
"""

from __future__ import annotations

import json
import logging
import sys
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from pipeledger import runner
from pipeledger.cli.render import results_lines, state_lines
from pipeledger.config import Config, load_config
from pipeledger.errors import PipeledgerError
from pipeledger.load.result import LoadResult
from pipeledger.redact import redact

app = typer.Typer(
    help="Idempotent, incremental loads with watermarks that commit with the rows.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
out = Console()
err = Console(stderr=True)


class _Options:
    config_path: Path | None = None
    debug: bool = False


OPTIONS = _Options()
ConfigOption = Annotated[
    Path | None, typer.Option("--config", "-c", help="Config file (default ./pipeledger.toml).")
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]


@app.callback()
def main_options(
    config: ConfigOption = None,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log progress.")] = False,
) -> None:
    OPTIONS.config_path = config
    OPTIONS.debug = debug
    if verbose:
        logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(message)s")


def _fail(exc: BaseException) -> None:
    _print_error(exc)
    raise typer.Exit(exc.exit_code if isinstance(exc, PipeledgerError) else 1)


def _print_error(exc: BaseException) -> None:
    if OPTIONS.debug:
        err.print(redact("".join(traceback.format_exception(exc))), markup=False)
    kind = "error" if isinstance(exc, PipeledgerError) else f"unexpected {type(exc).__name__}"
    err.print(f"[bold red]{kind}:[/] ", end="")
    err.print(redact(str(exc)), markup=False, soft_wrap=True, highlight=False)
    for note in getattr(exc, "__notes__", []):
        err.print(redact(note), markup=False, soft_wrap=True, highlight=False)


@contextmanager
def _guard() -> Iterator[None]:
    try:
        yield
    except typer.Exit:
        raise
    except Exception as exc:
        _fail(exc)


def _config() -> Config:
    return load_config(OPTIONS.config_path)


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


def _print_json(payload: Any) -> None:
    sys.stdout.write(json.dumps(payload, indent=2, default=str) + "\n")
    sys.stdout.flush()


def _report(results: list[LoadResult], as_json: bool) -> None:
    if as_json:
        _print_json([r.to_json() for r in results])
        return
    for line in results_lines(results):
        out.print(line, soft_wrap=True, highlight=False)


def _failed_json(name: str, exc: BaseException) -> dict[str, Any]:
    notes = " ".join(getattr(exc, "__notes__", []))
    return {"pipeline": name, "status": "failed", "error": redact(f"{exc} {notes}".strip())}


@app.command()
def run(
    names: Annotated[list[str] | None, typer.Argument(help="Pipelines (default: all).")] = None,
    as_json: JsonOption = False,
) -> None:
    """Incremental run: read rows with cursor >= watermark - lateness, merge, advance.

    Pipelines run one after the other; a failed one does not stop the others."""
    with _guard():
        config = _config()
        selected = names or list(config.pipelines)
        for name in selected:
            config.pipeline(name)
        results: list[LoadResult] = []
        failures: dict[str, PipeledgerError] = {}
        with _progress(not as_json) as on_progress:
            for name in selected:
                try:
                    results.append(runner.run_one(config, name, on_progress=on_progress))
                except PipeledgerError as exc:
                    failures[name] = exc
                    if not as_json:
                        _print_error(exc)
        if as_json:
            _print_json(
                [r.to_json() for r in results] + [_failed_json(n, e) for n, e in failures.items()]
            )
        else:
            _report(results, as_json)
        if failures:
            raise typer.Exit(max(e.exit_code for e in failures.values()))


@app.command()
def backfill(
    name: Annotated[str, typer.Argument(help="Pipeline to backfill.")],
    start: Annotated[str, typer.Option("--start", help="First cursor value (inclusive).")],
    end: Annotated[str, typer.Option("--end", help="Last cursor value (inclusive).")],
    as_json: JsonOption = False,
) -> None:
    """Reprocess exactly start <= cursor <= end; the live watermark does not move."""
    with _guard():
        config = _config()
        try:
            with _progress(not as_json) as on_progress:
                result = runner.backfill(config, name, start, end, on_progress=on_progress)
        except PipeledgerError as exc:
            if as_json:
                _print_json([_failed_json(name, exc)])
            raise
        _report([result], as_json)


@app.command()
def state(
    name: Annotated[str | None, typer.Argument(help="Pipeline (default: all).")] = None,
    as_json: JsonOption = False,
) -> None:
    """Watermarks per pipeline and partition."""
    with _guard():
        rows = runner.state(_config(), name)
        if as_json:
            _print_json([r.to_json() for r in rows])
        elif rows:
            for line in state_lines(rows):
                out.print(line, soft_wrap=True, highlight=False)
        else:
            out.print("no watermark yet: nothing has been loaded")


@app.command()
def demo(
    directory: Annotated[
        Path | None, typer.Option("--dir", help="Empty folder to run in (default: a new temp one).")
    ] = None,
) -> None:
    """A guided tour on the embedded default: load, re-run, increment, late row, backfill."""
    from pipeledger.demo import run_demo

    with _guard():
        run_demo(directory, out)


def main() -> None:
    app()
