"""What every command shares: the app, consoles, global options, error and JSON output."""

from __future__ import annotations

import json
import logging
import signal
import sys
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

from pipeledger.errors import PipeledgerError
from pipeledger.redact import redact

if TYPE_CHECKING:  # imported by the commands that use them: --help needs none
    from pipeledger import operate, runner
    from pipeledger.config import Config

# Help and usage errors are plain text: typer's boxed help would load rich's Markdown
# renderer, a third of what `pipeledger --help` costs.
app = typer.Typer(
    help="Idempotent, incremental loads with watermarks that commit with the rows.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
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


def exit_code_of(exc: BaseException) -> int:
    return exc.exit_code if isinstance(exc, PipeledgerError) else 1


def print_error(exc: BaseException) -> None:
    if OPTIONS.debug:
        err.print(redact("".join(traceback.format_exception(exc))), markup=False)
    kind = "error" if isinstance(exc, PipeledgerError) else f"unexpected {type(exc).__name__}"
    notes = [redact(note) for note in getattr(exc, "__notes__", [])]
    print_message(kind, redact(str(exc)), notes)


def print_message(kind: str, message: str, notes: Sequence[str] = ()) -> None:
    """``kind: message`` in red on stderr, then each note (what happens next) below it."""
    err.print(f"[bold red]{kind}:[/] ", end="")
    err.print(message, markup=False, soft_wrap=True, highlight=False)
    for note in notes:
        err.print(note, markup=False, soft_wrap=True, highlight=False)


def error_json(exc: BaseException) -> dict[str, Any]:
    """The one JSON document a command prints when it fails before it has results."""
    notes = [redact(note) for note in getattr(exc, "__notes__", [])]
    return {
        "status": "failed",
        "error": " ".join([redact(str(exc) or type(exc).__name__), *notes]),
        "error_type": type(exc).__name__,
        "exit_code": exit_code_of(exc),
    }


def usage_error_json(exc: typer.TyperException) -> dict[str, Any]:
    """The JSON document of a command line the parser refused (exit 2)."""
    usage = exc.exit_code == 2
    return {
        "status": "failed",
        "error": redact(exc.format_message()),
        "error_type": "UsageError" if usage else type(exc).__name__,
        "exit_code": exc.exit_code,
    }


@contextmanager
def guard(as_json: bool = False) -> Iterator[None]:
    """Any error ends the command with its exit code: printed on stderr, and with
    ``--json`` also as one JSON document on stdout (stdout stays valid JSON)."""
    try:
        yield
    except typer.Exit:
        raise
    except Exception as exc:
        print_error(exc)
        if as_json:
            print_json(error_json(exc))
        raise typer.Exit(exit_code_of(exc)) from None


def load() -> Config:
    from pipeledger.config import load_config  # pydantic: only for commands that read one

    return load_config(OPTIONS.config_path)


def print_json(payload: Any) -> None:
    sys.stdout.write(json.dumps(payload, indent=2, default=str) + "\n")
    sys.stdout.flush()


def print_failure(failure: runner.RunFailure) -> None:
    if OPTIONS.debug and failure.cause is not None:
        err.print(redact("".join(traceback.format_exception(failure.cause))), markup=False)
    kind = f"unexpected {failure.unexpected}" if failure.unexpected else "error"
    if failure.status == "skipped":
        kind = "skipped"
    print_message(kind, failure.error, failure.notes)


def print_outcome(outcome: runner.Outcome) -> None:
    """One outcome in words: its lines, or its error and what happens next."""
    from pipeledger import runner
    from pipeledger.cli.render import model_lines, result_lines
    from pipeledger.load.result import LoadResult  # not the models' module: it loads sqlglot

    if isinstance(outcome, runner.RunFailure):
        print_failure(outcome)
        return
    lines = result_lines(outcome) if isinstance(outcome, LoadResult) else model_lines(outcome)
    for line in lines:
        out.print(line, soft_wrap=True, highlight=False)
    if outcome.ledger_error:  # committed, but not recorded (exit 5)
        print_message("error", outcome.ledger_error)


def report_scheduled(outcomes: Sequence[operate.ScheduledOutcome], as_json: bool) -> None:
    if as_json:
        print_json([o.to_json() for o in outcomes])
        return
    if not outcomes:
        out.print("nothing is due")
    for scheduled in outcomes:
        interval = scheduled.interval
        out.print(
            f"[bold]{scheduled.node}[/] interval {interval.start.isoformat()} .. "
            f"{interval.end.isoformat()}",
            soft_wrap=True, highlight=False,
        )  # fmt: skip
        print_outcome(scheduled.outcome)


@contextmanager
def cancellable() -> Iterator[None]:
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
